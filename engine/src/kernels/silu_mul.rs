//! silu_mul: `h = silu(gate) ⊙ up`, SwiGLU's activation. Reference: `model::reference::swiglu`.
use crate::check::{Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "silu_mul",
    wgsl: include_str!("../../../shaders/silu_mul.wgsl"),
    entry_point: "silu_mul",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SiluMulParams {
    pub n: u32,
    pub _pad: [u32; 3],
}

/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    gate: &wgpu::Buffer,
    up: &wgpu::Buffer,
    h: &wgpu::Buffer,
    n: u32,
) -> Result<u64, KernelError> {
    check_len("silu_mul gate", gate, n.into())?;
    check_len("silu_mul up", up, n.into())?;
    check_len("silu_mul h", h, n.into())?;
    let p = SiluMulParams { n, _pad: [0; 3] };
    launch(ctx, pass, SHADER, &p, &[gate, up, h], n.into())?;
    Ok(3 * 4 * u64::from(n))
}

/// Against `silu(gate)·up` of `model::reference`, relative to `|h|`: `g / (1 + exp(−g))` as
/// `sigmoid::tolerance` (the division 2.5 ulp in place of the reciprocal), the product with
/// `up` one rounding more, and the reference's own two roundings.
pub fn tolerance(max_abs_gate: f64) -> Tolerance {
    Tolerance {
        abs: 0.0,
        rel: super::sigmoid::tolerance(max_abs_gate).rel + 2.0 * F32_UNIT_ROUNDOFF,
        why: "the sigmoid bound, the product with up and the reference's roundings",
    }
}
