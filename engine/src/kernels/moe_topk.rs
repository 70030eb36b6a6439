//! moe_topk: top-k experts per token by score + bias, gates normalized over the chosen.
//! Reference: `model::reference::route`.
use crate::check::{gamma, Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "moe_topk",
    wgsl: include_str!("../../../shaders/moe_topk.wgsl"),
    entry_point: "moe_topk",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeTopkParams {
    pub tokens: u32,
    pub experts: u32,
    pub k: u32,
    pub routed_scaling: f32,
}

/// Invocations per workgroup, as in the shader.
const WORKGROUP: u32 = 64;

/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    scores: &wgpu::Buffer,
    bias: &wgpu::Buffer,
    ids: &wgpu::Buffer,
    gates: &wgpu::Buffer,
    p: MoeTopkParams,
) -> Result<u64, KernelError> {
    if p.experts > 64 || p.k == 0 || p.k > p.experts {
        return Err(KernelError::LimitExceeded {
            what: "moe_topk k ≤ experts ≤ 64",
            got: p.experts.max(p.k).into(),
            max: 64,
        });
    }
    let (t, e, k) = (u64::from(p.tokens), u64::from(p.experts), u64::from(p.k));
    check_len("moe_topk scores", scores, t * e)?;
    check_len("moe_topk bias", bias, e)?;
    check_len("moe_topk ids", ids, t * k)?;
    check_len("moe_topk gates", gates, t * k)?;
    let groups = (p.tokens.div_ceil(WORKGROUP), 1);
    launch_groups(ctx, pass, SHADER, &p, &[scores, bias, ids, gates], groups)?;
    Ok(4 * (t * e + e + 2 * t * k))
}

/// The gates against the reference's (f64 sum, rounded to f32), relative to each gate: the sum
/// of `k` chosen scores (k − 1 adds), the division (2.5 ulp), the scaling and the reference's
/// own rounding. The chosen ids must be the reference's exactly.
pub fn tolerance(k: u32) -> Tolerance {
    Tolerance {
        abs: 0.0,
        rel: gamma(k.saturating_sub(1) as usize) + 4.5 * F32_UNIT_ROUNDOFF,
        why: "the sum of k scores, the division (2.5 ulp), the scaling and 1 rounding",
    }
}
