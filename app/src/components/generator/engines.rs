//! The engines behind the generator: the GPU engine (built once per adapter and format, dropped
//! on a device loss), the CPU engine in a Web Worker or on the page, and one generation run on
//! whichever the visitor's choice and browser allow.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;
use moescope_engine::gpu::GpuContext;
use moescope_engine::model::generate::{Backend, Engine, StepStats};
use moescope_engine::model::Weights;
use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;

use super::state::{Choice, GenState, Runtime, Status, StepSummary, TokenRow};
use crate::checkpoint::{self, Source};
use crate::generation::{self, yield_now};
use crate::worker::{CpuWorker, FromWorker};

/// Engines are built once per backend and reused: uploading 45 MB of weights per click would
/// dominate the first step.
#[derive(Default)]
pub(super) struct Engines {
    /// The adapter, kept so that changing the weight format only re-uploads the weights.
    pub gpu_ctx: Option<Arc<GpuContext>>,
    pub gpu: Option<Engine>,
    pub cpu: Option<Engine>,
    /// Why the GPU engine could not be built, remembered so Auto does not retry every click.
    pub gpu_error: Option<String>,
    /// The CPU engine off the main thread (`crate::worker`), started on first CPU use.
    pub worker: Option<Rc<CpuWorker>>,
    /// Why no worker could be started: the CPU engine then runs on the main thread.
    pub worker_error: Option<String>,
}

pub(super) async fn gpu_context(engines: &Rc<RefCell<Engines>>) -> Result<Arc<GpuContext>, String> {
    if let Some(ctx) = engines.borrow().gpu_ctx.clone() {
        return Ok(ctx);
    }
    let ctx = GpuContext::new().await.map_err(|e| e.to_string())?;
    // In the browser wgpu's handles are not Send; the Arc is the engine's native-friendly API and
    // costs one refcount here.
    #[allow(clippy::arc_with_non_send_sync)]
    let ctx = Arc::new(ctx);
    engines.borrow_mut().gpu_ctx = Some(Arc::clone(&ctx));
    Ok(ctx)
}

async fn build_gpu(
    engines: &Rc<RefCell<Engines>>,
    weights: &Weights,
    o: Optimizations,
    format: Format,
) -> Result<Engine, String> {
    let ctx = gpu_context(engines).await?;
    Engine::gpu(ctx, weights, o, format).map_err(|e| e.to_string())
}

/// The settings of one run: engine choice, switches, weight format, FP8 expert inputs.
pub(super) type Settings = (Choice, Optimizations, Format, bool);

/// One generation: picks the engine (the GPU's, else the CPU's in the worker, else on the page),
/// says which, and streams the tokens into the panel.
pub(super) async fn generate(
    rt: &Runtime,
    (choice, optimizations, format, dispatch_fp8): Settings,
    prompt: &[u32],
    n: usize,
    s: GenState,
) -> Result<(), String> {
    let engines = &rt.engines;
    let w = load_weights(&rt.weights, s.weights_source).await;
    s.fallback_note.set(None);
    // Taken out of its cell while it runs.
    let engine = if choice == Choice::Cpu {
        None
    } else {
        gpu_engine(engines, &w, (choice, optimizations, format), s).await?
    };
    if engine.is_none() {
        if let Some(done) = in_worker(rt, (format, dispatch_fp8), (prompt, n), s).await {
            return done;
        }
    }
    let mut engine = match engine {
        Some(e) => e,
        None => engines
            .borrow_mut()
            .cpu
            .take()
            .unwrap_or_else(|| Engine::cpu((*w).clone())),
    };
    engine.set_optimizations(optimizations);
    engine.set_profiling(true);
    engine
        .set_dispatch_fp8(dispatch_fp8)
        .map_err(|e| e.to_string())?;
    s.backend_label
        .set(engine_label(&engine, optimizations, format, dispatch_fp8));
    s.status.set(Status::Running);
    yield_now().await;

    let mut progress = Progress {
        prompt,
        bytes: Vec::new(),
        total_ms: 0.0,
    };
    let result = generation::stream(&mut engine, prompt, n, &rt.stop, |step, backend| {
        progress.push(&s, step, backend)
    })
    .await;
    if let Some(why) = engine.device_lost() {
        // Everything the visitor set stays; the next click runs on the CPU.
        forget_lost_gpu(engines, &why);
        return Err(format!(
            "The GPU device was lost ({why}). Press Generate again to continue on the CPU engine."
        ));
    }
    // Put the engine back for the next click.
    let mut cell = engines.borrow_mut();
    match engine.backend() {
        Backend::Gpu => cell.gpu = Some(engine),
        Backend::Cpu => cell.cpu = Some(engine),
    }
    result
}

