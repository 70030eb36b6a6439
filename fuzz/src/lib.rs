//! Fuzz targets: one function per kind of input MoEscope takes from outside, each asserting what
//! must hold for any bytes at all (no panic, and the stated property). The same functions run
//! under three drivers:
//!
//! - `cargo test -p moescope-fuzz` (CI): every seed and every committed corpus and regression
//!   file, then a fixed budget of proptest-driven mutations of them (`tests/campaign.rs`);
//! - `cargo xtask fuzz [--long]`: libFuzzer with coverage feedback on stable Rust
//!   (`src/bin/libfuzzer.rs`), starting from the same seeds and corpus;
//! - a regression: a crash libFuzzer found is copied to `fuzz/regressions/<target>/` and replayed
//!   by the test from then on.

use std::sync::OnceLock;

use moescope_app::state::{self, EmbedView, Page, Route};
use moescope_app::{lab_progress, labs, rack_state, sandbox_state, worker};
use moescope_engine::model::generate::{Engine, GenerateOptions, Generator, Sampling};
use moescope_engine::model::{GateFunction, MoeConfig, Weights};
use moescope_engine::quant::{self, Format};
use moescope_engine::rack::{self, Params, Scenario, ScenarioFile};
use safetensors::tensor::TensorView;
use safetensors::Dtype;

/// A fuzz target: its name (the corpus folder), the property, and the inputs it starts from.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    pub seeds: fn() -> Vec<Vec<u8>>,
}

pub const TARGETS: [Target; 7] = [
    Target {
        name: "address",
        run: address,
        seeds: address_seeds,
    },
    Target {
        name: "share_link",
        run: share_link,
        seeds: address_seeds,
    },
    Target {
        name: "scenario",
        run: scenario,
        seeds: scenario_seeds,
    },
    Target {
        name: "lab_file",
        run: lab_file,
        seeds: lab_seeds,
    },
    Target {
        name: "progress_file",
        run: progress_file,
        seeds: progress_seeds,
    },
    Target {
        name: "checkpoint",
        run: checkpoint,
        seeds: checkpoint_seeds,
    },
    Target {
        name: "worker_message",
        run: worker_message,
        seeds: worker_seeds,
    },
];

pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

fn shipped_labs() -> &'static [labs::Lab] {
    static LABS: OnceLock<Vec<labs::Lab>> = OnceLock::new();
    LABS.get_or_init(|| {
        labs::SHIPPED
            .iter()
            .map(|t| labs::parse(t).expect("the shipped labs parse"))
            .collect()
    })
}

/// Any address: the route and each page's state parse without panicking, and what they write
/// back reads back to the same state with no warning.
pub fn address(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = state::parse_route(text);
    let (rack, _) = rack_state::parse(text);
    let (back, warnings) = rack_state::parse(&rack_state::encode(&rack));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(unnamed(back), unnamed(rack));
    let (sandbox, _) = sandbox_state::parse(text);
    let (back, warnings) = sandbox_state::parse(&sandbox_state::encode(&sandbox));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(back, sandbox);
    let labs = shipped_labs();
    let (state, _) = labs::parse_state(text, labs);
    let query = labs::encode_state(&labs[state.lab], state.view);
    let (again, warnings) = labs::parse_state(&query, labs);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(again, state);
}

/// A rack state without its scenario name: the address does not carry the name (it is the
/// preset's label, which the page does not show), everything else it does.
fn unnamed(f: ScenarioFile) -> ScenarioFile {
    ScenarioFile { name: None, ..f }
}

/// Whatever state an address gave, the Share link and the embed snippet built from it open the
/// same page and view with the same state.
pub fn share_link(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = "https://example.org/a blog/moescope/";
    let (sandbox, _) = sandbox_state::parse(text);
    let query = sandbox_state::encode(&sandbox);
    for state in opened(base, (Page::Sandbox, EmbedView::SandboxMini), &query) {
        assert_eq!(sandbox_state::parse(&state), (sandbox.clone(), vec![]));
    }
    let (rack, _) = rack_state::parse(text);
    let query = rack_state::encode(&rack);
    for state in opened(base, (Page::Rack, EmbedView::RackSummary), &query) {
        let (back, warnings) = rack_state::parse(&state);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(unnamed(back), unnamed(rack.clone()));
    }
    let labs = shipped_labs();
    let (lab, _) = labs::parse_state(text, labs);
    let query = labs::encode_state(&labs[lab.lab], lab.view);
    for state in opened(base, (Page::Labs, EmbedView::Lab), &query) {
        assert_eq!(labs::parse_state(&state, labs), (lab, vec![]));
    }
}

