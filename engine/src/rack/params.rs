//! The efficiency parameters `calibrate` fits. They are the only free numbers in the rack model;
//! everything else is a datasheet figure, a model shape or a count. The fit is committed in
//! `fitted.json` and loaded from there (the browser never refits).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Achieved fraction of dense tensor-core peak in a compute-bound GEMM.
    pub flops_eff: f64,
    /// Achieved fraction of HBM bandwidth in a well-written memory-bound kernel (GEMV, copy).
    pub bw_eff: f64,
    /// The same for the naive MLA copy/concat kernel before TensorRT-LLM rewrote it.
    pub naive_copy_bw_eff: f64,
    /// GPU idle time between two dependent kernels replayed from a CUDA graph, µs.
    pub kernel_gap_us: f64,
    /// The shortest a kernel can run, however little it does (grid launch, ramp-up, drain and
    /// completion), µs: a kernel takes the larger of this and its roofline time.
    pub kernel_floor_us: f64,
    /// The same gap with programmatic dependent launch (the next kernel's prologue overlaps), µs.
    pub pdl_gap_us: f64,
    /// CPU time to launch one kernel outside a graph, µs.
    pub cpu_launch_us: f64,
    /// Achieved fraction of NVLink / network bandwidth in collectives.
    pub link_eff: f64,
    /// Fixed cost of one collective phase (kernel start, barrier, flag polling), µs.
    pub collective_base_us: f64,
    /// EAGLE-3's per-token acceptance probability: a chain of k drafts is accepted up to the
    /// first miss, so accepted length = (1 - a^(k+1)) / (1 - a).
    pub eagle3_accept: f64,
}

/// What `calibrate` may choose from: physically plausible bounds, not tuning knobs. Equal
/// bounds fix a parameter.
/// How many parameters there are.
pub const N: usize = 10;

pub const BOUNDS: [(&str, f64, f64); N] = [
    ("flops_eff", 0.3, 0.95),
    ("bw_eff", 0.3, 0.95),
    ("naive_copy_bw_eff", 0.05, 0.6),
    ("kernel_gap_us", 0.5, 15.0),
    ("kernel_floor_us", 0.0, 10.0),
    ("pdl_gap_us", 0.1, 15.0),
    // Fixed, not fitted: no calibration point runs without CUDA graphs at a size where launch
    // cost shows (see RACK_MODEL.md). An estimate, labeled as one.
    ("cpu_launch_us", 5.0, 5.0),
    ("link_eff", 0.3, 0.95),
    // Fixed, not fitted: the calibration points cannot tell a fixed cost per collective from
    // NCCL's hop latencies, which every collective already pays (a refit with it free lands
    // on its lower bound with a standard error of ±38 µs). 0.5 µs: one flag check.
    ("collective_base_us", 0.5, 0.5),
    ("eagle3_accept", 0.3, 0.98),
];

impl Params {
    /// The committed fit.
    pub fn fitted() -> Params {
        // The file is written by `moescope rack calibrate --write` and checked by the tests; a
        // malformed one fails them, so falling back here never hides a bad fit from CI.
        serde_json::from_str(FITTED).unwrap_or(Params::PRIOR)
    }

    /// Starting point of the fit: round numbers a GPU engineer would guess.
    pub const PRIOR: Params = Params {
        flops_eff: 0.7,
        bw_eff: 0.75,
        naive_copy_bw_eff: 0.25,
        kernel_gap_us: 3.0,
        kernel_floor_us: 2.0,
        pdl_gap_us: 1.5,
        cpu_launch_us: 5.0,
        link_eff: 0.8,
        collective_base_us: 5.0,
        eagle3_accept: 0.8,
    };

    pub fn to_vec(&self) -> [f64; N] {
        [
            self.flops_eff,
            self.bw_eff,
            self.naive_copy_bw_eff,
            self.kernel_gap_us,
            self.kernel_floor_us,
            self.pdl_gap_us,
            self.cpu_launch_us,
            self.link_eff,
            self.collective_base_us,
            self.eagle3_accept,
        ]
    }

    pub fn from_vec(v: &[f64; N]) -> Params {
        Params {
            flops_eff: v[0],
            bw_eff: v[1],
            naive_copy_bw_eff: v[2],
            kernel_gap_us: v[3],
            kernel_floor_us: v[4],
            pdl_gap_us: v[5],
            cpu_launch_us: v[6],
            link_eff: v[7],
            collective_base_us: v[8],
            eagle3_accept: v[9],
        }
    }
}

pub const FITTED: &str = include_str!("fitted.json");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_fit_parses_and_lies_within_bounds() {
        let p: Params = serde_json::from_str(FITTED).unwrap_or_else(|e| panic!("fitted.json: {e}"));
        for ((name, lo, hi), v) in BOUNDS.iter().zip(p.to_vec()) {
            assert!(
                (*lo..=*hi).contains(&v),
                "{name} = {v} outside [{lo}, {hi}]"
            );
        }
        assert!(
            p.pdl_gap_us <= p.kernel_gap_us,
            "PDL must not lengthen the gap"
        );
    }
}
