//! The prompt, the number of tokens, the engine choice, and Generate / Stop.

use leptos::prelude::*;

use super::actions;
use super::state::{Choice, GenState, Runtime, Status};

pub(super) fn prompt_controls(st: GenState, rt: Runtime) -> impl IntoView {
    let GenState {
        choice,
        prompt,
        status,
        tokens,
        ..
    } = st;
    let busy = move || matches!(status.get(), Status::Preparing | Status::Running);
    let (run_rt, stop_rt) = (rt.clone(), rt);
    view! {
        <div class="controls">
            <label>"Prompt "
                <input type="text" data-testid="gen-prompt" prop:value=move || prompt.get()
                    on:input=move |ev| prompt.set(event_target_value(&ev)) />
            </label>
            <label>"Tokens "
                <input type="number" min="1" max="256" data-testid="gen-tokens" prop:value=move || tokens.get()
                    on:input=move |ev| tokens.set(event_target_value(&ev)) />
            </label>
            <label>"Engine "
                <select data-testid="gen-backend-choice" on:change=move |ev| {
                    choice.set(match event_target_value(&ev).as_str() {
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
            <button data-testid="gen-run" on:click=move |_| actions::run(st, &run_rt) disabled=busy>"Generate"</button>
            <button data-testid="gen-stop" on:click=move |_| actions::stop(&stop_rt) disabled=move || !busy()>"Stop"</button>
        </div>
    }
}
