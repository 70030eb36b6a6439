//! softmax: in place per row over a causal (or full) prefix. Reference:
//! `model::reference::softmax`.
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

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_struct_size() {
        assert_eq!(std::mem::size_of::<super::SoftmaxParams>(), 16);
    }
}
