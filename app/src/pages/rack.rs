//! The rack: a calibrated analytic model of GB200 NVL72 and its peers. The explorer
//! (`RackExplorer`) evaluates the visitor's scenario in the browser on every change; below it,
//! the model's calibration against the public figures.

use leptos::prelude::*;
use moescope_engine::rack::{calibrate, params::BOUNDS, validation, Params};

use super::rack_explorer::RackExplorer;

fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

fn percent(x: f64) -> String {
    format!("{:+.1}%", 100.0 * x)
}

/// Measured and predicted values print with their own scale (fractions, µs, tokens/s).
fn value(x: f64) -> String {
    if x.abs() < 1.0 {
        format!("{x:.4}")
    } else {
        format!("{x:.1}")
    }
}

#[component]
pub fn RackPage() -> impl IntoView {
    let params = Params::fitted();
    let start = now_ms();
    let result = calibrate::residuals(&params);
    let elapsed = now_ms() - start;
    let errors: Vec<f64> = result
        .as_ref()
        .map(|r| r.iter().map(|r| r.residual).collect())
        .unwrap_or_default();
    let body = match result {
        Err(e) => view! {
            <p class="error" data-testid="rack-error">{format!("The rack model failed: {e}")}</p>
        }
        .into_any(),
        Ok(rows) => {
            let within = rows.iter().all(|r| r.within);
            let n = rows.len();
            let rows = rows
                .into_iter()
                .map(|r| {
                    let class = if r.within { "ok" } else { "bad" };
                    view! {
                        <tr data-testid="rack-residual" class=class>
                            <td>{r.metric}</td>
                            <td class="num">{value(r.measured)}</td>
                            <td class="num">{value(r.predicted)}</td>
                            <td class="num">{percent(r.residual)}</td>
                            <td class="num">{format!("±{:.0}%", 100.0 * r.bound)}</td>
                            <td>{if r.seed { "seed" } else { "" }}</td>
                        </tr>
                    }
                })
                .collect_view();
            let fitted = BOUNDS
                .iter()
                .zip(params.to_vec())
                .map(|((name, lo, hi), v)| {
                    let range = if lo == hi {
                        "fixed (estimate)".to_string()
                    } else {
                        format!("{lo} – {hi}")
                    };
                    view! { <tr><td><code>{*name}</code></td><td class="num">{format!("{v:.3}")}</td><td>{range}</td></tr> }
                })
                .collect_view();
            view! {
                <section class="card" data-testid="rack-calibration" data-all-within=within.to_string()>
                    <h2>"Calibration against public figures"</h2>
                    <p>
                        {format!(
                            "{n} public measurements, each predicted by the model from its scenario \
                             (computed just now in your browser, {elapsed:.1} ms). Seed figures must \
                             come within 5%, the others within 15%. Predicted values are model estimates."
                        )}
                    </p>
                    <div class="scroll-x"><table class="experts">
                        <thead><tr><th>"measurement"</th><th>"measured"</th><th>"predicted (estimate)"</th><th>"residual"</th><th>"bound"</th><th></th></tr></thead>
                        <tbody>{rows}</tbody>
                    </table></div>
                    <h3>"Fitted efficiency parameters"</h3>
                    <div class="scroll-x"><table class="experts">
                        <thead><tr><th>"parameter"</th><th>"value"</th><th>"bounds"</th></tr></thead>
                        <tbody>{fitted}</tbody>
                    </table></div>
                    <p class="hint">"Units: efficiencies are fractions of peak; gaps and latencies in µs. docs/RACK_MODEL.md explains each mechanism."</p>
                </section>
            }
            .into_any()
        }
    };
    view! {
        <h1>"Rack"</h1>
        <p class="lead">
            "A calibrated analytic model of a GB200 NVL72 rack (and DGX B200, HGX H800/H200/H100) serving "
            "DeepSeek-R1 and Llama 4 Maverick: how fused AllToAll over LL128, PDL, fusions, FP8/FP4, "
            "speculative decoding, disaggregation and expert parallelism move tokens/s per user, tokens/s "
            "per GPU and users per rack. Every number below is the model's estimate, computed in your "
            "browser; the last section shows how well the model matches what was measured."
        </p>
        <RackExplorer />
        {body}
        <Validation calibration=errors />
    }
}

/// The figures the model was never fitted to, with its error on each, the summary and the band
/// of each regime: where the error bands on every rack figure come from.
#[component]
fn Validation(
    /// The calibration residuals the page computed, for the summary.
    calibration: Vec<f64>,
) -> impl IntoView {
    let (rows, bands) = match validation::fitted() {
        Ok(v) => v.clone(),
        Err(e) => {
            return view! {
                <p class="error" data-testid="rack-validation-error">{format!("The validation set could not be evaluated: {e}")}</p>
            }
            .into_any()
        }
    };
    let summary = validation::summary(&calibration, &rows);
    let table = rows
        .into_iter()
        .map(|r| {
            let class = if r.within_target { "ok" } else { "bad" };
            view! {
                <tr data-testid="rack-validation-row" class=class>
                    <td>{r.name}</td>
                    <td>{r.metric}</td>
                    <td class="num">{value(r.measured)}</td>
                    <td class="num">{value(r.predicted)}</td>
                    <td class="num">{percent(r.rel_error)}</td>
                    <td>{r.regime.label()}</td>
                </tr>
            }
        })
        .collect_view();
    let bands = bands
        .into_iter()
        .map(|b| {
            view! {
                <tr>
                    <td>{b.regime.label()}</td>
                    <td class="num">{format!("±{:.0}%", 100.0 * b.median)}</td>
                    <td class="num">{format!("±{:.0}%", 100.0 * b.max)}</td>
                    <td class="num">{if b.pooled { format!("{} (all rows)", b.rows) } else { b.rows.to_string() }}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="card" data-testid="rack-validation" data-meets-targets=summary.meets_targets.to_string()>
            <h2>"Validation: measurements the model was never fitted to"</h2>
            <p>{format!(
                "{} public measurements, none used in the fit. The model is off by a median of {:.0}% and at most {:.0}% \
                 (the goals are {:.0}% and {:.0}%: {}). These errors, by regime, are the bands on every rack figure above.",
                summary.n_validation,
                100.0 * summary.validation_median,
                100.0 * summary.validation_max,
                100.0 * summary.target_median,
                100.0 * summary.target_max,
                if summary.meets_targets { "met" } else { "not met yet" }
            )}</p>
            <div class="scroll-x"><table class="experts">
                <thead><tr><th>"regime"</th><th>"band (median error)"</th><th>"largest error"</th><th>"rows"</th></tr></thead>
                <tbody>{bands}</tbody>
            </table></div>
            <div class="scroll-x"><table class="experts">
                <thead><tr><th>"figure"</th><th>"measurement"</th><th>"measured"</th><th>"predicted (estimate)"</th><th>"error"</th><th>"regime"</th></tr></thead>
                <tbody>{table}</tbody>
            </table></div>
            <p class="hint">"Sources and the assumptions each scenario makes where its source is silent: docs/RACK_MODEL.md."</p>
        </section>
    }
    .into_any()
}
