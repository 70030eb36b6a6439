//! The held-out loss of the recorded training runs against the bytes seen (`crate::training`).

use leptos::prelude::*;

use super::ticks::nice_ticks;
use crate::training::{Results, BF16_A, BF16_B, FP8};

const W: f64 = 640.0;
const H: f64 = 300.0;
const L: f64 = 56.0;
const B: f64 = 40.0;
const R: f64 = 16.0;
const T: f64 = 12.0;
/// The y axis spans this much loss above the lowest point: the first steps (loss 5.5 → 2) are
/// off the top, so the end of training, where BF16 and FP8 are compared, is readable.
const SPAN: f64 = 1.2;

#[component]
pub fn LossCurves(results: Results) -> impl IntoView {
    let lowest = results
        .curves
        .values()
        .flatten()
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min);
    let y0 = ((lowest - 0.05) * 10.0).floor() / 10.0;
    let y1 = y0 + SPAN;
    let xmax = results
        .curves
        .values()
        .flatten()
        .map(|p| p.0 / 1e6)
        .fold(0.0, f64::max);
    let (xt, xn) = nice_ticks(xmax);
    let xa = xt * xn as f64;
    let px = move |mb: f64| L + mb / xa * (W - L - R);
    let py = move |loss: f64| T + (y1 - loss) / SPAN * (H - T - B);
    let series = [(BF16_A, "curve-a"), (BF16_B, "curve-b"), (FP8, "curve-c")];
    view! {
        <figure class="chart" data-testid="loss-curves">
            <figcaption>"Held-out loss while training deepseek-mini, BF16 and FP8 (recorded on one H200; train/run.sh)"</figcaption>
            <svg viewBox=format!("0 0 {W} {H}") role="img" aria-label="Held-out loss against training bytes for two BF16 runs and one FP8 run">
                {(0..=xn).map(|i| { let v = xt * i as f64; view! {
                    <line x1=px(v) x2=px(v) y1=T y2=H - B class="timeline-grid" />
                    <text x=px(v) y=H - B + 16.0 text-anchor="middle" class="timeline-tick">{format!("{v:.0}")}</text>
                }}).collect_view()}
                {(0..=6).map(|i| { let v = y0 + 0.2 * i as f64; view! {
                    <line x1=L x2=W - R y1=py(v) y2=py(v) class="timeline-grid" />
                    <text x=L - 6.0 y=py(v) + 4.0 text-anchor="end" class="timeline-tick">{format!("{v:.1}")}</text>
                }}).collect_view()}
                {series.iter().map(|(run, class)| {
                    let d: String = results.curves.get(*run).into_iter().flatten()
                        .filter(|p| p.1 <= y1)
                        .enumerate()
                        .map(|(i, p)| format!("{}{:.1},{:.1}", if i == 0 { "M" } else { " L" }, px(p.0 / 1e6), py(p.1)))
                        .collect();
                    view! { <path d=d class=format!("loss-curve {class}")><title>{run.to_string()}</title></path> }
                }).collect_view()}
                <text x=(L + W - R) / 2.0 y=H - 6.0 text-anchor="middle" class="timeline-tick">"training bytes seen (millions)"</text>
                <text x="14" y=(H - B) / 2.0 text-anchor="middle" class="timeline-tick" transform=format!("rotate(-90 14 {})", (H - B) / 2.0)>"held-out loss (nats per byte)"</text>
            </svg>
            <ul class="legend">
                {series.iter().map(|(run, class)| view! {
                    <li><span class=format!("swatch line-swatch {class}-swatch")></span>{run.to_string()}</li>
                }).collect_view()}
            </ul>
        </figure>
    }
}
