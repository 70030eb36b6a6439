//! sigmoid: the DeepSeek-V3 gate function. Reference: `model::reference::gate_scores`.
use crate::check::{Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "sigmoid",
    wgsl: include_str!("../../../shaders/sigmoid.wgsl"),
    entry_point: "sigmoid",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SigmoidParams {
    pub n: u32,
    pub _pad: [u32; 3],
}

/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    n: u32,
) -> Result<u64, KernelError> {
    check_len("sigmoid x", x, n.into())?;
    check_len("sigmoid y", y, n.into())?;
    let p = SigmoidParams { n, _pad: [0; 3] };
    launch(ctx, pass, SHADER, &p, &[x, y], n.into())?;
    Ok(2 * 4 * u64::from(n))
}

/// Against `model::reference::sigmoid`, relative to `|y|`: `exp(−x)` within 3 + 2·|x| ulp
/// (Vulkan's bound) for `|x| ≤ max_abs_x` (a relative error of e moves 1/(1+e) by at most as
/// much), `1 + e` 1 rounding, the reciprocal 2.5 ulp, the reference's result 1.
pub fn tolerance(max_abs_x: f64) -> Tolerance {
    Tolerance {
        abs: 0.0,
        rel: (3.0 + 2.0 * max_abs_x + 4.5) * F32_UNIT_ROUNDOFF,
        why: "exp (3 + 2|x| ulp), 1 + e, the reciprocal (2.5 ulp) and the reference's rounding",
    }
}
