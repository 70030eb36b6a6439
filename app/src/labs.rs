//! Labs as data: a lab is a TOML file under `labs/` (steps with a question, a prediction to enter,
//! a run and an explanation), parsed with serde. The rack runs are evaluated here, natively
//! testable; the sandbox runs need the visitor's GPU and live in the page. A prediction is checked
//! against the computed value with the step's relative tolerance.

use moescope_engine::rack::scenario::Optimization;
use moescope_engine::rack::validation::{self, ErrorBand};
use moescope_engine::rack::{self, Evaluation, Params, Scenario, ScenarioFile};
use serde::Deserialize;

use crate::rack_state::{self, LoadKind};
pub use crate::training::TrainingMetric;

/// The labs that ship, in menu order: the seeds' story first, then the course from the GPU up
/// (roofline, launches, attention, experts, precision, speculation) to the rack and training.
pub const SHIPPED: [&str; 12] = [
    include_str!("../../labs/nvl72-story.toml"),
    include_str!("../../labs/roofline.toml"),
    include_str!("../../labs/kernel-fusion.toml"),
    include_str!("../../labs/launch-overhead.toml"),
    include_str!("../../labs/split-k-attention.toml"),
    include_str!("../../labs/moe-alltoall.toml"),
    include_str!("../../labs/fp8-fp4.toml"),
    include_str!("../../labs/speculative-decoding.toml"),
    include_str!("../../labs/disaggregation.toml"),
    include_str!("../../labs/expert-parallelism.toml"),
    include_str!("../../labs/fp8-training.toml"),
    include_str!("../../labs/training-mfu.toml"),
];

/// The committed scenarios a lab's rack run starts from, by file stem (a test checks this list
/// against `scenarios/`).
pub const SCENARIOS: [(&str, &str); 13] = [
    (
        "deepseek-h800-decode-ep144",
        include_str!("../../scenarios/deepseek-h800-decode-ep144.toml"),
    ),
    (
        "deepseek-v3-pretraining",
        include_str!("../../scenarios/deepseek-v3-pretraining.toml"),
    ),
    (
        "sglang-h100-deepseek-r1-prefill",
        include_str!("../../scenarios/sglang-h100-deepseek-r1-prefill.toml"),
    ),
    (
        "vllm-gb200-deepseek-r1-wide-ep",
        include_str!("../../scenarios/vllm-gb200-deepseek-r1-wide-ep.toml"),
    ),
    (
        "vllm-h200-deepseek-r1-wide-ep",
        include_str!("../../scenarios/vllm-h200-deepseek-r1-wide-ep.toml"),
    ),
    (
        "seed-nvl72-deepseek-r1-decode",
        include_str!("../../scenarios/seed-nvl72-deepseek-r1-decode.toml"),
    ),
    (
        "inferencex-gb200-deepseek-r1-disagg",
        include_str!("../../scenarios/inferencex-gb200-deepseek-r1-disagg.toml"),
    ),
    (
        "seed-llama4-maverick-min-latency",
        include_str!("../../scenarios/seed-llama4-maverick-min-latency.toml"),
    ),
    (
        "seed-gpt3-175b-training",
        include_str!("../../scenarios/seed-gpt3-175b-training.toml"),
    ),
    (
        "seed-mla-copy-concat",
        include_str!("../../scenarios/seed-mla-copy-concat.toml"),
    ),
    (
        "trtllm-b200-deepseek-r1-min-latency",
        include_str!("../../scenarios/trtllm-b200-deepseek-r1-min-latency.toml"),
    ),
    (
        "trtllm-b200-deepseek-r1-max-throughput",
        include_str!("../../scenarios/trtllm-b200-deepseek-r1-max-throughput.toml"),
    ),
    (
        "trtllm-b200-llama4-maverick-max-throughput",
        include_str!("../../scenarios/trtllm-b200-llama4-maverick-max-throughput.toml"),
    ),
];

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Lab {
    pub id: String,
    pub title: String,
    pub intro: String,
    /// About how long a student needs, for the teacher's plan.
    pub minutes: u32,
    /// What a student can do after the lab.
    pub goals: Vec<String>,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub title: String,
    pub text: String,
    pub unit: String,
    /// A prediction within this fraction of the computed value counts as close...
    pub tolerance: Option<f64>,
    /// ...or, for a question of direction, one on the same side of this number.
    pub side_of: Option<f64>,
    pub explain: String,
    pub run: Run,
}

