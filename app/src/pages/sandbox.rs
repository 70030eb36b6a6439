//! The sandbox: deepseek-mini, a small DeepSeek-style MoE model, running on this browser's GPU
//! (or on the CPU reference in wasm without WebGPU), after the gemv proof that kernels run here.

use leptos::prelude::*;

use crate::components::{DecodeBenchPanel, GeneratePanel, KernelCheck};
use crate::sandbox_state;

/// The query part of the current `location.hash`.
pub fn hash_query() -> String {
    let hash = web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default();
    hash.split_once('?')
        .map(|(_, q)| q.to_owned())
        .unwrap_or_default()
}

#[component]
pub fn SandboxPage() -> impl IntoView {
    let (initial, warnings) = sandbox_state::parse(&hash_query());
    view! {
        <h1>"Sandbox"</h1>
        <p class="lead">
            "A scaled-down DeepSeek-style Mixture-of-Experts model runs here, on your own GPU, "
            "with its kernels checked against a CPU reference. With every switch off it launches one "
            "kernel per operation and submits each on its own, like eager PyTorch; each switch swaps "
            "some of those kernels for a fused one and never changes the math."
        </p>
        {(!warnings.is_empty()).then(|| view! {
            <div class="banner warn" data-testid="sandbox-warnings">
                <p>"Some settings in the address could not be used; they were replaced by defaults:"</p>
                <ul>{warnings.into_iter().map(|w| view! { <li>{w}</li> }).collect_view()}</ul>
            </div>
        })}
        <GeneratePanel initial=initial />
        <DecodeBenchPanel />
        <KernelCheck />
        <section class="card placeholder">
            <h2>"Coming next"</h2>
            <p>"A trained checkpoint, so that the sandbox writes readable English and its experts specialize; FP8 activations in the MoE dispatch records."</p>
        </section>
    }
}
