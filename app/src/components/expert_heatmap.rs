//! The routing of each generated token as a heatmap: one row per token, one block of columns per
//! MoE layer, one column per routed expert; a filled cell is an expert the token was sent to.
//! The column totals under each block show how evenly the router spread the load.

use leptos::prelude::*;

const CELL: f64 = 12.0;
const LABEL: f64 = 56.0;
const GAP: f64 = 14.0;
const HEAD: f64 = 18.0;

/// Tokens (label, experts per MoE layer) and the number of routed experts per layer.
#[component]
pub fn ExpertHeatmap(
    #[prop(into)] tokens: Signal<Vec<(String, Vec<Vec<usize>>)>>,
    experts: usize,
) -> impl IntoView {
    move || {
        let rows = tokens.get();
        if rows.is_empty() {
            return view! { <p class="muted">"Generate to see which experts each token uses."</p> }
                .into_any();
        }
        let layers = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        let block = experts as f64 * CELL;
        let width = LABEL + layers as f64 * (block + GAP);
        let height = HEAD + rows.len() as f64 * CELL + 2.0 * CELL + 4.0;
        let mut load = vec![vec![0usize; experts]; layers];
        for (_, per_layer) in &rows {
            for (l, ids) in per_layer.iter().enumerate() {
                for &e in ids {
                    if e < experts {
                        load[l][e] += 1;
                    }
                }
            }
        }
        let max_load = load.iter().flatten().copied().max().unwrap_or(1).max(1);
        view! {
            <svg class="heatmap" viewBox=format!("0 0 {width} {height}") role="img"
                aria-label=format!("Expert routing of {} tokens over {layers} MoE layers", rows.len())
                data-testid="expert-heatmap" data-tokens=rows.len()>
                {(0..layers).map(|l| {
                    let x0 = LABEL + l as f64 * (block + GAP);
                    view! { <text x=x0 + block / 2.0 y="12" text-anchor="middle" class="timeline-tick">{format!("MoE layer {}", l + 1)}</text> }
                }).collect_view()}
                {rows.iter().enumerate().map(|(t, (label, per_layer))| {
                    let y = HEAD + t as f64 * CELL;
                    view! {
                        <text x=LABEL - 4.0 y=y + CELL - 2.0 text-anchor="end" class="heatmap-label">{label.clone()}</text>
                        {(0..layers).map(|l| {
                            let x0 = LABEL + l as f64 * (block + GAP);
                            let chosen = per_layer.get(l).cloned().unwrap_or_default();
                            (0..experts).map(|e| {
                                let on = chosen.contains(&e);
                                view! {
                                    <rect x=x0 + e as f64 * CELL y=y width=CELL - 1.0 height=CELL - 1.0
                                        class=if on { "cell-on" } else { "cell-off" }>
                                        {on.then(|| view! { <title>{format!("{label}: layer {} expert E{e}", l + 1)}</title> })}
                                    </rect>
                                }
                            }).collect_view()
                        }).collect_view()}
                    }
                }).collect_view()}
                {load.iter().enumerate().map(|(l, counts)| {
                    let x0 = LABEL + l as f64 * (block + GAP);
                    let y = HEAD + rows.len() as f64 * CELL + 4.0;
                    counts.iter().enumerate().map(|(e, &n)| {
                        // Taller bar: more tokens sent to that expert.
                        let h = 2.0 * CELL * n as f64 / max_load as f64;
                        view! {
                            <rect x=x0 + e as f64 * CELL y=y + 2.0 * CELL - h width=CELL - 1.0 height=h class="cell-load">
                                <title>{format!("layer {} expert E{e}: {n} tokens", l + 1)}</title>
                            </rect>
                        }
                    }).collect_view()
                }).collect_view()}
            </svg>
            <p class="hint">"Columns: the 16 routed experts (E0–E15) of each MoE layer; a filled cell is an expert the token was sent to; the bars below count the tokens per expert."</p>
        }
        .into_any()
    }
}

/// What each expert specializes in, over the generated tokens (`model::experts`): per MoE layer,
/// the experts that take one kind of byte far more often than the text has it.
#[component]
pub fn ExpertSpecialization(
    #[prop(into)] tokens: Signal<Vec<(u32, Vec<Vec<usize>>)>>,
    experts: usize,
) -> impl IntoView {
    use moescope_engine::model::experts::{specialization, ByteClass, MIN_ODDS_RATIO};
    move || {
        let rows = tokens.get();
        if rows.len() < 16 {
            return view! { <p class="muted">"Generate 16 tokens or more to see what each expert specializes in."</p> }.into_any();
        }
        let ids: Vec<u32> = rows.iter().map(|r| r.0).collect();
        let routing: Vec<Vec<Vec<usize>>> = rows.into_iter().map(|r| r.1).collect();
        let s = specialization(&ids, &routing, experts, 3);
        let total = s.tokens.max(1) as f64;
        let layers = s.experts.iter().map(|p| p.layer + 1).max().unwrap_or(0);
        view! {
            <div class="table-wrap">
            <table class="experts" data-testid="expert-specialization">
                <caption>{format!(
                    "Over these {} tokens: experts whose tokens are one kind of byte at {MIN_ODDS_RATIO:.0}× the odds of the text or more (share of the expert's tokens; of the text's).",
                    s.tokens
                )}</caption>
                <thead><tr><th>"layer"</th><th>"specialists"</th></tr></thead>
                <tbody>
                    {(0..layers).map(|l| {
                        let found: Vec<String> = s.experts.iter()
                            .filter(|p| p.layer == l)
                            .filter_map(|p| p.favourite.map(|(c, share, _)| {
                                let i = ByteClass::ALL.iter().position(|x| *x == c).unwrap_or(0);
                                format!("E{}: {} {:.0}% ({:.0}%)", p.expert, c.name(), 100.0 * share, 100.0 * s.overall[i] as f64 / total)
                            }))
                            .collect();
                        let text = if found.is_empty() { "none yet".to_string() } else { found.join(" · ") };
                        view! { <tr><td>{format!("MoE layer {}", l + 1)}</td><td>{text}</td></tr> }
                    }).collect_view()}
                </tbody>
            </table>
            </div>
        }.into_any()
    }
}
