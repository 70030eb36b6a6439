//! `#/embed/<view>?<state>`: one view alone, for an iframe. The views arrive with the UI issue;
//! the route and its error handling are real already.

use leptos::prelude::*;

use crate::state::EmbedView;

#[component]
pub fn EmbedPage(view: EmbedView, state: String) -> impl IntoView {
    view! {
        <main class="embed" data-testid="embed">
            <p class="muted">
                {format!("MoEscope embed \u{201c}{}\u{201d}: this view is not built yet.", view.slug())}
                {(!state.is_empty()).then(|| format!(" Its state ({} characters) will be read from the URL.", state.len()))}
            </p>
            <a href="#/sandbox" target="_blank" rel="noopener">"Open MoEscope"</a>
        </main>
    }
}
