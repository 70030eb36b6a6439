//! mla_split_k: flash-decoding attention of absorbed MLA. `mla_split_k` runs one workgroup per
//! (chunk of 64 positions, token·head) and writes each chunk's max, exp-sum and unnormalized
//! latent output; `mla_split_k_reduce` merges the chunks. The split follows the context:
//! `splits = ⌈(pos0 + tokens) / 64⌉`. Constraints: `latent ≤ row`. Reference:
//! `model::reference::forward`'s attention (scores, softmax, values).
use crate::check::Tolerance;
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "mla_split_k",
    wgsl: include_str!("../../../shaders/mla_split_k.wgsl"),
    entry_point: "mla_split_k",
};

pub const REDUCE: ShaderSource = ShaderSource {
    name: "mla_split_k_reduce",
    wgsl: include_str!("../../../shaders/mla_split_k_reduce.wgsl"),
    entry_point: "mla_split_k_reduce",
};

/// Context positions per workgroup, as in the shader.
pub const CHUNK: u32 = 64;

/// Mirrors the params struct of both shaders.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MlaSplitKParams {
    pub tokens: u32,
    pub heads: u32,
    pub row: u32,
    pub latent: u32,
    pub pos0: u32,
    pub splits: u32,
    pub scale: f32,
    pub _pad: u32,
}

impl MlaSplitKParams {
    /// Chunks of 64 positions over the whole visible context.
    pub fn splits_for(context: u32) -> u32 {
        context.div_ceil(CHUNK).max(1)
    }

    /// Floats of the partials buffer: `[T·H, splits, latent + 2]`.
    pub fn partial_floats(&self) -> u64 {
        u64::from(self.tokens)
            * u64::from(self.heads)
            * u64::from(self.splits)
            * u64::from(self.latent + 2)
    }
}

/// Records both kernels: `[q [T, H, row], cache [ctx, row], partials, o [T, H, latent]]`.
/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [q, cache, partials]: [&wgpu::Buffer; 3],
    p: MlaSplitKParams,
) -> Result<u64, KernelError> {
    check(&p)?;
    let (t, h, row) = (u64::from(p.tokens), u64::from(p.heads), u64::from(p.row));
    let context = u64::from(p.pos0) + t;
    if p.splits != MlaSplitKParams::splits_for(context as u32) {
        return Err(KernelError::Shape {
            what: "mla_split_k splits (⌈context / 64⌉)",
            expected: MlaSplitKParams::splits_for(context as u32).into(),
            got: p.splits.into(),
        });
    }
    check_len("mla_split_k q", q, t * h * row)?;
    check_len("mla_split_k cache", cache, context * row)?;
    check_len("mla_split_k partials", partials, p.partial_floats())?;
    launch_groups(
        ctx,
        pass,
        SHADER,
        &p,
        &[q, cache, partials],
        (p.splits, p.tokens * p.heads),
    )?;
    // The minimum, as for mla_scores: the queries and the cache once (the heads of a token read
    // the same rows; caches serve the repeats), the partials written.
    Ok(4 * (t * h * row + context * row + p.partial_floats()))
}

/// Records the reduction: `[partials, o [T, H, latent]]`. Returns bytes moved.
pub fn dispatch_reduce(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [partials, o]: [&wgpu::Buffer; 2],
    p: MlaSplitKParams,
) -> Result<u64, KernelError> {
    check(&p)?;
    let th = u64::from(p.tokens) * u64::from(p.heads);
    check_len("mla_split_k_reduce partials", partials, p.partial_floats())?;
    check_len("mla_split_k_reduce o", o, th * u64::from(p.latent))?;
    launch_groups(
        ctx,
        pass,
        REDUCE,
        &p,
        &[partials, o],
        (p.latent.div_ceil(64), p.tokens * p.heads),
    )?;
    Ok(4 * (p.partial_floats() + th * u64::from(p.latent)))
}

fn check(p: &MlaSplitKParams) -> Result<(), KernelError> {
    if p.tokens == 0 || p.heads == 0 || p.latent == 0 || p.latent > p.row {
        return Err(KernelError::Shape {
            what: "mla_split_k tokens, heads, and latent (1..=row)",
            expected: p.row.into(),
            got: p.latent.into(),
        });
    }
    Ok(())
}

/// Split-K attention against the f64 reference, compared with `scale = Σ_s p_s·|v_s|`.
///
/// Not a proven bound: a score's error (γ_row·Σ|q·k|) moves its probability by a relative
/// amount of the same order, exp adds 3 ulp, and the merge of chunks rescales by e^(m_j−M).
/// With row 80 and scores of order 1 that is a few 1e-6 relative; 1e-4 leaves room for the 3
/// levels of summation while a wrong mask, a dropped chunk or a bad merge weight moves the
/// output by O(0.1–1).
pub fn tolerance() -> Tolerance {
    Tolerance {
        why: "score rounding through softmax and the chunk merge: empirical, ~30x measured",
        rel: 1e-4,
        abs: 1e-6,
    }
}

#[cfg(test)]
mod tests {
    use super::MlaSplitKParams;

    #[test]
    fn splits_follow_the_context() {
        assert_eq!(MlaSplitKParams::splits_for(1), 1);
        assert_eq!(MlaSplitKParams::splits_for(64), 1);
        assert_eq!(MlaSplitKParams::splits_for(65), 2);
        assert_eq!(MlaSplitKParams::splits_for(512), 8);
    }
}
