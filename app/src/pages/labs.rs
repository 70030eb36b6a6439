//! Labs: guided exercises with a prediction, a run and a check. Not built yet.

use leptos::prelude::*;

#[component]
pub fn LabsPage() -> impl IntoView {
    view! {
        <h1>"Labs"</h1>
        <section class="card placeholder" data-testid="labs-placeholder">
            <p>
                "Not built yet. Guided exercises will live here: predict a number, run the sandbox or the "
                "rack model, and check your prediction, starting with the NVL72 story (77 → 83 tokens/s per "
                "user) and kernel fusion on your own GPU."
            </p>
        </section>
    }
}
