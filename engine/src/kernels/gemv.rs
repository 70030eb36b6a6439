//! gemv: `y[M] = W[M, K] · x[K]` in f32, the memory-bound heart of every decode step. One
//! workgroup of 256 computes `256 / lanes` rows with `lanes` invocations per row; x is staged in
//! workgroup memory. Constraints: `K % 4 == 0`, `M ≥ 1`, `lanes` ∈ {32, 64, 128, 256}.
//! Reference: `model::reference::gemv`.

use crate::gpu::{bind_buffers, uniform_buffer, GpuContext, ShaderSource};

use super::{check_len, grid_2d, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "gemv",
    wgsl: include_str!("../../../shaders/gemv.wgsl"),
    entry_point: "gemv",
};

/// Invocations per workgroup, as in the shader.
const WORKGROUP: u32 = 256;
/// The shader's default `LANES`: invocations that share one row.
pub const DEFAULT_LANES: u32 = 32;
/// The `LANES` values the shader supports (powers of two, at most one workgroup).
pub const LANE_CHOICES: [u32; 4] = [32, 64, 128, 256];

/// Mirrors `struct GemvParams` in gemv.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GemvParams {
    pub m: u32,
    pub k: u32,
    pub _pad: [u32; 2],
}

/// The problem and the variant: `y[M] = W[M, K] · x[K]` with `lanes` invocations per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvShape {
    pub m: u32,
    pub k: u32,
    pub lanes: u32,
}

impl GemvShape {
    /// `[m, k]` with the default lanes per row.
    pub fn new(m: u32, k: u32) -> Self {
        Self {
            m,
            k,
            lanes: DEFAULT_LANES,
        }
    }
}

/// Records `y = W · x` into `pass`. `w` holds `M·K` f32, `x` holds `K`, `y` at least `M`.
/// Returns the bytes it moves (`bytes_moved`).
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    w: &wgpu::Buffer,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    shape: GemvShape,
) -> Result<u64, KernelError> {
    let GemvShape { m, k, lanes } = shape;
    if !LANE_CHOICES.contains(&lanes) {
        return Err(KernelError::NotDivisible {
            dim: "gemv lanes (32..=256, power of two)",
            value: lanes.into(),
            by: 32,
        });
    }
    if m == 0 {
        return Err(KernelError::Shape {
            what: "gemv M",
            expected: 1,
            got: 0,
        });
    }
    if k == 0 || !k.is_multiple_of(4) {
        return Err(KernelError::NotDivisible {
            dim: "gemv K",
            value: k.into(),
            by: 4,
        });
    }
    check_len("gemv w bytes", w, u64::from(m) * u64::from(k))?;
    check_len("gemv x bytes", x, k.into())?;
    check_len("gemv y bytes", y, m.into())?;
    let (gx, gy) = grid_2d(
        u64::from(m).div_ceil(u64::from(WORKGROUP / lanes)),
        ctx.adapter.limits.max_compute_workgroups_per_dimension,
    )?;

    let pipeline = ctx
        .pipelines
        .get(&ctx.device, SHADER, &[("LANES", f64::from(lanes))]);
    let params = uniform_buffer(ctx, "gemv params", &GemvParams { m, k, _pad: [0; 2] });
    let bind_group = bind_buffers(&ctx.device, &pipeline, "gemv", &[&params, w, x, y]);
    pass.set_pipeline(&pipeline);
    pass.set_bind_group(0, &bind_group, &[]);
    pass.dispatch_workgroups(gx, gy, 1);
    Ok(bytes_moved(m.into(), k.into()))
}

/// Bytes one dispatch must move through memory at least: W and x read once, y written once.
pub fn bytes_moved(m: u64, k: u64) -> u64 {
    4 * (m * k + k + m)
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_struct_size() {
        // struct GemvParams { m, k, _pad0, _pad1 }: four u32 = 16 bytes.
        assert_eq!(std::mem::size_of::<super::GemvParams>(), 16);
    }
}