/// The run in the CPU worker, or None (with a note) where it must run on the page instead: no
/// worker can be started here, or this one never started (its script or wasm did not load; it
/// is then dropped, so later runs do not try it again).
async fn in_worker(
    rt: &Runtime,
    (format, dispatch_fp8): (Format, bool),
    (prompt, n): (&[u32], usize),
    s: GenState,
) -> Option<Result<(), String>> {
    let worker = match cpu_worker(&rt.engines) {
        Ok(w) => w,
        Err(why) => {
            add_note(s, main_thread_note(&why));
            return None;
        }
    };
    s.backend_label
        .set(cpu_label(format, dispatch_fp8, " in a Web Worker"));
    s.status.set(Status::Running);
    match run_in_worker(&worker, (prompt, n, dispatch_fp8), &rt.stop, s).await {
        Err(why) if !worker.started() => {
            let mut cell = rt.engines.borrow_mut();
            cell.worker = None;
            cell.worker_error = Some(why.clone());
            drop(cell);
            add_note(s, main_thread_note(&why));
            None
        }
        done => Some(done),
    }
}

/// The GPU engine for these settings: the cached one if it holds this format and its device
/// lives, else a new one; None (with a note) where WebGPU is not usable and the choice is Auto.
async fn gpu_engine(
    engines: &Rc<RefCell<Engines>>,
    w: &Weights,
    (choice, optimizations, format): (Choice, Optimizations, Format),
    s: GenState,
) -> Result<Option<Engine>, String> {
    // A cached engine in another format is dropped: its weights are the wrong ones. One whose
    // device was lost is dropped with its context, and Auto falls back to the CPU.
    let mut cached = engines
        .borrow_mut()
        .gpu
        .take()
        .filter(|e| e.format() == format);
    if let Some(why) = cached.as_ref().and_then(Engine::device_lost) {
        forget_lost_gpu(engines, &why);
        cached = None;
    }
    let engine = match cached {
        Some(e) => Some(e),
        None if engines.borrow().gpu_error.is_none() || choice == Choice::Gpu => {
            match build_gpu(engines, w, optimizations, format).await {
                Ok(e) => Some(e),
                Err(why) => {
                    engines.borrow_mut().gpu_error = Some(why.clone());
                    if choice == Choice::Gpu {
                        return Err(format!("WebGPU is not usable here: {why}"));
                    }
                    None
                }
            }
        }
        None => None,
    };
    if engine.is_none() {
        let why = engines.borrow().gpu_error.clone().unwrap_or_default();
        s.fallback_note.set(Some(format!(
            "WebGPU is not usable ({why}). Running the CPU reference compiled to WebAssembly instead: the same model, slower, and with no kernels to time."
        )));
    }
    Ok(engine)
}

fn main_thread_note(why: &str) -> String {
    format!(
        "The CPU engine runs on the main thread here, so the page pauses between tokens: no Web Worker could be started ({why})."
    )
}

/// Adds a sentence to the fallback note.
fn add_note(s: GenState, text: String) {
    s.fallback_note.update(|note| {
        *note = Some(match note.take() {
            Some(n) => format!("{n} {text}"),
            None => text,
        });
    });
}

/// The engine line: which engine, on which adapter, with which weights and switches.
fn engine_label(
    engine: &Engine,
    optimizations: Optimizations,
    format: Format,
    dispatch_fp8: bool,
) -> String {
    match engine.backend() {
        Backend::Gpu => format!(
            "Engine: WebGPU on {}, {} weights ({:.1} MB on the GPU){}, optimizations: {}",
            adapter_name(engine),
            format.name(),
            engine.weight_bytes() as f64 / 1e6,
            if dispatch_fp8 {
                ", FP8 expert inputs"
            } else {
                ""
            },
            optimizations.label()
        ),
        Backend::Cpu => cpu_label(format, dispatch_fp8, " on the main thread"),
    }
}

/// Drops the GPU engine and its context after a device loss, and remembers why: Auto then
/// falls back to the CPU (a later "WebGPU" choice tries a new device).
fn forget_lost_gpu(engines: &Rc<RefCell<Engines>>, why: &str) {
    let mut cell = engines.borrow_mut();
    cell.gpu = None;
    cell.gpu_ctx = None;
    cell.gpu_error = Some(format!("the GPU device was lost: {why}"));
}

/// The weights, fetched and parsed on first use (the trained checkpoint, or synthetic weights
/// with the reason); later calls only clone the Rc. The CPU engine copies them once, when it is
/// built.
pub(super) async fn load_weights(
    weights: &Rc<RefCell<Option<Rc<Weights>>>>,
    source: RwSignal<Option<Source>>,
) -> Rc<Weights> {
    if let Some(w) = weights.borrow().clone() {
        return w;
    }
    let (w, from) = checkpoint::load().await;
    // A second caller may have finished loading while this one awaited: keep the first.
    if let Some(w) = weights.borrow().clone() {
        return w;
    }
    let w = Rc::new(w);
    *weights.borrow_mut() = Some(Rc::clone(&w));
    source.set(Some(from));
    w
}

