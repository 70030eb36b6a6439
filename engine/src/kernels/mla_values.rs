//! mla_values: the attention-weighted sum of latent cache rows (W_UV absorbed into the output
//! projection). Reference: the values inside `model::reference::forward`'s attention.
use crate::check::Tolerance;
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "mla_values",
    wgsl: include_str!("../../../shaders/mla_values.wgsl"),
    entry_point: "mla_values",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MlaValuesParams {
    pub tokens: u32,
    pub heads: u32,
    pub ctx: u32,
    pub row: u32,
    pub latent: u32,
    pub _pad: [u32; 3],
}

/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    p_buf: &wgpu::Buffer,
    cache: &wgpu::Buffer,
    out: &wgpu::Buffer,
    p: MlaValuesParams,
) -> Result<u64, KernelError> {
    let th = u64::from(p.tokens) * u64::from(p.heads);
    if p.latent > p.row {
        return Err(KernelError::Shape {
            what: "mla_values latent width (at most the cache row)",
            expected: p.row.into(),
            got: p.latent.into(),
        });
    }
    check_len("mla_values p", p_buf, th * u64::from(p.ctx))?;
    check_len(
        "mla_values cache",
        cache,
        u64::from(p.ctx) * u64::from(p.row),
    )?;
    check_len("mla_values out", out, th * u64::from(p.latent))?;
    launch(
        ctx,
        pass,
        SHADER,
        &p,
        &[p_buf, cache, out],
        th * u64::from(p.latent),
    )?;
    Ok(4 * (th * u64::from(p.ctx)
        + u64::from(p.ctx) * u64::from(p.latent)
        + th * u64::from(p.latent)))
}

/// `Σ_s p_s·cache[s, c]` over `ctx` positions against the f64 sum, relative to `Σ|p·c|`: a
/// chain of `ctx` products and adds (γ_{2·ctx}).
pub fn tolerance(ctx: u32) -> Tolerance {
    Tolerance::gamma(
        2 * ctx as usize,
        "a sequential sum of products over the context",
    )
}