impl Step {
    pub fn rule(&self) -> Rule {
        match (self.side_of, self.tolerance) {
            (Some(pivot), _) => Rule::Side(pivot),
            (None, tolerance) => Rule::Within(tolerance.unwrap_or(0.0)),
        }
    }

    pub fn check(&self, prediction: f64, value: f64) -> Verdict {
        check(prediction, value, self.rule())
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Run {
    /// A rack-model evaluation: a committed scenario, changed, one output (or its ratio to the
    /// same output of a baseline change of the same scenario).
    Rack {
        scenario: String,
        metric: String,
        #[serde(default)]
        change: RackChange,
        baseline: Option<Box<RackChange>>,
    },
    /// The sandbox's decode step on the visitor's GPU, eager and fused.
    Sandbox { metric: SandboxMetric },
    /// The recorded BF16 and FP8 training runs (`crate::training`).
    Training { metric: TrainingMetric },
}

/// How a rack run departs from its committed scenario.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RackChange {
    /// Scenario-file fields replaced (any field; a table such as `speculative` is merged).
    #[serde(default)]
    pub set: toml::Table,
    /// Scenario-file fields removed (back to their defaults), such as `speculative`.
    #[serde(default)]
    pub unset: Vec<String>,
    #[serde(default)]
    pub add: Vec<String>,
    #[serde(default)]
    pub remove: Vec<String>,
    /// The load as the rack explorer gives it: `batch`, `concurrency` or `target`, with `at`.
    pub load: Option<String>,
    pub at: Option<f64>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMetric {
    EagerKernels,
    FusedKernels,
    EagerSubmissions,
    FusedSubmissions,
    /// Host time (recording + submitting) per eager step, in µs.
    EagerHostUs,
    /// Host time per fused step, in µs.
    FusedHostUs,
    /// Fused step time, in ms.
    FusedStepMs,
    /// Megabytes the fused step's kernels read and write.
    FusedMegabytes,
    /// Those bytes over the fused step time, in GB/s.
    FusedGbPerS,
    Speedup,
}

/// Parses a lab file; the message names what is wrong.
pub fn parse(text: &str) -> Result<Lab, String> {
    let lab: Lab = toml::from_str(text).map_err(|e| e.to_string())?;
    if lab.steps.is_empty() {
        return Err(format!("lab {}: no steps", lab.id));
    }
    for s in &lab.steps {
        match (s.tolerance, s.side_of) {
            (Some(t), None) if t > 0.0 && t < 1.0 => {}
            (Some(_), None) => {
                return Err(format!("{}: tolerance must be between 0 and 1", s.title))
            }
            (None, Some(p)) if p.is_finite() => {}
            _ => {
                return Err(format!(
                    "{}: a step has either a tolerance or a side_of, not both",
                    s.title
                ))
            }
        }
    }
    Ok(lab)
}

fn metric(e: &Evaluation, name: &str) -> Result<f64, String> {
    let b = &e.breakdown_us;
    Ok(match name {
        "tokens_per_s_per_user" => e.tokens_per_s_per_user,
        "output_tokens_per_s_per_gpu" => e.output_tokens_per_s_per_gpu,
        "total_tokens_per_s_per_gpu" => e.total_tokens_per_s_per_gpu,
        "training_tokens_per_s_per_gpu" => e.tokens_per_s_per_gpu,
        "users_per_rack" => e.users_per_rack,
        "mfu" => e.mfu,
        "mbu" => e.mbu,
        "step_time_us" => e.step_time_us,
        "step_time_ms" => e.step_time_us / 1e3,
        "batch_per_gpu" => e.batch_per_gpu,
        "kernels_per_step" => e.kernels_per_step,
        "accepted_tokens_per_step" => e.accepted_tokens_per_step,
        "ttft_ms" => e.ttft_ms,
        "copy_concat_us_per_layer" => e.copy_concat_us_per_layer,
        "compute_us" => b.compute_us,
        "memory_us" => b.memory_us,
        "communication_us" => b.communication_us,
        "launch_us" => b.launch_us,
        "memory_share" => b.memory_us / b.total_us(),
        "communication_share" => b.communication_us / b.total_us(),
        "launch_share" => b.launch_us / b.total_us(),
        other => return Err(format!("unknown rack metric {other}")),
    })
}

/// The committed scenario `id` with `change` applied.
pub fn changed_scenario(id: &str, change: &RackChange) -> Result<ScenarioFile, String> {
    let (_, text) = SCENARIOS
        .iter()
        .find(|(s, _)| *s == id)
        .ok_or_else(|| format!("unknown scenario {id}"))?;
    let mut table: toml::Table = toml::from_str(text).map_err(|e| format!("{id}: {e}"))?;
    for (key, value) in &change.set {
        match (table.get_mut(key), value) {
            (Some(toml::Value::Table(old)), toml::Value::Table(new)) => {
                old.extend(new.clone());
            }
            _ => {
                table.insert(key.clone(), value.clone());
            }
        }
    }
    for key in &change.unset {
        table.remove(key);
    }
    let text = toml::to_string(&table).map_err(|e| e.to_string())?;
    let mut f = ScenarioFile::parse(&format!("{id}.toml"), &text).map_err(|e| e.to_string())?;
    let named = |r: &String| {
        Optimization::EVERY
            .into_iter()
            .find(|o| o.name() == r)
            .ok_or_else(|| format!("unknown optimization {r}"))
    };
    for r in &change.remove {
        let o = named(r)?;
        f.optimizations.retain(|x| *x != o);
    }
    for a in &change.add {
        let o = named(a)?;
        if !f.optimizations.contains(&o) {
            f.optimizations.push(o);
        }
    }
    match (&change.load, change.at) {
        (None, None) => {}
        (Some(load), Some(at)) => {
            let kind = LoadKind::ALL
                .into_iter()
                .find(|k| k.slug() == load)
                .ok_or_else(|| format!("unknown load {load}"))?;
            rack_state::set_load(&mut f, kind, at);
        }
        _ => return Err("a load needs both `load` and `at`".into()),
    }
    Ok(f)
}

fn evaluate(id: &str, change: &RackChange, name: &str) -> Result<f64, String> {
    let s = Scenario::resolve(changed_scenario(id, change)?).map_err(|e| e.to_string())?;
    let e = rack::eval(&s, &Params::fitted()).map_err(|e| e.to_string())?;
    metric(&e, name)
}

/// Evaluates a rack run.
pub fn run_rack(run: &Run) -> Result<f64, String> {
    let Run::Rack {
        scenario,
        metric,
        change,
        baseline,
    } = run
    else {
        return Err("not a rack run".into());
    };
    let value = evaluate(scenario, change, metric)?;
    let Some(b) = baseline else {
        return Ok(value);
    };
    let base = evaluate(scenario, b, metric)?;
    let ratio = value / base;
    if ratio.is_finite() {
        Ok(ratio)
    } else {
        Err(format!(
            "{metric}: {value} against a baseline of {base} is no ratio"
        ))
    }
}

/// The out-of-sample error band a rack run's figure carries: that of the validation rows in the
/// regime of its (changed) scenario.
pub fn error_band(run: &Run) -> Result<ErrorBand, String> {
    let Run::Rack {
        scenario, change, ..
    } = run
    else {
        return Err("not a rack run".into());
    };
    let s = Scenario::resolve(changed_scenario(scenario, change)?).map_err(|e| e.to_string())?;
    let e = rack::eval(&s, &Params::fitted()).map_err(|e| e.to_string())?;
    validation::band_of(&e)
}

/// The label of a model figure: estimated, and how far off the model has been on measurements
/// like it that it was not fitted to.
pub fn band_label(b: &ErrorBand) -> String {
    format!("model: an estimate, {}", b.describe())
}

/// The version of the labs' URL state (`#/labs?v=1&lab=ID&view=teacher`).
pub const STATE_VERSION: u32 = 1;

/// Every setting `parse_state` reads (docs/EMBED.md has a row for each).
pub const STATE_KEYS: [&str; 3] = ["v", "lab", "view"];

/// Who the labs page is for: a student working through a lab, a teacher reading every answer
/// and explanation, or the printable summary of a student's progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LabsView {
    #[default]
    Student,
    Teacher,
    Summary,
}

impl LabsView {
    pub const ALL: [LabsView; 3] = [LabsView::Student, LabsView::Teacher, LabsView::Summary];

