//! The rack model: a calibrated analytic model of LLM serving and training on GB200 NVL72,
//! DGX B200 and HGX H100/H200/H800. It stands alone (nothing from `gpu` or `kernels`) and is
//! cheap enough to evaluate on every slider move in the browser.
//!
//! - `hardware`, `models`, `precision`: the catalogues (datasheet figures and model shapes).
//! - `mechanisms`: one equation per mechanism (roofline, collectives, launch gaps, drafts).
//! - `step`: one forward step, layer by layer, on one GPU.
//! - `serve`, `train`: from steps to deployments: eval, sweep, waterfall; `evaluation`: what they
//!   return.
//! - `params`, `calibrate`: the few fitted efficiencies and the fit against public figures.
//!
//! docs/RACK_MODEL.md explains each equation and shows the residuals.

pub mod calibrate;
pub mod evaluation;
pub mod figures;
pub mod hardware;
pub mod mechanisms;
pub mod models;
pub mod params;
pub mod precision;
pub mod scenario;
pub mod serve;
pub mod step;
pub mod train;
pub mod validation;

pub use evaluation::Evaluation;
pub use params::Params;
pub use scenario::{Scenario, ScenarioFile};
pub use serve::{eval, sweep, waterfall, WaterfallStep};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RackError {
    #[error("unknown {field} \"{value}\"; allowed: {allowed}")]
    Unknown {
        field: &'static str,
        value: String,
        allowed: &'static str,
    },
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("scenario: {0}")]
    Parse(String),
}

impl RackError {
    pub fn unknown(field: &'static str, value: &str, allowed: &'static str) -> RackError {
        RackError::Unknown {
            field,
            value: value.to_string(),
            allowed,
        }
    }
}
