//! One step of a lab: the question, the prediction box, the run (the rack model in wasm, the
//! recorded training runs, or the sandbox's decode step measured on the visitor's GPU), the
//! verdict and the explanation. An answered step is recorded in the student's progress.

use leptos::prelude::*;
use leptos::task::spawn_local;
use moescope_engine::bench::decode::{run_variants, DecodeBench, DecodeBenchOptions, Variant};
use moescope_engine::gpu::GpuContext;
use moescope_engine::plan::Optimizations;

use crate::lab_progress::{Answer, Progress};
use crate::labs::{self, Run, SandboxMetric, Step};

/// The sandbox's decode step, eager and fused, measured once per page visit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SandboxRun {
    eager: Measured,
    fused: Measured,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Measured {
    kernels: f64,
    submissions: f64,
    host_us: f64,
    ms: f64,
    bytes: f64,
}

impl Measured {
    fn of(v: &Variant) -> Self {
        Self {
            kernels: v.kernels_per_step as f64,
            submissions: v.submissions_per_step as f64,
            host_us: v.record_us_per_step + v.submit_us_per_step,
            ms: v.ms_per_step,
            bytes: v.bytes_per_step as f64,
        }
    }
}

impl SandboxRun {
    fn from_bench(b: &DecodeBench) -> Option<Self> {
        Some(Self {
            eager: Measured::of(b.variants.first()?),
            fused: Measured::of(b.variants.last()?),
        })
    }

    fn get(&self, m: SandboxMetric) -> f64 {
        let (e, f) = (&self.eager, &self.fused);
        match m {
            SandboxMetric::EagerKernels => e.kernels,
            SandboxMetric::FusedKernels => f.kernels,
            SandboxMetric::EagerSubmissions => e.submissions,
            SandboxMetric::FusedSubmissions => f.submissions,
            SandboxMetric::EagerHostUs => e.host_us,
            SandboxMetric::FusedHostUs => f.host_us,
            SandboxMetric::FusedStepMs => f.ms,
            SandboxMetric::FusedMegabytes => f.bytes / 1e6,
            SandboxMetric::FusedGbPerS => f.bytes / (f.ms * 1e6),
            SandboxMetric::Speedup => e.ms / f.ms,
        }
    }
}

async fn measure_sandbox() -> Result<SandboxRun, String> {
    let ctx = GpuContext::new()
        .await
        .map_err(|e| format!("this lab needs WebGPU: {e}"))?;
    let options = DecodeBenchOptions {
        prompt_tokens: 8,
        steps: 3,
        rounds: 1,
        seed: 0,
    };
    let list = vec![
        ("none".to_string(), Optimizations::none()),
        ("all".to_string(), Optimizations::all()),
    ];
    let b = run_variants(&ctx, options, list)
        .await
        .map_err(|e| e.to_string())?;
    SandboxRun::from_bench(&b).ok_or_else(|| "the benchmark returned nothing".into())
}

/// A value with as many digits as it needs: 0.00101, 0.260, 1.03, 17.5, 958.
pub fn format_value(v: f64, unit: &str) -> String {
    let digits = if v == 0.0 || v.abs() >= 100.0 || v.fract() == 0.0 {
        0
    } else {
        (2 - v.abs().log10().floor() as i32).clamp(1, 6) as usize
    };
    format!("{v:.digits$} {unit}")
}

/// Where a step's value comes from, as the page labels it.
pub fn provenance(run: &Run) -> String {
    match run {
        Run::Rack { .. } => match labs::error_band(run) {
            Ok(b) => labs::band_label(&b),
            Err(e) => format!("model: an estimate (its error band could not be computed: {e})"),
        },
        Run::Sandbox { metric } => match metric {
            SandboxMetric::EagerKernels
            | SandboxMetric::FusedKernels
            | SandboxMetric::EagerSubmissions
            | SandboxMetric::FusedSubmissions
            | SandboxMetric::FusedMegabytes => "counted by the sandbox as it ran on your GPU".into(),
            _ => "measured on your GPU".into(),
        },
        Run::Training { .. } => "measured: the deepseek-mini training runs on an H200 \
                                 (train/results/fp8-training.json), recorded, not run in your browser"
            .into(),
    }
}

async fn run_step(
    run: Run,
    sandbox: RwSignal<Option<Result<SandboxRun, String>>>,
) -> Result<f64, String> {
    match run {
        r @ Run::Rack { .. } => labs::run_rack(&r),
        Run::Training { metric } => crate::training::results().map(|r| r.get(metric)),
        Run::Sandbox { metric } => {
            let measured = match sandbox.get_untracked() {
                Some(done) => done,
                None => {
                    let m = measure_sandbox().await;
                    sandbox.set(Some(m.clone()));
                    m
                }
            };
            measured.map(|s| s.get(metric))
        }
    }
}

#[component]
pub fn LabStep(
    lab_id: String,
    index: usize,
    step: Step,
    sandbox: RwSignal<Option<Result<SandboxRun, String>>>,
    progress: RwSignal<Progress>,
) -> impl IntoView {
    let saved = progress.with_untracked(|p| p.answer(&lab_id, index));
    let prediction = RwSignal::new(saved.map(|a| a.prediction.to_string()).unwrap_or_default());
    let result = RwSignal::new(saved.map(|a| Ok::<f64, String>(a.value)));
    let running = RwSignal::new(false);
    let parsed =
        move || prediction.with(|p| p.trim().parse::<f64>().ok().filter(|v| v.is_finite()));
    let rule = step.rule();
    let run = {
        let run = step.run.clone();
        move |_| {
            let Some(predicted) = parsed() else { return };
            if running.get_untracked() {
                return;
            }
            running.set(true);
            let (run, lab_id) = (run.clone(), lab_id.clone());
            spawn_local(async move {
                let r = run_step(run, sandbox).await;
                if let Ok(value) = r {
                    let close = labs::check(predicted, value, rule).close();
                    let answer = Answer {
                        prediction: predicted,
                        value,
                        close,
                    };
                    progress.update(|p| p.record(&lab_id, index, answer));
                }
                result.set(Some(r));
                running.set(false);
            });
        }
    };
    let unit = step.unit.clone();
    let explain = step.explain.clone();
    let source = provenance(&step.run);
    view! {
        <section class="card lab-step" data-testid=format!("lab-step-{index}")>
            <h3>{format!("{}. {}", index + 1, step.title)}</h3>
            <p>{step.text.clone()}</p>
            <div class="controls">
                <label>{format!("Your prediction ({})", step.unit)}
                    <input type="number" step="any" data-testid=format!("lab-predict-{index}")
                        prop:value=move || prediction.get()
                        on:input=move |ev| prediction.set(event_target_value(&ev)) />
                </label>
                <button data-testid=format!("lab-run-{index}") on:click=run
                    disabled=move || parsed().is_none() || running.get()>
                    {move || if running.get() { "Running…" } else { "Run" }}
                </button>
            </div>
            {move || result.get().map(|r| match r {
                Err(e) => view! { <p class="bad" data-testid=format!("lab-result-{index}")>{e}</p> }.into_any(),
                Ok(v) => {
                    let verdict = labs::check(parsed().unwrap_or(f64::NAN), v, rule);
                    let text = format!("{} ({source}). {}", format_value(v, &unit), verdict.describe());
                    view! {
                        <p class=if verdict.close() { "good" } else { "bad" } data-testid=format!("lab-result-{index}")
                            data-close=verdict.close().to_string()>{text}</p>
                        <p class="lab-explain" data-testid=format!("lab-explain-{index}")>{explain.clone()}</p>
                    }.into_any()
                }
            })}
        </section>
    }
}
