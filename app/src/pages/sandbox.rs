//! The sandbox: a small DeepSeek-style MoE model running on this browser's GPU. Today it proves
//! the kernel path with the gemv check; the model and its switches arrive with the engine issue.

use leptos::prelude::*;

use crate::components::KernelCheck;

#[component]
pub fn SandboxPage() -> impl IntoView {
    view! {
        <h1>"Sandbox"</h1>
        <p class="lead">
            "A scaled-down DeepSeek-style Mixture-of-Experts model will run here, on your own GPU, "
            "with every kernel checked against a CPU reference and timed. First, the proof that "
            "kernels run and agree:"
        </p>
        <KernelCheck />
        <section class="card placeholder">
            <h2>"Coming next"</h2>
            <p>"Text generation with deepseek-mini (MLA attention, routed and shared experts), the optimization switches (fused kernels, one recorded command buffer per step), quantized weights (int8, FP8, NVFP4, MXFP4) and a per-kernel timeline."</p>
        </section>
    }
}
