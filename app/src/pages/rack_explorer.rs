//! The rack explorer: every setting of a scenario as a control, the model evaluated on each
//! change (one evaluation, a 40-point sweep and the waterfall: a few ms in wasm), its outputs, the
//! step breakdown, the Pareto curve and the waterfall, and the state kept in the URL for Share
//! and Embed. The same `Computed` feeds the embeddable views (`RackView`).

use leptos::prelude::*;
use moescope_engine::rack::calibrate::ParetoPoint;
use moescope_engine::rack::precision::Precision;
use moescope_engine::rack::scenario::{Optimization, Phase, SpecMethod, Speculative};
use moescope_engine::rack::validation::ErrorBand;
use moescope_engine::rack::{self, Evaluation, Params, Scenario, ScenarioFile, WaterfallStep};

use crate::components::{
    hash_query, share_links, ParetoChart, SettingsWarnings, SharePanel, StepBreakdownBar,
    WaterfallChart,
};
use crate::rack_state::{self, LoadKind, AUTO, MODELS, PRECISIONS, PRESETS, SYSTEMS};
use crate::state::{EmbedView, Page};

/// Points of the Pareto sweep.
const SWEEP_POINTS: usize = 40;

/// One evaluation of the visitor's scenario and everything drawn from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Computed {
    pub eval: Evaluation,
    pub sweep: Vec<Evaluation>,
    pub waterfall: Vec<WaterfallStep>,
    pub ms: f64,
    pub phase: Phase,
    pub measured: Vec<ParetoPoint>,
    /// The out-of-sample error band of the evaluation's regime.
    pub band: Result<ErrorBand, String>,
}

/// Evaluates `f`; the error is the model's message (a scenario that cannot run, e.g. weights that
/// do not fit).
pub fn compute(f: &ScenarioFile) -> Result<Computed, String> {
    let start = web_time::Instant::now();
    let s = Scenario::resolve(f.clone()).map_err(|e| e.to_string())?;
    let p = Params::fitted();
    let eval = rack::eval(&s, &p).map_err(|e| e.to_string())?;
    let sweep = rack::sweep(&s, &p, SWEEP_POINTS).unwrap_or_default();
    let waterfall = rack::waterfall(&s, &p).unwrap_or_default();
    Ok(Computed {
        band: rack::validation::band_of(&eval),
        measured: rack::calibrate::pareto_points(&f.system, &f.model, s.phase, &p),
        phase: s.phase,
        eval,
        sweep,
        waterfall,
        ms: start.elapsed().as_secs_f64() * 1e3,
    })
}

fn replace_hash(hash: &str) {
    if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(hash));
    }
}

/// A log-scale slider position (0..=1000) for `v` in `range`, and back.
fn to_slider(v: f64, (lo, hi): (f64, f64)) -> f64 {
    ((v.clamp(lo, hi) / lo).ln() / (hi / lo).ln() * 1000.0).round()
}

fn from_slider(pos: f64, (lo, hi): (f64, f64)) -> f64 {
    let v = lo * (hi / lo).powf(pos / 1000.0);
    // Three significant digits, so the URL stays short.
    let k = 10f64.powi(2 - v.log10().floor() as i32);
    (v * k).round() / k
}

fn precision_select(
    label: &'static str,
    testid: &'static str,
    get: impl Fn(&ScenarioFile) -> Option<Precision> + Send + Sync + Copy + 'static,
    set: impl Fn(&mut ScenarioFile, Option<Precision>) + Send + Sync + Copy + 'static,
    state: RwSignal<ScenarioFile>,
) -> impl IntoView {
    view! {
        <label>{label}" "
            <select data-testid=testid on:change=move |ev| {
                let v = event_target_value(&ev);
                state.update(|f| set(f, PRECISIONS.into_iter().find(|p| p.name() == v)));
            }>
                <option value=AUTO selected=move || state.with(|f| get(f).is_none())>"default"</option>
                {PRECISIONS.into_iter().map(|p| view! {
                    <option value=p.name() selected=move || state.with(|f| get(f) == Some(p))>{p.name()}</option>
                }).collect_view()}
            </select>
        </label>
    }
}

fn count_input(
    label: &'static str,
    testid: &'static str,
    get: impl Fn(&ScenarioFile) -> Option<u32> + Send + Sync + Copy + 'static,
    set: impl Fn(&mut ScenarioFile, Option<u32>) + Send + Sync + Copy + 'static,
    state: RwSignal<ScenarioFile>,
) -> impl IntoView {
    view! {
        <label>{label}" "
            <input type="number" min="1" max="4096" placeholder="auto" data-testid=testid
                prop:value=move || state.with(|f| get(f).map_or(String::new(), |n| n.to_string()))
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    let n = v.trim().parse::<u32>().ok().filter(|n| (1..=4096).contains(n));
                    state.update(|f| set(f, n));
                } />
        </label>
    }
}

