//! rms_norm: `y = x / sqrt(mean(x²) + eps) ⊙ w` per row, rows read and written with strides and
//! offsets; `tail` values after each normalized row are copied as they are. Reference:
//! `model::reference::rms_norm`.
use crate::check::{gamma, Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "rms_norm",
    wgsl: include_str!("../../../shaders/rms_norm.wgsl"),
    entry_point: "rms_norm",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsNormParams {
    pub rows: u32,
    pub width: u32,
    pub in_stride: u32,
    pub in_offset: u32,
    pub out_stride: u32,
    pub out_offset: u32,
    pub eps: f32,
    /// Values after the `width` normalized ones that are copied unchanged.
    pub tail: u32,
}

impl RmsNormParams {
    /// `rows` contiguous rows of `width`.
    pub fn dense(rows: u32, width: u32, eps: f32) -> Self {
        Self {
            rows,
            width,
            in_stride: width,
            in_offset: 0,
            out_stride: width,
            out_offset: 0,
            eps,
            tail: 0,
        }
    }
}

/// One workgroup per row. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    x: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    y: &wgpu::Buffer,
    p: RmsNormParams,
) -> Result<u64, KernelError> {
    let last = |offset: u32, stride: u32| {
        u64::from(offset)
            + u64::from(p.rows.saturating_sub(1)) * u64::from(stride)
            + u64::from(p.width + p.tail)
    };
    check_len("rms_norm x", x, last(p.in_offset, p.in_stride))?;
    check_len("rms_norm weight", weight, p.width.into())?;
    check_len("rms_norm y", y, last(p.out_offset, p.out_stride))?;
    launch_groups(ctx, pass, SHADER, &p, &[x, weight, y], (p.rows, 1))?;
    let n = u64::from(p.rows) * u64::from(p.width + p.tail);
    Ok(4 * (2 * n + u64::from(p.width)))
}

/// Against `model::reference::rms_norm` (f64 sums, rounded to f32), relative to `|y|`. The mean
/// of squares goes through 1 product, ⌈width/256⌉ adds in an invocation, the 8 levels of the
/// workgroup tree, the division and `+ eps` (γ_n); the square root halves that relative error;
/// `inverseSqrt` adds 2 ulp (Vulkan's bound), the two products 2 roundings and the reference's
/// own result 1.
pub fn tolerance(width: u32) -> Tolerance {
    let n = 1 + width.div_ceil(256) as usize + 8 + 2;
    Tolerance {
        abs: 0.0,
        rel: 0.5 * gamma(n) + 5.0 * F32_UNIT_ROUNDOFF,
        why: "half the γ_n of the mean of squares, inverseSqrt (2 ulp) and 3 roundings",
    }
}
