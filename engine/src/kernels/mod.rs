//! One module per kernel family, each paired with `shaders/<same name>.wgsl`: its params struct
//! (mirrored by a WGSL struct), its shader source and a `dispatch` that validates shapes.

/// The source of a gemv-shaped kernel, `shaders/<name>.wgsl`, with what it builds on prepended:
/// FP8 decoding, the weight formats (weights.wgsl) and gemv's params and bindings.
macro_rules! gemv_shaped_source {
    ($name:literal) => {
        crate::gpu::ShaderSource {
            name: $name,
            wgsl: concat!(
                include_str!("../../../shaders/include/fp8.wgsl"),
                include_str!("../../../shaders/include/weights.wgsl"),
                include_str!("../../../shaders/include/gemv_layout.wgsl"),
                include_str!(concat!("../../../shaders/", $name, ".wgsl"))
            ),
            entry_point: $name,
        }
    };
}

pub mod add;
pub mod add_rms_norm;
pub mod copy_rows;
pub mod copy_vec4;
pub mod embed;
pub mod fp8_round_trip;
pub mod gate_up_swiglu;
pub mod gather_rows;
pub mod gemv;
pub mod mla_scores;
pub mod mla_split_k;
pub mod mla_values;
pub mod moe_combine;
pub mod moe_dispatch;
pub mod moe_route;
pub mod moe_topk;
pub mod qkv_rope_scale;
pub mod rms_norm;
pub mod rope;
pub mod scatter_add;
pub mod sigmoid;
pub mod silu_mul;
pub mod softmax;

use crate::gpu::{bind_buffers, GpuContext, GpuError, ShaderSource};

/// Every kernel's source as the engine compiles it (its includes prepended), so that a test can
/// validate exactly that (tests/tests/shaders.rs).
pub const SHADERS: [ShaderSource; 25] = [
    add::SHADER,
    add_rms_norm::SHADER,
    copy_rows::SHADER,
    copy_vec4::SHADER,
    embed::SHADER,
    fp8_round_trip::SHADER,
    gate_up_swiglu::SHADER,
    gather_rows::SHADER,
    gemv::SHADER,
    gemv::WIDE,
    mla_scores::SHADER,
    mla_split_k::SHADER,
    mla_split_k::REDUCE,
    mla_values::SHADER,
    moe_combine::SHADER,
    moe_dispatch::SHADER,
    moe_route::SHADER,
    moe_topk::SHADER,
    qkv_rope_scale::SHADER,
    rms_norm::SHADER,
    rope::SHADER,
    scatter_add::SHADER,
    sigmoid::SHADER,
    silu_mul::SHADER,
    softmax::SHADER,
];

/// What a kernel does in a decode step, for grouping kernels in a timeline or a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KernelKind {
    Projection,
    NormResidual,
    Attention,
    Moe,
    Activation,
    Movement,
}

impl KernelKind {
    /// In legend order.
    pub const ALL: [KernelKind; 6] = [
        KernelKind::Projection,
        KernelKind::NormResidual,
        KernelKind::Attention,
        KernelKind::Moe,
        KernelKind::Activation,
        KernelKind::Movement,
    ];

    pub fn label(self) -> &'static str {
        match self {
            KernelKind::Projection => "projections (GEMV)",
            KernelKind::NormResidual => "norms and residuals",
            KernelKind::Attention => "attention",
            KernelKind::Moe => "MoE routing, dispatch, combine",
            KernelKind::Activation => "activations",
            KernelKind::Movement => "copies, RoPE, embedding",
        }
    }

    /// The kind of the kernel named `name` (a `SHADERS` name), None for another name.
    pub fn of(name: &str) -> Option<KernelKind> {
        use KernelKind::*;
        Some(match name {
            "gemv" | "gemv_wide" | "gate_up_swiglu" | "qkv_rope_scale" => Projection,
            "rms_norm" | "add_rms_norm" | "add" => NormResidual,
            "mla_scores" | "softmax" | "mla_values" | "mla_split_k" | "mla_split_k_reduce" => {
                Attention
            }
            "moe_route" | "sigmoid" | "moe_topk" | "moe_dispatch" | "moe_combine"
            | "gather_rows" | "scatter_add" => Moe,
            "silu_mul" | "fp8_round_trip" => Activation,
            "copy_rows" | "copy_vec4" | "rope" | "embed" => Movement,
            _ => return None,
        })
    }
}

/// Invocations per workgroup of the one-invocation-per-element kernels.
const FLAT_WORKGROUP: u64 = 256;

