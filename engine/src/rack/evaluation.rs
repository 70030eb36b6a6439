//! What an evaluation of a scenario returns: the figures `moescope rack eval` prints and the app
//! draws. Serving and training both fill it in.

use std::collections::BTreeMap;

use serde::Serialize;

use super::scenario::Phase;
use super::step::Breakdown;

/// What `moescope rack eval` prints. Every number is a model estimate, not a measurement.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Evaluation {
    pub system: &'static str,
    pub model: &'static str,
    pub phase: Phase,
    pub tokens_per_s_per_user: f64,
    pub output_tokens_per_s_per_gpu: f64,
    /// Output tokens/s over the decode GPUs only (a disaggregated deployment's decode pool;
    /// the same as per GPU when decoding alone).
    pub output_tokens_per_s_per_decode_gpu: f64,
    /// Input plus output tokens over every GPU (prefill GPUs included), InferenceX's metric.
    pub total_tokens_per_s_per_gpu: f64,
    /// Training: tokens trained per second per GPU.
    pub tokens_per_s_per_gpu: f64,
    pub users_per_rack: f64,
    pub mfu: f64,
    pub mbu: f64,
    pub step_time_us: f64,
    pub batch_per_gpu: f64,
    pub concurrency: f64,
    pub gpus: u32,
    pub breakdown_us: Breakdown,
    pub kernels_per_step: f64,
    pub accepted_tokens_per_step: f64,
    /// Time to first token: the mean, and the median and 99th percentile from the prefill
    /// queue's wait distribution (`mechanisms::md1_wait_quantile_us`); 0 when decoding alone.
    pub ttft_ms: f64,
    pub ttft_ms_p50: f64,
    pub ttft_ms_p99: f64,
    /// One layer's MLA copy/concat kernel in the prefill chunk (0 for GQA models).
    pub copy_concat_us_per_layer: f64,
    /// Always true: these are the analytic model's estimates.
    pub estimated: bool,
    /// The scenario's `[hardware]` what-ifs, echoed: field -> value.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hardware_overrides: BTreeMap<&'static str, f64>,
}

/// `value` if every number in it is finite, else an error naming the first that is not. The
/// scenario limits keep the model's arithmetic finite; this is the net under them, so that no
/// caller ever prints `null` or draws NaN.
pub fn finite<T: Serialize>(value: T) -> Result<T, super::RackError> {
    fn first_non_finite(v: &serde_json::Value, path: &str) -> Option<String> {
        match v {
            serde_json::Value::Null => Some(path.to_owned()),
            serde_json::Value::Array(a) => a
                .iter()
                .enumerate()
                .find_map(|(i, x)| first_non_finite(x, &format!("{path}[{i}]"))),
            serde_json::Value::Object(o) => o.iter().find_map(|(k, x)| {
                first_non_finite(
                    x,
                    &if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    },
                )
            }),
            _ => None,
        }
    }
    let json = serde_json::to_value(&value).map_err(|e| super::RackError::Parse(e.to_string()))?;
    match first_non_finite(&json, "") {
        None => Ok(value),
        Some(path) => Err(super::RackError::Invalid {
            field: "scenario",
            message: format!(
                "the model's {path} is not a finite number for these inputs: they lie outside what it represents"
            ),
        }),
    }
}
