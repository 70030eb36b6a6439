//! Labs: guided exercises loaded from `labs/*.toml` (`crate::labs`). Three views of them: the
//! student's (predict, run, compare, read the explanation; progress saved in the browser and
//! exported as a file to hand in), the teacher's (every step with its answer, its rule and its
//! explanation, beside an imported student's predictions) and a printable summary.

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast;

use crate::components::{
    format_value, hash_query, provenance, share_links, LabStep, LossCurves, SandboxRun,
    SettingsWarnings, SharePanel,
};
use crate::lab_progress::{self, Progress};
use crate::labs::{self, Lab, LabsView, Rule, Run};
use crate::progress_store;
use crate::state::{EmbedView, Page};

/// The loss chart of a lab with training steps.
fn training_chart(lab: &Lab) -> Option<AnyView> {
    lab.steps
        .iter()
        .any(|s| matches!(s.run, Run::Training { .. }))
        .then(|| match crate::training::results() {
            Ok(r) => view! { <LossCurves results=r /> }.into_any(),
            Err(e) => view! { <p class="bad">{format!("The recorded training runs could not be read: {e}")}</p> }.into_any(),
        })
}

#[component]
pub fn LabView(lab: Lab, progress: RwSignal<Progress>) -> impl IntoView {
    let sandbox = RwSignal::new(None::<Result<SandboxRun, String>>);
    let chart = training_chart(&lab);
    let id = lab.id.clone();
    view! {
        <article data-testid=format!("lab-{}", lab.id)>
            <h2>{lab.title.clone()}</h2>
            <p class="lead">{lab.intro.clone()}</p>
            <p class="muted">{format!("About {} minutes.", lab.minutes)}</p>
            {chart}
            {lab.steps.into_iter().enumerate().map(|(i, s)| view! {
                <LabStep lab_id=id.clone() index=i step=s sandbox=sandbox progress=progress />
            }).collect_view()}
        </article>
    }
}

fn rule_text(rule: Rule) -> String {
    match rule {
        Rule::Within(t) => format!("right within ±{:.0}%", 100.0 * t),
        Rule::Side(p) => format!("right on the correct side of {p}"),
    }
}

/// What the teacher sees of a step's answer: the value, or why there is no fixed one.
fn answer_text(run: &Run, unit: &str) -> String {
    match run {
        Run::Sandbox { .. } => {
            "measured on each student's GPU: no fixed answer; compare with the range in the \
             question"
                .into()
        }
        _ => {
            let value = match run {
                Run::Training { metric } => crate::training::results().map(|r| r.get(*metric)),
                r => labs::run_rack(r),
            };
            match value {
                Ok(v) => format!("{} ({})", format_value(v, unit), provenance(run)),
                Err(e) => format!("could not be computed: {e}"),
            }
        }
    }
}

#[component]
fn TeacherView(lab: Lab, progress: RwSignal<Progress>) -> impl IntoView {
    let chart = training_chart(&lab);
    let goals = lab.goals.clone();
    let id = lab.id.clone();
    view! {
        <article data-testid=format!("lab-teacher-{}", lab.id)>
            <h2>{format!("Teacher view: {}", lab.title)}</h2>
            <p class="lead">{lab.intro.clone()}</p>
            <p>{format!("About {} minutes. After this lab a student can:", lab.minutes)}</p>
            <ul>{goals.into_iter().map(|g| view! { <li>{g}</li> }).collect_view()}</ul>
            {chart}
            {lab.steps.into_iter().enumerate().map(|(i, s)| {
                let id = id.clone();
                let student = move || progress.with(|p| p.answer(&id, i)).map(|a| format!(
                    "{}: {} ({}).",
                    progress.with(|p| if p.student.is_empty() { "Student".to_owned() } else { p.student.clone() }),
                    format_value(a.prediction, ""),
                    if a.close { "right" } else { "not right" },
                ));
                view! {
                    <section class="card lab-step" data-testid=format!("teacher-step-{i}")>
                        <h3>{format!("{}. {}", i + 1, s.title)}</h3>
                        <p>{s.text.clone()}</p>
                        <p data-testid=format!("teacher-answer-{i}")><strong>"Answer: "</strong>
                            {answer_text(&s.run, &s.unit)}{format!("; {}.", rule_text(s.rule()))}</p>
                        <p class="lab-explain">{s.explain.clone()}</p>
                        {move || student().map(|t| view! { <p class="muted" data-testid=format!("teacher-student-{i}")>{t}</p> })}
                    </section>
                }
            }).collect_view()}
        </article>
    }
}

