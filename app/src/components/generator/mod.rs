//! Text generation with deepseek-mini: on WebGPU, with the kernels the optimization switches
//! pick, when the browser gives an adapter, else on the CPU reference compiled to wasm, labeled as
//! such. Tokens stream in with tokens/s, kernels, submissions and bytes per step, and the experts
//! each token was routed to.
//!
//! `state` holds the panel's signals (`GenState`) and what outlives a click (`Runtime`);
//! `actions` what the buttons start; `engines` the engines and one run; one view function per
//! part of the panel, in its own file.

mod actions;
mod compare_baseline;
mod engines;
mod format_picker;
mod gen_output;
mod prompt_controls;
mod reference_check;
mod routing_views;
mod state;
mod weights_source;

use leptos::prelude::*;

use super::{share_links, KernelTimeline, OptimizationSwitches, SharePanel};
use crate::sandbox_state::{self, SandboxState};
use crate::state::{EmbedView, Page};
use compare_baseline::compare_baseline;
use format_picker::format_picker;
use gen_output::gen_output;
use prompt_controls::prompt_controls;
use reference_check::reference_check;
use routing_views::routing_views;
use state::{GenState, Runtime};
use weights_source::weights_source;

#[component]
pub fn GeneratePanel(
    /// The settings to start from (the URL's, on a shared link or an embed).
    #[prop(optional)]
    initial: Option<SandboxState>,
    /// For an embed: no introduction, no share button.
    #[prop(optional)]
    compact: bool,
) -> impl IntoView {
    let st = GenState::new(&initial.unwrap_or_default());
    let rt = Runtime::default();
    actions::prefetch_weights(st, &rt);
    let share = move |_| {
        let q = sandbox_state::encode(&st.settings());
        st.share.set(Some(share_links(
            (Page::Sandbox, EmbedView::SandboxMini),
            &q,
            (760, 720),
            "MoEscope sandbox",
        )));
    };
    view! {
        <section class="card" data-testid="generator" data-status=move || st.status.get().attr() data-runs=move || st.runs.get()>
            <h2>"Generate with deepseek-mini"</h2>
            <p class="muted" class:hidden=compact>
                "11.3 M parameters (4 layers: MLA attention, 1 dense FFN, 3 MoE layers of 16 routed experts, top-2, plus 1 shared), byte-level tokens. "
            </p>
            {weights_source(st)}
            {prompt_controls(st, rt.clone())}
            <OptimizationSwitches optimizations=st.optimizations disabled=Signal::derive(move || st.busy()) />
            {compare_baseline(st, rt.clone())}
            {format_picker(st, rt.clone())}
            {gen_output(st)}
            {reference_check(st, rt)}
            {(!compact).then(|| view! {
                <div class="controls">
                    <button data-testid="gen-share" on:click=share>"Share / Embed"</button>
                </div>
            })}
            <SharePanel share=st.share prefix="gen" views="views: sandbox-mini, kernel-timeline" />
            <KernelTimeline trace=st.last_trace />
            {routing_views(st)}
        </section>
    }
}
