//! Labs as data: a lab is a TOML file under `labs/` (steps with a question, a prediction to enter,
//! a run and an explanation), parsed with serde. The rack runs are evaluated here, natively
//! testable; the sandbox runs need the visitor's GPU and live in the page. A prediction is checked
//! against the computed value with the step's relative tolerance.

use moescope_engine::rack::scenario::Optimization;
use moescope_engine::rack::{self, Evaluation, Params, Scenario};
use serde::Deserialize;

use crate::rack_state::{self, LoadKind};
pub use crate::training::TrainingMetric;

/// The labs that ship, in menu order.
pub const SHIPPED: [&str; 3] = [
    include_str!("../../labs/nvl72-story.toml"),
    include_str!("../../labs/kernel-fusion.toml"),
    include_str!("../../labs/fp8-training.toml"),
];

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Lab {
    pub id: String,
    pub title: String,
    pub intro: String,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub title: String,
    pub text: String,
    pub unit: String,
    /// A prediction within this fraction of the computed value counts as close.
    pub tolerance: f64,
    pub explain: String,
    pub run: Run,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Run {
    /// A rack-model evaluation: a preset, optimizations removed, a load, one output.
    Rack {
        preset: String,
        #[serde(default)]
        remove: Vec<String>,
        load: String,
        at: f64,
        metric: String,
    },
    /// The sandbox's decode step on the visitor's GPU, eager and fused.
    Sandbox { metric: SandboxMetric },
    /// The recorded BF16 and FP8 training runs (`crate::training`).
    Training { metric: TrainingMetric },
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMetric {
    EagerKernels,
    FusedKernels,
    Speedup,
}

/// Parses a lab file; the message names what is wrong.
pub fn parse(text: &str) -> Result<Lab, String> {
    let lab: Lab = toml::from_str(text).map_err(|e| e.to_string())?;
    if lab.steps.is_empty() {
        return Err(format!("lab {}: no steps", lab.id));
    }
    for s in &lab.steps {
        if !(s.tolerance > 0.0 && s.tolerance < 1.0) {
            return Err(format!("{}: tolerance must be between 0 and 1", s.title));
        }
    }
    Ok(lab)
}

fn metric(e: &Evaluation, name: &str) -> Result<f64, String> {
    Ok(match name {
        "tokens_per_s_per_user" => e.tokens_per_s_per_user,
        "output_tokens_per_s_per_gpu" => e.output_tokens_per_s_per_gpu,
        "users_per_rack" => e.users_per_rack,
        "mfu" => e.mfu,
        "step_time_us" => e.step_time_us,
        other => return Err(format!("unknown rack metric {other}")),
    })
}

/// Evaluates a rack run.
pub fn run_rack(run: &Run) -> Result<f64, String> {
    let Run::Rack {
        preset,
        remove,
        load,
        at,
        metric: name,
    } = run
    else {
        return Err("not a rack run".into());
    };
    let mut f = rack_state::preset(preset).ok_or_else(|| format!("unknown preset {preset}"))?;
    for r in remove {
        let o = Optimization::EVERY
            .into_iter()
            .find(|o| o.name() == r)
            .ok_or_else(|| format!("unknown optimization {r}"))?;
        f.optimizations.retain(|x| *x != o);
    }
    let kind = LoadKind::ALL
        .into_iter()
        .find(|k| k.slug() == load)
        .ok_or_else(|| format!("unknown load {load}"))?;
    rack_state::set_load(&mut f, kind, *at);
    let s = Scenario::resolve(f).map_err(|e| e.to_string())?;
    let e = rack::eval(&s, &Params::fitted()).map_err(|e| e.to_string())?;
    metric(&e, name)
}

/// The version of the labs' URL state (`#/labs?v=1&lab=ID`).
pub const STATE_VERSION: u32 = 1;

/// Which shipped lab an address opens (an index into `labs`), and the settings it could not
/// use, each with what replaced it. Never fails: anything unreadable falls back to the first lab.
pub fn parse_state(query: &str, labs: &[Lab]) -> (usize, Vec<String>) {
    let mut index = 0;
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
                Some(i) => index = i,
                None => {
                    let ids: Vec<&str> = labs.iter().map(|l| l.id.as_str()).collect();
                    warnings.push(format!(
                        "lab {}: there is no such lab (labs: {}); showing the first",
                        crate::state::shorten(value),
                        ids.join(", ")
                    ));
                }
            },
            other => warnings.push(format!(
                "{}: not a setting of this page",
                crate::state::shorten(other)
            )),
        }
    }
    (index, warnings)
}

pub fn encode_state(lab: &Lab) -> String {
    format!("v={STATE_VERSION}&lab={}", lab.id)
}

