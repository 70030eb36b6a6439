//! `#/embed/<view>?<state>`: one view alone, for an iframe, with its whole state in the URL (the
//! rack explorer's format, `rack_state`). Settings it cannot read are listed in the widget and
//! replaced by defaults. The sandbox views (`sandbox-mini`, `kernel-timeline`) read the sandbox's
//! state (`sandbox_state`) and show the generator, whose timeline follows each run; `lab` shows
//! one lab (`#/embed/lab?v=1&lab=ID`).

use leptos::prelude::*;
use moescope_engine::rack::scenario::Phase;

use super::rack_explorer::{compute, RackPareto, RackSummary, RackWaterfall};
use crate::components::{GeneratePanel, SettingsWarnings, StepBreakdownBar};
use crate::rack_state;
use crate::sandbox_state;
use crate::state::EmbedView;

#[component]
pub fn EmbedPage(view: EmbedView, state: String) -> impl IntoView {
    let rack_view = matches!(
        view,
        EmbedView::RackSummary | EmbedView::Pareto | EmbedView::Waterfall
    );
    let open = format!("#/rack?{state}");
    let body = if rack_view {
        let (f, warnings) = rack_state::parse(&state);
        // From the settings, not the preset's name: the URL may have changed any of them.
        let phase = if f.phase == Phase::Serve {
            "serving"
        } else {
            "decode"
        };
        let title = format!("{} · {} · {phase}", f.system, f.model);
        let content = match compute(&f) {
            Err(e) => view! { <p class="bad" data-testid="embed-error">{format!("This deployment cannot run: {e}")}</p> }.into_any(),
            Ok(c) => match view {
                EmbedView::Pareto => view! { <RackPareto c=c /> }.into_any(),
                EmbedView::Waterfall => view! { <RackWaterfall c=c /> }.into_any(),
                _ => view! {
                    <RackSummary c=c.clone() />
                    <StepBreakdownBar breakdown=c.eval.breakdown_us step_time_us=c.eval.step_time_us />
                }
                .into_any(),
            },
        };
        view! {
            <h2 class="embed-title">{title}</h2>
            <SettingsWarnings warnings=warnings testid="embed-warnings" />
            {content}
            <p class="muted">"Estimates from MoEscope's calibrated rack model. "
                <a href=open target="_blank" rel="noopener">"Open in MoEscope"</a>
            </p>
        }
        .into_any()
    } else if view == EmbedView::Lab {
        let (labs, _) = super::labs::shipped();
        let (at, mut warnings) = crate::labs::parse_state(&state, &labs);
        if at.view != crate::labs::LabsView::Student {
            warnings.push(format!(
                "view {}: an embedded lab shows the student view; open it in MoEscope for the others",
                at.view.slug()
            ));
        }
        let open = labs
            .get(at.lab)
            .map(|l| format!("#/labs?{}", crate::labs::encode_state(l, at.view)))
            .unwrap_or_else(|| "#/labs".into());
        let (progress, _) = crate::progress_store::signal(&labs);
        view! {
            <SettingsWarnings warnings=warnings testid="embed-warnings" />
            {labs.get(at.lab).cloned().map(|lab| view! { <super::labs::LabView lab=lab progress=progress /> })}
            <p class="muted"><a href=open target="_blank" rel="noopener">"Open in MoEscope"</a></p>
        }
        .into_any()
    } else {
        // The sandbox views: the generator with the URL's prompt, switches and format; the
        // kernel timeline is part of it.
        let (initial, warnings) = sandbox_state::parse(&state);
        let open = format!("#/sandbox?{}", sandbox_state::encode(&initial));
        view! {
            <SettingsWarnings warnings=warnings testid="embed-warnings" />
            <GeneratePanel initial=initial compact=true />
            <p class="muted"><a href=open target="_blank" rel="noopener">"Open in MoEscope"</a></p>
        }
        .into_any()
    };
    view! {
        <main class="embed" data-testid="embed" data-view=view.slug()>
            {body}
        </main>
    }
}
