//! What the pages that keep their state in the URL share: reading the hash's query, the page's
//! base address, the banner listing settings the URL could not supply, and the Share / Embed
//! panel.

use leptos::prelude::*;

use crate::state::{self, EmbedView, Page};

/// The query part of the current `location.hash`.
pub fn hash_query() -> String {
    let hash = web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default();
    hash.split_once('?')
        .map(|(_, q)| q.to_owned())
        .unwrap_or_default()
}

/// The page's address without its hash.
pub fn base_url() -> String {
    web_sys::window()
        .and_then(|w| w.location().href().ok())
        .map(|h| h.split('#').next().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// The link to this page and the embed snippet of one of its views (`state::share_links`).
pub fn share_links(
    views: (Page, EmbedView),
    query: &str,
    size: (u32, u32),
    title: &str,
) -> (String, String) {
    state::share_links(&base_url(), views, query, size, title)
}

/// The settings an address could not supply, each with what replaced it.
#[component]
pub fn SettingsWarnings(
    #[prop(into)] warnings: Signal<Vec<String>>,
    testid: &'static str,
) -> impl IntoView {
    move || {
        let w = warnings.get();
        (!w.is_empty()).then(|| view! {
            <div class="banner warn" data-testid=testid>
                <p>"Some settings in the address could not be used; they were replaced by defaults:"</p>
                <ul>{w.into_iter().map(|w| view! { <li>{w}</li> }).collect_view()}</ul>
            </div>
        })
    }
}

/// The link and the embed snippet, once Share was pressed.
#[component]
pub fn SharePanel(
    share: RwSignal<Option<(String, String)>>,
    /// Test ids are `{prefix}-share-url` and `{prefix}-embed-code`.
    prefix: &'static str,
    views: &'static str,
) -> impl IntoView {
    move || {
        share.get().map(|(url, embed)| view! {
            <label class="share">"Link to these settings "
                <input type="text" readonly data-testid=format!("{prefix}-share-url") prop:value=url />
            </label>
            <label class="share">{format!("Embed ({views}) ")}
                <textarea readonly rows="3" data-testid=format!("{prefix}-embed-code") prop:value=embed></textarea>
            </label>
        })
    }
}