fn stat(
    label: &'static str,
    testid: &'static str,
    value: String,
    band: Option<f64>,
    how: &'static str,
) -> impl IntoView {
    view! {
        <div class="stat" data-testid=testid>
            <div class="stat-value"><span class="stat-number">{value}</span>
                {band.map(|b| view! { <span class="stat-band" title="typical out-of-sample error of the model in this regime">{format!(" ±{:.0}%", 100.0 * b)}</span> })}
            </div>
            <div class="stat-label">{label}</div>
            <div class="stat-how">{how}</div>
        </div>
    }
}

/// What the error band says, in words.
fn band_line(band: &Result<ErrorBand, String>) -> String {
    match band {
        Ok(b) => format!(
            "Every figure here is a model estimate. Out of sample it has been {}: docs/RACK_MODEL.md lists them.",
            b.describe()
        ),
        Err(e) => format!(
            "Every figure here is a model estimate; its error band could not be computed: {e}"
        ),
    }
}

/// The outputs of one evaluation.
#[component]
pub fn RackSummary(c: Computed) -> impl IntoView {
    let e = &c.eval;
    let b = c.band.as_ref().ok().map(|b| b.median);
    view! {
        <p class="error-band" data-testid="rack-error-band">{band_line(&c.band)}</p>
        <div class="stats" data-testid="rack-summary">
            {stat("tokens/s per user", "rack-tps-user", format!("{:.1}", e.tokens_per_s_per_user), b,
                "accepted tokens per step ÷ step time")}
            {stat("output tokens/s per GPU", "rack-tps-gpu", format!("{:.0}", e.output_tokens_per_s_per_gpu), b,
                "sequences per GPU × tokens/s per user")}
            {stat("users per rack", "rack-users", format!("{:.0}", e.users_per_rack), b,
                "tokens/s per GPU × GPUs per rack ÷ tokens/s per user")}
            {stat("MFU", "rack-mfu", format!("{:.1}%", 100.0 * e.mfu), b,
                "useful FLOP/s ÷ tensor-core peak")}
            {stat("MBU", "rack-mbu", format!("{:.1}%", 100.0 * e.mbu), b,
                "bytes moved per second ÷ HBM bandwidth")}
            {stat("step time", "rack-step", format!("{:.0} µs", e.step_time_us), b,
                "compute, memory, communication and launch gaps, layer by layer")}
        </div>
        <p class="hint">{format!(
            "{:.2} sequences per GPU, {:.0} in flight over {} GPUs; {:.0} kernels per step. Estimates, computed in {:.1} ms.",
            e.batch_per_gpu, e.concurrency, e.gpus, e.kernels_per_step, c.ms
        )}</p>
    }
}

/// The Pareto chart of a computation.
#[component]
pub fn RackPareto(c: Computed) -> impl IntoView {
    if c.sweep.is_empty() {
        return view! { <p class="muted">"No sweep for this phase."</p> }.into_any();
    }
    view! {
        <ParetoChart points=c.sweep current=c.eval total=c.phase == Phase::Serve measured=c.measured />
    }
    .into_any()
}

#[component]
pub fn RackWaterfall(c: Computed) -> impl IntoView {
    if c.waterfall.is_empty() {
        return view! { <p class="muted">"Pick optimizations to see what each one adds."</p> }
            .into_any();
    }
    view! { <WaterfallChart steps=c.waterfall /> }.into_any()
}

#[component]
pub fn RackExplorer() -> impl IntoView {
    let (initial, warnings) = rack_state::parse(&hash_query());
    let state = RwSignal::new(initial);
    let warnings = RwSignal::new(warnings);
    let computed = Memo::new(move |_| state.with(compute));
    let share = RwSignal::new(None::<(String, String)>);
    // The URL follows the state (replaceState: no history entry per slider step, no hashchange).
    Effect::new(move |_| {
        let q = state.with(rack_state::encode);
        replace_hash(&format!("#/rack?{q}"));
    });

    view! {
        <section class="card" data-testid="rack-explorer">
            <h2>"Explore a deployment"</h2>
            <SettingsWarnings warnings=warnings testid="rack-warnings" />
            {deployment_controls(state, warnings)}
            {load_controls(state)}
            {optimization_checks(state)}
            {move || match computed.get() {
                Err(e) => view! { <p class="bad" data-testid="rack-error">{format!("This deployment cannot run: {e}")}</p> }.into_any(),
                Ok(c) => view! {
                    <RackSummary c=c.clone() />
                    <StepBreakdownBar breakdown=c.eval.breakdown_us step_time_us=c.eval.step_time_us />
                    <RackPareto c=c.clone() />
                    <RackWaterfall c=c />
                }.into_any(),
            }}
            <div class="controls">
                <button data-testid="rack-share" on:click=move |_| {
                    let q = state.with(rack_state::encode);
                    share.set(Some(share_links((Page::Rack, EmbedView::RackSummary), &q, (720, 420), "MoEscope rack")));
                }>"Share / Embed"</button>
            </div>
            <SharePanel share=share prefix="rack" views="rack summary; views: rack-summary, pareto, waterfall" />
        </section>
    }
}

