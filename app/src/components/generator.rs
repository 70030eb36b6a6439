//! Text generation with deepseek-mini: on WebGPU, with the kernels the optimization switches
//! pick, when the browser gives an adapter, else on the CPU reference compiled to wasm, labeled as
//! such. Tokens stream in with tokens/s, kernels, submissions and bytes per step, and the experts
//! each token was routed to.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use moescope_engine::bench::decode::{run_variants, DecodeBenchOptions};
use moescope_engine::gpu::GpuContext;
use moescope_engine::model::accuracy::{self, Accuracy};
use moescope_engine::model::generate::{
    check_against_reference, Backend, Engine, ReferenceCheck, StepStats,
};
use moescope_engine::model::gpu::KernelLaunch;
use moescope_engine::model::{tokenizer, Weights};
use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;

use super::{
    share_links, ExpertHeatmap, ExpertSpecialization, KernelTimeline, OptimizationSwitches,
    SharePanel,
};
use crate::checkpoint::{self, Source};
use crate::generation::{self, yield_now};
use crate::sandbox_state::{self, SandboxState};
use crate::worker::{CpuWorker, FromWorker};

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
    token: u32,
    text: String,
    experts: Vec<Vec<usize>>,
}

/// Engines are built once per backend and reused: uploading 45 MB of weights per click would
/// dominate the first step.
#[derive(Default)]
struct Engines {
    /// The adapter, kept so that changing the weight format only re-uploads the weights.
    gpu_ctx: Option<Arc<GpuContext>>,
    gpu: Option<Engine>,
    cpu: Option<Engine>,
    /// Why the GPU engine could not be built, remembered so Auto does not retry every click.
    gpu_error: Option<String>,
    /// The CPU engine off the main thread (`crate::worker`), started on first CPU use.
    worker: Option<Rc<CpuWorker>>,
    /// Why no worker could be started: the CPU engine then runs on the main thread.
    worker_error: Option<String>,
}

