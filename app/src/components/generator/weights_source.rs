//! Where the sandbox's weights come from: the trained checkpoint, or synthetic weights and why.

use leptos::prelude::*;

use super::state::GenState;
use crate::checkpoint::Source;

#[component]
pub(super) fn WeightsSource(st: GenState) -> impl IntoView {
    view! {
        <p class="muted" data-testid="weights-source"
            data-source=move || match st.weights_source.get() {
                Some(Source::Trained { .. }) => "trained",
                Some(Source::Synthetic { .. }) => "synthetic",
                None => "loading",
            }>
            {move || st.weights_source.get().map(|s| s.describe()).unwrap_or_else(|| "Loading the trained checkpoint (13 MB)…".into())}
        </p>
    }
}