/// The state each of the two shared addresses carries, after checking that the link opens
/// `page` and the snippet's iframe opens `view`.
fn opened(base: &str, (page, view): (Page, EmbedView), query: &str) -> [String; 2] {
    let (link, embed) = state::share_links(base, (page, view), query, (720, 480), "a \"title\"");
    let hash = link
        .strip_prefix(base)
        .expect("the link starts at the base");
    assert_eq!(state::parse_route(hash), Ok(Route::Page(page)), "{link}");
    let link_state = hash.split_once('?').map(|(_, q)| q.to_owned());
    let src = embed
        .strip_prefix("<iframe src=\"")
        .and_then(|s| s.split_once('"'))
        .map(|(src, _)| unescape_attribute(src))
        .expect("the snippet is an iframe with a src");
    let hash = src
        .strip_prefix(base)
        .expect("the iframe starts at the base");
    let Ok(Route::Embed { view: got, state }) = state::parse_route(hash) else {
        panic!("the snippet does not open an embed: {embed}");
    };
    assert_eq!(got, view);
    [link_state.unwrap_or_default(), state]
}

fn unescape_attribute(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A scenario file (the first byte picks TOML or JSON): it is refused with a message, or every
/// number that eval, sweep and waterfall return is finite.
pub fn scenario(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let path = if kind % 2 == 0 { "s.toml" } else { "s.json" };
    let Ok(s) = Scenario::from_text(path, text) else {
        return;
    };
    let p = Params::fitted();
    if let Ok(e) = rack::eval(&s, &p) {
        assert_finite("eval", &e);
    }
    if let Ok(points) = rack::sweep(&s, &p, 4) {
        assert_finite("sweep", &points);
    }
    if let Ok(steps) = rack::waterfall(&s, &p) {
        assert_finite("waterfall", &steps);
    }
}

/// Every number in `value` as JSON is finite (serde_json writes NaN and infinities as null).
fn assert_finite(what: &str, value: &impl serde::Serialize) {
    let json = serde_json::to_value(value).expect("rack outputs serialize");
    fn walk(v: &serde_json::Value, path: &mut String, what: &str) {
        match v {
            serde_json::Value::Null => panic!("{what}: {path} is not a finite number"),
            serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
                let n = path.len();
                path.push_str(&format!("[{i}]"));
                walk(x, path, what);
                path.truncate(n);
            }),
            serde_json::Value::Object(o) => o.iter().for_each(|(k, x)| {
                let n = path.len();
                path.push_str(&format!(".{k}"));
                walk(x, path, what);
                path.truncate(n);
            }),
            _ => {}
        }
    }
    walk(&json, &mut String::new(), what);
}

/// A lab file: refused with a message, or every rack run in it gives a finite value or a
/// message.
pub fn lab_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(lab) = labs::parse(text) else {
        return;
    };
    for step in &lab.steps {
        if let Ok(v) = labs::run_rack(&step.run) {
            assert!(v.is_finite(), "{}: {v}", step.title);
        }
        let verdict = step.check(1.0, 1.0);
        assert!(verdict.off_by.is_finite());
        if let labs::Rule::Within(_) = step.rule() {
            assert!(verdict.close(), "an exact prediction is close");
        }
    }
}

/// A progress file a student hands in: refused with a message, or imported; what was imported
/// exports and imports again to the same progress with no warning.
pub fn progress_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let labs = shipped_labs();
    let Ok((progress, _)) = lab_progress::import(text, labs) else {
        return;
    };
    let (again, warnings) = lab_progress::import(&progress.to_json(), labs).expect("re-imports");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(again, progress);
}

/// A checkpoint: refused with a message, or loaded; a loaded one writes out and reads back to
/// the same bytes.
pub fn checkpoint(data: &[u8]) {
    let Ok(w) = Weights::from_safetensors(data, &tiny_config()) else {
        return;
    };
    let bytes = w.to_safetensors().expect("loaded weights serialize");
    let again = Weights::from_safetensors(&bytes, &tiny_config()).expect("written weights load");
    assert!(again.to_safetensors().expect("serialize") == bytes);
}

