//! The first proof that kernels run here: gemv on this browser's GPU, compared with the CPU
//! reference, timed with the profiler, with the adapter it ran on.

use leptos::prelude::*;
use moescope_engine::bench::{gemv_check, GemvCheck};
use moescope_engine::gpu::{AdapterReport, GpuContext, TimingSource};

/// gemv shape for the in-browser check: 4 MiB of weights, quick even on a software adapter.
const M: u32 = 1024;
const K: u32 = 1024;
const ITERATIONS: u32 = 20;

#[derive(Clone)]
struct CheckResult {
    adapter: AdapterReport,
    check: GemvCheck,
}

async fn run() -> Result<CheckResult, String> {
    let ctx = GpuContext::new().await.map_err(|e| e.to_string())?;
    let check = gemv_check(&ctx, M, K, ITERATIONS)
        .await
        .map_err(|e| e.to_string())?;
    Ok(CheckResult {
        adapter: ctx.adapter.clone(),
        check,
    })
}

fn timing_note(check: &GemvCheck) -> String {
    match (check.time.source, check.time.observed_resolution_ns) {
        (TimingSource::TimestampQuery, Some(res)) if res >= 1000.0 => format!(
            "GPU timestamps, rounded by the browser to {:.0} µs: single kernels cannot be timed precisely",
            res / 1000.0
        ),
        (TimingSource::TimestampQuery, Some(res)) => {
            format!("GPU timestamp queries, observed resolution {res:.0} ns")
        }
        (TimingSource::TimestampQuery, None) => "GPU timestamp queries".to_owned(),
        (TimingSource::WallClock, _) => {
            "wall-clock time (no timestamp-query): includes submission overhead".to_owned()
        }
    }
}

/// Three significant figures, so a software adapter's 0.04 GB/s does not read as zero.
fn gb_per_s(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

#[component]
pub fn KernelCheck() -> impl IntoView {
    let result = LocalResource::new(run);
    let status = move || match result.get() {
        None => "running",
        Some(Ok(r)) if r.check.passed => "pass",
        Some(Ok(_)) => "fail",
        Some(Err(_)) => "error",
    };
    view! {
        <section class="card" data-testid="gemv-check" data-status=status>
            <h2>"Kernel check: gemv on your GPU"</h2>
            <p class="muted">
                {format!("y = W·x with W of {M}×{K} f32 (4 MiB), run on WebGPU and compared with the CPU f32 reference.")}
            </p>
            {move || match result.get() {
                None => view! { <p>"Running the kernel…"</p> }.into_any(),
                Some(Err(e)) => view! {
                    <p class="bad" data-testid="gemv-error">{format!("Could not run on the GPU: {e}")}</p>
                }.into_any(),
                Some(Ok(r)) => {
                    let c = &r.check;
                    let verdict = if c.passed { "matches the reference" } else { "does NOT match the reference" };
                    let name = if r.adapter.name.is_empty() { "(name hidden by the browser)".to_owned() } else { r.adapter.name.clone() };
                    view! {
                        <dl class="facts">
                            <dt>"Result"</dt>
                            <dd class=if c.passed { "good" } else { "bad" } data-testid="gemv-verdict">
                                {format!("{verdict}: max |error| {:.2e}, worst error / allowed {:.3}", c.comparison.max_abs_error, c.comparison.worst_ratio_to_allowed)}
                            </dd>
                            <dt>"Tolerance"</dt>
                            <dd>{format!("|got − want| ≤ {:.2e} · Σ|w·x| ({})", c.tolerance.rel, c.tolerance.why)}</dd>
                            <dt>"Time"</dt>
                            <dd data-testid="gemv-time">{format!("{:.1} µs per dispatch (median of {}), {} GB/s", c.time.per_dispatch_us, c.time.iterations, gb_per_s(c.time.gb_per_s))}</dd>
                            <dt>"Timer"</dt>
                            <dd data-testid="gemv-timer">{timing_note(c)}</dd>
                            <dt>"Adapter"</dt>
                            <dd data-testid="adapter-name">{format!("{name} · {} · {}", r.adapter.backend, r.adapter.device_type)}</dd>
                            <dt>"Features"</dt>
                            <dd>{if r.adapter.features.is_empty() { "none of timestamp-query, shader-f16, subgroups".to_owned() } else { r.adapter.features.join(", ") }}</dd>
                            <dt>"Max storage binding"</dt>
                            <dd>{format!("{} MiB", r.adapter.limits.max_storage_buffer_binding_size / (1024 * 1024))}</dd>
                        </dl>
                    }.into_any()
                }
            }}
        </section>
    }
}
