//! moe_dispatch: one record per (token, choice) slot — a 16-byte header (expert id, gate,
//! activation scale, token) and the token's activation — as the fused AllToAll sends it. The
//! expert kernels read their expert id and input from the record; moe_combine reads the gate.
//! Constraints: `hidden % 4 == 0`. Reference: `model::reference::moe` (which experts see which
//! token, with which gate).
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, grid_2d, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "moe_dispatch",
    wgsl: include_str!("../../../shaders/moe_dispatch.wgsl"),
    entry_point: "moe_dispatch",
};

/// Floats of metadata at the start of each record: expert id, gate, scale, token.
pub const HEADER_FLOATS: u32 = 4;

/// Floats per record for a model of width `hidden`.
pub fn record_floats(hidden: u32) -> u32 {
    HEADER_FLOATS + hidden
}

/// Mirrors the params struct of the shader (also moe_combine's).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeDispatchParams {
    pub tokens: u32,
    pub k: u32,
    pub hidden: u32,
    /// Floats per record: `record_floats(hidden)`.
    pub record: u32,
}

/// `buffers`: `[h [T, D], ids [T, K], gates [T, K], records [T·K, record]]`. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [h, ids, gates, records]: [&wgpu::Buffer; 4],
    p: MoeDispatchParams,
) -> Result<u64, KernelError> {
    if !p.hidden.is_multiple_of(4) {
        return Err(KernelError::NotDivisible {
            dim: "moe_dispatch hidden",
            value: p.hidden.into(),
            by: 4,
        });
    }
    if p.record != record_floats(p.hidden) {
        return Err(KernelError::Shape {
            what: "moe_dispatch record floats",
            expected: record_floats(p.hidden).into(),
            got: p.record.into(),
        });
    }
    let (t, k, d) = (u64::from(p.tokens), u64::from(p.k), u64::from(p.hidden));
    let slots = t * k;
    check_len("moe_dispatch h", h, t * d)?;
    check_len("moe_dispatch ids", ids, slots)?;
    check_len("moe_dispatch gates", gates, slots)?;
    check_len("moe_dispatch records", records, slots * u64::from(p.record))?;
    let max = ctx.adapter.limits.max_compute_workgroups_per_dimension;
    let (gx, gy) = grid_2d(slots, max)?;
    if gy > 1 {
        // The shader indexes slots by wg.x alone; the model never has this many.
        return Err(KernelError::LimitExceeded {
            what: "moe_dispatch slots",
            got: slots,
            max: max.into(),
        });
    }
    launch_groups(ctx, pass, SHADER, &p, &[h, ids, gates, records], (gx, 1))?;
    Ok(4 * (slots * d + 2 * slots + slots * u64::from(p.record)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_struct_size() {
        assert_eq!(std::mem::size_of::<super::MoeDispatchParams>(), 16);
    }

    #[test]
    fn header_keeps_the_activation_vec4_aligned() {
        assert_eq!(super::HEADER_FLOATS % 4, 0);
        assert_eq!(super::record_floats(256), 260);
    }
}
