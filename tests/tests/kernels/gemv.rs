//! gemv against `model::reference::gemv` on a real adapter, over the edge shapes of STYLE.md.
//! Tolerance: `check::gemv::tolerance_f32(K, lanes)`, the γ_n bound of the kernel's summation
//! order.

use moescope_engine::check::compare_scaled;
use moescope_engine::gpu::{read_back, storage_buffer, storage_zeroed, GpuContext};
use moescope_engine::kernels::{gemv, KernelError};
use moescope_engine::model::reference;
use moescope_engine::rng::uniform_f32;
use moescope_tests::gpu;

fn run_gemv(
    ctx: &GpuContext,
    w: &[f32],
    x: &[f32],
    m: u32,
    k: u32,
) -> Result<Vec<f32>, KernelError> {
    run_gemv_lanes(ctx, w, x, m, k, gemv::DEFAULT_LANES)
}

fn run_gemv_lanes(
    ctx: &GpuContext,
    w: &[f32],
    x: &[f32],
    m: u32,
    k: u32,
    lanes: u32,
) -> Result<Vec<f32>, KernelError> {
    let w_buf = storage_buffer(ctx, "w", w)?;
    let x_buf = storage_buffer(ctx, "x", x)?;
    let y_buf = storage_zeroed(ctx, "y", u64::from(m) * 4)?;
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        gemv::dispatch(
            ctx,
            &mut pass,
            &w_buf,
            &x_buf,
            &y_buf,
            gemv::GemvShape {
                lanes,
                ..gemv::GemvShape::new(m, k)
            },
        )?;
    }
    ctx.queue.submit([encoder.finish()]);
    Ok(pollster::block_on(read_back::<f32>(ctx, &y_buf))?[..m as usize].to_vec())
}

#[test]
pub fn gemv_matches_reference() {
    let Some(ctx) = gpu() else { return };
    // (M, K): 1×4 the smallest; fewer rows than a workgroup; M not a multiple of 8 and K not a
    // multiple of the 1024-float x tile; K much larger than M; M much larger than K.
    let shapes = [
        (1, 4),
        (3, 12),
        (9, 1028),
        (1, 8192),
        (1000, 4),
        (64, 64),
        (257, 2052),
    ];
    for (i, &(m, k)) in shapes.iter().enumerate() {
        let (mu, ku) = (m as usize, k as usize);
        let w = uniform_f32(10 + i as u64, mu * ku, 1.0);
        let x = uniform_f32(100 + i as u64, ku, 1.0);
        let want = reference::gemv(&w, &x, mu, ku);
        let scale = reference::gemv_magnitude(&w, &x, mu, ku);
        for lanes in gemv::LANE_CHOICES {
            let got = run_gemv_lanes(&ctx, &w, &x, m, k, lanes).expect("gemv runs");
            let c = compare_scaled(&got, &want, &scale, gemv::tolerance_f32(ku, lanes));
            assert!(
                c.passed(),
                "{}",
                c.describe(&format!("gemv {m}x{k} lanes {lanes}"))
            );
        }
    }
}

#[test]
pub fn gemv_rows_do_not_depend_on_the_batch() {
    // Batch invariance: row r's result is bit-identical whether or not other rows are computed,
    // because each row is summed by its own 32 lanes in a fixed order.
    let Some(ctx) = gpu() else { return };
    let (m, k) = (40u32, 520u32);
    let w = uniform_f32(7, (m * k) as usize, 1.0);
    let x = uniform_f32(8, k as usize, 1.0);
    let all = run_gemv(&ctx, &w, &x, m, k).expect("gemv runs");
    let first = run_gemv(&ctx, &w[..(3 * k) as usize], &x, 3, k).expect("gemv runs");
    assert_eq!(&all[..3], &first[..]);
}

#[test]
pub fn gemv_rejects_bad_shapes_with_data() {
    let Some(ctx) = gpu() else { return };
    let err = run_gemv(&ctx, &[0.0; 6], &[0.0; 6], 1, 6).expect_err("K = 6 is not a multiple of 4");
    assert!(
        matches!(
            err,
            KernelError::NotDivisible {
                value: 6,
                by: 4,
                ..
            }
        ),
        "{err}"
    );
    let err = run_gemv(&ctx, &[0.0; 4], &[0.0; 8], 2, 8).expect_err("w is too short for 2x8");
    assert!(
        matches!(
            err,
            KernelError::Shape {
                expected: 64,
                got: 16,
                ..
            }
        ),
        "{err}"
    );
}