/// Every lab's answered steps in one table, for printing or handing in.
#[component]
fn SummaryView(labs: Vec<Lab>, progress: RwSignal<Progress>) -> impl IntoView {
    let print = |_| {
        if let Some(w) = web_sys::window() {
            let _ = w.print();
        }
    };
    view! {
        <article data-testid="lab-summary">
            <h2>"Lab summary"</h2>
            <p>{move || progress.with(|p| if p.student.is_empty() {
                "No name given.".to_owned()
            } else {
                format!("Student: {}", p.student)
            })}</p>
            <div class="controls no-print">
                <button data-testid="summary-print" on:click=print>"Print"</button>
            </div>
            {labs.into_iter().map(|lab| {
                let rows = lab.steps.iter().enumerate().map(|(i, s)| {
                    let (id, unit, title) = (lab.id.clone(), s.unit.clone(), s.title.clone());
                    move || {
                        let a = progress.with(|p| p.answer(&id, i));
                        view! {
                            <tr>
                                <td>{format!("{}. {title}", i + 1)}</td>
                                <td>{a.map(|a| format_value(a.prediction, &unit)).unwrap_or_else(|| "not answered".into())}</td>
                                <td>{a.map(|a| format_value(a.value, &unit)).unwrap_or_default()}</td>
                                <td>{a.map(|a| if a.close { "right" } else { "not right" }).unwrap_or_default()}</td>
                            </tr>
                        }
                    }
                }).collect_view();
                let for_tally = lab.clone();
                view! {
                    <section class="card" data-testid=format!("summary-{}", lab.id)>
                        <h3>{lab.title.clone()}</h3>
                        <p class="muted">{move || {
                            let (answered, right) = progress.with(|p| p.tally(&for_tally));
                            format!("{answered} of {} steps answered, {right} right.", for_tally.steps.len())
                        }}</p>
                        <table class="summary">
                            <thead><tr><th>"Step"</th><th>"Prediction"</th><th>"Value"</th><th>"Verdict"</th></tr></thead>
                            <tbody>{rows}</tbody>
                        </table>
                    </section>
                }
            }).collect_view()}
        </article>
    }
}

/// Saves the progress as the file a student hands in (a Blob behind an object URL, clicked as
/// a download link; the URL is released once the browser has taken the file).
fn download(progress: &Progress) -> Result<(), String> {
    let failed = |_| "the browser refused to save the file".to_owned();
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(&progress.to_json()));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("application/json");
    let blob =
        web_sys::Blob::new_with_str_sequence_and_options(&parts, &options).map_err(failed)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(failed)?;
    let link = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.create_element("a").ok())
        .and_then(|e| e.dyn_into::<web_sys::HtmlAnchorElement>().ok())
        .ok_or("the page has no document")?;
    link.set_href(&url);
    link.set_download("moescope-progress.json");
    link.click();
    set_timeout(
        move || {
            let _ = web_sys::Url::revoke_object_url(&url);
        },
        std::time::Duration::from_secs(10),
    );
    Ok(())
}

/// The text of the file chosen in a file input, if one was chosen.
async fn chosen_file(input: web_sys::HtmlInputElement) -> Option<Result<String, String>> {
    let file = input.files()?.get(0)?;
    if file.size() > lab_progress::MAX_BYTES as f64 {
        return Some(Err(format!(
            "{} is {:.0} kB; a progress file is at most {} kB",
            file.name(),
            file.size() / 1e3,
            lab_progress::MAX_BYTES / 1000
        )));
    }
    let text = wasm_bindgen_futures::JsFuture::from(file.text()).await;
    Some(
        text.ok()
            .and_then(|t| t.as_string())
            .ok_or_else(|| format!("{} could not be read", file.name())),
    )
}

/// Name, export, import and the storage's state.
#[component]
fn ProgressPanel(
    labs: Vec<Lab>,
    progress: RwSignal<Progress>,
    problem: RwSignal<Option<String>>,
) -> impl IntoView {
    let imported = RwSignal::new(None::<Result<String, String>>);
    let on_file = move |ev: web_sys::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        let labs = labs.clone();
        spawn_local(async move {
            let outcome = match chosen_file(input).await {
                None => return,
                Some(Err(e)) => Err(format!("Not imported: {e}")),
                Some(Ok(text)) => lab_progress::import(&text, &labs)
                    .map(|(p, warnings)| {
                        let answered: usize = p.labs.values().map(|a| a.len()).sum();
                        progress.set(p);
                        let mut said = format!("Imported {answered} answers.");
                        for w in warnings {
                            said.push_str(&format!(" Left out: {w}."));
                        }
                        said
                    })
                    .map_err(|e| format!("Not imported: {e}")),
            };
            imported.set(Some(outcome));
        });
    };
    view! {
        {move || problem.get().map(|p| view! {
            <p class="bad no-print" data-testid="lab-progress-problem">{format!(
                "Progress is not saved: {p}. It lasts until you leave the page; export it to keep it.")}</p>
        })}
        <details class="card progress-panel no-print" data-testid="lab-progress">
            <summary>{move || {
                let answered: usize = progress.with(|p| p.labs.values().map(|a| a.len()).sum());
                let saved = if problem.with(Option::is_some) { "not saved" } else { "saved in this browser" };
                format!("Your progress: {answered} steps answered ({saved}): name, export, import")
            }}</summary>
            <div class="controls">
                <label>"Your name (in the file you hand in)"
                    <input type="text" maxlength="200" data-testid="lab-student"
                        prop:value=move || progress.with(|p| p.student.clone())
                        on:change=move |ev| progress.update(|p| p.student = event_target_value(&ev)) />
                </label>
                <button data-testid="lab-export" on:click=move |_| {
                    if let Err(e) = progress.with_untracked(download) {
                        imported.set(Some(Err(e)));
                    }
                }>"Export progress"</button>
                <label>"Import a progress file"
                    <input type="file" accept=".json,application/json" data-testid="lab-import" on:change=on_file />
                </label>
            </div>
            {move || imported.get().map(|r| match r {
                Ok(t) => view! { <p class="good" data-testid="lab-import-result">{t}</p> }.into_any(),
                Err(e) => view! { <p class="bad" data-testid="lab-import-result">{e}</p> }.into_any(),
            })}
        </details>
    }
}

