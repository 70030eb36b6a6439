//! The per-kernel timeline of one decode step: a row per layer (the embedding and the head on
//! rows of their own), the kernels laid end to end in launch order, each bar as long as its GPU
//! time (timestamp queries) or, where the browser gives no GPU timer, as its bytes. Colors group
//! kernels by kind; hovering a bar shows its op, time and bytes; a table sums each kernel.

use std::collections::BTreeMap;

use leptos::prelude::*;
use moescope_engine::kernels::KernelKind;
use moescope_engine::model::gpu::KernelLaunch;

use super::ticks::nice_ticks;

/// The color of each `KernelKind`, in legend order (style.css repeats them as `.kind0`…`.kind5`).
const KIND_COLORS: [&str; 6] = [
    "#3a5bd9", "#17803d", "#d9822b", "#8e44ad", "#c0392b", "#7f8c8d",
];

/// The color of a kernel's kind (a name the engine does not know is drawn as data movement).
fn color(kernel: &str) -> &'static str {
    let kind = KernelKind::of(kernel).unwrap_or(KernelKind::Movement);
    let i = KernelKind::ALL.iter().position(|k| *k == kind).unwrap_or(5);
    KIND_COLORS[i]
}

/// One bar: where it starts and how long it is, in the row's unit (µs or bytes).
struct Bar {
    start: f64,
    len: f64,
    color: &'static str,
    title: String,
}

struct Row {
    label: String,
    bars: Vec<Bar>,
    total: f64,
}

/// Rows per layer, and whether the lengths are GPU µs (`true`) or bytes.
fn layout(trace: &[KernelLaunch]) -> (Vec<Row>, bool) {
    let timed = !trace.is_empty() && trace.iter().all(|k| k.gpu_us.is_some());
    let mut rows: Vec<Row> = Vec::new();
    let mut key = None;
    for (i, k) in trace.iter().enumerate() {
        let row_key = match k.layer {
            Some(l) => format!("layer {l}"),
            None if i == 0 => "embed".to_owned(),
            None => "head".to_owned(),
        };
        if key.as_ref() != Some(&row_key) {
            rows.push(Row {
                label: row_key.clone(),
                bars: Vec::new(),
                total: 0.0,
            });
            key = Some(row_key);
        }
        let Some(row) = rows.last_mut() else { continue };
        let len = if timed {
            k.gpu_us.unwrap_or(0.0)
        } else {
            k.bytes as f64
        };
        let time = k
            .gpu_us
            .map_or("no GPU timer".to_owned(), |us| format!("{us:.1} µs"));
        row.bars.push(Bar {
            start: row.total,
            len,
            color: color(k.kernel),
            title: format!(
                "{} — {} — {time}, {:.1} kB",
                k.op,
                k.kernel,
                k.bytes as f64 / 1e3
            ),
        });
        row.total += len;
    }
    (rows, timed)
}

const WIDTH: f64 = 900.0;
const LABEL: f64 = 70.0;
const ROW_H: f64 = 26.0;
const AXIS_H: f64 = 34.0;

