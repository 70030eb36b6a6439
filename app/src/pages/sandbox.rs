//! The sandbox: deepseek-mini, a small DeepSeek-style MoE model, running on this browser's GPU
//! (or on the CPU reference in wasm without WebGPU), after the gemv proof that kernels run here.

use leptos::prelude::*;

use crate::components::{GeneratePanel, KernelCheck};

#[component]
pub fn SandboxPage() -> impl IntoView {
    view! {
        <h1>"Sandbox"</h1>
        <p class="lead">
            "A scaled-down DeepSeek-style Mixture-of-Experts model runs here, on your own GPU, "
            "with its kernels checked against a CPU reference. The eager path below launches one "
            "kernel per operation, like eager PyTorch: the baseline every fusion will be measured against."
        </p>
        <GeneratePanel />
        <KernelCheck />
        <section class="card placeholder">
            <h2>"Coming next"</h2>
            <p>"The optimization switches (fused kernels, one recorded command buffer per step), quantized weights (int8, FP8, NVFP4, MXFP4) and a per-kernel timeline."</p>
        </section>
    }
}