/// The deployment: a preset to start from, system, model, phase, precisions, pools and
/// parallelism, and the request shape.
fn deployment_controls(
    state: RwSignal<ScenarioFile>,
    warnings: RwSignal<Vec<String>>,
) -> impl IntoView {
    let serve = move || state.with(|f| f.phase == Phase::Serve);
    view! {
        <div class="controls">
            <label>"Start from "
                <select data-testid="rack-preset" on:change=move |ev| {
                    if let Some(f) = rack_state::preset(&event_target_value(&ev)) {
                        warnings.set(Vec::new());
                        state.set(f);
                    }
                }>
                    <option value="" selected>"(current settings)"</option>
                    {PRESETS.into_iter().map(|(id, label, _)| view! { <option value=id>{label}</option> }).collect_view()}
                </select>
            </label>
        </div>
        <div class="controls">
            <label>"System "
                <select data-testid="rack-system" on:change=move |ev| { let v = event_target_value(&ev); state.update(|f| f.system = v); }>
                    {SYSTEMS.into_iter().map(|s| view! { <option value=s selected=move || state.with(|f| f.system == s)>{s}</option> }).collect_view()}
                </select>
            </label>
            <label>"Model "
                <select data-testid="rack-model" on:change=move |ev| { let v = event_target_value(&ev); state.update(|f| f.model = v); }>
                    {MODELS.into_iter().map(|m| view! { <option value=m selected=move || state.with(|f| f.model == m)>{m}</option> }).collect_view()}
                </select>
            </label>
            <label>"Phase "
                <select data-testid="rack-phase" on:change=move |ev| {
                    let serve = event_target_value(&ev) == "serve";
                    state.update(|f| f.phase = if serve { Phase::Serve } else { Phase::Decode });
                }>
                    <option value="decode" selected=move || !serve()>"decode (one instance)"</option>
                    <option value="serve" selected=serve>"serve (prefill + decode pools)"</option>
                </select>
            </label>
            {precision_select("Weights", "rack-weights", |f| f.weights, |f, p| f.weights = p, state)}
            {precision_select("Activations", "rack-act", |f| f.activations, |f, p| f.activations = p, state)}
            {precision_select("KV cache", "rack-kv", |f| f.kv_cache, |f, p| f.kv_cache = p, state)}
        </div>
        <div class="controls">
            {move || if serve() {
                view! {
                    {count_input("Prefill GPUs", "rack-prefill-gpus", |f| f.prefill_gpus, |f, n| f.prefill_gpus = n, state)}
                    {count_input("Prefill TP", "rack-prefill-tp", |f| f.prefill_tp, |f, n| f.prefill_tp = n, state)}
                    {count_input("Decode GPUs", "rack-decode-gpus", |f| f.decode_gpus, |f, n| f.decode_gpus = n, state)}
                }.into_any()
            } else {
                view! {
                    {count_input("GPUs", "rack-gpus", |f| f.gpus, |f, n| f.gpus = n, state)}
                    {count_input("TP", "rack-tp", |f| f.tp, |f, n| f.tp = n, state)}
                }.into_any()
            }}
            {count_input("EP", "rack-ep", |f| f.ep, |f, n| f.ep = n, state)}
            {count_input("Input tokens", "rack-in", |f| f.input_tokens, |f, n| f.input_tokens = n.or(Some(1024)), state)}
            {count_input("Output tokens", "rack-out", |f| f.output_tokens, |f, n| f.output_tokens = n.or(Some(1024)), state)}
        </div>
    }
}

