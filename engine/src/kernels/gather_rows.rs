//! gather_rows: the tokens routed to one expert, packed into a dense batch.
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "gather_rows",
    wgsl: include_str!("../../../shaders/gather_rows.wgsl"),
    entry_point: "gather_rows",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GatherParams {
    pub rows: u32,
    pub width: u32,
    pub base: u32,
    pub _pad: u32,
}

/// Gathers `rows` rows `src[index[base + j]]` into `dst`. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    src: &wgpu::Buffer,
    index: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    p: GatherParams,
) -> Result<u64, KernelError> {
    let n = u64::from(p.rows) * u64::from(p.width);
    check_len(
        "gather_rows index",
        index,
        u64::from(p.base) + u64::from(p.rows),
    )?;
    check_len("gather_rows dst", dst, n)?;
    check_len("gather_rows src", src, p.width.into())?;
    launch(ctx, pass, SHADER, &p, &[src, index, dst], n)?;
    Ok(4 * (2 * n + u64::from(p.rows)))
}
