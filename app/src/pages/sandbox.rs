//! The sandbox: deepseek-mini, a small DeepSeek-style MoE model, running on this browser's GPU
//! (or on the CPU reference in wasm without WebGPU), after the gemv proof that kernels run here.

use leptos::prelude::*;

use crate::components::{
    hash_query, DecodeBenchPanel, GeneratePanel, KernelCheck, SettingsWarnings,
};
use crate::sandbox_state;

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
        <SettingsWarnings warnings=warnings testid="sandbox-warnings" />
        <GeneratePanel initial=initial />
        <DecodeBenchPanel />
        <KernelCheck />
    }
}