    pub fn slug(self) -> &'static str {
        match self {
            LabsView::Student => "student",
            LabsView::Teacher => "teacher",
            LabsView::Summary => "summary",
        }
    }
}

/// What a labs address opens: a shipped lab (an index into `labs`) in a view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LabsState {
    pub lab: usize,
    pub view: LabsView,
}

/// The state an address opens, and the settings it could not use, each with what replaced it.
/// Never fails: anything unreadable falls back to the first lab in the student view.
pub fn parse_state(query: &str, labs: &[Lab]) -> (LabsState, Vec<String>) {
    let mut state = LabsState::default();
    let mut warnings = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "v" if value == STATE_VERSION.to_string() => {}
            "v" => warnings.push(format!(
                "version {}: this page reads version {STATE_VERSION}",
                crate::state::shorten(value)
            )),
            "lab" => match labs.iter().position(|l| l.id == value) {
                Some(i) => state.lab = i,
                None => {
                    let ids: Vec<&str> = labs.iter().map(|l| l.id.as_str()).collect();
                    warnings.push(format!(
                        "lab {}: there is no such lab (labs: {}); showing the first",
                        crate::state::shorten(value),
                        ids.join(", ")
                    ));
                }
            },
            "view" => match LabsView::ALL.into_iter().find(|v| v.slug() == value) {
                Some(v) => state.view = v,
                None => warnings.push(format!(
                    "view {}: the views are student, teacher and summary; showing student",
                    crate::state::shorten(value)
                )),
            },
            other => warnings.push(format!(
                "{}: not a setting of this page",
                crate::state::shorten(other)
            )),
        }
    }
    (state, warnings)
}

