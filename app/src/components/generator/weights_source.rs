//! Where the sandbox's weights come from: the trained checkpoint, or synthetic weights and why.

use leptos::prelude::*;

use super::state::GenState;
use crate::checkpoint::Source;

pub(super) fn weights_source(st: GenState) -> impl IntoView {
    let GenState { weights_source, .. } = st;
    view! {
        <p class="muted" data-testid="weights-source"
            data-source=move || match weights_source.get() {
                Some(Source::Trained { .. }) => "trained",
                Some(Source::Synthetic { .. }) => "synthetic",
                None => "loading",
            }>
            {move || weights_source.get().map(|s| s.describe()).unwrap_or_else(|| "Loading the trained checkpoint (13 MB)…".into())}
        </p>
    }
}
