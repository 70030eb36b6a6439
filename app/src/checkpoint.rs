//! The trained deepseek-mini checkpoint that ships with the site (public/, written by
//! train/export.py; docs/TRAINING.md): fetched once, parsed by the engine's loader, and replaced
//! by the seeded synthetic weights, with the reason, when it cannot be had.

use moescope_engine::model::{MoeConfig, Weights};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// Relative to the page, so the site works under any path.
pub const CHECKPOINT_URL: &str = "deepseek-mini-int8.safetensors";
/// The largest checkpoint the page reads (the shipped int8 one is 13 MB, the same weights in f32
/// 45 MB): a bigger file is not deepseek-mini, and reading it whole could exhaust the tab's memory.
pub const MAX_CHECKPOINT_BYTES: usize = 64 << 20;
/// Seeds the fallback weights (and the benchmarks, whose timing does not depend on the values).
pub const SYNTHETIC_SEED: u64 = 0;

/// Where the weights in use came from.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Source {
    /// The shipped checkpoint, and its size in bytes.
    Trained { bytes: usize },
    /// Seeded synthetic weights, and why the checkpoint was not used.
    Synthetic { why: String },
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::Trained { bytes } => format!(
                "Trained weights: deepseek-mini trained on the Python 3.11 documentation (49 M bytes, 1,500 steps on one H200), stored as int8 with a scale per 1×32 block ({:.1} MB).",
                *bytes as f64 / 1e6
            ),
            Source::Synthetic { why } => format!(
                "The trained checkpoint could not be loaded ({why}), so these are synthetic (seeded random) weights and the text is gibberish; the kernels, the speed and the routing still work."
            ),
        }
    }
}

/// The checkpoint, or synthetic weights and the reason. Never fails: the fallback always builds.
pub async fn load() -> (Weights, Source) {
    match fetch(CHECKPOINT_URL).await.and_then(|bytes| {
        Weights::from_safetensors(&bytes, &MoeConfig::deepseek_mini())
            .map(|w| (w, bytes.len()))
            .map_err(|e| e.to_string())
    }) {
        Ok((w, bytes)) => (w, Source::Trained { bytes }),
        Err(why) => {
            let w = Weights::synthetic(&MoeConfig::deepseek_mini(), SYNTHETIC_SEED)
                .expect("the built-in config is valid");
            (w, Source::Synthetic { why })
        }
    }
}

async fn fetch(url: &str) -> Result<Vec<u8>, String> {
    // In the page or in the CPU worker (crate::worker).
    let global = js_sys::global();
    let request = if let Some(w) = global.dyn_ref::<web_sys::Window>() {
        w.fetch_with_str(url)
    } else if let Some(w) = global.dyn_ref::<web_sys::WorkerGlobalScope>() {
        w.fetch_with_str(url)
    } else {
        return Err("neither a window nor a worker: nothing to fetch with".into());
    };
    let response = JsFuture::from(request)
        .await
        .map_err(|e| format!("fetching {url} failed: {}", js_message(&e)))?;
    let response: web_sys::Response = response
        .dyn_into()
        .map_err(|_| "fetch returned something other than a Response".to_string())?;
    if !response.ok() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    // Refused before reading when the server says the size, and after reading when it does not.
    let declared = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|n| n.trim().parse::<u64>().ok());
    if let Some(n) = declared.filter(|&n| n > MAX_CHECKPOINT_BYTES as u64) {
        return Err(too_large(url, n));
    }
    let buffer = response.array_buffer().map_err(|e| js_message(&e))?;
    let buffer = JsFuture::from(buffer)
        .await
        .map_err(|e| format!("reading {url} failed: {}", js_message(&e)))?;
    let bytes = js_sys::Uint8Array::new(&buffer);
    if bytes.length() as usize > MAX_CHECKPOINT_BYTES {
        return Err(too_large(url, u64::from(bytes.length())));
    }
    Ok(bytes.to_vec())
}

fn too_large(url: &str, bytes: u64) -> String {
    format!(
        "{url} is {:.1} MB; the sandbox reads at most {:.0} MB",
        bytes as f64 / 1e6,
        MAX_CHECKPOINT_BYTES as f64 / 1e6
    )
}

fn js_message(e: &wasm_bindgen::JsValue) -> String {
    e.as_string()
        .or_else(|| {
            e.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| format!("{e:?}"))
}