async fn gpu_context(engines: &Rc<RefCell<Engines>>) -> Result<Arc<GpuContext>, String> {
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

#[component]
pub fn GeneratePanel(
    /// The settings to start from (the URL's, on a shared link or an embed).
    #[prop(optional)]
    initial: Option<SandboxState>,
    /// For an embed: no introduction, no share button.
    #[prop(optional)]
    compact: bool,
) -> impl IntoView {
    let initial = initial.unwrap_or_default();
    let prompt = RwSignal::new(initial.prompt.clone());
    let tokens = RwSignal::new(initial.tokens.to_string());
    let choice = RwSignal::new(Choice::Auto);
    let status = RwSignal::new(Status::Idle);
    // Finished runs (done or error): lets a test wait for the run it started.
    let runs = RwSignal::new(0u32);
    let output = RwSignal::new(String::new());
    let rows = RwSignal::new(Vec::<TokenRow>::new());
    let backend_label = RwSignal::new(String::new());
    let fallback_note = RwSignal::new(None::<String>);
    let stats = RwSignal::new(None::<StepSummary>);
    let optimizations = RwSignal::new(initial.optimizations);
    let format = RwSignal::new(initial.format);
    let dispatch_fp8 = RwSignal::new(initial.dispatch_fp8);
    let share = RwSignal::new(None::<(String, String)>);
    let compare = RwSignal::new(None::<Result<String, String>>);
    let comparing = RwSignal::new(false);
    let accuracy = RwSignal::new(None::<Result<Accuracy, String>>);
    let measuring = RwSignal::new(false);
    let last_trace = RwSignal::new(Vec::<KernelLaunch>::new());
    // The prompt and the generated tokens of the last run, and which engine ran them.
    let last_tokens = RwSignal::new(None::<(Vec<u32>, Backend)>);
    let check = RwSignal::new(None::<Result<ReferenceCheck, String>>);
    let checking = RwSignal::new(false);
    let stop = Rc::new(RefCell::new(false));
    let engines = Rc::new(RefCell::new(Engines::default()));
    let weights: Rc<RefCell<Option<Rc<Weights>>>> = Rc::new(RefCell::new(None));
    let weights_source = RwSignal::new(None::<Source>);
    // Fetch the checkpoint as soon as the sandbox shows, so the first Generate does not wait.
    {
        let weights = Rc::clone(&weights);
        spawn_local(async move {
            load_weights(&weights, weights_source).await;
        });
    }

    let run = {
        let (stop, engines, weights) = (Rc::clone(&stop), Rc::clone(&engines), Rc::clone(&weights));
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
            // A check of the previous run's tokens says nothing about this one.
            check.set(None);
            status.set(Status::Preparing);
            let (stop, engines, weights) =
                (Rc::clone(&stop), Rc::clone(&engines), Rc::clone(&weights));
            spawn_local(async move {
                let result = generate(
                    &engines,
                    &weights,
                    (
                        choice.get_untracked(),
                        optimizations.get_untracked(),
                        format.get_untracked(),
                        dispatch_fp8.get_untracked(),
                    ),
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
                        last_tokens,
                        weights_source,
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
        let (stop, engines) = (Rc::clone(&stop), Rc::clone(&engines));
        move |_| {
            *stop.borrow_mut() = true;
            if let Some(w) = engines.borrow().worker.as_ref() {
                w.stop();
            }
        }
    };
    let busy = move || matches!(status.get(), Status::Preparing | Status::Running);
    // Before/after in one click: the same decode steps with every switch off and with the
    // current set, measured in one run.
    let run_compare = {
        let engines = Rc::clone(&engines);
        move |_| {
            if comparing.get_untracked() || busy() {
                return;
            }
            comparing.set(true);
            compare.set(None);
            let engines = Rc::clone(&engines);
            let current = optimizations.get_untracked();
            spawn_local(async move {
                let result = async {
                    let ctx = gpu_context(&engines).await.map_err(|e| format!("needs WebGPU: {e}"))?;
                    let options = DecodeBenchOptions { prompt_tokens: 8, steps: 3, rounds: 1, seed: checkpoint::SYNTHETIC_SEED };
                    let list = vec![("none".to_string(), Optimizations::none()), (current.label(), current)];
                    let b = run_variants(&ctx, options, list).await.map_err(|e| e.to_string())?;
                    let (before, after) = match (b.variants.first(), b.variants.last()) {
                        (Some(x), Some(y)) => (x, y),
                        _ => return Err("the benchmark returned nothing".to_string()),
                    };
                    Ok(format!(
                        "Eager: {:.1} ms per decode step, {} kernels in {} submissions. Current switches ({}): {:.1} ms, {} kernels in {} submissions: {:.2}× (measured on this GPU, 3 steps after 8 tokens; logits differ by at most {:.1e}).",
                        before.ms_per_step, before.kernels_per_step, before.submissions_per_step,
                        current.label(), after.ms_per_step, after.kernels_per_step, after.submissions_per_step,
                        before.ms_per_step / after.ms_per_step, after.max_logit_diff_vs_baseline
                    ))
                }
                .await;
                compare.set(Some(result));
                comparing.set(false);
            });
        }
    };
    let run_check = {
        let (engines, weights) = (Rc::clone(&engines), Rc::clone(&weights));
        move |_| {
            let Some((tokens, backend)) = last_tokens.get_untracked() else {
                return;
            };
            if checking.get_untracked() || busy() {
                return;
            }
            checking.set(true);
            check.set(None);
            let (engines, weights) = (Rc::clone(&engines), Rc::clone(&weights));
            spawn_local(async move {
                let w = load_weights(&weights, weights_source).await;
                let taken = match backend {
                    Backend::Gpu => engines.borrow_mut().gpu.take(),
                    // The text may have come from the worker: check it with a page-side engine.
                    Backend::Cpu => Some(
                        engines
                            .borrow_mut()
                            .cpu
                            .take()
                            .unwrap_or_else(|| Engine::cpu((*w).clone())),
                    ),
                };
                let result = match taken {
                    Some(mut engine) => {
                        let r = check_against_reference(&mut engine, &w, &tokens)
                            .await
                            .map_err(|e| e.to_string());
                        let mut cell = engines.borrow_mut();
                        match engine.backend() {
                            Backend::Gpu => cell.gpu = Some(engine),
                            Backend::Cpu => cell.cpu = Some(engine),
                        }
                        r
                    }
                    None => Err("generate first: there is no engine to check".into()),
                };
                check.set(Some(result));
                checking.set(false);
            });
        }
    };
    let measure = {
        let (engines, weights) = (Rc::clone(&engines), Rc::clone(&weights));
        move |_| {
            if measuring.get_untracked() {
                return;
            }
            measuring.set(true);
            accuracy.set(None);
            let (engines, weights) = (Rc::clone(&engines), Rc::clone(&weights));
            let (f, fp8) = (format.get_untracked(), dispatch_fp8.get_untracked());
            spawn_local(async move {
                let result = async {
                    let w = load_weights(&weights, weights_source).await;
                    let ctx = gpu_context(&engines).await?;
                    accuracy::measure(&ctx, &w, f, fp8)
                        .await
                        .map_err(|e| e.to_string())
                }
                .await;
                accuracy.set(Some(result));
                measuring.set(false);
            });
        }
    };

    view! {
        <section class="card" data-testid="generator" data-status=move || status.get().attr() data-runs=move || runs.get()>
            <h2>"Generate with deepseek-mini"</h2>
            <p class="muted" class:hidden=compact>
                "11.3 M parameters (4 layers: MLA attention, 1 dense FFN, 3 MoE layers of 16 routed experts, top-2, plus 1 shared), byte-level tokens. "
            </p>
            <p class="muted" data-testid="weights-source"
                data-source=move || match weights_source.get() {
                    Some(Source::Trained { .. }) => "trained",
                    Some(Source::Synthetic { .. }) => "synthetic",
                    None => "loading",
                }>
                {move || weights_source.get().map(|s| s.describe()).unwrap_or_else(|| "Loading the trained checkpoint (13 MB)…".into())}
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
            <div class="controls">
                <button data-testid="gen-compare" on:click=run_compare disabled=move || busy() || comparing.get()>
                    {move || if comparing.get() { "Comparing…" } else { "Compare with the eager baseline" }}
                </button>
            </div>
            {move || compare.get().map(|r| match r {
                Ok(t) => view! { <p data-testid="gen-compare-result">{t}</p> }.into_any(),
                Err(e) => view! { <p class="bad" data-testid="gen-compare-result">{format!("Comparison not run: {e}")}</p> }.into_any(),
            })}
            <div class="controls" data-testid="format-picker">
                <label>"Weight format "
                    <select data-testid="gen-format" disabled=busy on:change=move |ev| {
                        if let Some(f) = Format::parse(&event_target_value(&ev)) {
                            format.set(f);
                            accuracy.set(None);
                        }
                    }>
                        {Format::ALL.into_iter().map(|f| view! {
                            <option value=f.name() selected=move || format.get() == f>{format_label(f)}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label class="check" title="The routed experts read their input as E4M3 codes with one power-of-two scale per 1×128 tile, as DeepSeek-V3's dispatch sends activations; the shared expert reads it in f32.">
                    <input type="checkbox" data-testid="gen-dispatch-fp8" disabled=busy
                        prop:checked=move || dispatch_fp8.get()
                        on:change=move |ev| {
                            dispatch_fp8.set(event_target_checked(&ev));
                            accuracy.set(None);
                        } />
                    "FP8 expert inputs (E4M3, 1×128 tiles)"
                </label>
                <button data-testid="format-measure" on:click=measure disabled=move || busy() || measuring.get()>
                    {move || if measuring.get() { "Measuring…" } else { "Measure accuracy vs f32" }}
                </button>
            </div>
            <p class="muted">"The attention and FFN projections are quantized at load from the weights in memory (the int8 checkpoint decoded to f32), block-scaled as in the label, and unpacked in registers by the GEMV kernels; the embedding, output head, router and norms stay f32, as DeepSeek-V3 keeps them. Needs WebGPU: the CPU fallback runs f32. FP8 expert inputs: the dispatch sends each token to its routed experts as E4M3 codes with one power-of-two scale per 1×128 tile (a 288-byte record instead of 1,040 in f32), as DeepSeek-V3's dispatch does (the shared expert reads f32); both engines run it."</p>
            {move || accuracy.get().map(|r| match r {
                Ok(a) => view! {
                    <p data-testid="format-accuracy">{format!(
                        "{}{} against f32 over {} positions of 4 fixed prompts (measured): top-1 agreement {:.1}%, KL divergence {:.2e} nats, max logit error {:.3}; {:.3} bytes per parameter, {:.1} MB of weights on the GPU",
                        a.format.name(), if a.dispatch_fp8 { " with FP8 expert inputs" } else { "" }, a.positions, 100.0 * a.top1_agreement, a.kl_divergence,
                        a.max_logit_error, a.bytes_per_parameter, a.model_bytes as f64 / 1e6
                    )}</p>
                }.into_any(),
                Err(e) => view! { <p class="bad" data-testid="format-accuracy">{format!("Accuracy not measured: {e}")}</p> }.into_any(),
            })}
            // The engine line always holds a line of text, and the notes that may appear go below
            // the output: nothing above the output moves when Generate is pressed.
            <p class="muted" data-testid="gen-backend">{move || {
                let label = backend_label.get();
                if label.is_empty() { "Engine: chosen when you press Generate (WebGPU if available, else the CPU reference).".to_string() } else { label }
            }}</p>
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
            {move || fallback_note.get().map(|note| view! {
                <p class="banner warn" data-testid="gen-fallback">{note}</p>
            })}
            {move || match status.get() {
                Status::Error(e) => Some(view! { <p class="bad" data-testid="gen-error">{e}</p> }),
                _ => None,
            }}
            <div class="controls">
                <button data-testid="gen-check" on:click=run_check
                    disabled=move || busy() || checking.get() || last_tokens.get().is_none()>
                    {move || if checking.get() { "Checking…" } else { "Check against the CPU reference" }}
                </button>
                {move || check.get().map(|r| match r {
                    Err(e) => view! { <span class="bad" data-testid="correctness-badge">{format!("Check failed to run: {e}")}</span> }.into_any(),
                    Ok(c) if c.format == Format::F32 && !c.comparable => view! {
                        <span class="muted" data-testid="correctness-badge" data-passed="n/a">{format!(
                            "Not counted: an expert input lies {:.1e} (relative) from an FP8 rounding tie, where the GPU's f32 rounding may pick the other code; max |Δlogit| {:.3} over {} positions. Try another prompt.",
                            c.dispatch_margin.unwrap_or(0.0), c.comparison.max_abs_error, c.tokens
                        )}</span>
                    }.into_any(),
                    Ok(c) if !c.comparable => view! {
                        <span class="muted" data-testid="correctness-badge" data-passed="n/a">{format!(
                            "{} weights differ from the f32 reference by design: max |Δlogit| {:.3} over {} positions (see the accuracy measurement)",
                            c.format.name(), c.comparison.max_abs_error, c.tokens
                        )}</span>
                    }.into_any(),
                    Ok(c) => view! {
                        <span class=if c.passed() { "good" } else { "bad" } data-testid="correctness-badge" data-passed=c.passed().to_string()>{format!(
                            "{} the CPU reference: max |Δlogit| {:.1e} over {} positions (allowed {:.0e} + {:.0e}·|logit|)",
                            if c.passed() { "✓ Matches" } else { "✗ Does not match" },
                            c.comparison.max_abs_error, c.tokens, c.tolerance.abs, c.tolerance.rel
                        )}</span>
                    }.into_any(),
                })}
            </div>
            {(!compact).then(|| view! {
                <div class="controls">
                    <button data-testid="gen-share" on:click=move |_| {
                        let st = SandboxState {
                            prompt: prompt.get_untracked(),
                            tokens: tokens.get_untracked().trim().parse().unwrap_or(32).clamp(1, 256),
                            optimizations: optimizations.get_untracked(),
                            format: format.get_untracked(),
                            dispatch_fp8: dispatch_fp8.get_untracked(),
                        };
                        let q = sandbox_state::encode(&st);
                        share.set(Some(share_links("sandbox", "sandbox-mini", &q, (760, 720), "MoEscope sandbox")));
                    }>"Share / Embed"</button>
                </div>
            })}
            <SharePanel share=share prefix="gen" views="views: sandbox-mini, kernel-timeline" />
            <KernelTimeline trace=last_trace />
            <h3>"Experts per token"</h3>
            <p class="muted">"Each generated token, and the two routed experts (of 16) it used in each MoE layer. The shared expert sees every token."</p>
            <ExpertHeatmap experts=16 tokens=Signal::derive(move || rows.get().into_iter().map(|r| (r.text, r.experts)).collect::<Vec<_>>()) />
            <h3>"What the experts specialize in"</h3>
            <ExpertSpecialization experts=16 tokens=Signal::derive(move || rows.get().into_iter().map(|r| (r.token, r.experts)).collect::<Vec<_>>()) />
            <details>
            <summary>"As a table"</summary>
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
            </details>
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
    last_tokens: RwSignal<Option<(Vec<u32>, Backend)>>,
    weights_source: RwSignal<Option<Source>>,
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
    (choice, optimizations, format, dispatch_fp8): (Choice, Optimizations, Format, bool),
    prompt: &[u32],
    n: usize,
    stop: &Rc<RefCell<bool>>,
    s: Sinks,
) -> Result<(), String> {
    let w = load_weights(weights, s.weights_source).await;

    // Pick and build the engine; taken out of the cell while it runs.
    let want_gpu = choice != Choice::Cpu;
    let mut engine = None;
    s.fallback_note.set(None);
    if want_gpu {
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
        engine = match cached {
            Some(e) => Some(e),
            None if engines.borrow().gpu_error.is_none() || choice == Choice::Gpu => {
                match build_gpu(engines, &w, optimizations, format).await {
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
    }
    if engine.is_none() {
        match cpu_worker(engines) {
            Ok(worker) => {
                s.backend_label.set(cpu_label(format, dispatch_fp8, " in a Web Worker"));
                s.status.set(Status::Running);
                return run_in_worker(&worker, (prompt, n, dispatch_fp8), stop, s).await;
            }
            Err(why) => s.fallback_note.update(|note| {
                let text = format!(
                    "The CPU engine runs on the main thread here, so the page pauses between tokens: no Web Worker could be started ({why})."
                );
                *note = Some(match note.take() {
                    Some(n) => format!("{n} {text}"),
                    None => text,
                });
            }),
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
    s.backend_label.set(match engine.backend() {
        Backend::Gpu => format!(
            "Engine: WebGPU on {}, {} weights ({:.1} MB on the GPU){}, optimizations: {}",
            adapter_name(&engine),
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
    });
    s.status.set(Status::Running);
    yield_now().await;

    let mut progress = Progress {
        prompt,
        bytes: Vec::new(),
        total_ms: 0.0,
    };
    let result = generation::stream(&mut engine, prompt, n, stop, |step, backend| {
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
async fn load_weights(
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

/// A format with its block scaling and its bytes per weight, as the picker lists it.
fn format_label(f: Format) -> String {
    format!("{} ({:.2} bytes)", f.scaling(), f.bytes_per_parameter())
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
    fn push(&mut self, s: &Sinks, step: &StepStats, backend: Backend) {
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
    s: Sinks,
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
