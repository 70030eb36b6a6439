//! "Compare with the eager baseline": the same decode steps with every switch off and with the
//! current set, measured on the visitor's GPU in one run.

use leptos::prelude::*;

use super::actions;
use super::state::{GenState, Runtime};

#[component]
pub(super) fn CompareBaseline(st: GenState, rt: Runtime) -> impl IntoView {
    view! {
        <div class="controls">
            <button data-testid="gen-compare" on:click=move |_| actions::compare(st, &rt) disabled=move || st.busy() || st.comparing.get()>
                {move || if st.comparing.get() { "Comparing…" } else { "Compare with the eager baseline" }}
            </button>
        </div>
        {move || st.compare.get().map(|r| match r {
            Ok(t) => view! { <p data-testid="gen-compare-result">{t}</p> }.into_any(),
            Err(e) => view! { <p class="bad" data-testid="gen-compare-result">{format!("Comparison not run: {e}")}</p> }.into_any(),
        })}
    }
}
