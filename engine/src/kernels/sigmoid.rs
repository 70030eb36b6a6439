//! sigmoid: the DeepSeek-V3 gate function. Reference: `model::reference::gate_scores`.
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

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_struct_size() {
        assert_eq!(std::mem::size_of::<super::SigmoidParams>(), 16);
    }
}
