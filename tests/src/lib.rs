//! Shared helpers for the integration tests: the GPU context, which must exist in CI.

use moescope_engine::gpu::{read_back, GpuContext};

/// The test GPU (lavapipe in CI). Without an adapter the test fails when
/// `MOESCOPE_REQUIRE_GPU=1` (CI sets it through `cargo xtask test`); elsewhere it prints a loud
/// skip and returns `None`.
pub fn gpu() -> Option<GpuContext> {
    match pollster::block_on(GpuContext::new()) {
        Ok(ctx) => Some(ctx),
        Err(e) if std::env::var("MOESCOPE_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("MOESCOPE_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED (no GPU adapter: {e}); install mesa-vulkan-drivers for lavapipe");
            None
        }
    }
}

/// Records one kernel, submits it and reads `out` back as f32.
pub fn run(
    ctx: &GpuContext,
    out: &wgpu::Buffer,
    record: impl FnOnce(&mut wgpu::ComputePass<'_>),
) -> Vec<f32> {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        record(&mut pass);
    }
    ctx.queue.submit([encoder.finish()]);
    pollster::block_on(read_back::<f32>(ctx, out)).expect("the result reads back")
}

/// The reference for one token through gate_up_swiglu: both projections, their magnitudes
/// Σ|w·x| (what the gemv tolerances scale by), silu(gate)·up, and the magnitude the swiglu
/// tolerances scale by: each projection's bound carried through silu's slope (≤ 1.1) and the
/// product, plus the product's own rounding.
pub struct SwigluReference {
    pub gate: Vec<f32>,
    pub up: Vec<f32>,
    pub gate_magnitude: Vec<f64>,
    pub up_magnitude: Vec<f64>,
    pub act: Vec<f32>,
    pub act_scale: Vec<f64>,
}

impl SwigluReference {
    pub fn new(w_gate: &[f32], w_up: &[f32], x: &[f32], m: usize, k: usize) -> Self {
        use moescope_engine::model::reference::{gemv, gemv_magnitude, silu};
        let (gate, up) = (gemv(w_gate, x, m, k), gemv(w_up, x, m, k));
        let (gate_magnitude, up_magnitude) = (
            gemv_magnitude(w_gate, x, m, k),
            gemv_magnitude(w_up, x, m, k),
        );
        let act = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
        let act_scale = (0..m)
            .map(|i| {
                let s = f64::from(silu(gate[i]));
                let u = f64::from(up[i]);
                1.1 * gate_magnitude[i] * u.abs() + s.abs() * up_magnitude[i] + (s * u).abs()
            })
            .collect();
        Self {
            gate,
            up,
            gate_magnitude,
            up_magnitude,
            act,
            act_scale,
        }
    }
}

/// Where qkv_rope_scale rotates and how it scales: `heads` periods of `period` rows, each ending
/// in `dim` rotated rows, everything times `scale`.
#[derive(Clone, Copy)]
pub struct RopeEpilogue {
    pub heads: usize,
    pub period: usize,
    pub dim: usize,
    pub theta: f32,
    pub scale: f32,
}

impl RopeEpilogue {
    /// Output rows: M.
    pub fn rows(&self) -> usize {
        self.heads * self.period
    }

    /// The kernel's params for `tokens` rows of x (K = `k`, packed) after `pos0` cached
    /// positions, writing packed rows of M.
    pub fn params(
        &self,
        k: usize,
        tokens: usize,
        pos0: usize,
    ) -> moescope_engine::kernels::qkv_rope_scale::QkvRopeScaleParams {
        moescope_engine::kernels::qkv_rope_scale::QkvRopeScaleParams {
            m: self.rows() as u32,
            k: k as u32,
            tokens: tokens as u32,
            pos0: pos0 as u32,
            x_stride: (k / 4) as u32,
            y_stride: self.rows() as u32,
            rope_from: 0,
            rope_period: self.period as u32,
            rope_dim: self.dim as u32,
            scale: self.scale,
            _pad: [0; 2],
        }
    }
}

/// The reference for one token at position `pos` through qkv_rope_scale: W·x, rotated and
/// scaled, and the magnitude its tolerance scales by (a rotated row mixes two rows, so a pair's
/// rows both count the pair's Σ|w·x|).
pub struct QkvRopeReference {
    pub want: Vec<f32>,
    pub magnitude: Vec<f64>,
}

impl QkvRopeReference {
    pub fn new(w: &[f32], x: &[f32], k: usize, rope: RopeEpilogue, pos: usize) -> Self {
        use moescope_engine::model::reference::{gemv, gemv_magnitude, rope as rotate};
        let RopeEpilogue {
            heads,
            period,
            dim,
            theta,
            scale,
        } = rope;
        let m = rope.rows();
        let mut want = gemv(w, x, m, k);
        let mag = gemv_magnitude(w, x, m, k);
        let mut magnitude = mag.clone();
        for h in 0..heads {
            let r = h * period + period - dim;
            rotate(&mut want[r..r + dim], pos, theta);
            for i in 0..dim / 2 {
                let both = mag[r + i] + mag[r + i + dim / 2];
                magnitude[r + i] = both;
                magnitude[r + i + dim / 2] = both;
            }
        }
        Self {
            want: want.iter().map(|v| v * scale).collect(),
            magnitude: magnitude.iter().map(|v| v * f64::from(scale)).collect(),
        }
    }
}