/// A message to or from the CPU worker: anything that is not one is an error; one that is
/// re-encodes to itself, and a Generate request runs on the CPU engine or is refused with a
/// message, as the worker runs it (a tiny model, at most three steps).
pub fn worker_message(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = worker::decode_text::<worker::FromWorker>(text) {
        let once = worker::encode_text(&m);
        let m: worker::FromWorker = worker::decode_text(&once).expect("re-encoded message");
        assert_eq!(worker::encode_text(&m), once);
    }
    let Ok(m) = worker::decode_text::<worker::ToWorker>(text) else {
        return;
    };
    let once = worker::encode_text(&m);
    let back: worker::ToWorker = worker::decode_text(&once).expect("re-encoded message");
    assert_eq!(worker::encode_text(&back), once);
    if let worker::ToWorker::Generate {
        prompt,
        tokens,
        dispatch_fp8,
    } = m
    {
        let mut engine = Engine::cpu(tiny_weights().clone());
        if engine.set_dispatch_fp8(dispatch_fp8).is_err() {
            return;
        }
        let opts = GenerateOptions {
            max_new_tokens: tokens,
            sampling: Sampling::Greedy,
            seed: 0,
        };
        let Ok(mut g) = pollster::block_on(Generator::start(&mut engine, &prompt, opts)) else {
            return;
        };
        for _ in 0..3 {
            match pollster::block_on(g.next(&mut engine)) {
                Ok(Some(step)) => assert!(step.token < 256),
                _ => break,
            }
        }
    }
}

/// A model small enough that a fuzz input runs it in microseconds, valid for every kernel.
pub fn tiny_config() -> MoeConfig {
    MoeConfig {
        name: "fuzz-tiny".into(),
        vocab_size: 256,
        hidden: 16,
        layers: 2,
        dense_layers: 1,
        heads: 2,
        q_lora_rank: 8,
        kv_lora_rank: 8,
        qk_nope_head_dim: 4,
        qk_rope_head_dim: 4,
        v_head_dim: 4,
        dense_intermediate: 16,
        routed_experts: 4,
        experts_per_token: 2,
        shared_experts: 1,
        expert_intermediate: 8,
        gate_function: GateFunction::Sigmoid,
        routed_scaling: 1.0,
        rms_eps: 1e-6,
        rope_theta: 10_000.0,
        max_seq_len: 16,
        dispatch_fp8: false,
    }
}

fn tiny_weights() -> &'static Weights {
    static W: OnceLock<Weights> = OnceLock::new();
    W.get_or_init(|| Weights::synthetic(&tiny_config(), 7).expect("the tiny config is valid"))
}

// ---- Seeds: the inputs every driver starts from ----

const SCENARIOS: [&str; 14] = [
    include_str!("../../scenarios/deepseek-h800-decode-ep144.toml"),
    include_str!("../../scenarios/deepseek-v3-pretraining.toml"),
    include_str!("../../scenarios/sglang-h100-deepseek-r1-prefill.toml"),
    include_str!("../../scenarios/vllm-gb200-deepseek-r1-wide-ep.toml"),
    include_str!("../../scenarios/vllm-h200-deepseek-r1-wide-ep.toml"),
    // The seeds' rack with a [hardware] what-if, so that mutations reach every override.
    concat!(
        include_str!("../../scenarios/seed-nvl72-deepseek-r1-decode.toml"),
        "\n[hardware]\ngpus = 144\nnvlink_domain = 144\nnvlink_gb_s = 1800\nscale_out_gb_s = 100\n",
        "sms = 160\nhbm_gb = 288\nhbm_tb_s = 8\nbf16_tflops = 2500\nfp8_tflops = 5000\nfp4_tflops = 15000\n"
    ),
    include_str!("../../scenarios/inferencex-gb200-deepseek-r1-disagg.toml"),
    include_str!("../../scenarios/seed-gpt3-175b-training.toml"),
    include_str!("../../scenarios/seed-llama4-maverick-min-latency.toml"),
    include_str!("../../scenarios/seed-mla-copy-concat.toml"),
    include_str!("../../scenarios/seed-nvl72-deepseek-r1-decode.toml"),
    include_str!("../../scenarios/trtllm-b200-deepseek-r1-max-throughput.toml"),
    include_str!("../../scenarios/trtllm-b200-deepseek-r1-min-latency.toml"),
    include_str!("../../scenarios/trtllm-b200-llama4-maverick-max-throughput.toml"),
];

