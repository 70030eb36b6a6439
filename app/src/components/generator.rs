//! Text generation with deepseek-mini: on WebGPU, with the kernels the optimization switches
//! pick, when the browser gives an adapter, else on the CPU reference compiled to wasm, labeled as
//! such. Tokens stream in with tokens/s, kernels, submissions and bytes per step, and the experts
//! each token was routed to.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use moescope_engine::gpu::GpuContext;
use moescope_engine::model::generate::{Backend, Engine, GenerateOptions, Generator, Sampling};
use moescope_engine::model::gpu::KernelLaunch;
use moescope_engine::model::{tokenizer, MoeConfig, Weights};
use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;
use wasm_bindgen::JsCast;

use super::{KernelTimeline, OptimizationSwitches};

/// Synthetic weights seed until the trained checkpoint ships.
const WEIGHTS_SEED: u64 = 0;
const DEFAULT_PROMPT: &str = "The experts";
const DEFAULT_TOKENS: usize = 32;

/// Which engine the visitor asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Choice {
    Auto,
    Gpu,
    Cpu,
}

#[derive(Clone, Debug, PartialEq)]
enum Status {
    Idle,
    Preparing,
    Running,
    Done,
    Error(String),
}

impl Status {
    fn attr(&self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Preparing | Status::Running => "running",
            Status::Done => "done",
            Status::Error(_) => "error",
        }
    }
}

/// One row of the routing table.
#[derive(Clone, Debug, PartialEq)]
struct TokenRow {
    text: String,
    experts: Vec<Vec<usize>>,
}

/// Engines are built once per backend and reused: uploading 45 MB of weights per click would
/// dominate the first step.
#[derive(Default)]
struct Engines {
    gpu: Option<Engine>,
    cpu: Option<Engine>,
    /// Why the GPU engine could not be built, remembered so Auto does not retry every click.
    gpu_error: Option<String>,
}

async fn build_gpu(weights: &Weights, o: Optimizations) -> Result<Engine, String> {
    let ctx = GpuContext::new().await.map_err(|e| e.to_string())?;
    // In the browser wgpu's handles are not Send; the Arc is the engine's native-friendly API and
    // costs one refcount here.
    #[allow(clippy::arc_with_non_send_sync)]
    let ctx = Arc::new(ctx);
    Engine::gpu(ctx, weights, o, Format::F32).map_err(|e| e.to_string())
}

/// Lets the browser paint between tokens.
async fn yield_to_browser() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ =
                w.set_timeout_with_callback_and_timeout_and_arguments_0(resolve.unchecked_ref(), 0);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

