//! scatter_add: the gate-weighted combine of one expert's outputs into token order.
use crate::check::Tolerance;
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "scatter_add",
    wgsl: include_str!("../../../shaders/scatter_add.wgsl"),
    entry_point: "scatter_add",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScatterParams {
    pub rows: u32,
    pub width: u32,
    pub base: u32,
    pub _pad: u32,
}

/// `out[index[base + j]] += weight[base + j] · y[j]` for `j < rows`. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    y: &wgpu::Buffer,
    index: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    out: &wgpu::Buffer,
    p: ScatterParams,
) -> Result<u64, KernelError> {
    let n = u64::from(p.rows) * u64::from(p.width);
    let slots = u64::from(p.base) + u64::from(p.rows);
    check_len("scatter_add y", y, n)?;
    check_len("scatter_add index", index, slots)?;
    check_len("scatter_add weight", weight, slots)?;
    check_len("scatter_add out", out, p.width.into())?;
    launch(ctx, pass, SHADER, &p, &[y, index, weight, out], n)?;
    Ok(4 * (3 * n + 2 * u64::from(p.rows)))
}

/// `out + weight·y` against the same in f64, relative to `|out| + |weight·y|`: two roundings
/// (one if the compiler fuses them into an FMA).
pub fn tolerance() -> Tolerance {
    Tolerance::gamma(2, "one product and one add, each rounded once")
}
