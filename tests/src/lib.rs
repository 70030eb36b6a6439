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
