//! copy_vec4: `dst[i] = src[i]` over N vec4s. Not part of the model: the measured bandwidth
//! ceiling (bytes read + written per second) that the other kernels are compared with.

use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, grid_2d, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "copy_vec4",
    wgsl: include_str!("../../../shaders/copy_vec4.wgsl"),
    entry_point: "copy_vec4",
};

const WORKGROUP: u64 = 256;

/// Mirrors `struct CopyParams` in copy_vec4.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CopyParams {
    pub n_vec4: u32,
    pub _pad: [u32; 3],
}

/// Records a copy of `n_vec4` vec4s from `src` to `dst` into `pass`.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    n_vec4: u32,
) -> Result<(), KernelError> {
    check_len("copy_vec4 src bytes", src, u64::from(n_vec4) * 4)?;
    check_len("copy_vec4 dst bytes", dst, u64::from(n_vec4) * 4)?;
    let (gx, gy) = grid_2d(
        u64::from(n_vec4).div_ceil(WORKGROUP),
        ctx.adapter.limits.max_compute_workgroups_per_dimension,
    )?;
    let params = CopyParams {
        n_vec4,
        _pad: [0; 3],
    };
    launch_groups(ctx, pass, SHADER, &params, &[src, dst], (gx, gy))
}
