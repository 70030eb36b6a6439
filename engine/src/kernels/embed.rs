//! embed: `x[t, :] = table[tokens[t], :]`. Reference: the first line of `model::reference::forward`.
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "embed",
    wgsl: include_str!("../../../shaders/embed.wgsl"),
    entry_point: "embed",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EmbedParams {
    pub tokens: u32,
    pub hidden: u32,
    pub vocab: u32,
    pub _pad: u32,
}

/// Records the lookup of `tokens` ids (u32) into `x` (`[tokens, hidden]`). Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    table: &wgpu::Buffer,
    token_ids: &wgpu::Buffer,
    x: &wgpu::Buffer,
    p: EmbedParams,
) -> Result<u64, KernelError> {
    let n = u64::from(p.tokens) * u64::from(p.hidden);
    check_len(
        "embed table",
        table,
        u64::from(p.vocab) * u64::from(p.hidden),
    )?;
    check_len("embed token ids", token_ids, p.tokens.into())?;
    check_len("embed x", x, n)?;
    launch(ctx, pass, SHADER, &p, &[table, token_ids, x], n)?;
    Ok(4 * (2 * n + u64::from(p.tokens)))
}
