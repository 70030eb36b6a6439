//! silu_mul: `h = silu(gate) ⊙ up`, SwiGLU's activation. Reference: `model::reference::swiglu`.
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

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_struct_size() {
        assert_eq!(std::mem::size_of::<super::SiluMulParams>(), 16);
    }
}
