//! rope: rotary embedding in place (half-split layout), cos/sin from a host-computed table.
//! Reference: `model::reference::rope`.
use crate::check::{Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "rope",
    wgsl: include_str!("../../../shaders/rope.wgsl"),
    entry_point: "rope",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RopeParams {
    pub tokens: u32,
    pub count: u32,
    pub dim: u32,
    pub row_stride: u32,
    pub offset: u32,
    pub vec_stride: u32,
    pub pos0: u32,
    pub _pad: u32,
}

/// The rotation angle (rad) of pair `i` of a `d`-wide RoPE vector at position `pos`.
pub fn rope_angle(pos: usize, i: usize, d: usize, theta: f32) -> f64 {
    pos as f64 * f64::from(theta).powf(-2.0 * i as f64 / d as f64)
}

/// The `[max_seq, dim/2]` table of `(cos, sin)` the kernel reads, computed in f64.
pub fn cos_sin_table(max_seq: usize, dim: usize, theta: f32) -> Vec<[f32; 2]> {
    let half = dim / 2;
    (0..max_seq)
        .flat_map(|pos| {
            (0..half).map(move |i| {
                let (s, c) = rope_angle(pos, i, dim, theta).sin_cos();
                [c as f32, s as f32]
            })
        })
        .collect()
}

/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    x: &wgpu::Buffer,
    cos_sin: &wgpu::Buffer,
    p: RopeParams,
) -> Result<u64, KernelError> {
    if p.dim == 0 || !p.dim.is_multiple_of(2) {
        return Err(KernelError::NotDivisible {
            dim: "rope dim",
            value: p.dim.into(),
            by: 2,
        });
    }
    let rows = u64::from(p.tokens);
    let last = rows.saturating_sub(1) * u64::from(p.row_stride)
        + u64::from(p.offset)
        + u64::from(p.count.saturating_sub(1)) * u64::from(p.vec_stride)
        + u64::from(p.dim);
    check_len("rope x", x, last)?;
    check_len(
        "rope cos/sin table",
        cos_sin,
        (u64::from(p.pos0) + rows) * u64::from(p.dim),
    )?;
    let n = rows * u64::from(p.count) * u64::from(p.dim / 2);
    launch(ctx, pass, SHADER, &p, &[x, cos_sin], n)?;
    Ok(4 * (2 * rows * u64::from(p.count) * u64::from(p.dim) + rows * u64::from(p.dim)))
}

/// Against `model::reference::rope` (f64 angles and products), relative to `|a| + |b|` of the
/// element's pair: the f32 table's cos and sin (1 rounding each), two products and a sum, and
/// the reference's own rounding. Elements outside the rotated vectors must be unchanged.
pub fn tolerance() -> Tolerance {
    Tolerance {
        abs: 0.0,
        rel: 5.0 * F32_UNIT_ROUNDOFF,
        why: "cos/sin rounded to f32, 2 products and a sum, and the reference's rounding",
    }
}
