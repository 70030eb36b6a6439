//! The optimization switches of the sandbox's decode step. Each switch changes which kernels run,
//! never the math: with any set, the logits agree with `model::reference` within
//! `model::gpu::logits_tolerance`. `model::gpu` reads the set while it records a forward.

use serde::{Deserialize, Serialize};

/// One switch per fusion of the seeds (docs/MODEL.md lists the kernels each one removes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Optimizations {
    /// Gate and up projections in one kernel that reads x once and writes silu(gate)·up.
    pub fuse_gate_up_swiglu: bool,
    /// The query and latent-KV projections with RoPE and the 1/sqrt(d) scale in their epilogue.
    pub fuse_qkv_rope_scale: bool,
    /// Residual add and the next RMSNorm in one kernel.
    pub fuse_residual_rmsnorm: bool,
    /// Flash decoding: the context split over workgroups, partial softmax, then a reduction.
    pub split_k_attention: bool,
    /// Router logits, gating function and top-k in one kernel.
    pub fuse_moe_route: bool,
    /// Routing stays on the GPU: records of (expert, gate, scale, token, activation), one grouped
    /// launch per expert projection, and a combine that writes the output.
    pub fuse_moe_dispatch_combine: bool,
    /// Projections write straight into the concatenated layouts attention reads.
    pub fuse_mla_copy_concat: bool,
    /// All kernels of a step in one command buffer instead of one submission each.
    pub recorded_submission: bool,
}

/// The switch names, in the order the benchmark and the UI list them.
pub const NAMES: [&str; 8] = [
    "fuse_gate_up_swiglu",
    "fuse_qkv_rope_scale",
    "fuse_residual_rmsnorm",
    "split_k_attention",
    "fuse_moe_route",
    "fuse_moe_dispatch_combine",
    "fuse_mla_copy_concat",
    "recorded_submission",
];

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("unknown optimization {name:?}; use none, all, or a comma-separated list of: {}", NAMES.join(", "))]
pub struct UnknownOptimization {
    pub name: String,
}

impl Optimizations {
    /// The eager baseline: every switch off.
    pub fn none() -> Self {
        Self::default()
    }

    pub fn all() -> Self {
        Self {
            fuse_gate_up_swiglu: true,
            fuse_qkv_rope_scale: true,
            fuse_residual_rmsnorm: true,
            split_k_attention: true,
            fuse_moe_route: true,
            fuse_moe_dispatch_combine: true,
            fuse_mla_copy_concat: true,
            recorded_submission: true,
        }
    }

    /// Only the named switch on.
    pub fn only(name: &str) -> Result<Self, UnknownOptimization> {
        let mut o = Self::none();
        o.set(name, true)?;
        Ok(o)
    }

    fn switch_mut(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "fuse_gate_up_swiglu" => &mut self.fuse_gate_up_swiglu,
            "fuse_qkv_rope_scale" => &mut self.fuse_qkv_rope_scale,
            "fuse_residual_rmsnorm" => &mut self.fuse_residual_rmsnorm,
            "split_k_attention" => &mut self.split_k_attention,
            "fuse_moe_route" => &mut self.fuse_moe_route,
            "fuse_moe_dispatch_combine" => &mut self.fuse_moe_dispatch_combine,
            "fuse_mla_copy_concat" => &mut self.fuse_mla_copy_concat,
            "recorded_submission" => &mut self.recorded_submission,
            _ => return None,
        })
    }

    pub fn get(&self, name: &str) -> Option<bool> {
        let mut copy = *self;
        copy.switch_mut(name).map(|b| *b)
    }

    pub fn set(&mut self, name: &str, on: bool) -> Result<(), UnknownOptimization> {
        match self.switch_mut(name) {
            Some(b) => {
                *b = on;
                Ok(())
            }
            None => Err(UnknownOptimization { name: name.into() }),
        }
    }

    /// The names of the switches that are on, in `NAMES` order.
    pub fn enabled(&self) -> Vec<&'static str> {
        NAMES
            .into_iter()
            .filter(|n| self.get(n) == Some(true))
            .collect()
    }

    /// Parses `none`, `all`, or `NAME,NAME,...` (spaces around names are ignored).
    pub fn parse(text: &str) -> Result<Self, UnknownOptimization> {
        match text.trim() {
            "none" => Ok(Self::none()),
            "all" => Ok(Self::all()),
            list => {
                let mut o = Self::none();
                for name in list.split(',').map(str::trim) {
                    o.set(name, true)?;
                }
                Ok(o)
            }
        }
    }

    /// The inverse of `parse`: `none`, `all` or the list.
    pub fn label(&self) -> String {
        let on = self.enabled();
        match on.len() {
            0 => "none".into(),
            n if n == NAMES.len() => "all".into(),
            _ => on.join(","),
        }
    }
}

impl std::fmt::Display for Optimizations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_distinct_switch() {
        for (i, a) in NAMES.iter().enumerate() {
            let o = Optimizations::only(a).unwrap();
            assert_eq!(o.enabled(), vec![*a]);
            for b in &NAMES[i + 1..] {
                assert_eq!(o.get(b), Some(false));
            }
        }
        assert_eq!(Optimizations::all().enabled().len(), NAMES.len());
        assert!(Optimizations::none().enabled().is_empty());
    }

    #[test]
    fn parse_and_label_round_trip() {
        for text in [
            "none",
            "all",
            "split_k_attention",
            "fuse_moe_route,pdl_never",
        ] {
            match Optimizations::parse(text) {
                Ok(o) => assert_eq!(Optimizations::parse(&o.label()).unwrap(), o),
                Err(e) => assert_eq!(e.name, "pdl_never"),
            }
        }
        let o = Optimizations::parse(" fuse_moe_route , recorded_submission").unwrap();
        assert_eq!(o.label(), "fuse_moe_route,recorded_submission");
        assert!(Optimizations::parse("").is_err());
    }
}
