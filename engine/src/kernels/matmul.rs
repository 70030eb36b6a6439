//! matmul: `y[T, M] = x[T, K] · W[M, K]ᵀ` for prefill (T > 1), 16×16 output tiles. Reference:
//! `model::reference::gemv` per token.
use crate::gpu::{GpuContext, ShaderSource};

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "matmul",
    wgsl: include_str!("../../../shaders/matmul.wgsl"),
    entry_point: "matmul",
};

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatmulParams {
    pub t: u32,
    pub m: u32,
    pub k: u32,
    pub _pad: u32,
}

const TILE: u32 = 16;

/// Returns bytes moved (W read once, x read once, y written once: the minimum).
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    w: &wgpu::Buffer,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    p: MatmulParams,
) -> Result<u64, KernelError> {
    let (t, m, k) = (u64::from(p.t), u64::from(p.m), u64::from(p.k));
    if t == 0 || m == 0 || k == 0 {
        return Err(KernelError::Shape {
            what: "matmul T, M and K",
            expected: 1,
            got: 0,
        });
    }
    check_len("matmul w", w, m * k)?;
    check_len("matmul x", x, t * k)?;
    check_len("matmul y", y, t * m)?;
    let groups = (p.m.div_ceil(TILE), p.t.div_ceil(TILE));
    launch_groups(ctx, pass, SHADER, &p, &[w, x, y], groups)?;
    Ok(4 * (m * k + t * k + t * m))
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_struct_size() {
        assert_eq!(std::mem::size_of::<super::MatmulParams>(), 16);
    }
}