#[component]
pub fn KernelTimeline(
    /// The kernels of the step to show, in launch order.
    #[prop(into)]
    trace: Signal<Vec<KernelLaunch>>,
) -> impl IntoView {
    let chart = move || {
        let trace = trace.get();
        if trace.is_empty() {
            return view! { <p class="muted">"Generate on WebGPU to see where a decode step's time goes."</p> }
                .into_any();
        }
        let (rows, timed) = layout(&trace);
        let longest = rows.iter().map(|r| r.total).fold(0.0, f64::max);
        let (step, ticks) = nice_ticks(if timed { longest } else { longest / 1e3 });
        let max = step * ticks as f64 * if timed { 1.0 } else { 1e3 };
        let scale = (WIDTH - LABEL - 24.0) / max.max(1e-9);
        let height = rows.len() as f64 * ROW_H + AXIS_H;
        let unit = if timed {
            "GPU time per layer (µs)"
        } else {
            "bytes per layer (kB) — no GPU timer here"
        };
        // One tick per round step: 0, step, 2·step, … up to the axis end.
        let ticks: Vec<f64> = (0..=ticks).map(|i| max * i as f64 / ticks as f64).collect();
        let tick_label = move |v: f64| {
            if timed {
                format!("{v:.0}")
            } else {
                format!("{:.0}", v / 1e3)
            }
        };
        let total_us: f64 = trace.iter().filter_map(|k| k.gpu_us).sum();
        view! {
            <p data-testid="timeline-summary">
                {format!("{} kernels", trace.len())}
                {timed.then(|| format!(" · {total_us:.0} µs of GPU time (timestamp queries around each kernel's pass)"))}
            </p>
            <svg class="timeline" viewBox=format!("0 0 {WIDTH} {height}") role="img"
                aria-label=format!("Per-kernel timeline: {} kernels", trace.len())
                data-testid="timeline-svg" data-kernels=trace.len()>
                {rows.into_iter().enumerate().map(|(r, row)| {
                    let y = r as f64 * ROW_H;
                    view! {
                        <text x="0" y=y + ROW_H * 0.65 class="timeline-label">{row.label}</text>
                        {row.bars.into_iter().map(|b| view! {
                            <rect x=LABEL + b.start * scale y=y + 3.0 width=(b.len * scale).max(0.5)
                                height=ROW_H - 6.0 fill=b.color stroke="var(--card)" stroke-width="0.5">
                                <title>{b.title}</title>
                            </rect>
                        }).collect_view()}
                    }
                }).collect_view()}
                {ticks.into_iter().map(|v| {
                    let x = LABEL + v * scale;
                    let y = height - AXIS_H;
                    view! {
                        <line x1=x x2=x y1="0" y2=y + 4.0 class="timeline-grid" />
                        <text x=x y=y + 16.0 text-anchor="middle" class="timeline-tick">{tick_label(v)}</text>
                    }
                }).collect_view()}
                <text x=LABEL + (WIDTH - LABEL) / 2.0 y=height - 3.0 text-anchor="middle" class="timeline-tick">{unit}</text>
            </svg>
            {kind_legend()}
            {kernel_table(&trace, timed)}
        }
        .into_any()
    };
    view! {
        <section class="card" data-testid="kernel-timeline">
            <h3>"Kernel timeline of the last decode step"</h3>
            <p class="muted">
                "One row per layer, kernels end to end in launch order; bar length is the kernel's GPU time. "
                "Browsers may round GPU timestamps (Chrome: to about 100 µs), which makes single short kernels unreadable: then compare totals, or use the benchmark below."
            </p>
            {chart}
        </section>
    }
}

/// The colors of the kernel kinds.
fn kind_legend() -> impl IntoView {
    view! {
        <ul class="legend">
            {KernelKind::ALL.into_iter().enumerate().map(|(i, kind)| {
                // Classes, not inline styles: the site's CSP forbids inline styles.
                view! { <li><span class=format!("swatch kind{i}")></span>{kind.label()}</li> }
            }).collect_view()}
        </ul>
    }
}

/// Each kernel's launches, GPU time and bytes in the step, the most expensive first.
fn kernel_table(trace: &[KernelLaunch], timed: bool) -> impl IntoView {
    let mut sums: BTreeMap<&'static str, (usize, f64, u64)> = BTreeMap::new();
    for k in trace {
        let e = sums.entry(k.kernel).or_default();
        e.0 += 1;
        e.1 += k.gpu_us.unwrap_or(0.0);
        e.2 += k.bytes;
    }
    let mut sums: Vec<_> = sums.into_iter().collect();
    sums.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1).then(b.1 .2.cmp(&a.1 .2)));
    view! {
        <details>
            <summary>"Per kernel"</summary>
            <div class="table-wrap">
                <table class="experts" data-testid="timeline-table">
                    <thead><tr><th>"kernel"</th><th>"launches"</th><th>"GPU µs"</th><th>"kB moved"</th></tr></thead>
                    <tbody>
                        {sums.into_iter().map(|(name, (n, us, bytes))| view! {
                            <tr>
                                <td><code>{name}</code></td>
                                <td class="num">{n}</td>
                                <td class="num">{if timed { format!("{us:.1}") } else { "—".to_owned() }}</td>
                                <td class="num">{format!("{:.1}", bytes as f64 / 1e3)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </details>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(kernel: &'static str, layer: Option<usize>, us: Option<f64>) -> KernelLaunch {
        KernelLaunch {
            kernel,
            op: kernel.into(),
            layer,
            bytes: 1000,
            gpu_us: us,
        }
    }

    #[test]
    fn rows_follow_layers_and_bars_follow_time() {
        let trace = [
            launch("embed", None, Some(2.0)),
            launch("rms_norm", Some(0), Some(3.0)),
            launch("gemv", Some(0), Some(5.0)),
            launch("gemv", None, Some(4.0)),
        ];
        let (rows, timed) = layout(&trace);
        assert!(timed);
        let labels: Vec<_> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["embed", "layer 0", "head"]);
        assert_eq!(rows[1].total, 8.0);
        assert_eq!(rows[1].bars[1].start, 3.0);
        // One kernel without a time: bars fall back to bytes.
        let (rows, timed) = layout(&[launch("gemv", Some(0), None)]);
        assert!(!timed);
        assert_eq!(rows[0].total, 1000.0);
    }
}
