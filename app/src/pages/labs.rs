//! Labs: guided exercises loaded from `labs/*.toml` (`crate::labs`). Each step asks a question;
//! the visitor enters a prediction, then runs the model (the rack model in wasm, or the sandbox
//! on their own GPU), sees the computed value checked against the prediction, and the explanation.

use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use moescope_engine::bench::decode::{run_variants, DecodeBench, DecodeBenchOptions};
use moescope_engine::gpu::GpuContext;
use moescope_engine::plan::Optimizations;

use crate::components::{hash_query, share_links, LossCurves, SettingsWarnings, SharePanel};
use crate::labs::{self, Lab, Run, SandboxMetric};
use crate::state::{EmbedView, Page};

/// Kernels and speedup of the sandbox's decode step, measured once per page visit.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SandboxRun {
    eager_kernels: f64,
    fused_kernels: f64,
    speedup: f64,
}

impl SandboxRun {
    fn from_bench(b: &DecodeBench) -> Option<Self> {
        let (none, all) = (b.variants.first()?, b.variants.last()?);
        Some(Self {
            eager_kernels: none.kernels_per_step as f64,
            fused_kernels: all.kernels_per_step as f64,
            speedup: none.ms_per_step / all.ms_per_step,
        })
    }

    fn get(&self, m: SandboxMetric) -> f64 {
        match m {
            SandboxMetric::EagerKernels => self.eager_kernels,
            SandboxMetric::FusedKernels => self.fused_kernels,
            SandboxMetric::Speedup => self.speedup,
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

fn format_value(v: f64, unit: &str) -> String {
    let digits = if v.abs() >= 100.0 || v.fract() == 0.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

#[component]
fn LabStep(
    index: usize,
    step: labs::Step,
    sandbox: RwSignal<Option<Result<SandboxRun, String>>>,
) -> impl IntoView {
    let prediction = RwSignal::new(String::new());
    let result = RwSignal::new(None::<Result<f64, String>>);
    let running = RwSignal::new(false);
    let step = Rc::new(step);
    let parsed =
        move || prediction.with(|p| p.trim().parse::<f64>().ok().filter(|v| v.is_finite()));
    let run = {
        let step = Rc::clone(&step);
        move |_| {
            if parsed().is_none() || running.get_untracked() {
                return;
            }
            match &step.run {
                r @ Run::Rack { .. } => result.set(Some(labs::run_rack(r))),
                Run::Training { metric } => {
                    result.set(Some(crate::training::results().map(|r| r.get(*metric))))
                }
                Run::Sandbox { metric } => {
                    let metric = *metric;
                    if let Some(done) = sandbox.get_untracked() {
                        result.set(Some(done.map(|s| s.get(metric))));
                        return;
                    }
                    running.set(true);
                    spawn_local(async move {
                        let measured = measure_sandbox().await;
                        sandbox.set(Some(measured.clone()));
                        result.set(Some(measured.map(|s| s.get(metric))));
                        running.set(false);
                    });
                }
            }
        }
    };
    let unit = step.unit.clone();
    let tolerance = step.tolerance;
    let explain = step.explain.clone();
    let kind = match step.run {
        Run::Rack { .. } => "computed by the rack model, an estimate",
        Run::Sandbox { .. } => "measured on your GPU",
        Run::Training { .. } => "measured once on an H200 and recorded, not run in your browser",
    };
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
                    let verdict = labs::check(parsed().unwrap_or(f64::NAN), v, tolerance);
                    let text = format!("{} ({kind}). {}", format_value(v, &unit), verdict.describe());
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

#[component]
pub fn LabView(lab: Lab) -> impl IntoView {
    let sandbox = RwSignal::new(None::<Result<SandboxRun, String>>);
    let chart = lab
        .steps
        .iter()
        .any(|s| matches!(s.run, Run::Training { .. }))
        .then(|| match crate::training::results() {
            Ok(r) => view! { <LossCurves results=r /> }.into_any(),
            Err(e) => view! { <p class="bad">{format!("The recorded training runs could not be read: {e}")}</p> }.into_any(),
        });
    view! {
        <article data-testid=format!("lab-{}", lab.id)>
            <h2>{lab.title.clone()}</h2>
            <p class="lead">{lab.intro.clone()}</p>
            {chart}
            {lab.steps.into_iter().enumerate().map(|(i, s)| view! { <LabStep index=i step=s sandbox=sandbox /> }).collect_view()}
        </article>
    }
}

/// The shipped labs that parse, and a message for each that does not.
pub fn shipped() -> (Vec<Lab>, Vec<String>) {
    let parsed: Vec<Result<Lab, String>> = labs::SHIPPED.iter().map(|t| labs::parse(t)).collect();
    let labs = parsed
        .iter()
        .filter_map(|l| l.as_ref().ok().cloned())
        .collect();
    let errors = parsed.into_iter().filter_map(Result::err).collect();
    (labs, errors)
}

#[component]
pub fn LabsPage() -> impl IntoView {
    let (labs, errors) = shipped();
    let (start, warnings) = labs::parse_state(&hash_query(), &labs);
    let current = RwSignal::new(start);
    let share = RwSignal::new(None::<(String, String)>);
    let titles: Vec<(usize, String, String)> = labs
        .iter()
        .enumerate()
        .map(|(i, l)| (i, l.id.clone(), l.title.clone()))
        .collect();
    // The address follows the open lab (replaceState: no history entry, no hashchange).
    let ids: Vec<Lab> = labs.clone();
    Effect::new(move |_| {
        if let Some(lab) = ids.get(current.get()) {
            if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
                let hash = format!("#/labs?{}", labs::encode_state(lab));
                let _ =
                    history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&hash));
            }
            share.set(None);
        }
    });
    let for_share = labs.clone();
    view! {
        <h1>"Labs"</h1>
        <p class="lead">"Predict a number, run the model, compare. Each step checks your prediction against what the rack model computes or your GPU measures, then explains it."</p>
        <SettingsWarnings warnings=warnings testid="labs-warnings" />
        {errors.into_iter().map(|e| view! { <p class="bad">{format!("A lab file could not be read: {e}")}</p> }).collect_view()}
        <nav class="lab-menu" aria-label="Labs">
            {titles.into_iter().map(|(i, id, title)| view! {
                <button data-testid=format!("lab-open-{id}") aria-pressed=move || (current.get() == i).to_string()
                    on:click=move |_| current.set(i)>{title}</button>
            }).collect_view()}
        </nav>
        <div class="controls">
            <button data-testid="labs-share" on:click=move |_| {
                if let Some(lab) = for_share.get(current.get_untracked()) {
                    let q = labs::encode_state(lab);
                    share.set(Some(share_links((Page::Labs, EmbedView::Lab), &q, (760, 900), &format!("MoEscope lab: {}", lab.title))));
                }
            }>"Share / Embed"</button>
        </div>
        <SharePanel share=share prefix="labs" views="view: lab" />
        {move || labs.get(current.get()).cloned().map(|lab| view! { <LabView lab=lab /> })}
    }
}
