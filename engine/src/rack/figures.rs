//! Public figures and how the model reads them: a committed scenario file, an edit to it (an
//! optimization removed, another load), one output of `eval` and the measured value on that
//! output's own definition. `calibrate` fits to some of them, `validation` only reports the rest.

use super::evaluation::Evaluation;
use super::params::Params;
use super::scenario::{Optimization, Scenario, ScenarioFile};
use super::serve::eval;
use super::RackError;

/// A change to a committed scenario file before it is checked (an optimization removed, a load).
pub type Edit = Box<dyn Fn(&mut ScenarioFile)>;

/// One public figure and how the model reads it.
pub struct Point {
    pub id: &'static str,
    pub source: &'static str,
    pub seed: bool,
    pub scenario: (&'static str, &'static str),
    pub edit: Edit,
    pub metric: &'static str,
    pub read: fn(&Evaluation) -> f64,
    /// When set, the point is a gain: read(edit) / read(this edit) - 1.
    pub gain_over: Option<Edit>,
    pub measured: f64,
}

impl Point {
    pub fn bound(&self) -> f64 {
        if self.seed {
            0.05
        } else {
            0.15
        }
    }

    fn scenario_with(&self, edit: &Edit) -> Result<Scenario, RackError> {
        let (path, text) = self.scenario;
        let mut f = ScenarioFile::parse(path, text)?;
        edit(&mut f);
        Scenario::resolve(f)
    }

    pub fn scenario(&self) -> Result<Scenario, RackError> {
        self.scenario_with(&self.edit)
    }

    pub fn evaluation(&self, p: &Params) -> Result<Evaluation, RackError> {
        eval(&self.scenario()?, p)
    }

    pub fn predict(&self, p: &Params) -> Result<f64, RackError> {
        let value = (self.read)(&self.evaluation(p)?);
        match &self.gain_over {
            None => Ok(value),
            Some(edit) => Ok(value / (self.read)(&eval(&self.scenario_with(edit)?, p)?) - 1.0),
        }
    }
}

macro_rules! scenario {
    ($file:literal) => {
        ($file, include_str!(concat!("../../../scenarios/", $file)))
    };
}
pub(crate) use scenario;

pub(crate) fn keep(_: &mut ScenarioFile) {}

/// The file's optimizations (`all` spelled out) without `drop`.
pub(crate) fn without(f: &mut ScenarioFile, drop: &[Optimization]) {
    let mut kept: Vec<Optimization> = Vec::new();
    for &o in &f.optimizations {
        let each = if o == Optimization::All {
            Optimization::EVERY.to_vec()
        } else {
            vec![o]
        };
        for o in each {
            if !drop.contains(&o) && !kept.contains(&o) {
                kept.push(o);
            }
        }
    }
    f.optimizations = kept;
}

/// Replaces the file's load by one target speed per user.
pub(crate) fn at_speed(f: &mut ScenarioFile, tokens_per_s_per_user: f64) {
    f.batch_per_gpu = None;
    f.concurrency = None;
    f.target_tokens_per_s_per_user = Some(tokens_per_s_per_user);
}

pub(crate) fn user(e: &Evaluation) -> f64 {
    e.tokens_per_s_per_user
}

pub(crate) fn out_per_gpu(e: &Evaluation) -> f64 {
    e.output_tokens_per_s_per_gpu
}

/// Four significant figures, without exponents (a table of tokens/s reads 10,210, not 1.021e4).
pub(crate) fn figure(x: f64) -> String {
    let digits = if x == 0.0 {
        0
    } else {
        (3 - x.abs().log10().floor() as i32).max(0) as usize
    };
    let text = format!("{x:.digits$}");
    match text.split_once('.') {
        None if x.abs() >= 1e4 => {
            let (sign, int) = text.split_at(usize::from(text.starts_with('-')));
            let mut grouped = String::new();
            for (i, c) in int.chars().enumerate() {
                if i > 0 && (int.len() - i) % 3 == 0 {
                    grouped.push(',');
                }
                grouped.push(c);
            }
            format!("{sign}{grouped}")
        }
        _ => text,
    }
}