pub fn encode_state(lab: &Lab, view: LabsView) -> String {
    match view {
        LabsView::Student => format!("v={STATE_VERSION}&lab={}", lab.id),
        v => format!("v={STATE_VERSION}&lab={}&view={}", lab.id, v.slug()),
    }
}

/// What counts as a right prediction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// Within this fraction of the computed value.
    Within(f64),
    /// On the same side of this number as the computed value: "above or below 1?".
    Side(f64),
}

/// How a prediction compares with the computed value.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub prediction: f64,
    pub value: f64,
    /// (prediction − value) / value.
    pub off_by: f64,
    pub rule: Rule,
}

impl Verdict {
    /// Whether the prediction is right by its rule (never for a NaN prediction).
    pub fn close(&self) -> bool {
        match self.rule {
            Rule::Within(tolerance) => self.off_by.abs() <= tolerance,
            Rule::Side(pivot) => {
                (self.prediction > pivot && self.value > pivot)
                    || (self.prediction < pivot && self.value < pivot)
            }
        }
    }

    /// What the page says of the prediction: how far off it is, and whether that is close.
    /// Half a percent or less is spot on: a student who counted the kernels exactly should read
    /// that, not only "within 20%".
    pub fn describe(&self) -> String {
        let percent = 100.0 * self.off_by;
        match self.rule {
            _ if percent.abs() < 0.5 => "Your prediction is spot on.".to_owned(),
            Rule::Within(tolerance) if self.close() => format!(
                "Your prediction is off by {percent:+.0}%, within {:.0}%: close.",
                100.0 * tolerance
            ),
            Rule::Within(_) => format!("Your prediction is off by {percent:+.0}%."),
            Rule::Side(pivot) => {
                let side = if self.value < pivot { "below" } else { "above" };
                let verdict = if self.close() { "right" } else { "wrong" };
                format!(
                    "The value is {side} {pivot}: your prediction is on the {verdict} side \
                     (off by {percent:+.0}%)."
                )
            }
        }
    }
}

