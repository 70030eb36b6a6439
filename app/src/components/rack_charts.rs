//! The rack explorer's charts, as SVG: the step-time breakdown (a stacked bar), the Pareto curve
//! (throughput per GPU against speed per user, with the current point and public measurements)
//! and the optimization waterfall. Every number they draw is the rack model's estimate.

use leptos::prelude::*;
use moescope_engine::rack::calibrate::ParetoPoint;
use moescope_engine::rack::step::Breakdown;
use moescope_engine::rack::{Evaluation, WaterfallStep};

use super::ticks::nice_ticks;

/// The parts of a step, in stacking order, with their legend class (style.css `.part0`…). A
/// kernel's time is the longer of its FLOPs and its bytes (the roofline), and it counts as
/// compute- or memory-bound by which one that is.
fn parts(b: &Breakdown) -> [(&'static str, f64); 4] {
    [
        ("compute-bound kernels", b.compute_us),
        ("memory-bound kernels", b.memory_us),
        // What overlap hides comes out of communication: the bar shows what is left exposed.
        (
            "communication (exposed)",
            (b.communication_us + b.overlap_us).max(0.0),
        ),
        ("launch gaps", b.launch_us),
    ]
}

const W: f64 = 640.0;

#[component]
pub fn StepBreakdownBar(breakdown: Breakdown, step_time_us: f64) -> impl IntoView {
    let parts = parts(&breakdown);
    let total: f64 = parts.iter().map(|p| p.1).sum::<f64>().max(1e-9);
    let (tick, n) = nice_ticks(total);
    let axis = tick * n as f64;
    // Room on the right for the last tick's label.
    let scale = (W - 50.0) / axis;
    let mut x = 10.0;
    let bars = parts
        .iter()
        .enumerate()
        .map(|(i, (name, us))| {
            let w = us * scale;
            let bar = view! {
                <rect x=x y="8" width=w.max(0.0) height="30" class=format!("part{i}")>
                    <title>{format!("{name}: {us:.0} µs")}</title>
                </rect>
            };
            x += w;
            bar
        })
        .collect_view();
    let ticks = (0..=n)
        .map(|i| {
            let v = tick * i as f64;
            let x = 10.0 + v * scale;
            view! {
                <line x1=x x2=x y1="40" y2="45" class="timeline-grid" />
                <text x=x y="58" text-anchor="middle" class="timeline-tick">{format!("{v:.0}")}</text>
            }
        })
        .collect_view();
    view! {
        <figure class="chart" data-testid="rack-breakdown">
            <figcaption>{format!("Where one step's {step_time_us:.0} µs go (estimate)")}</figcaption>
            <svg viewBox=format!("0 0 {W} 80") role="img" aria-label="Step time breakdown">
                {bars}
                {ticks}
                <text x=W / 2.0 y="76" text-anchor="middle" class="timeline-tick">"µs per step"</text>
            </svg>
            <ul class="legend">
                {parts.iter().enumerate().map(|(i, (name, us))| view! {
                    <li><span class=format!("swatch part{i}")></span>{format!("{name} {us:.0} µs")}</li>
                }).collect_view()}
            </ul>
            {(breakdown.overlap_us < -0.5).then(|| view! {
                <p class="hint">{format!("{:.0} µs of communication are hidden under compute (overlap).", -breakdown.overlap_us)}</p>
            })}
        </figure>
    }
}

const PW: f64 = 640.0;
const PH: f64 = 320.0;
const PL: f64 = 64.0;
const PB: f64 = 44.0;

#[component]
pub fn ParetoChart(
    points: Vec<Evaluation>,
    current: Evaluation,
    /// Total tokens per GPU (InferenceX's metric, serving) instead of output tokens.
    total: bool,
    measured: Vec<ParetoPoint>,
) -> impl IntoView {
    let y_of = move |e: &Evaluation| {
        if total {
            e.total_tokens_per_s_per_gpu
        } else {
            e.output_tokens_per_s_per_gpu
        }
    };
    let xmax = points
        .iter()
        .map(|e| e.tokens_per_s_per_user)
        .chain([current.tokens_per_s_per_user])
        .chain(measured.iter().map(|m| m.tokens_per_s_per_user))
        .fold(0.0, f64::max);
    let ymax = points
        .iter()
        .map(y_of)
        .chain([y_of(&current)])
        .chain(measured.iter().map(|m| m.tokens_per_s_per_gpu))
        .chain(measured.iter().map(|m| m.predicted_tokens_per_s_per_gpu))
        .fold(0.0, f64::max);
    let (xt, xn) = nice_ticks(xmax);
    let (yt, yn) = nice_ticks(ymax);
    let (xa, ya) = (xt * xn as f64, yt * yn as f64);
    let px = move |v: f64| PL + v / xa * (PW - PL - 16.0);
    let py = move |v: f64| PH - PB - v / ya * (PH - PB - 12.0);
    let path: String = points
        .iter()
        .filter(|e| e.tokens_per_s_per_user.is_finite() && y_of(e).is_finite())
        .enumerate()
        .map(|(i, e)| {
            format!(
                "{}{:.1},{:.1}",
                if i == 0 { "M" } else { " L" },
                px(e.tokens_per_s_per_user),
                py(y_of(e))
            )
        })
        .collect();
    let ylabel = if total {
        "total tokens/s per GPU (input + output)"
    } else {
        "output tokens/s per GPU"
    };
    view! {
        <figure class="chart" data-testid="rack-pareto">
            <figcaption>"Throughput against interactivity over load (estimate)"</figcaption>
            <svg viewBox=format!("0 0 {PW} {PH}") role="img" aria-label="Pareto curve: tokens per second per GPU against tokens per second per user">
                {(0..=xn).map(|i| { let v = xt * i as f64; view! {
                    <line x1=px(v) x2=px(v) y1="12" y2=PH - PB class="timeline-grid" />
                    <text x=px(v) y=PH - PB + 16.0 text-anchor="middle" class="timeline-tick">{format!("{v:.0}")}</text>
                }}).collect_view()}
                {(0..=yn).map(|i| { let v = yt * i as f64; view! {
                    <line x1=PL x2=PW - 16.0 y1=py(v) y2=py(v) class="timeline-grid" />
                    <text x=PL - 6.0 y=py(v) + 4.0 text-anchor="end" class="timeline-tick">{format!("{v:.0}")}</text>
                }}).collect_view()}
                <path d=path class="pareto-line" />
                {measured.iter().map(|m| {
                    let (x, y, model) = (px(m.tokens_per_s_per_user), py(m.tokens_per_s_per_gpu), py(m.predicted_tokens_per_s_per_gpu));
                    let validation = m.kind == "validation";
                    let title = format!(
                        "{}: {:.0} tokens/s per user, {:.0} tokens/s per GPU (measured; {}); the model gives {:.0} for the same deployment and load ({:+.0}%)",
                        m.label, m.tokens_per_s_per_user, m.tokens_per_s_per_gpu,
                        if validation { "not fitted" } else { "fitted" },
                        m.predicted_tokens_per_s_per_gpu, 100.0 * m.rel_error
                    );
                    view! {
                        <g class=if validation { "pareto-validation" } else { "pareto-measured" }
                            data-testid=if validation { "pareto-validation-point" } else { "pareto-calibration-point" }>
                            <line x1=x x2=x y1=y y2=model class="pareto-residual" />
                            <circle cx=x cy=model r="3" class="pareto-model-reading" />
                            {if validation {
                                view! { <path d=format!("M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z", y - 6.0, x + 6.0, y + 6.0, x - 6.0) /> }.into_any()
                            } else {
                                view! { <rect x=x - 5.0 y=y - 5.0 width="10" height="10" /> }.into_any()
                            }}
                            <text x=x + 8.0 y=y - 6.0 class="pareto-residual-label">{format!("{:+.0}%", 100.0 * m.rel_error)}</text>
                            <title>{title}</title>
                        </g>
                    }
                }).collect_view()}
                <circle cx=px(current.tokens_per_s_per_user) cy=py(y_of(&current)) r="7" class="pareto-current">
                    <title>{format!("this setting: {:.1} tokens/s per user, {:.0} tokens/s per GPU", current.tokens_per_s_per_user, y_of(&current))}</title>
                </circle>
                <text x=(PL + PW) / 2.0 y=PH - 6.0 text-anchor="middle" class="timeline-tick">"tokens/s per user"</text>
                <text x="14" y=(PH - PB) / 2.0 text-anchor="middle" class="timeline-tick" transform=format!("rotate(-90 14 {})", (PH - PB) / 2.0)>{ylabel}</text>
            </svg>
            {pareto_legend(
                measured.iter().any(|m| m.kind != "validation"),
                measured.iter().any(|m| m.kind == "validation"),
            )}
        </figure>
    }
}

/// The Pareto chart's legend; measurements only where some are drawn.
fn pareto_legend(fitted: bool, validation: bool) -> impl IntoView {
    view! {
        <ul class="legend">
            <li><span class="swatch line-swatch"></span>"model, over load"</li>
            <li><span class="swatch current-swatch"></span>"this setting"</li>
            {fitted.then(|| view! { <li><span class="swatch measured-swatch"></span>"measured, fitted (calibration)"</li> })}
            {validation.then(|| view! { <li><span class="swatch validation-swatch"></span>"measured, not fitted (validation)"</li> })}
            {(fitted || validation).then(|| view! { <li><span class="swatch residual-swatch"></span>"the model's reading of it, and its error"</li> })}
        </ul>
    }
}

const WW: f64 = 640.0;
const ROW: f64 = 30.0;
const WL: f64 = 190.0;

#[component]
pub fn WaterfallChart(steps: Vec<WaterfallStep>) -> impl IntoView {
    let max = steps.iter().map(|s| s.users_per_rack).fold(0.0, f64::max);
    let (tick, n) = nice_ticks(max);
    let axis = tick * n as f64;
    // Room on the right for the value label after the longest bar.
    let scale = (WW - WL - 180.0) / axis.max(1e-9);
    let height = steps.len() as f64 * ROW + 40.0;
    let rows = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let y = i as f64 * ROW;
            let class = if s.users_per_rack_change >= 0.0 { "part1" } else { "part3" };
            view! {
                <text x=WL - 8.0 y=y + ROW * 0.65 text-anchor="end" class="timeline-label">{s.optimization}</text>
                <rect x=WL y=y + 4.0 width=(s.users_per_rack * scale).max(0.5) height=ROW - 8.0 class=class>
                    <title>{format!("{}: {:.0} users per rack ({:+.0}), MFU {:.1}% ({:+.1} points)", s.optimization, s.users_per_rack, s.users_per_rack_change, 100.0 * s.mfu, 100.0 * s.mfu_change)}</title>
                </rect>
                <text x=WL + s.users_per_rack * scale + 6.0 y=y + ROW * 0.65 class="timeline-tick">
                    {format!("{:.0} ({:+.0}) · MFU {:.1}%", s.users_per_rack, s.users_per_rack_change, 100.0 * s.mfu)}
                </text>
            }
        })
        .collect_view();
    let ticks = (0..=n)
        .map(|i| {
            let v = tick * i as f64;
            let x = WL + v * scale;
            let y = height - 40.0;
            view! {
                <line x1=x x2=x y1="0" y2=y + 4.0 class="timeline-grid" />
                <text x=x y=y + 16.0 text-anchor="middle" class="timeline-tick">{format!("{v:.0}")}</text>
            }
        })
        .collect_view();
    view! {
        <figure class="chart" data-testid="rack-waterfall">
            <figcaption>"Optimizations added one at a time: users per rack and MFU (estimate)"</figcaption>
            <svg viewBox=format!("0 0 {WW} {height}") role="img" aria-label="Waterfall of optimizations">
                {rows}
                {ticks}
                <text x=WL + (WW - WL) / 2.0 y=height - 4.0 text-anchor="middle" class="timeline-tick">"users served per rack"</text>
            </svg>
        </figure>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_communication_is_not_drawn_twice() {
        let b = Breakdown {
            compute_us: 10.0,
            memory_us: 5.0,
            communication_us: 4.0,
            launch_us: 1.0,
            overlap_us: -3.0,
        };
        let p = parts(&b);
        assert_eq!(p[2].1, 1.0);
        assert_eq!(p.iter().map(|x| x.1).sum::<f64>(), b.total_us());
    }
}
