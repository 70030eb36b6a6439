//! add_rms_norm: `x += r; h = x / sqrt(mean(x²) + eps) ⊙ w` per row: the residual add and the
//! next RMSNorm in one kernel. Reference: `model::reference::rms_norm` after the residual add.
use crate::check::Tolerance;
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "add_rms_norm",
    wgsl: include_str!("../../../shaders/add_rms_norm.wgsl"),
    entry_point: "add_rms_norm",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AddRmsNormParams {
    pub rows: u32,
    pub width: u32,
    pub eps: f32,
    pub _pad: u32,
}

/// One workgroup per row of `width`. Returns bytes moved: x read and written, r read, h
/// written, the weight read once.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [x, r, weight, h]: [&wgpu::Buffer; 4],
    p: AddRmsNormParams,
) -> Result<u64, KernelError> {
    let n = u64::from(p.rows) * u64::from(p.width);
    check_len("add_rms_norm x", x, n)?;
    check_len("add_rms_norm r", r, n)?;
    check_len("add_rms_norm weight", weight, p.width.into())?;
    check_len("add_rms_norm h", h, n)?;
    launch_groups(ctx, pass, SHADER, &p, &[x, r, weight, h], (p.rows, 1))?;
    Ok(4 * (4 * n + u64::from(p.width)))
}

/// The normalized output against the reference of `x + r` (rounded to f32 first, as here) then
/// `rms_norm`: the same summation order, so `rms_norm::tolerance`; the new residual `x + r` is
/// one f32 rounding on both sides, so it must be exact.
pub fn tolerance(width: u32) -> Tolerance {
    super::rms_norm::tolerance(width)
}
