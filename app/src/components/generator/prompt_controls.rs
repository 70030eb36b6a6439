//! The prompt, the number of tokens, the engine choice, and Generate / Stop.

use leptos::prelude::*;

use super::actions;
use super::state::{Choice, GenState, Runtime};

#[component]
pub(super) fn PromptControls(st: GenState, rt: Runtime) -> impl IntoView {
    let (run_rt, stop_rt) = (rt.clone(), rt);
    view! {
        <div class="controls">
            <label>"Prompt "
                <input type="text" data-testid="gen-prompt" prop:value=move || st.prompt.get()
                    on:input=move |ev| st.prompt.set(event_target_value(&ev)) />
            </label>
            <label>"Tokens "
                <input type="number" min="1" max="256" data-testid="gen-tokens" prop:value=move || st.tokens.get()
                    on:input=move |ev| st.tokens.set(event_target_value(&ev)) />
            </label>
            <label>"Engine "
                <select data-testid="gen-backend-choice" on:change=move |ev| {
                    st.choice.set(match event_target_value(&ev).as_str() {
                        "gpu" => Choice::Gpu,
                        "cpu" => Choice::Cpu,
                        _ => Choice::Auto,
                    })
                }>
                    <option value="auto">"Auto (WebGPU if available)"</option>
                    <option value="gpu">"WebGPU"</option>
                    <option value="cpu">"CPU reference (wasm)"</option>
                </select>
            </label>
            <button data-testid="gen-run" on:click=move |_| actions::run(st, &run_rt) disabled=move || st.busy()>"Generate"</button>
            <button data-testid="gen-stop" on:click=move |_| actions::stop(&stop_rt) disabled=move || !st.busy()>"Stop"</button>
        </div>
    }
}
