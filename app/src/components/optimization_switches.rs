//! The sandbox's optimization switches: one checkbox per fusion, plus "none" (the eager baseline)
//! and "all". Each switch changes which kernels run, never the math.

use leptos::prelude::*;
use moescope_engine::plan::{Optimizations, NAMES};

/// What each switch does, in one line a visitor can read.
fn describe(name: &str) -> &'static str {
    match name {
        "fuse_gate_up_swiglu" => "gate and up projections and SwiGLU in one kernel (FC13 + SwiGLU)",
        "fuse_qkv_rope_scale" => "query/KV projections with RoPE and 1/√d applied in the same kernel",
        "fuse_residual_rmsnorm" => "residual add and the next RMSNorm in one kernel",
        "split_k_attention" => "attention split over 64-position chunks, then a reduction (flash decoding)",
        "fuse_moe_route" => "router logits, sigmoid and top-k in one kernel",
        "fuse_moe_dispatch_combine" => "routing stays on the GPU: each token's activation travels in one record with its expert id, gate and scale (16 bytes of metadata per 1 kB: 1.6%, where LL128 spends 8 flag bytes per 128, 6.25%), one launch per expert projection for all experts, combine in the output pass",
        "fuse_mla_copy_concat" => "projections write straight into the layouts attention reads: no copy or concat kernels",
        "recorded_submission" => "all kernels of a step in one command buffer instead of one queue submission each",
        _ => "",
    }
}

#[component]
pub fn OptimizationSwitches(
    optimizations: RwSignal<Optimizations>,
    #[prop(into)] disabled: Signal<bool>,
) -> impl IntoView {
    view! {
        <fieldset class="switches" data-testid="opt-switches">
            <legend>"Optimizations"</legend>
            <div class="switch-buttons">
                <button data-testid="opt-none" disabled=disabled
                    on:click=move |_| optimizations.set(Optimizations::none())>"None (eager baseline)"</button>
                <button data-testid="opt-all" disabled=disabled
                    on:click=move |_| optimizations.set(Optimizations::all())>"All"</button>
            </div>
            <ul>
                {NAMES.into_iter().map(|name| view! {
                    <li>
                        <label>
                            <input type="checkbox" data-testid=format!("opt-{name}") disabled=disabled
                                prop:checked=move || optimizations.get().get(name) == Some(true)
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    optimizations.update(|o| {
                                        // NAMES are exactly the switch names.
                                        let _ = o.set(name, on);
                                    });
                                } />
                            <code>{name}</code>
                        </label>
                        <span class="muted">" — "{describe(name)}</span>
                    </li>
                }).collect_view()}
            </ul>
            <p class="muted small">
                "WebGPU has no programmatic dependent launch (PDL): on NVIDIA GPUs PDL lets a kernel start its prologue while the previous one drains, hiding the gap between dependent kernels. "
                "Here, recording the whole step into one command buffer removes the per-kernel submission, which is the part of that gap a browser lets us remove."
            </p>
        </fieldset>
    }
}
