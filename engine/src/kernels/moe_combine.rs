//! moe_combine: `out[t] += Σ_j gate(t, j) · expert_out[t·K + j]`, the routed experts' weighted
//! sum added to the shared expert's output, gates read from the dispatch records. Reference:
//! `model::reference::moe`.
use crate::check::Tolerance;
use crate::gpu::{GpuContext, ShaderSource};

use super::moe_dispatch::MoeDispatchParams;
use super::{check_len, launch, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "moe_combine",
    wgsl: include_str!("../../../shaders/moe_combine.wgsl"),
    entry_point: "moe_combine",
};

/// `buffers`: `[records [T·K, record], expert_out [T·K, D], out [T, D]]`. Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [records, expert_out, out]: [&wgpu::Buffer; 3],
    p: MoeDispatchParams,
) -> Result<u64, KernelError> {
    let (t, k, d) = (u64::from(p.tokens), u64::from(p.k), u64::from(p.hidden));
    check_len("moe_combine records", records, t * k * u64::from(p.record))?;
    check_len("moe_combine expert_out", expert_out, t * k * d)?;
    check_len("moe_combine out", out, t * d)?;
    launch(ctx, pass, SHADER, &p, &[records, expert_out, out], t * d)?;
    Ok(4 * (t * k + t * k * d + 2 * t * d))
}

/// `out + Σ_j gate_j·expert_out_j` over `k` choices against the same in f64, relative to
/// `|out| + Σ|gate·expert_out|`: a chain of k products and k adds (γ_2k).
pub fn tolerance(k: u32) -> Tolerance {
    Tolerance::gamma(
        2 * k as usize,
        "a chain of k products and k adds into the shared output",
    )
}
