//! The fused-kernel benchmark on this browser's GPU: the same decode steps with every switch off,
//! each switch alone, and all on, in one run (`engine::bench::decode`), as a table of ratios to
//! the eager baseline. Times are host time per step, read-back included, as a visitor waits for
//! them; the logits of every variant are compared with the baseline's.

use leptos::prelude::*;
use leptos::task::spawn_local;
use moescope_engine::bench::decode::{self, DecodeBench, DecodeBenchOptions};
use moescope_engine::gpu::{GpuContext, TimingSource};

#[derive(Clone, Debug)]
enum State {
    Idle,
    Running,
    Done(Box<DecodeBench>),
    Error(String),
}

impl State {
    fn attr(&self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Running => "running",
            State::Done(_) => "done",
            State::Error(_) => "error",
        }
    }
}

#[component]
pub fn DecodeBenchPanel() -> impl IntoView {
    let steps = RwSignal::new("4".to_owned());
    let state = RwSignal::new(State::Idle);
    let run = move |_| {
        if matches!(state.get_untracked(), State::Running) {
            return;
        }
        let steps = match steps.get_untracked().trim().parse::<usize>() {
            Ok(n) if (1..=64).contains(&n) => n,
            _ => {
                state.set(State::Error(
                    "Steps must be a whole number from 1 to 64.".into(),
                ));
                return;
            }
        };
        state.set(State::Running);
        spawn_local(async move {
            let options = DecodeBenchOptions {
                prompt_tokens: 8,
                steps,
                rounds: 1,
                seed: 0,
            };
            let result = match GpuContext::new().await {
                Ok(ctx) => decode::run(&ctx, options).await.map_err(|e| e.to_string()),
                Err(e) => Err(format!("WebGPU is not usable here: {e}")),
            };
            state.set(match result {
                Ok(r) => State::Done(Box::new(r)),
                Err(e) => State::Error(e),
            });
        });
    };
    let busy = move || matches!(state.get(), State::Running);
    view! {
        <section class="card" data-testid="decode-bench" data-status=move || state.get().attr()>
            <h2>"What each switch buys on your GPU"</h2>
            <p class="muted">
                "Runs the same decode steps (8 tokens of context) with every switch off, each switch alone, and all on, one after another, "
                "and checks every variant's logits against the baseline's. Time is host time per step including the read-back of the logits: what you wait for."
            </p>
            <div class="controls">
                <label>"Timed steps per variant "
                    <input type="number" min="1" max="64" data-testid="bench-steps" prop:value=move || steps.get()
                        on:input=move |ev| steps.set(event_target_value(&ev)) />
                </label>
                <button data-testid="bench-run" on:click=run disabled=busy>"Run the benchmark"</button>
            </div>
            {move || match state.get() {
                State::Idle => view! { <p class="muted">"Not run yet."</p> }.into_any(),
                State::Running => view! { <p>"Running… (on a software adapter this takes a minute)"</p> }.into_any(),
                State::Error(e) => view! { <p class="bad" data-testid="bench-error">{e}</p> }.into_any(),
                State::Done(r) => view! { {bench_result(*r)} }.into_any(),
            }}
        </section>
    }
}

/// The benchmark's table: every variant's time, speed-up, kernels, submissions, bytes and
/// logit difference from the baseline.
fn bench_result(r: DecodeBench) -> impl IntoView {
    view! {
        <p class="muted">{format!(
            "{} · GPU µs from {}",
            r.adapter.name,
            match r.timing {
                TimingSource::TimestampQuery => "timestamp queries around each kernel",
                TimingSource::WallClock => "nowhere: this adapter has no timestamp queries",
            }
        )}</p>
        <div>
            <table class="experts" data-testid="bench-table">
                <thead><tr>
                    <th>"variant"</th><th>"ms / step"</th><th>"vs none"</th><th>"kernels"</th>
                    <th>"submissions"</th><th>"MB / step"</th><th>"GPU µs / step"</th><th>"max |Δlogit|"</th>
                </tr></thead>
                <tbody>
                    {r.variants.iter().map(|v| view! {
                        <tr data-testid="bench-row" data-variant=v.name.clone()>
                            <td><code>{v.name.clone()}</code></td>
                            <td class="num">{format!("{:.2}", v.ms_per_step)}</td>
                            <td class="num">{format!("{:.2}×", v.speedup_vs_baseline)}</td>
                            <td class="num">{v.kernels_per_step}</td>
                            <td class="num">{v.submissions_per_step}</td>
                            <td class="num">{format!("{:.2}", v.bytes_per_step as f64 / 1e6)}</td>
                            <td class="num">{v.gpu_us_per_step.map_or("—".to_owned(), |us| format!("{us:.0}"))}</td>
                            <td class="num">{logit_diff(v.max_logit_diff_vs_baseline)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// A logit difference for the table: "0" when the variant's logits equal the baseline's bit
/// for bit (a fusion that keeps every sum's order changes no bit), else two significant digits.
fn logit_diff(d: f64) -> String {
    if d == 0.0 {
        "0".to_owned()
    } else {
        format!("{d:.1e}")
    }
}
