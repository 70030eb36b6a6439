//! mla_scores: causal attention scores of absorbed MLA over the latent cache (multi-query form).
//! Reference: the scores inside `model::reference::forward`'s attention.
use crate::check::Tolerance;
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "mla_scores",
    wgsl: include_str!("../../../shaders/mla_scores.wgsl"),
    entry_point: "mla_scores",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MlaScoresParams {
    pub tokens: u32,
    pub heads: u32,
    pub ctx: u32,
    pub row: u32,
    pub pos0: u32,
    pub scale: f32,
    pub _pad: [u32; 2],
}

/// Returns bytes moved: each query row once, the cache rows `0..ctx` once, the scores written.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    q: &wgpu::Buffer,
    cache: &wgpu::Buffer,
    scores: &wgpu::Buffer,
    p: MlaScoresParams,
) -> Result<u64, KernelError> {
    let th = u64::from(p.tokens) * u64::from(p.heads);
    let row = u64::from(p.row);
    if u64::from(p.pos0) + u64::from(p.tokens) != u64::from(p.ctx) {
        return Err(KernelError::Shape {
            what: "mla_scores ctx (pos0 + tokens)",
            expected: u64::from(p.pos0) + u64::from(p.tokens),
            got: p.ctx.into(),
        });
    }
    check_len("mla_scores q", q, th * row)?;
    check_len("mla_scores cache", cache, u64::from(p.ctx) * row)?;
    check_len("mla_scores scores", scores, th * u64::from(p.ctx))?;
    launch(
        ctx,
        pass,
        SHADER,
        &p,
        &[q, cache, scores],
        th * u64::from(p.ctx),
    )?;
    Ok(4 * (th * row + u64::from(p.ctx) * row + th * u64::from(p.ctx)))
}

/// `scale·q·cache` over a row of `row` values against the f64 dot product, relative to
/// `scale·Σ|q·c|`: a chain of `row` products and adds, then the scale (γ_{2·row+1}).
pub fn tolerance(row: u32) -> Tolerance {
    Tolerance::gamma(
        2 * row as usize + 1,
        "a sequential dot product over the row, then the scale",
    )
}
