//! fp8_round_trip: each row of x as an FP8 dispatch record carries it, decoded back to f32 (E4M3
//! with a power-of-two scale per 1×128 tile). The eager MoE runs it before gathering, so that
//! with `MoeConfig::dispatch_fp8` the experts see the same values on both paths. Reference:
//! `quant::activation::round_trip`, bit for bit.
use crate::gpu::{GpuContext, ShaderSource};

use super::moe_dispatch::MAX_FP8_HIDDEN;
use super::{check_len, grid_2d, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "fp8_round_trip",
    wgsl: concat!(
        include_str!("../../../shaders/include/fp8.wgsl"),
        include_str!("../../../shaders/fp8_round_trip.wgsl"),
    ),
    entry_point: "fp8_round_trip",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Fp8RoundTripParams {
    pub rows: u32,
    pub width: u32,
    pub _pad: [u32; 2],
}

/// `y[r] = round_trip(x[r])` for `rows` rows of `width`. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    rows: u32,
    width: u32,
) -> Result<u64, KernelError> {
    if !width.is_multiple_of(16) {
        return Err(KernelError::NotDivisible {
            dim: "fp8_round_trip width",
            value: width.into(),
            by: 16,
        });
    }
    if width > MAX_FP8_HIDDEN {
        return Err(KernelError::LimitExceeded {
            what: "fp8_round_trip width",
            got: width.into(),
            max: MAX_FP8_HIDDEN.into(),
        });
    }
    let n = u64::from(rows) * u64::from(width);
    check_len("fp8_round_trip x", x, n)?;
    check_len("fp8_round_trip y", y, n)?;
    let max = ctx.adapter.limits.max_compute_workgroups_per_dimension;
    let (gx, gy) = grid_2d(rows.into(), max)?;
    if gy > 1 {
        return Err(KernelError::LimitExceeded {
            what: "fp8_round_trip rows",
            got: rows.into(),
            max: max.into(),
        });
    }
    let p = Fp8RoundTripParams {
        rows,
        width,
        _pad: [0; 2],
    };
    launch_groups(ctx, pass, SHADER, &p, &[x, y], (gx, 1))?;
    Ok(8 * n)
}