fn cpu_label(format: Format, dispatch_fp8: bool, place: &str) -> String {
    let inputs = if dispatch_fp8 {
        ", FP8 expert inputs"
    } else {
        ""
    };
    if format == Format::F32 {
        format!("Engine: CPU reference in WebAssembly (fallback, f64 accumulation){place}{inputs}")
    } else {
        format!(
            "Engine: CPU reference in WebAssembly (f64 accumulation){place}{inputs} with f32 weights: {} runs on WebGPU only",
            format.name()
        )
    }
}

/// The worker, started on first use; a failure is remembered so later clicks do not retry.
fn cpu_worker(engines: &Rc<RefCell<Engines>>) -> Result<Rc<CpuWorker>, String> {
    let mut cell = engines.borrow_mut();
    if let Some(w) = &cell.worker {
        return Ok(Rc::clone(w));
    }
    if let Some(why) = &cell.worker_error {
        return Err(why.clone());
    }
    match CpuWorker::start() {
        Ok(w) => {
            let w = Rc::new(w);
            cell.worker = Some(Rc::clone(&w));
            Ok(w)
        }
        Err(why) => {
            cell.worker_error = Some(why.clone());
            Err(why)
        }
    }
}

/// The tokens of one run so far, and what the page shows of them.
struct Progress<'a> {
    prompt: &'a [u32],
    bytes: Vec<u8>,
    total_ms: f64,
}

impl Progress<'_> {
    /// Shows one generated token: the text so far, its routing row, the running averages and
    /// (GPU) the kernel trace of its step.
    fn push(&mut self, s: &GenState, step: &StepStats, backend: Backend) {
        self.bytes.push(step.token as u8);
        self.total_ms += step.ms;
        let ms = self.total_ms / self.bytes.len() as f64;
        s.last_trace.set(step.trace.clone());
        let mut all = self.prompt.to_vec();
        all.extend(self.bytes.iter().map(|&b| u32::from(b)));
        s.last_tokens.set(Some((all, backend)));
        s.output
            .set(String::from_utf8_lossy(&self.bytes).into_owned());
        s.rows.update(|r| {
            r.push(TokenRow {
                token: step.token,
                text: token_label(step.token),
                experts: step.experts.clone(),
            })
        });
        s.stats.set(Some(StepSummary {
            tokens_per_s: 1e3 / ms,
            ms,
            kernels: step.kernels,
            submissions: step.submissions,
            mb: step.bytes as f64 / 1e6,
        }));
    }
}

/// The next message, or None when the worker's side of the channel is gone.
async fn next(rx: &mut futures_channel::mpsc::UnboundedReceiver<FromWorker>) -> Option<FromWorker> {
    std::future::poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut *rx), cx))
        .await
}

/// Generation in the CPU worker: its messages become the same rows and numbers as a page-side
/// run. Stop is forwarded by the Stop button; the worker answers with Done.
async fn run_in_worker(
    worker: &CpuWorker,
    (prompt, n, dispatch_fp8): (&[u32], usize, bool),
    stop: &Rc<RefCell<bool>>,
    s: GenState,
) -> Result<(), String> {
    let mut rx = worker.generate(prompt, n, dispatch_fp8);
    let mut progress = Progress {
        prompt,
        bytes: Vec::new(),
        total_ms: 0.0,
    };
    while let Some(message) = next(&mut rx).await {
        match message {
            FromWorker::Listening => {}
            // Say which weights the worker really runs (its own fetch may have failed).
            FromWorker::Ready { source } => s.weights_source.set(Some(source)),
            FromWorker::Token { step } => {
                progress.push(&s, &step, Backend::Cpu);
                if *stop.borrow() {
                    worker.stop();
                }
            }
            FromWorker::Done => return Ok(()),
            FromWorker::Error { message } => return Err(message),
        }
    }
    Err("the CPU worker stopped answering".into())
}

fn adapter_name(engine: &Engine) -> String {
    let name = engine.device_name();
    if name.is_empty() {
        "this browser's GPU (name hidden)".to_owned()
    } else {
        name
    }
}

/// A byte token as a reader can see it: printable ASCII quoted, anything else (part of a
/// multi-byte character, or a control byte) as hex.
fn token_label(token: u32) -> String {
    match u8::try_from(token) {
        Ok(b' ') => "' '".to_owned(),
        Ok(b) if b.is_ascii_graphic() => format!("'{}'", b as char),
        Ok(b) => format!("0x{b:02X}"),
        Err(_) => format!("#{token}"),
    }
}
