//! The shell: reads the route from the URL's hash, and shows either a full page under the header
//! or, for `#/embed/...`, one view with minimal chrome.

use leptos::prelude::*;

use crate::components::{Header, RouteErrorPanel, WebGpuBanner};
use crate::pages::{EmbedPage, LabsPage, RackPage, SandboxPage};
use crate::state::{parse_route, Page, Route};

fn current_hash() -> String {
    web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default()
}

#[component]
pub fn App() -> impl IntoView {
    let (hash, set_hash) = signal(current_hash());
    let listener = window_event_listener(leptos::ev::hashchange, move |_| {
        set_hash.set(current_hash())
    });
    on_cleanup(move || listener.remove());
    let route = Memo::new(move |_| parse_route(&hash.get()));

    // Any new address re-renders the page, even for the same page: a pasted or shared URL
    // carries new settings in its query. (The pages' own URL updates use replaceState, which
    // fires no hashchange.)
    move || {
        hash.track();
        render(route.get())
    }
}

/// The page (or embed) for `route`.
fn render(route: Result<Route, crate::state::RouteError>) -> AnyView {
    match route {
        Ok(Route::Embed { view, state }) => {
            view! { <EmbedPage view=view state=state /> }.into_any()
        }
        other => {
            let active = match &other {
                Ok(Route::Page(p)) => Some(*p),
                _ => None,
            };
            view! {
                <Header active=active />
                <WebGpuBanner />
                <main class="page">
                    {match other {
                        Ok(Route::Page(Page::Sandbox)) => view! { <SandboxPage /> }.into_any(),
                        Ok(Route::Page(Page::Rack)) => view! { <RackPage /> }.into_any(),
                        Ok(Route::Page(Page::Labs)) => view! { <LabsPage /> }.into_any(),
                        Ok(Route::Embed { .. }) => ().into_any(),
                        Err(e) => view! { <RouteErrorPanel message=e.to_string() /> }.into_any(),
                    }}
                </main>
            }
            .into_any()
        }
    }
}
