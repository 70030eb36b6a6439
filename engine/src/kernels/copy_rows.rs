//! copy_rows: strided row copies, the eager MLA path's copy/concat kernels.
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "copy_rows",
    wgsl: include_str!("../../../shaders/copy_rows.wgsl"),
    entry_point: "copy_rows",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CopyRowsParams {
    pub rows: u32,
    pub width: u32,
    pub src_base: u32,
    pub src_stride: u32,
    pub dst_base: u32,
    pub dst_stride: u32,
    pub _pad: [u32; 2],
}

impl CopyRowsParams {
    /// `rows` rows of `width` values, packed back to back on both sides, from offset 0 to 0.
    pub fn contiguous(rows: u32, width: u32) -> Self {
        Self {
            rows,
            width,
            src_base: 0,
            src_stride: width,
            dst_base: 0,
            dst_stride: width,
            _pad: [0; 2],
        }
    }
}

/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    p: CopyRowsParams,
) -> Result<u64, KernelError> {
    let last = |base: u32, stride: u32| {
        u64::from(base)
            + u64::from(p.rows.saturating_sub(1)) * u64::from(stride)
            + u64::from(p.width)
    };
    check_len("copy_rows src", src, last(p.src_base, p.src_stride))?;
    check_len("copy_rows dst", dst, last(p.dst_base, p.dst_stride))?;
    let n = u64::from(p.rows) * u64::from(p.width);
    launch(ctx, pass, SHADER, &p, &[src, dst], n)?;
    Ok(8 * n)
}