/// How a prediction compares with the computed value.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// (prediction − value) / value.
    pub off_by: f64,
    /// The fraction `check` counted as close.
    pub tolerance: f64,
}

impl Verdict {
    /// Whether the prediction is within the tolerance (never for a NaN prediction).
    pub fn close(&self) -> bool {
        self.off_by.abs() <= self.tolerance
    }

    /// What the page says of the prediction: how far off it is, and whether that is close.
    /// Half a percent or less is spot on: a student who counted the kernels exactly should read
    /// that, not only "within 20%".
    pub fn describe(&self) -> String {
        let percent = 100.0 * self.off_by;
        if percent.abs() < 0.5 {
            "Your prediction is spot on.".to_owned()
        } else if self.close() {
            format!(
                "Your prediction is off by {percent:+.0}%, within {:.0}%: close.",
                100.0 * self.tolerance
            )
        } else {
            format!("Your prediction is off by {percent:+.0}%.")
        }
    }
}

pub fn check(prediction: f64, value: f64, tolerance: f64) -> Verdict {
    let off_by = if value != 0.0 {
        (prediction - value) / value.abs()
    } else {
        prediction
    };
    Verdict { off_by, tolerance }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_lab_parses_and_its_rack_steps_run() {
        for text in SHIPPED {
            let lab = parse(text).expect("a shipped lab parses");
            for s in &lab.steps {
                if matches!(s.run, Run::Rack { .. }) {
                    let v = run_rack(&s.run).unwrap_or_else(|e| panic!("{}: {e}", s.title));
                    assert!(v.is_finite() && v > 0.0, "{}: {v}", s.title);
                }
            }
        }
    }

    #[test]
    fn the_nvl72_story_reproduces_the_seed_figures() {
        let lab = parse(SHIPPED[0]).expect("parses");
        let values: Vec<f64> = lab
            .steps
            .iter()
            .map(|s| run_rack(&s.run).expect("runs"))
            .collect();
        // Measured: 77 → 83 tokens/s per user, 890 → 958 users per rack (within the seed bound).
        for (v, want) in values.iter().zip([77.0, 890.0, 83.0, 958.0]) {
            assert!((v / want - 1.0).abs() < 0.05, "{v} vs {want}");
        }
    }

    #[test]
    fn the_fp8_lab_reads_the_recorded_runs() {
        let lab = parse(SHIPPED[2]).unwrap();
        let r = crate::training::results().unwrap();
        for s in &lab.steps {
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

    fn shipped() -> Vec<Lab> {
        SHIPPED.iter().map(|t| parse(t).unwrap()).collect()
    }

    #[test]
    fn the_labs_address_opens_a_lab_and_reports_what_it_cannot_use() {
        let labs = shipped();
        for (i, lab) in labs.iter().enumerate() {
            assert_eq!(parse_state(&encode_state(lab), &labs), (i, vec![]));
        }
        let (i, w) = parse_state("v=1&lab=nope&color=red&v=9", &labs);
        assert_eq!(i, 0);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("no such lab") && w[0].contains("fp8-training"));
        assert_eq!(parse_state("", &labs), (0, vec![]));
    }

    proptest::proptest! {
        #[test]
        fn any_labs_address_parses_without_panic(query in ".{0,200}") {
            let labs = shipped();
            let (i, _) = parse_state(&query, &labs);
            proptest::prop_assert!(i < labs.len());
        }
    }

    #[test]
    fn predictions_are_checked_against_the_tolerance() {
        assert!(check(80.0, 77.0, 0.15).close());
        assert!(!check(120.0, 77.0, 0.15).close());
        assert!((check(88.0, 80.0, 0.15).off_by - 0.1).abs() < 1e-12);
    }

    #[test]
    fn verdicts_say_how_far_off_the_prediction_is() {
        assert_eq!(
            check(140.0, 140.0, 0.2).describe(),
            "Your prediction is spot on."
        );
        assert_eq!(
            check(2.0, 1.74, 0.3).describe(),
            "Your prediction is off by +15%, within 30%: close."
        );
        assert_eq!(
            check(60.0, 77.0, 0.15).describe(),
            "Your prediction is off by -22%."
        );
    }

    #[test]
    fn bad_lab_files_give_a_message() {
        assert!(parse("id = 3").is_err());
        let no_steps = "id = \"x\"\ntitle = \"t\"\nintro = \"i\"\nsteps = []\n";
        assert!(parse(no_steps).unwrap_err().contains("no steps"));
        let bad_kind = SHIPPED[0].replace("kind = \"rack\"", "kind = \"quantum\"");
        assert!(parse(&bad_kind).is_err());
    }
}
