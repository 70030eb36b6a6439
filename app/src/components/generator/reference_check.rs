//! "Check against the CPU reference": the last run's tokens re-run through the f64 reference,
//! and a badge that says whether the logits agree within the tolerance.

use leptos::prelude::*;
use moescope_engine::quant::Format;

use super::actions;
use super::state::{GenState, Runtime, Status};

pub(super) fn reference_check(st: GenState, rt: Runtime) -> impl IntoView {
    let GenState {
        check,
        checking,
        last_tokens,
        status,
        ..
    } = st;
    let busy = move || matches!(status.get(), Status::Preparing | Status::Running);
    view! {
        <div class="controls">
            <button data-testid="gen-check" on:click=move |_| actions::check(st, &rt)
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
    }
}
