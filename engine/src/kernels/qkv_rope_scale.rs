//! qkv_rope_scale: `y[z] = scale · rope(W · x[z])`, an attention projection with RoPE and the
//! softmax scale in its epilogue ("FC_QKV + attention scaling"). 16 rows per workgroup; the
//! rotated rows are the last `rope_dim` of every `rope_period` rows from `rope_from` on.
//! Constraints: `K % 4 == 0`; `rope_from`, `rope_period` multiples of 16; `rope_dim` even, ≤ 16,
//! dividing 16, ≤ rope_period. Reference: `model::reference::rope` after `gemv`.
use crate::check::{Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};

use crate::quant::{matrix, Format};

use super::gemv::{check_format_k, format_constants};
use super::{check_len, launch_grid, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "qkv_rope_scale",
    wgsl: concat!(
        include_str!("../../../shaders/include/fp8.wgsl"),
        include_str!("../../../shaders/include/weights.wgsl"),
        include_str!("../../../shaders/qkv_rope_scale.wgsl")
    ),
    entry_point: "qkv_rope_scale",
};

/// Output rows per workgroup, as in the shader.
pub const ROWS: u32 = 16;

/// Mirrors the params struct of the shader. `x_stride` counts vec4s, `y_stride` floats.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QkvRopeScaleParams {
    pub m: u32,
    pub k: u32,
    pub tokens: u32,
    pub pos0: u32,
    pub x_stride: u32,
    pub y_stride: u32,
    pub rope_from: u32,
    pub rope_period: u32,
    pub rope_dim: u32,
    pub scale: f32,
    pub _pad: [u32; 2],
}

/// Records the projection. `cos_sin` is the host's `[max_seq, rope_dim/2]` table (vec2 each).
/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [w, x, y, cos_sin]: [&wgpu::Buffer; 4],
    p: QkvRopeScaleParams,
    format: Format,
) -> Result<u64, KernelError> {
    if p.m == 0 || p.tokens == 0 {
        return Err(KernelError::Shape {
            what: "qkv_rope_scale M and tokens",
            expected: 1,
            got: 0,
        });
    }
    for (dim, value, by) in [
        ("qkv_rope_scale rope_from", p.rope_from, ROWS),
        ("qkv_rope_scale rope_period", p.rope_period, ROWS),
        ("qkv_rope_scale 16 / rope_dim", ROWS, p.rope_dim.max(1)),
        ("qkv_rope_scale rope_dim", p.rope_dim, 2),
    ] {
        let zero_ok = dim == "qkv_rope_scale rope_from";
        if (value == 0 && !zero_ok) || !value.is_multiple_of(by) {
            return Err(KernelError::NotDivisible {
                dim,
                value: value.into(),
                by: by.into(),
            });
        }
    }
    check_format_k(
        "qkv_rope_scale K (whole chunks of the weight format)",
        format,
        p.k,
    )?;
    if p.rope_dim > p.rope_period {
        return Err(KernelError::Shape {
            what: "qkv_rope_scale rope_dim (at most rope_period)",
            expected: p.rope_period.into(),
            got: p.rope_dim.into(),
        });
    }
    let (m, k, t) = (u64::from(p.m), u64::from(p.k), u64::from(p.tokens));
    let w_bytes = matrix::matrix_bytes(format, m as usize, k as usize);
    check_len("qkv_rope_scale w", w, w_bytes / 4)?;
    check_len(
        "qkv_rope_scale x",
        x,
        4 * (t - 1) * u64::from(p.x_stride) + k,
    )?;
    check_len("qkv_rope_scale y", y, (t - 1) * u64::from(p.y_stride) + m)?;
    let pairs = u64::from(p.pos0) + t;
    check_len(
        "qkv_rope_scale cos_sin",
        cos_sin,
        pairs * u64::from(p.rope_dim),
    )?;
    launch_grid(
        ctx,
        pass,
        (SHADER, &format_constants(format)),
        &p,
        &[w, x, y, cos_sin],
        (p.m.div_ceil(ROWS), 1, p.tokens),
    )?;
    Ok(w_bytes + 4 * t * (k + m))
}

/// A gemv row with weights in `format`, rotated with its pair by an f32 cos/sin and scaled,
/// compared with `scale = s·(Σ|w_a·x| + Σ|w_b·x|)` over the pair (s the softmax scale): the
/// tile gemv's bound of each row at 16 lanes, the table's rounding (1 ulp each) and 3 roundings
/// of the rotation.
pub fn tolerance(format: Format, k: usize) -> Tolerance {
    Tolerance {
        why: "the gemv bound of both rows of a pair, plus cos/sin rounding and 3 roundings",
        rel: super::gemv::tolerance_tile(format, k, 16).rel + 5.0 * F32_UNIT_ROUNDOFF,
        abs: 0.0,
    }
}