/// The shipped labs that parse, and a message for each that does not.
pub fn shipped() -> (Vec<Lab>, Vec<String>) {
    let parsed: Vec<Result<Lab, String>> = labs::SHIPPED.iter().map(|t| labs::parse(t)).collect();
    let labs = parsed
        .iter()
        .filter_map(|l| l.as_ref().ok().cloned())
        .collect();
    let errors = parsed.into_iter().filter_map(Result::err).collect();
    (labs, errors)
}

#[component]
pub fn LabsPage() -> impl IntoView {
    let (labs, errors) = shipped();
    let (start, warnings) = labs::parse_state(&hash_query(), &labs);
    let current = RwSignal::new(start.lab);
    let view_kind = RwSignal::new(start.view);
    let share = RwSignal::new(None::<(String, String)>);
    let (progress, problem) = progress_store::signal(&labs);
    // The address follows the open lab and view (replaceState: no history entry, no hashchange).
    let for_address = labs.clone();
    Effect::new(move |_| {
        if let Some(lab) = for_address.get(current.get()) {
            if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
                let hash = format!("#/labs?{}", labs::encode_state(lab, view_kind.get()));
                let _ =
                    history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&hash));
            }
            share.set(None);
        }
    });
    let menu = labs
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let (id, title, lab) = (l.id.clone(), l.title.clone(), l.clone());
            let tally = move || {
                let (answered, _) = progress.with(|p| p.tally(&lab));
                format!(" ({answered}/{})", lab.steps.len())
            };
            view! {
                <button data-testid=format!("lab-open-{id}") aria-pressed=move || (current.get() == i).to_string()
                    on:click=move |_| current.set(i)>{title}<span class="muted">{tally}</span></button>
            }
        })
        .collect_view();
    let views = LabsView::ALL
        .into_iter()
        .map(|v| {
            let label = match v {
                LabsView::Student => "Student",
                LabsView::Teacher => "Teacher (answers)",
                LabsView::Summary => "Summary to print",
            };
            view! {
                <button data-testid=format!("labs-view-{}", v.slug()) aria-pressed=move || (view_kind.get() == v).to_string()
                    on:click=move |_| view_kind.set(v)>{label}</button>
            }
        })
        .collect_view();
    let for_share = labs.clone();
    let for_panel = labs.clone();
    view! {
        <h1 class="no-print">"Labs"</h1>
        <p class="lead no-print">"Predict a number, run the model, compare. Each step checks your prediction against what the rack model computes or your GPU measures, then explains it. Every model figure carries its error on measurements the model was not fitted to."</p>
        <SettingsWarnings warnings=warnings testid="labs-warnings" />
        {errors.into_iter().map(|e| view! { <p class="bad">{format!("A lab file could not be read: {e}")}</p> }).collect_view()}
        <nav class="lab-menu no-print" aria-label="Labs">{menu}</nav>
        <nav class="lab-menu no-print" aria-label="View">{views}</nav>
        <ProgressPanel labs=for_panel progress=progress problem=problem />
        <div class="controls no-print">
            <button data-testid="labs-share" on:click=move |_| {
                if let Some(lab) = for_share.get(current.get_untracked()) {
                    let q = labs::encode_state(lab, view_kind.get_untracked());
                    share.set(Some(share_links((Page::Labs, EmbedView::Lab), &q, (760, 900), &format!("MoEscope lab: {}", lab.title))));
                }
            }>"Share / Embed"</button>
        </div>
        <SharePanel share=share prefix="labs" views="view: lab" />
        {move || match view_kind.get() {
            LabsView::Summary => view! { <SummaryView labs=labs.clone() progress=progress /> }.into_any(),
            LabsView::Teacher => labs.get(current.get()).cloned()
                .map(|lab| view! { <TeacherView lab=lab progress=progress /> }.into_any())
                .unwrap_or_else(|| ().into_any()),
            LabsView::Student => labs.get(current.get()).cloned()
                .map(|lab| view! { <LabView lab=lab progress=progress /> }.into_any())
                .unwrap_or_else(|| ().into_any()),
        }}
    }
}