#[component]
pub fn GeneratePanel() -> impl IntoView {
    let prompt = RwSignal::new(DEFAULT_PROMPT.to_owned());
    let tokens = RwSignal::new(DEFAULT_TOKENS.to_string());
    let choice = RwSignal::new(Choice::Auto);
    let status = RwSignal::new(Status::Idle);
    // Finished runs (done or error): lets a test wait for the run it started.
    let runs = RwSignal::new(0u32);
    let output = RwSignal::new(String::new());
    let rows = RwSignal::new(Vec::<TokenRow>::new());
    let backend_label = RwSignal::new(String::new());
    let fallback_note = RwSignal::new(None::<String>);
    let stats = RwSignal::new(None::<StepSummary>);
    let optimizations = RwSignal::new(Optimizations::all());
    let last_trace = RwSignal::new(Vec::<KernelLaunch>::new());
    let stop = Rc::new(RefCell::new(false));
    let engines = Rc::new(RefCell::new(Engines::default()));
    let weights: Rc<RefCell<Option<Rc<Weights>>>> = Rc::new(RefCell::new(None));

    let run = {
        let stop = Rc::clone(&stop);
        move || {
            if matches!(status.get_untracked(), Status::Preparing | Status::Running) {
                return;
            }
            let n = match tokens.get_untracked().trim().parse::<usize>() {
                Ok(n) if (1..=256).contains(&n) => n,
                _ => {
                    status.set(Status::Error(
                        "Tokens must be a whole number from 1 to 256.".into(),
                    ));
                    runs.update(|r| *r += 1);
                    return;
                }
            };
            let prompt_ids = tokenizer::encode(&prompt.get_untracked());
            if prompt_ids.is_empty() {
                status.set(Status::Error("Type a prompt first.".into()));
                runs.update(|r| *r += 1);
                return;
            }
            *stop.borrow_mut() = false;
            output.set(String::new());
            rows.set(Vec::new());
            stats.set(None);
            status.set(Status::Preparing);
            let (stop, engines, weights) =
                (Rc::clone(&stop), Rc::clone(&engines), Rc::clone(&weights));
            spawn_local(async move {
                let result = generate(
                    &engines,
                    &weights,
                    (choice.get_untracked(), optimizations.get_untracked()),
                    &prompt_ids,
                    n,
                    &stop,
                    Sinks {
                        status,
                        output,
                        rows,
                        backend_label,
                        fallback_note,
                        stats,
                        last_trace,
                    },
                )
                .await;
                match result {
                    Ok(()) => status.set(Status::Done),
                    Err(e) => status.set(Status::Error(e)),
                }
                runs.update(|r| *r += 1);
            });
        }
    };
    let stop_click = {
        let stop = Rc::clone(&stop);
        move |_| *stop.borrow_mut() = true
    };
    let busy = move || matches!(status.get(), Status::Preparing | Status::Running);

    view! {
        <section class="card" data-testid="generator" data-status=move || status.get().attr() data-runs=move || runs.get()>
            <h2>"Generate with deepseek-mini"</h2>
            <p class="muted">
                "11.3 M parameters (4 layers: MLA attention, 1 dense FFN, 3 MoE layers of 16 routed experts, top-2, plus 1 shared), byte-level tokens. "
                "The weights are synthetic (seeded random) until the trained checkpoint ships, so the text is gibberish: what matters here is the kernels, the speed and the routing."
            </p>
            <div class="controls">
                <label>"Prompt "
                    <input type="text" data-testid="gen-prompt" prop:value=move || prompt.get()
                        on:input=move |ev| prompt.set(event_target_value(&ev)) />
                </label>
                <label>"Tokens "
                    <input type="number" min="1" max="256" data-testid="gen-tokens" prop:value=move || tokens.get()
                        on:input=move |ev| tokens.set(event_target_value(&ev)) />
                </label>
                <label>"Engine "
                    <select data-testid="gen-backend-choice" on:change=move |ev| {
                        choice.set(match event_target_value(&ev).as_str() {
                            "gpu" => Choice::Gpu,
                            "cpu" => Choice::Cpu,
                            _ => Choice::Auto,
                        })
                    }>
                        <option value="auto">"Auto (WebGPU if available)"</option>
                        <option value="gpu">"WebGPU"</option>
                        <option value="cpu">"CPU reference (wasm)"</option>
                    </select>
                </label>
                <button data-testid="gen-run" on:click=move |_| run() disabled=busy>"Generate"</button>
                <button data-testid="gen-stop" on:click=stop_click disabled=move || !busy()>"Stop"</button>
            </div>
            <OptimizationSwitches optimizations disabled=Signal::derive(busy) />
            {move || fallback_note.get().map(|note| view! {
                <p class="banner warn" data-testid="gen-fallback">{note}</p>
            })}
            {move || match status.get() {
                Status::Error(e) => Some(view! { <p class="bad" data-testid="gen-error">{e}</p> }),
                _ => None,
            }}
            <p class="muted" data-testid="gen-backend">{move || backend_label.get()}</p>
            <pre class="gen-output" data-testid="gen-output" aria-live="polite">
                <span class="prompt">{move || if output.get().is_empty() && !busy() { String::new() } else { prompt.get() }}</span>
                {move || output.get()}
            </pre>
            <p data-testid="gen-stats">{move || match stats.get() {
                None => if busy() { "Running…".to_owned() } else { String::new() },
                Some(StepSummary { tokens_per_s, ms, kernels, submissions, mb }) => format!(
                    "{tokens_per_s:.1} tokens/s ({ms:.1} ms per decode step, measured) · {kernels} kernels in {submissions} queue submissions per step · {mb:.1} MB read and written per step (computed from the shapes)"
                ),
            }}</p>
            <KernelTimeline trace=last_trace />
            <h3>"Experts per token"</h3>
            <p class="muted">"Each generated token, and the two routed experts (of 16) it used in each MoE layer. The shared expert sees every token."</p>
            <div class="table-wrap">
                <table class="experts" data-testid="gen-experts">
                    <thead><tr><th>"token"</th><th>"layer 1"</th><th>"layer 2"</th><th>"layer 3"</th></tr></thead>
                    <tbody>
                        {move || rows.get().into_iter().map(|r| view! {
                            <tr>
                                <td><code>{r.text}</code></td>
                                {r.experts.into_iter().map(|ids| view! {
                                    <td>{ids.iter().map(|e| format!("E{e}")).collect::<Vec<_>>().join(" ")}</td>
                                }).collect_view()}
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

/// The signals one run writes to.
#[derive(Clone, Copy)]
struct Sinks {
    status: RwSignal<Status>,
    output: RwSignal<String>,
    rows: RwSignal<Vec<TokenRow>>,
    backend_label: RwSignal<String>,
    fallback_note: RwSignal<Option<String>>,
    stats: RwSignal<Option<StepSummary>>,
    last_trace: RwSignal<Vec<KernelLaunch>>,
}

/// The running averages shown under the output.
#[derive(Clone, Copy, Debug, PartialEq)]
struct StepSummary {
    tokens_per_s: f64,
    ms: f64,
    kernels: usize,
    submissions: usize,
    mb: f64,
}

async fn generate(
    engines: &Rc<RefCell<Engines>>,
    weights: &Rc<RefCell<Option<Rc<Weights>>>>,
    (choice, optimizations): (Choice, Optimizations),
    prompt: &[u32],
    n: usize,
    stop: &Rc<RefCell<bool>>,
    s: Sinks,
) -> Result<(), String> {
    // Built once; a click only clones the Rc. The CPU engine copies them once, when it is built.
    let cached = weights.borrow().clone();
    let w = match cached {
        Some(w) => w,
        None => {
            let w = Weights::synthetic(&MoeConfig::deepseek_mini(), WEIGHTS_SEED)
                .map_err(|e| e.to_string())?;
            let w = Rc::new(w);
            *weights.borrow_mut() = Some(Rc::clone(&w));
            w
        }
    };

    // Pick and build the engine; taken out of the cell while it runs.
    let want_gpu = choice != Choice::Cpu;
    let mut engine = None;
    s.fallback_note.set(None);
    if want_gpu {
        let cached = engines.borrow_mut().gpu.take();
        engine = match cached {
            Some(e) => Some(e),
            None if engines.borrow().gpu_error.is_none() || choice == Choice::Gpu => {
                match build_gpu(&w, optimizations).await {
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
                "No WebGPU ({why}). Running the CPU reference compiled to WebAssembly instead: the same model, slower, and with no kernels to time."
            )));
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
    s.backend_label.set(match engine.backend() {
        Backend::Gpu => format!(
            "Engine: WebGPU on {}, optimizations: {}",
            adapter_name(&engine),
            optimizations.label()
        ),
        Backend::Cpu => {
            "Engine: CPU reference in WebAssembly (fallback, f64 accumulation)".to_owned()
        }
    });
    s.status.set(Status::Running);
    yield_to_browser().await;

    let opts = GenerateOptions {
        max_new_tokens: n,
        sampling: Sampling::Greedy,
        seed: 0,
    };
    let result = run_loop(&mut engine, prompt, opts, stop, s).await;
    // Put the engine back for the next click.
    let mut cell = engines.borrow_mut();
    match engine.backend() {
        Backend::Gpu => cell.gpu = Some(engine),
        Backend::Cpu => cell.cpu = Some(engine),
    }
    result
}

fn adapter_name(engine: &Engine) -> String {
    let name = engine.device_name();
    if name.is_empty() {
        "this browser's GPU (name hidden)".to_owned()
    } else {
        name
    }
}

async fn run_loop(
    engine: &mut Engine,
    prompt: &[u32],
    opts: GenerateOptions,
    stop: &Rc<RefCell<bool>>,
    s: Sinks,
) -> Result<(), String> {
    let mut generator = Generator::start(engine, prompt, opts)
        .await
        .map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    let mut total_ms = 0.0;
    while !*stop.borrow() {
        let Some(step) = generator.next(engine).await.map_err(|e| e.to_string())? else {
            break;
        };
        bytes.push(step.token as u8);
        total_ms += step.ms;
        let count = bytes.len() as f64;
        let row = TokenRow {
            text: token_label(step.token),
            experts: step.experts.clone(),
        };
        let ms = total_ms / count;
        let summary = StepSummary {
            tokens_per_s: 1e3 / ms,
            ms,
            kernels: step.kernels,
            submissions: step.submissions,
            mb: step.bytes as f64 / 1e6,
        };
        s.last_trace.set(step.trace.clone());
        s.output.set(String::from_utf8_lossy(&bytes).into_owned());
        s.rows.update(|r| r.push(row));
        s.stats.set(Some(summary));
        yield_to_browser().await;
    }
    Ok(())
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
