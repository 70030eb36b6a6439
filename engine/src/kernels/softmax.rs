//! softmax: in place per row over a causal (or full) prefix. Reference:
//! `model::reference::softmax`.
use crate::check::{gamma, Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "softmax",
    wgsl: include_str!("../../../shaders/softmax.wgsl"),
    entry_point: "softmax",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SoftmaxParams {
    pub rows: u32,
    pub stride: u32,
    pub valid_base: u32,
    pub rows_per_step: u32,
}

impl SoftmaxParams {
    /// Every row over all `width` entries.
    pub fn full(rows: u32, width: u32) -> Self {
        Self {
            rows,
            stride: width,
            valid_base: width,
            rows_per_step: u32::MAX,
        }
    }
    /// Causal attention rows `[tokens·heads, pos0 + tokens]`: token t sees `pos0 + t + 1`.
    pub fn causal(tokens: u32, heads: u32, pos0: u32) -> Self {
        Self {
            rows: tokens * heads,
            stride: pos0 + tokens,
            valid_base: pos0 + 1,
            rows_per_step: heads.max(1),
        }
    }
}

/// One workgroup per row. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    x: &wgpu::Buffer,
    p: SoftmaxParams,
) -> Result<u64, KernelError> {
    let n = u64::from(p.rows) * u64::from(p.stride);
    check_len("softmax x", x, n)?;
    launch_groups(ctx, pass, SHADER, &p, &[x], (p.rows, 1))?;
    Ok(8 * n)
}

/// Against `model::reference::softmax` (max-subtracted, f64), relative to each probability.
/// Each `exp(x − max)` is within 3 + 2·|x − max| ulp (Vulkan's bound), so with `spread` the
/// largest `x − max` of a row an entry carries that once and the sum (γ_n over ⌈valid/256⌉ adds
/// and the 8 tree levels) carries it again; the reciprocal adds 2.5 ulp, the product and the
/// reference's rounding 1 each.
pub fn tolerance(valid: u32, spread: f64) -> Tolerance {
    let n = valid.div_ceil(256) as usize + 8;
    let exp_ulps = 3.0 + 2.0 * spread.abs();
    Tolerance {
        abs: 0.0,
        rel: 2.0 * exp_ulps * F32_UNIT_ROUNDOFF + gamma(n) + 4.5 * F32_UNIT_ROUNDOFF,
        why: "exp (3 + 2|x| ulp) in the entry and in the sum, γ_n of the sum, 1/x and 2 roundings",
    }
}
