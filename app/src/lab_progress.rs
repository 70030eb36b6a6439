//! A student's progress through the labs: each answered step's prediction and the value it was
//! checked against. Pure (serde only): the page keeps it in localStorage, exports it as a small
//! JSON file a student hands in, and imports such a file; everything read back goes through
//! `import`, which never panics and says what it dropped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::labs::Lab;

/// The progress file's format version; `import` reads only this one.
pub const VERSION: u32 = 1;

/// The largest progress file `import` reads: twelve labs of a few steps are a few kilobytes.
pub const MAX_BYTES: usize = 256 * 1024;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    pub version: u32,
    /// Who handed it in, as the student typed it (may be empty).
    #[serde(default)]
    pub student: String,
    /// Answers by lab id, then by step number (from 1, as the page shows them).
    pub labs: BTreeMap<String, BTreeMap<usize, Answer>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub prediction: f64,
    /// What the run computed or measured when the student ran it.
    pub value: f64,
    /// Whether the step's check accepted the prediction.
    pub close: bool,
}

impl Progress {
    pub fn new() -> Self {
        Progress {
            version: VERSION,
            ..Progress::default()
        }
    }

    pub fn answer(&self, lab: &str, step: usize) -> Option<Answer> {
        self.labs.get(lab)?.get(&(step + 1)).copied()
    }

    /// Records the answer to step `step` (0-based) of `lab`.
    pub fn record(&mut self, lab: &str, step: usize, answer: Answer) {
        self.labs
            .entry(lab.to_owned())
            .or_default()
            .insert(step + 1, answer);
    }

    /// How many of `lab`'s steps have an answer, and how many of those were close.
    pub fn tally(&self, lab: &Lab) -> (usize, usize) {
        let answers = self.labs.get(&lab.id);
        let answered = answers.map_or(0, |a| a.len());
        let close = answers.map_or(0, |a| a.values().filter(|a| a.close).count());
        (answered, close)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Reads a progress file against the shipped labs. Unreadable files are an error that says why;
/// answers to labs or steps that do not exist, or with numbers that are not finite, are dropped,
/// each with a warning.
pub fn import(text: &str, labs: &[Lab]) -> Result<(Progress, Vec<String>), String> {
    if text.len() > MAX_BYTES {
        return Err(format!(
            "the progress file is {} bytes; a progress file is at most {MAX_BYTES}",
            text.len()
        ));
    }
    let read: Progress =
        serde_json::from_str(text).map_err(|e| format!("not a MoEscope progress file: {e}"))?;
    if read.version != VERSION {
        return Err(format!(
            "progress file version {}: this page reads version {VERSION}",
            read.version
        ));
    }
    let mut warnings = Vec::new();
    let mut kept = Progress {
        student: read.student.chars().take(200).collect(),
        ..Progress::new()
    };
    for (id, answers) in read.labs {
        let Some(lab) = labs.iter().find(|l| l.id == id) else {
            warnings.push(format!(
                "lab {}: there is no such lab; its answers were left out",
                crate::state::shorten(&id)
            ));
            continue;
        };
        for (step, a) in answers {
            if step == 0 || step > lab.steps.len() {
                warnings.push(format!(
                    "lab {id}, step {step}: the lab has steps 1 to {}; left out",
                    lab.steps.len()
                ));
            } else if !(a.prediction.is_finite() && a.value.is_finite()) {
                warnings.push(format!(
                    "lab {id}, step {step}: not a finite number; left out"
                ));
            } else {
                // The check is redone: a hand-edited file cannot mark a wrong answer right.
                let close = lab.steps[step - 1].check(a.prediction, a.value).close();
                kept.record(&id, step - 1, Answer { close, ..a });
            }
        }
    }
    Ok((kept, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labs::{parse, SHIPPED};

    fn labs() -> Vec<Lab> {
        SHIPPED.iter().map(|t| parse(t).unwrap()).collect()
    }

    fn answered(labs: &[Lab]) -> Progress {
        let mut p = Progress::new();
        p.student = "Ada".into();
        let story = &labs[0];
        let value = 77.0;
        for (i, prediction) in [(0, 80.0), (2, 120.0)] {
            let close = story.steps[i].check(prediction, value).close();
            p.record(
                &story.id,
                i,
                Answer {
                    prediction,
                    value,
                    close,
                },
            );
        }
        p
    }

    #[test]
    fn export_then_import_restores_the_progress() {
        let labs = labs();
        let p = answered(&labs);
        assert_eq!(p.tally(&labs[0]), (2, 1));
        let (back, warnings) = import(&p.to_json(), &labs).unwrap();
        assert_eq!(back, p);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(back.answer(&labs[0].id, 2).unwrap().prediction, 120.0);
        assert_eq!(back.answer(&labs[0].id, 1), None);
    }

    #[test]
    fn import_drops_what_does_not_exist_and_rechecks_every_answer() {
        let labs = labs();
        let story = &labs[0].id;
        let text = format!(
            r#"{{"version": 1, "labs": {{
                "{story}": {{
                    "1": {{"prediction": 500, "value": 77, "close": true}},
                    "99": {{"prediction": 1, "value": 1, "close": true}}
                }},
                "alchemy": {{"1": {{"prediction": 1, "value": 1, "close": true}}}}
            }}}}"#
        );
        let (p, warnings) = import(&text, &labs).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("alchemy"));
        assert!(warnings[1].contains("step 99") && warnings[1].contains("steps 1 to 4"));
        let a = p.answer(story, 0).unwrap();
        assert!(!a.close, "a hand-edited `close` is not believed");
    }

    #[test]
    fn unreadable_files_say_why() {
        let labs = labs();
        for (text, says) in [
            ("", "not a MoEscope progress file"),
            ("{\"version\": 2, \"labs\": {}}", "version 2"),
            (
                "{\"version\": 1, \"labs\": {}, \"grade\": \"A\"}",
                "unknown field",
            ),
            ("[1, 2, 3]", "not a MoEscope progress file"),
        ] {
            let e = import(text, &labs).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        let huge = " ".repeat(MAX_BYTES + 1);
        assert!(import(&huge, &labs).unwrap_err().contains("at most"));
    }

    proptest::proptest! {
        #[test]
        fn any_text_imports_without_panic(text in ".{0,400}") {
            let _ = import(&text, &labs());
        }
    }
}
