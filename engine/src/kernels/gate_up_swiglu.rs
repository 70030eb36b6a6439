//! gate_up_swiglu: `y[z] = silu(Wg·x[z]) ⊙ (Wu·x[z])`, SwiGLU's two projections and activation in
//! one kernel ("FC13 + SwiGLU"). Each expert stores its `[M, K]` gate matrix, then its up matrix
//! (`quant::matrix` layout, any weight format); the layout (offsets, strides, grouped experts) is
//! gemv's `GemvLayout`. Constraints: K a multiple of the format's chunk.
//! Reference: `model::reference::swiglu` (its first two projections and activation).

use crate::check::{Tolerance, F32_UNIT_ROUNDOFF};
use crate::gpu::{GpuContext, ShaderSource};
use crate::quant::Format;

use super::gemv::{self, GemvLayout, GemvShape};
use super::KernelError;

pub const SHADER: ShaderSource = gemv_shaped_source!("gate_up_swiglu");

/// Records the fused projection; `buffers` is `[w, x, y, meta]` as for `gemv::dispatch_layout`,
/// `shape.m` the intermediate width (the rows of each of the two matrices). Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    buffers: [&wgpu::Buffer; 4],
    shape: GemvShape,
    layout: GemvLayout,
) -> Result<u64, KernelError> {
    // The shader writes each token's row contiguously: an interleaved layout would be ignored.
    if layout.seg != shape.m {
        return Err(KernelError::Shape {
            what: "gate_up_swiglu output segment (rows are written whole)",
            expected: shape.m.into(),
            got: layout.seg.into(),
        });
    }
    let kernel = gemv::GemvKernel {
        source: SHADER,
        matrices: 2,
        rows: gemv::Rows::LaneGroups(None),
    };
    gemv::record(ctx, pass, kernel, buffers, shape, layout)
}

/// silu(g)·u of two gemv rows with both matrices in `format`, compared with
/// `scale = 1.1·Σ|wg·x|·|u| + |silu(g)|·Σ|wu·x| + |silu(g)·u|`: each dot product carries the
/// tile gemv's bound, silu's slope is below 1.1, and exp, the division and the product add a
/// few roundings (Vulkan's exp: 3 ulp + 2 for the rest).
pub fn tolerance(format: Format, k: usize, lanes: u32) -> Tolerance {
    Tolerance {
        why: "the gemv bound through silu's slope, plus exp (3 ulp) and 2 roundings",
        rel: gemv::tolerance_tile(format, k, lanes).rel + 5.0 * F32_UNIT_ROUNDOFF,
        abs: 0.0,
    }
}