/// The load (a target speed, requests in flight or sequences per GPU) on a log slider, and
/// speculative decoding.
fn load_controls(state: RwSignal<ScenarioFile>) -> impl IntoView {
    let load_kind = move || state.with(|f| rack_state::load_kind(f).0);
    let slider_pos = move || {
        state.with(|f| {
            let (k, v) = rack_state::load_kind(f);
            to_slider(v, k.range())
        })
    };
    view! {
        <div class="controls">
            <label>"Load given as "
                <select data-testid="rack-load-kind" on:change=move |ev| {
                    let v = event_target_value(&ev);
                    if let Some(k) = LoadKind::ALL.into_iter().find(|k| k.slug() == v) {
                        let (lo, hi) = k.range();
                        state.update(|f| rack_state::set_load(f, k, (lo * hi).sqrt().round()));
                    }
                }>
                    <option value="target" selected=move || load_kind() == LoadKind::Target>"target tokens/s per user"</option>
                    <option value="concurrency" selected=move || load_kind() == LoadKind::Concurrency>"requests in flight"</option>
                    <option value="batch" selected=move || load_kind() == LoadKind::Batch>"sequences per GPU"</option>
                </select>
            </label>
            <label class="slider">
                <span data-testid="rack-load-value">{move || state.with(|f| {
                    let (k, v) = rack_state::load_kind(f);
                    match k {
                        LoadKind::Target => format!("{v} tokens/s per user"),
                        LoadKind::Concurrency => format!("{v} requests in flight"),
                        LoadKind::Batch => format!("{v} sequences per GPU"),
                    }
                })}</span>
                <input type="range" min="0" max="1000" step="1" data-testid="rack-load-slider"
                    aria-label="load"
                    prop:value=move || slider_pos().to_string()
                    on:input=move |ev| {
                        if let Ok(pos) = event_target_value(&ev).parse::<f64>() {
                            state.update(|f| {
                                let k = rack_state::load_kind(f).0;
                                rack_state::set_load(f, k, from_slider(pos, k.range()));
                            });
                        }
                    } />
            </label>
            <label>"Speculative decoding "
                <select data-testid="rack-spec" on:change=move |ev| {
                    let v = event_target_value(&ev);
                    state.update(|f| f.speculative = match v.as_str() {
                        "mtp" => Some(Speculative { method: SpecMethod::Mtp, draft_tokens: 1, acceptance_length: None }),
                        "eagle3" => Some(Speculative { method: SpecMethod::Eagle3, draft_tokens: 3, acceptance_length: None }),
                        _ => None,
                    });
                }>
                    <option value="none" selected=move || state.with(|f| f.speculative.is_none())>"none"</option>
                    <option value="mtp" selected=move || state.with(|f| f.speculative.is_some_and(|s| s.method == SpecMethod::Mtp))>"MTP"</option>
                    <option value="eagle3" selected=move || state.with(|f| f.speculative.is_some_and(|s| s.method == SpecMethod::Eagle3))>"EAGLE-3"</option>
                </select>
            </label>
            {move || state.with(|f| f.speculative).map(|s| view! {
                <label>"Draft tokens "
                    <input type="number" min="1" max="16" data-testid="rack-drafts" prop:value=s.draft_tokens.to_string()
                        on:change=move |ev| {
                            if let Ok(n) = event_target_value(&ev).parse::<u32>() {
                                state.update(|f| if let Some(s) = f.speculative.as_mut() { s.draft_tokens = n.clamp(1, 16); });
                            }
                        } />
                </label>
            })}
        </div>
    }
}

/// One checkbox per optimization, in the waterfall's order.
fn optimization_checks(state: RwSignal<ScenarioFile>) -> impl IntoView {
    view! {
        <fieldset class="switches" data-testid="rack-optimizations">
            <legend>"Optimizations (the waterfall adds them in this order)"</legend>
            {Optimization::EVERY.into_iter().map(|o| view! {
                <label>
                    <input type="checkbox" data-testid=format!("rack-opt-{}", o.name())
                        prop:checked=move || state.with(|f| f.optimizations.contains(&o))
                        on:change=move |ev| {
                            let on = event_target_checked(&ev);
                            state.update(|f| {
                                f.optimizations.retain(|x| *x != o);
                                if on { f.optimizations.push(o); }
                            });
                        } />
                    <code>{o.name()}</code>
                </label>
            }).collect_view()}
        </fieldset>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slider_is_logarithmic_and_round_trips() {
        let r = LoadKind::Concurrency.range();
        assert_eq!(to_slider(1.0, r), 0.0);
        assert_eq!(to_slider(100_000.0, r), 1000.0);
        assert_eq!(to_slider(316.0, r), 500.0);
        let v = from_slider(500.0, r);
        assert!((v - 316.0).abs() < 1.0, "{v}");
        assert_eq!(from_slider(0.0, LoadKind::Target.range()), 5.0);
    }

    #[test]
    fn the_default_state_computes_and_marks_the_seed_figures() {
        let c = compute(&rack_state::default_state()).expect("the default scenario runs");
        assert_eq!(c.measured.len(), 2);
        assert_eq!(c.sweep.len(), SWEEP_POINTS);
        assert!(!c.waterfall.is_empty());
        assert!(c.eval.users_per_rack > 0.0);
    }
}