fn address_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        "#/sandbox?v=1&prompt=The%20experts&tokens=8&opt=all&format=nvfp4&dispatch=fp8".into(),
        "#/embed/pareto?v=1&preset=nvl72-serve&concurrency=512".into(),
        "#/labs?v=1&lab=kernel-fusion".into(),
        "#/embed/sandbox-mini?v=1&tokens=99999&opt=warp&prompt=%ZZ".into(),
    ];
    for (id, _, _) in rack_state::PRESETS {
        let f = rack_state::preset(id).expect("a shipped preset");
        seeds.push(format!("#/rack?{}", rack_state::encode(&f)));
    }
    seeds.push(sandbox_state::encode(&Default::default()));
    seeds.into_iter().map(String::into_bytes).collect()
}

fn scenario_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for text in SCENARIOS {
        seeds.push([b"\0", text.as_bytes()].concat());
        let f = ScenarioFile::parse("s.toml", text).expect("a shipped scenario parses");
        let json = serde_json::to_string(&f).expect("serializes");
        seeds.push([b"\x01", json.as_bytes()].concat());
    }
    seeds
}

/// A progress file with an answer to the first step of every shipped lab.
fn progress_seeds() -> Vec<Vec<u8>> {
    let mut p = lab_progress::Progress::new();
    p.student = "Ada Lovelace".into();
    for lab in shipped_labs() {
        let answer = lab_progress::Answer {
            prediction: 2.0,
            value: 1.5,
            close: false,
        };
        p.record(&lab.id, 0, answer);
    }
    vec![p.to_json().into_bytes()]
}

fn lab_seeds() -> Vec<Vec<u8>> {
    labs::SHIPPED
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect()
}

/// The tiny model in f32 and in int8 with its block scales, and cuts of it.
fn checkpoint_seeds() -> Vec<Vec<u8>> {
    let f32_file = tiny_weights().to_safetensors().expect("serializes");
    let int8_file = int8_checkpoint(tiny_weights());
    let mut seeds = vec![f32_file.clone(), int8_file.clone()];
    for cut in [8, 64, f32_file.len() / 2, f32_file.len() - 1] {
        seeds.push(f32_file[..cut].to_vec());
    }
    seeds.push(int8_file[..int8_file.len() - 3].to_vec());
    seeds
}

/// The layout train/export.py writes: matrices as int8 codes with one f32 scale per 1×32 block.
fn int8_checkpoint(w: &Weights) -> Vec<u8> {
    use moescope_engine::model::weights::{CONFIG_METADATA_KEY, INT8_SCALES_SUFFIX};
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    w.for_each(&mut |name, t| match t.shape[..] {
        [rows, cols] => {
            let q = quant::quantize(Format::Int8, &t.data, rows, cols);
            let codes = q.codes.iter().map(|&c| c as u8).collect();
            tensors.push((name.to_owned(), Dtype::I8, t.shape.clone(), codes));
            let scales = q.scales.iter().flat_map(|s| s.to_le_bytes()).collect();
            let blocks = vec![rows, q.scales.len() / rows];
            tensors.push((
                format!("{name}{INT8_SCALES_SUFFIX}"),
                Dtype::F32,
                blocks,
                scales,
            ));
        }
        _ => {
            let bytes = t.data.iter().flat_map(|v| v.to_le_bytes()).collect();
            tensors.push((name.to_owned(), Dtype::F32, t.shape.clone(), bytes));
        }
    });
    let config = serde_json::to_string(&w.config).expect("serializes");
    serialize(&tensors, CONFIG_METADATA_KEY, &config)
}

fn serialize(tensors: &[(String, Dtype, Vec<usize>, Vec<u8>)], key: &str, config: &str) -> Vec<u8> {
    let views = tensors.iter().map(|(name, dtype, shape, bytes)| {
        let view = TensorView::new(*dtype, shape.clone(), bytes).expect("consistent view");
        (name.clone(), view)
    });
    let metadata = [(key.to_owned(), config.to_owned())].into_iter().collect();
    safetensors::serialize(views, Some(metadata)).expect("serializes")
}

fn worker_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"kind":"generate","prompt":[84,104,101],"tokens":3}"#,
        r#"{"kind":"generate","prompt":[84,104,101],"tokens":2,"dispatch_fp8":true}"#,
        r#"{"kind":"generate","prompt":[],"tokens":1}"#,
        r#"{"kind":"generate","prompt":[300],"tokens":18446744073709551615}"#,
        r#"{"kind":"stop"}"#,
        r#"{"kind":"listening"}"#,
        r#"{"kind":"ready","source":{"Synthetic":{"why":"HTTP 404"}}}"#,
        r#"{"kind":"error","message":"lost"}"#,
        r#"{"kind":"done"}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
