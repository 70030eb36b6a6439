//! Shared helpers for the integration tests: the GPU context, which must exist in CI.

use moescope_engine::gpu::GpuContext;

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
