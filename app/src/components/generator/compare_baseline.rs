//! "Compare with the eager baseline": the same decode steps with every switch off and with the
//! current set, measured on the visitor's GPU in one run.

use leptos::prelude::*;

use super::actions;
use super::state::{GenState, Runtime, Status};

pub(super) fn compare_baseline(st: GenState, rt: Runtime) -> impl IntoView {
    let GenState {
        compare,
        comparing,
        status,
        ..
    } = st;
    let busy = move || matches!(status.get(), Status::Preparing | Status::Running);
    view! {
        <div class="controls">
            <button data-testid="gen-compare" on:click=move |_| actions::compare(st, &rt) disabled=move || busy() || comparing.get()>
                {move || if comparing.get() { "Comparing…" } else { "Compare with the eager baseline" }}
            </button>
        </div>
        {move || compare.get().map(|r| match r {
            Ok(t) => view! { <p data-testid="gen-compare-result">{t}</p> }.into_any(),
            Err(e) => view! { <p class="bad" data-testid="gen-compare-result">{format!("Comparison not run: {e}")}</p> }.into_any(),
        })}
    }
}
