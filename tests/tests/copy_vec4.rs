//! copy_vec4 copies exactly, including a count that does not fill the last workgroup.

use moescope_engine::gpu::{read_back, storage_buffer, storage_zeroed};
use moescope_engine::kernels::copy_vec4;
use moescope_engine::rng::uniform_f32;
use moescope_tests::gpu;

#[test]
fn copy_vec4_copies_bit_exactly() {
    let Some(ctx) = gpu() else { return };
    let n_vec4 = 1000u32; // not a multiple of the 256-invocation workgroup
    let data = uniform_f32(5, n_vec4 as usize * 4, 3.0);
    let src = storage_buffer(&ctx, "src", &data).expect("src");
    // One vec4 more than copied, to see that the kernel stops at N.
    let dst = storage_zeroed(&ctx, "dst", (u64::from(n_vec4) + 1) * 16).expect("dst");
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        copy_vec4::dispatch(&ctx, &mut pass, &src, &dst, n_vec4).expect("dispatch");
    }
    ctx.queue.submit([encoder.finish()]);
    let got: Vec<f32> = pollster::block_on(read_back(&ctx, &dst)).expect("read back");
    assert_eq!(&got[..data.len()], &data[..]);
    assert_eq!(&got[data.len()..], &[0.0; 4]);
}
