//! A lost GPU device (the browser resets the GPU, the driver crashes) is reported, not a panic:
//! the context says it is lost, and a forward on it returns an error the app can act on (it
//! switches to the CPU engine). `destroy` loses the device on purpose.

use std::sync::Arc;

use moescope_engine::model::generate::Engine;
use moescope_engine::model::tokenizer::encode;
use moescope_engine::model::{MoeConfig, Weights};
use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;
use moescope_tests::gpu;

#[test]
fn a_destroyed_device_is_reported_and_forward_fails_cleanly() {
    let Some(ctx) = gpu() else { return };
    let ctx = Arc::new(ctx);
    let w = Weights::synthetic(&MoeConfig::deepseek_mini(), 1).unwrap();
    let mut engine = Engine::gpu(Arc::clone(&ctx), &w, Optimizations::all(), Format::F32).unwrap();
    assert!(pollster::block_on(engine.forward(&encode("ok"))).is_ok());
    assert_eq!(engine.device_lost(), None);

    ctx.device.destroy();
    let _ = ctx.device.poll(wgpu::PollType::wait_indefinitely());
    let why = engine
        .device_lost()
        .expect("the context knows the device is gone");
    assert!(why.contains("Destroyed"), "{why}");
    engine.reset();
    assert!(pollster::block_on(engine.forward(&encode("again"))).is_err());
}