/// Records a kernel that runs one invocation per element over `invocations` elements, in
/// workgroups of 256 spread over a 2D grid (see `grid_2d`).
pub(crate) fn launch<P: bytemuck::Pod>(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    source: ShaderSource,
    params: &P,
    buffers: &[&wgpu::Buffer],
    invocations: u64,
) -> Result<(), KernelError> {
    let groups = grid_2d(
        invocations.div_ceil(FLAT_WORKGROUP),
        ctx.adapter.limits.max_compute_workgroups_per_dimension,
    )?;
    launch_groups(ctx, pass, source, params, buffers, groups)
}

/// Records a kernel over an explicit `(x, y)` grid of workgroups. The params struct is bound at
/// 0, then `buffers` in order: the shader's binding numbers.
pub(crate) fn launch_groups<P: bytemuck::Pod>(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    source: ShaderSource,
    params: &P,
    buffers: &[&wgpu::Buffer],
    (gx, gy): (u32, u32),
) -> Result<(), KernelError> {
    launch_grid(ctx, pass, (source, &[]), params, buffers, (gx, gy, 1))
}

/// Records a kernel with override constants over an `(x, y, z)` grid; bindings as
/// `launch_groups`.
pub(crate) fn launch_grid<P: bytemuck::Pod>(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    (source, constants): (ShaderSource, &[(&str, f64)]),
    params: &P,
    buffers: &[&wgpu::Buffer],
    (gx, gy, gz): (u32, u32, u32),
) -> Result<(), KernelError> {
    let max = ctx.adapter.limits.max_compute_workgroups_per_dimension;
    if gx > max || gy > max || gz > max {
        return Err(KernelError::LimitExceeded {
            what: "workgroups per dimension",
            got: gx.max(gy).max(gz).into(),
            max: max.into(),
        });
    }
    if gx == 0 || gy == 0 || gz == 0 {
        // Nothing to do (an empty batch): record nothing.
        return Ok(());
    }
    let pipeline = ctx.pipelines.get(&ctx.device, source, constants);
    let params = ctx.uniforms.push(&ctx.queue, params);
    let bind_group = bind_buffers(&ctx.device, &pipeline, source.name, params, buffers);
    pass.set_pipeline(&pipeline.pipeline);
    pass.set_bind_group(0, &bind_group, &[]);
    pass.dispatch_workgroups(gx, gy, gz);
    Ok(())
}

/// A kernel refused its inputs; every variant carries the numbers that were wrong.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("{what}: expected {expected}, got {got}")]
    Shape {
        what: &'static str,
        expected: u64,
        got: u64,
    },
    #[error("{dim} = {value} must be a multiple of {by}")]
    NotDivisible {
        dim: &'static str,
        value: u64,
        by: u64,
    },
    #[error("{what} does not take {format} weights")]
    Format {
        what: &'static str,
        format: &'static str,
    },
    #[error("{what} = {got} exceeds the limit {max}")]
    LimitExceeded {
        what: &'static str,
        got: u64,
        max: u64,
    },
    #[error(transparent)]
    Layout(#[from] crate::quant::matrix::LayoutError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// Checks that `buffer` holds at least `elems` 4-byte values.
pub(crate) fn check_len(
    what: &'static str,
    buffer: &wgpu::Buffer,
    elems: u64,
) -> Result<(), KernelError> {
    if buffer.size() < elems * 4 {
        return Err(KernelError::Shape {
            what,
            expected: elems * 4,
            got: buffer.size(),
        });
    }
    Ok(())
}

/// Spreads `groups` workgroups over a 2D grid (x ≤ the per-dimension limit); shaders recover the
/// flat index as `wg.x + wg.y * num_workgroups.x` and bounds-check it.
pub(crate) fn grid_2d(groups: u64, max_per_dim: u32) -> Result<(u32, u32), KernelError> {
    let max = u64::from(max_per_dim.max(1));
    let x = groups.clamp(1, max);
    let y = groups.div_ceil(x).max(1);
    if y > max {
        return Err(KernelError::LimitExceeded {
            what: "workgroups",
            got: groups,
            max: max * max,
        });
    }
    Ok((x as u32, y as u32))
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_kernel_has_a_kind() {
        for shader in super::SHADERS {
            assert!(
                super::KernelKind::of(shader.name).is_some(),
                "{}",
                shader.name
            );
        }
        assert_eq!(super::KernelKind::of("matmul"), None);
    }
    use super::grid_2d;

    #[test]
    fn grid_covers_every_group_within_limits() {
        assert_eq!(grid_2d(1, 65535).unwrap(), (1, 1));
        assert_eq!(grid_2d(65535, 65535).unwrap(), (65535, 1));
        assert_eq!(grid_2d(65536, 65535).unwrap(), (65535, 2));
        assert!(grid_2d(65535u64 * 65535 + 1, 65535).is_err());
    }
}
