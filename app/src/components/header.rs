//! The site header: the name, what it is, and the page links.

use leptos::prelude::*;

use crate::state::Page;

#[component]
pub fn Header(active: Option<Page>) -> impl IntoView {
    view! {
        <header class="site-header">
            <a class="brand" href="#/sandbox">"MoEscope"</a>
            <span class="tagline">"How LLM inference gets fast, from one WebGPU kernel to a 72-GPU rack"</span>
            <nav aria-label="Pages">
                {Page::ALL
                    .into_iter()
                    .map(|p| {
                        let current = (active == Some(p)).then_some("page");
                        view! {
                            <a href=format!("#/{}", p.slug()) aria-current=current data-testid=format!("nav-{}", p.slug())>
                                {p.title()}
                            </a>
                        }
                    })
                    .collect_view()}
            </nav>
        </header>
    }
}
