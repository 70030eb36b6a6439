//! moe_route: router logits, gating function (sigmoid or softmax) and top-k in one kernel, one
//! workgroup per token. Constraints: `experts ≤ 64`, `hidden % 4 == 0`, `1 ≤ k ≤ experts`.
//! Reference: `model::reference::route` on `gemv` logits.
use crate::check::{gamma, Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "moe_route",
    wgsl: include_str!("../../../shaders/moe_route.wgsl"),
    entry_point: "moe_route",
};

/// How router logits become gate weights before the top-k. The kernel's `gate` parameter
/// (`MoeRouteParams::gate_code`) and `model::reference::gate_scores` both follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateFunction {
    /// DeepSeek-V2: softmax over all experts.
    Softmax,
    /// DeepSeek-V3: an independent sigmoid per expert.
    Sigmoid,
}

/// The most experts one workgroup routes over (its size).
pub const MAX_EXPERTS: u32 = 64;

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeRouteParams {
    pub tokens: u32,
    pub experts: u32,
    pub k: u32,
    pub hidden: u32,
    pub routed_scaling: f32,
    /// 0: sigmoid, 1: softmax.
    pub gate: u32,
    pub _pad: [u32; 2],
}

impl MoeRouteParams {
    pub fn gate_code(gate: GateFunction) -> u32 {
        match gate {
            GateFunction::Sigmoid => 0,
            GateFunction::Softmax => 1,
        }
    }
}

/// `buffers`: `[router [E, D], h [T, D], bias [E], scores [T, E], ids [T, K], gates [T, K]]`.
/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [router, h, bias, scores, ids, gates]: [&wgpu::Buffer; 6],
    p: MoeRouteParams,
) -> Result<u64, KernelError> {
    if p.experts == 0 || p.experts > MAX_EXPERTS {
        return Err(KernelError::LimitExceeded {
            what: "moe_route experts",
            got: p.experts.into(),
            max: MAX_EXPERTS.into(),
        });
    }
    if p.k == 0 || p.k > p.experts {
        return Err(KernelError::Shape {
            what: "moe_route k (1..=experts)",
            expected: p.experts.into(),
            got: p.k.into(),
        });
    }
    if !p.hidden.is_multiple_of(4) {
        return Err(KernelError::NotDivisible {
            dim: "moe_route hidden",
            value: p.hidden.into(),
            by: 4,
        });
    }
    let (t, e, k, d) = (
        u64::from(p.tokens),
        u64::from(p.experts),
        u64::from(p.k),
        u64::from(p.hidden),
    );
    check_len("moe_route router", router, e * d)?;
    check_len("moe_route h", h, t * d)?;
    check_len("moe_route bias", bias, e)?;
    check_len("moe_route scores", scores, t * e)?;
    check_len("moe_route ids", ids, t * k)?;
    check_len("moe_route gates", gates, t * k)?;
    launch_groups(
        ctx,
        pass,
        SHADER,
        &p,
        &[router, h, bias, scores, ids, gates],
        (p.tokens, 1),
    )?;
    Ok(4 * (e * d + t * d + e + t * e + 2 * t * k))
}

/// The scores against `model::reference::gate_scores` of the f64 logits, relative to each
/// score. A logit's error is at most γ_n·Σ|w·h| (a chain of D/4 vec4 dots: n = 3 + D/4 + 1)
/// with `magnitude` the largest Σ|w·h| of the token; a logit shift δ moves a sigmoid score by
/// at most δ relatively and a softmax score by at most 2δ (its own logit and the sum's), and
/// exp adds 3 + 2·`spread` ulp twice (in the entry and, for softmax, the sum), `spread` the
/// largest |logit| (sigmoid) or logit − max (softmax), plus 4.5 ulp of reciprocal, division and
/// roundings.
pub fn score_tolerance(hidden: u32, magnitude: f64, spread: f64) -> Tolerance {
    let n = 3 + hidden.div_ceil(4) as usize + 1;
    Tolerance {
        abs: 0.0,
        rel: 2.0 * gamma(n) * magnitude
            + (2.0 * (3.0 + 2.0 * spread.abs()) + 4.5) * F32_UNIT_ROUNDOFF,
        why: "the logit's γ_n·Σ|w·h| through the gate function, exp's ulps and 4.5 more",
    }
}

/// The gates: each is a chosen score over the sum of the chosen (`moe_topk::tolerance`), and
/// both carry the scores' error (`score_tolerance`).
pub fn gate_tolerance(hidden: u32, magnitude: f64, spread: f64, k: u32) -> Tolerance {
    Tolerance {
        abs: 0.0,
        rel: 2.0 * score_tolerance(hidden, magnitude, spread).rel
            + super::moe_topk::tolerance(k).rel,
        why: "twice the scores' bound (a score and the chosen sum) plus the normalization",
    }
}