pub fn check(prediction: f64, value: f64, rule: Rule) -> Verdict {
    let off_by = if value != 0.0 {
        (prediction - value) / value.abs()
    } else {
        prediction
    };
    Verdict {
        prediction,
        value,
        off_by,
        rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moescope_engine::rack::scenario::SpecMethod;

    fn shipped() -> Vec<Lab> {
        SHIPPED.iter().map(|t| parse(t).unwrap()).collect()
    }

    fn lab(id: &str) -> Lab {
        shipped()
            .into_iter()
            .find(|l| l.id == id)
            .expect("a shipped lab")
    }

    /// What a step computes without the visitor's GPU (rack and recorded training runs).
    fn computed(run: &Run) -> Option<f64> {
        match run {
            Run::Rack { .. } => Some(run_rack(run).expect("a shipped rack run evaluates")),
            Run::Training { metric } => Some(crate::training::results().unwrap().get(*metric)),
            Run::Sandbox { .. } => None,
        }
    }

    #[test]
    fn every_shipped_lab_parses_with_unique_ids_goals_and_a_time() {
        let labs = shipped();
        assert_eq!(labs.len(), SHIPPED.len());
        let mut ids: Vec<&str> = labs.iter().map(|l| l.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), labs.len(), "lab ids are unique");
        for l in &labs {
            assert!(!l.goals.is_empty() && l.minutes > 0, "{}", l.id);
        }
    }

    /// docs/LABS.md's table gives each lab's title, time and steps as its file does, in menu order.
    #[test]
    fn the_teachers_guide_lists_every_lab_as_it_is() {
        let doc = include_str!("../../docs/LABS.md");
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `")).collect();
        let labs = shipped();
        assert_eq!(rows.len(), labs.len());
        for (row, l) in rows.iter().zip(&labs) {
            let want = format!(
                "| `{}` | {} | {} min | {} |",
                l.id,
                l.title,
                l.minutes,
                l.steps.len()
            );
            assert!(row.starts_with(&want), "{row}\nwant {want}");
            for g in &l.goals {
                assert!(row.contains(g.as_str()), "{}: goal {g} missing", l.id);
            }
        }
    }

    #[test]
    fn every_lab_file_under_labs_ships() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../labs");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        files.sort();
        let mut shipped: Vec<String> = SHIPPED.iter().map(|s| s.to_string()).collect();
        shipped.sort();
        assert_eq!(
            files, shipped,
            "labs/*.toml and SHIPPED list the same files"
        );
    }

    #[test]
    fn scenarios_lists_every_committed_scenario() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");
        let mut stems: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        stems.sort();
        let mut listed: Vec<String> = SCENARIOS.iter().map(|(s, _)| s.to_string()).collect();
        listed.sort();
        assert_eq!(stems, listed);
    }

    /// Every computable step runs, and its check accepts the computed value and rejects a
    /// wrong one: twice the tolerance away on either side, or the other side of the pivot.
    #[test]
    fn every_check_accepts_the_computed_value_and_rejects_a_wrong_one() {
        for l in shipped() {
            for s in &l.steps {
                let Some(v) = computed(&s.run) else { continue };
                assert!(v.is_finite() && v > 0.0, "{} / {}: {v}", l.id, s.title);
                let wrong = match s.rule() {
                    Rule::Within(t) => vec![v * (1.0 + 2.0 * t), v * (1.0 - 2.0 * t)],
                    Rule::Side(pivot) => vec![2.0 * pivot - v, pivot],
                };
                assert!(s.check(v, v).close(), "{}", s.title);
                for w in wrong {
                    assert!(!s.check(w, v).close(), "{}: {w} accepted for {v}", s.title);
                }
            }
        }
    }

    /// The direction questions have the answer their explanation gives.
    #[test]
    fn direction_steps_land_on_the_side_their_explanation_says() {
        let mut seen = 0;
        for l in shipped() {
            for s in &l.steps {
                let Rule::Side(pivot) = s.rule() else {
                    continue;
                };
                let v = computed(&s.run).expect("a direction step is computable");
                let said = if v < pivot { "Below" } else { "Above" };
                assert!(
                    s.explain.starts_with(said),
                    "{}: {v} is not {said}",
                    s.title
                );
                seen += 1;
            }
        }
        assert!(seen >= 4, "{seen} direction steps");
    }

    #[test]
    fn a_change_sets_merges_and_unsets_scenario_fields() {
        let change = RackChange {
            set: toml::from_str("ep = 8\nspeculative = { draft_tokens = 5 }").unwrap(),
            remove: vec!["pdl".into()],
            add: vec!["two_batch_overlap".into()],
            ..RackChange::default()
        };
        let f = changed_scenario("trtllm-b200-deepseek-r1-min-latency", &change).unwrap();
        assert_eq!(f.ep, Some(8));
        let spec = f.speculative.expect("merged, not replaced");
        assert_eq!((spec.method, spec.draft_tokens), (SpecMethod::Mtp, 5));
        assert!(!f.optimizations.contains(&Optimization::Pdl));
        assert!(f.optimizations.contains(&Optimization::TwoBatchOverlap));
        let unset = RackChange {
            unset: vec!["speculative".into()],
            ..RackChange::default()
        };
        let f = changed_scenario("trtllm-b200-deepseek-r1-min-latency", &unset).unwrap();
        assert!(f.speculative.is_none());
        for (bad, says) in [
            ("nope", "unknown scenario nope"),
            (
                "seed-nvl72-deepseek-r1-decode",
                "unknown optimization warp_drive",
            ),
        ] {
            let change = RackChange {
                add: vec!["warp_drive".into()],
                ..RackChange::default()
            };
            assert_eq!(changed_scenario(bad, &change).unwrap_err(), says);
        }
        let half_load = RackChange {
            load: Some("batch".into()),
            ..RackChange::default()
        };
        assert!(changed_scenario("seed-nvl72-deepseek-r1-decode", &half_load).is_err());
    }

    #[test]
    fn every_rack_figure_carries_the_band_of_its_regime() {
        use moescope_engine::rack::validation::Regime;
        for lab in shipped() {
            for step in &lab.steps {
                if !matches!(step.run, Run::Rack { .. }) {
                    continue;
                }
                let b = error_band(&step.run).unwrap_or_else(|e| panic!("{}: {e}", step.title));
                assert!(b.median > 0.0 && b.median <= b.max, "{}: {b:?}", step.title);
                let label = band_label(&b);
                assert!(label.starts_with("model: an estimate"), "{label}");
                assert!(label.contains(b.regime.label()), "{label}");
                assert!(label.contains(&format!("{} public", b.rows)), "{label}");
                if b.regime == Regime::Training {
                    assert!(
                        b.pooled,
                        "one training row is too few for a band of its own"
                    );
                }
            }
        }
    }

    #[test]
    fn the_fp8_lab_reads_the_recorded_runs() {
        let r = crate::training::results().unwrap();
        for s in &lab("fp8-training").steps {
            let Run::Training { metric } = s.run else {
                panic!("{}: not a training step", s.title);
            };
            assert!(
                r.get(metric).is_finite() && r.get(metric) > 0.0,
                "{}",
                s.title
            );
        }
    }

    #[test]
    fn the_labs_address_opens_a_lab_and_reports_what_it_cannot_use() {
        let labs = shipped();
        for (i, lab) in labs.iter().enumerate() {
            for view in LabsView::ALL {
                let state = LabsState { lab: i, view };
                assert_eq!(
                    parse_state(&encode_state(lab, view), &labs),
                    (state, vec![])
                );
            }
        }
        let (s, w) = parse_state("v=1&lab=nope&color=red&v=9&view=admin", &labs);
        assert_eq!(s, LabsState::default());
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("no such lab") && w[0].contains("fp8-training"));
        assert!(w[3].contains("view admin"), "{w:?}");
        assert_eq!(parse_state("", &labs), (LabsState::default(), vec![]));
    }

    proptest::proptest! {
        #[test]
        fn any_labs_address_parses_without_panic(query in ".{0,200}") {
            let labs = shipped();
            let (s, _) = parse_state(&query, &labs);
            proptest::prop_assert!(s.lab < labs.len());
        }
    }

    #[test]
    fn predictions_are_checked_against_the_tolerance() {
        let within = Rule::Within(0.15);
        assert!(check(80.0, 77.0, within).close());
        assert!(!check(120.0, 77.0, within).close());
        assert!(!check(f64::NAN, 77.0, within).close());
        assert!((check(88.0, 80.0, within).off_by - 0.1).abs() < 1e-12);
        let side = Rule::Side(1.0);
        assert!(check(0.9, 0.98, side).close());
        assert!(!check(1.02, 0.98, side).close());
        assert!(
            !check(1.0, 0.98, side).close(),
            "the pivot itself is no side"
        );
        assert!(!check(f64::NAN, 0.98, side).close());
    }

    #[test]
    fn verdicts_say_how_far_off_the_prediction_is() {
        assert_eq!(
            check(140.0, 140.0, Rule::Within(0.2)).describe(),
            "Your prediction is spot on."
        );
        assert_eq!(
            check(2.0, 1.74, Rule::Within(0.3)).describe(),
            "Your prediction is off by +15%, within 30%: close."
        );
        assert_eq!(
            check(60.0, 77.0, Rule::Within(0.15)).describe(),
            "Your prediction is off by -22%."
        );
        assert_eq!(
            check(0.9, 0.98, Rule::Side(1.0)).describe(),
            "The value is below 1: your prediction is on the right side (off by -8%)."
        );
        assert_eq!(
            check(1.1, 0.98, Rule::Side(1.0)).describe(),
            "The value is below 1: your prediction is on the wrong side (off by +12%)."
        );
    }

    /// Prints every computable step's value (`cargo test -p moescope-app print_lab_values --
    /// --ignored --nocapture`): what a lab author checks the questions against.
    #[test]
    #[ignore]
    fn print_lab_values() {
        for l in shipped() {
            for s in &l.steps {
                if !matches!(s.run, Run::Sandbox { .. }) {
                    let v = match &s.run {
                        Run::Rack { .. } => {
                            run_rack(&s.run).map_or_else(|e| e, |v| format!("{v:.4}"))
                        }
                        _ => format!("{:.4}", computed(&s.run).unwrap()),
                    };
                    println!("{:24} {:48} {v} {}", l.id, s.title, s.unit);
                }
            }
        }
    }

    #[test]
    fn bad_lab_files_give_a_message() {
        assert!(parse("id = 3").is_err());
        let no_steps =
            "id = \"x\"\ntitle = \"t\"\nintro = \"i\"\nminutes = 5\ngoals = []\nsteps = []\n";
        assert!(parse(no_steps).unwrap_err().contains("no steps"));
        let bad_kind = SHIPPED[0].replace("kind = \"rack\"", "kind = \"quantum\"");
        assert!(parse(&bad_kind).is_err());
    }
}
