//! The experts each generated token was routed to: a heatmap, what the experts specialize in,
//! and the same as a table.

use leptos::prelude::*;

use super::super::{ExpertHeatmap, ExpertSpecialization};
use super::state::GenState;

pub(super) fn routing_views(st: GenState) -> impl IntoView {
    let GenState { rows, .. } = st;
    view! {
        <h3>"Experts per token"</h3>
        <p class="muted">"Each generated token, and the two routed experts (of 16) it used in each MoE layer. The shared expert sees every token."</p>
        <ExpertHeatmap experts=16 tokens=Signal::derive(move || rows.get().into_iter().map(|r| (r.text, r.experts)).collect::<Vec<_>>()) />
        <h3>"What the experts specialize in"</h3>
        <ExpertSpecialization experts=16 tokens=Signal::derive(move || rows.get().into_iter().map(|r| (r.token, r.experts)).collect::<Vec<_>>()) />
        <details>
        <summary>"As a table"</summary>
        <div class="table-wrap">
            <table class="experts" data-testid="gen-experts">
                <thead><tr><th>"token"</th><th>"layer 1"</th><th>"layer 2"</th><th>"layer 3"</th></tr></thead>
                <tbody>
                    {move || rows.get().into_iter().map(|r| view! {
                        <tr>
                            <td><code>{r.text}</code></td>
                            {r.experts.into_iter().map(|ids| view! {
                                <td>{ids.iter().map(|e| format!("E{e}")).collect::<Vec<_>>().join(" ")}</td>
                            }).collect_view()}
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        </details>
    }
}
