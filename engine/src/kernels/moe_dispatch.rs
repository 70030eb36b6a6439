//! moe_dispatch: one record per (token, choice) slot — a 16-byte header (expert id, gate,
//! activation scale, token) and the token's activation, in f32 or as FP8 tiles
//! (`quant::activation`: E4M3 codes and a power-of-two scale per 1×128 tile) — as the fused
//! AllToAll sends it. The expert kernels read their expert id and input from the record;
//! moe_combine reads the gate. Constraints: `hidden % 4 == 0`; FP8: `hidden % 16 == 0`,
//! `hidden ≤ 8192`.
//! Reference: `model::reference::moe` (which experts see which token, with which gate, and
//! `quant::activation::round_trip` for what FP8 records carry).
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, grid_2d, launch_grid, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "moe_dispatch",
    wgsl: concat!(
        include_str!("../../../shaders/include/fp8.wgsl"),
        include_str!("../../../shaders/moe_dispatch.wgsl"),
    ),
    entry_point: "moe_dispatch",
};

/// Floats of metadata at the start of each record: expert id, gate, scale, token.
pub const HEADER_FLOATS: u32 = 4;

/// The largest FP8 hidden size: the shader keeps one amax per tile in 64 workgroup slots.
pub const MAX_FP8_HIDDEN: u32 = 64 * 128;

/// How a record carries the activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    pub hidden: u32,
    pub fp8: bool,
}

impl RecordLayout {
    /// 4-byte words per record: header, then D floats, or the tile scales (padded to 4 words)
    /// and D/4 words of codes.
    pub fn words(self) -> u32 {
        HEADER_FLOATS
            + if self.fp8 {
                4 * self.scale_x4() + self.hidden / 4
            } else {
                self.hidden
            }
    }

    /// vec4s of tile scales after the header (FP8 only).
    pub fn scale_x4(self) -> u32 {
        self.hidden
            .div_ceil(crate::quant::activation::TILE as u32)
            .div_ceil(4)
    }

    /// Where the activation starts in a record, in vec4s: past the header (and the scales).
    pub fn x_offset_x4(self) -> u32 {
        HEADER_FLOATS / 4 + if self.fp8 { self.scale_x4() } else { 0 }
    }
}

/// Mirrors the params struct of the shader (also moe_combine's).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeDispatchParams {
    pub tokens: u32,
    pub k: u32,
    pub hidden: u32,
    /// 4-byte words per record: `RecordLayout::words`.
    pub record: u32,
}

/// `buffers`: `[h [T, D], ids [T, K], gates [T, K], records [T·K, record]]`; `fp8` writes FP8
/// records. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [h, ids, gates, records]: [&wgpu::Buffer; 4],
    p: MoeDispatchParams,
    fp8: bool,
) -> Result<u64, KernelError> {
    let by = if fp8 { 16 } else { 4 };
    if !p.hidden.is_multiple_of(by) {
        return Err(KernelError::NotDivisible {
            dim: "moe_dispatch hidden",
            value: p.hidden.into(),
            by: by.into(),
        });
    }
    if fp8 && p.hidden > MAX_FP8_HIDDEN {
        return Err(KernelError::LimitExceeded {
            what: "moe_dispatch FP8 hidden",
            got: p.hidden.into(),
            max: MAX_FP8_HIDDEN.into(),
        });
    }
    let layout = RecordLayout {
        hidden: p.hidden,
        fp8,
    };
    if p.record != layout.words() {
        return Err(KernelError::Shape {
            what: "moe_dispatch record words",
            expected: layout.words().into(),
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
    let constants = [("FP8", if fp8 { 1.0 } else { 0.0 })];
    launch_grid(
        ctx,
        pass,
        (SHADER, &constants),
        &p,
        &[h, ids, gates, records],
        (gx, 1, 1),
    )?;
    Ok(4 * (slots * d + 2 * slots + slots * u64::from(p.record)))
}

#[cfg(test)]
mod tests {

    #[test]
    fn records_keep_the_activation_vec4_aligned() {
        use super::RecordLayout;
        assert_eq!(super::HEADER_FLOATS % 4, 0);
        let f32s = RecordLayout {
            hidden: 256,
            fp8: false,
        };
        assert_eq!((f32s.words(), f32s.x_offset_x4()), (260, 1));
        // 2 tiles: 2 scales padded to one vec4, then 64 words of codes.
        let fp8 = RecordLayout {
            hidden: 256,
            fp8: true,
        };
        assert_eq!((fp8.words(), fp8.x_offset_x4()), (4 + 4 + 64, 2));
        let wide = RecordLayout {
            hidden: 1040,
            fp8: true,
        };
        assert_eq!((wide.scale_x4(), wide.words()), (3, 4 + 12 + 260));
    }
}
