//! add: `a[i] += b[i]`, the residual connection.
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "add",
    wgsl: include_str!("../../../shaders/add.wgsl"),
    entry_point: "add",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AddParams {
    pub n: u32,
    pub _pad: [u32; 3],
}

/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    a: &wgpu::Buffer,
    b: &wgpu::Buffer,
    n: u32,
) -> Result<u64, KernelError> {
    check_len("add a", a, n.into())?;
    check_len("add b", b, n.into())?;
    let p = AddParams { n, _pad: [0; 3] };
    launch(ctx, pass, SHADER, &p, &[a, b], n.into())?;
    Ok(3 * 4 * u64::from(n))
}
