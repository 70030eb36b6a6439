//! What a visitor sees at an address that is not a MoEscope page: the reason, and a way back.

use leptos::prelude::*;

#[component]
pub fn RouteErrorPanel(message: String) -> impl IntoView {
    view! {
        <section class="card error" role="alert" data-testid="route-error">
            <h2>"This address is not a MoEscope page"</h2>
            <p>{message}</p>
            <p><a href="#/sandbox">"Go to the sandbox"</a></p>
        </section>
    }
}
