//! moe_route: router logits, gating function (sigmoid or softmax) and top-k in one kernel, one
//! workgroup per token. Constraints: `experts ≤ 64`, `hidden % 4 == 0`, `1 ≤ k ≤ experts`.
//! Reference: `model::reference::route` on `gemv` logits.
use crate::gpu::{GpuContext, ShaderSource};
use crate::model::GateFunction;

use super::{check_len, launch_groups, KernelError};

pub const SHADER: ShaderSource = ShaderSource {
    name: "moe_route",
    wgsl: include_str!("../../../shaders/moe_route.wgsl"),
    entry_point: "moe_route",
};

/// The most experts one workgroup routes over (its size).
pub const MAX_EXPERTS: u32 = 64;

/// Mirrors the params struct of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeRouteParams {
    pub tokens: u32,
    pub experts: u32,
    pub k: u32,
    pub hidden: u32,
    pub routed_scaling: f32,
    /// 0: sigmoid, 1: softmax.
    pub gate: u32,
    pub _pad: [u32; 2],
}

impl MoeRouteParams {
    pub fn gate_code(gate: GateFunction) -> u32 {
        match gate {
            GateFunction::Sigmoid => 0,
            GateFunction::Softmax => 1,
        }
    }
}

/// `buffers`: `[router [E, D], h [T, D], bias [E], scores [T, E], ids [T, K], gates [T, K]]`.
/// Returns bytes moved.
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    [router, h, bias, scores, ids, gates]: [&wgpu::Buffer; 6],
    p: MoeRouteParams,
) -> Result<u64, KernelError> {
    if p.experts == 0 || p.experts > MAX_EXPERTS {
        return Err(KernelError::LimitExceeded {
            what: "moe_route experts",
            got: p.experts.into(),
            max: MAX_EXPERTS.into(),
        });
    }
    if p.k == 0 || p.k > p.experts {
        return Err(KernelError::Shape {
            what: "moe_route k (1..=experts)",
            expected: p.experts.into(),
            got: p.k.into(),
        });
    }
    if !p.hidden.is_multiple_of(4) {
        return Err(KernelError::NotDivisible {
            dim: "moe_route hidden",
            value: p.hidden.into(),
            by: 4,
        });
    }
    let (t, e, k, d) = (
        u64::from(p.tokens),
        u64::from(p.experts),
        u64::from(p.k),
        u64::from(p.hidden),
    );
    check_len("moe_route router", router, e * d)?;
    check_len("moe_route h", h, t * d)?;
    check_len("moe_route bias", bias, e)?;
    check_len("moe_route scores", scores, t * e)?;
    check_len("moe_route ids", ids, t * k)?;
    check_len("moe_route gates", gates, t * k)?;
    launch_groups(
        ctx,
        pass,
        SHADER,
        &p,
        &[router, h, bias, scores, ids, gates],
        (p.tokens, 1),
    )?;
    Ok(4 * (e * d + t * d + e + t * e + 2 * t * k))
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_struct_size() {
        assert_eq!(std::mem::size_of::<super::MoeRouteParams>(), 32);
    }
}
