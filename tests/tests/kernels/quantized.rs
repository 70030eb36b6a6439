//! The weight-reading kernels (gemv, gate_up_swiglu, qkv_rope_scale) in every weight format on a
//! real adapter, two ways: against the reference on the same quantized weights dequantized (the
//! unpacking must be exact: only f32 summation order may differ, `gemv::tolerance_tile`),
//! and against the f32 weights they were quantized from (the difference must stay within what
//! the format may lose, `quant::block::error_bound`, plus that summation bound).

use moescope_engine::check::{compare_scaled, Comparison, Tolerance};
use moescope_engine::gpu::{storage_buffer, storage_zeroed};
use moescope_engine::kernels::gemv::{self, GemvLayout, GemvShape};
use moescope_engine::kernels::{gate_up_swiglu, qkv_rope_scale, rope};
use moescope_engine::model::reference;
use moescope_engine::quant::activation::{quantize_row, round_trip, TILE};
use moescope_engine::quant::{block, dequantize, matrix, quantize, Format};
use moescope_engine::rng::uniform_f32;
use moescope_tests::{gpu, run, QkvRopeReference, RopeEpilogue, SwigluReference};

/// Weights with some structure: rows of different magnitudes, a few outliers, so that block
/// scales differ from block to block.
fn weights(seed: u64, rows: usize, cols: usize) -> Vec<f32> {
    let mut w = uniform_f32(seed, rows * cols, 1.0);
    for (i, v) in w.iter_mut().enumerate() {
        let (r, c) = (i / cols, i % cols);
        *v *= 0.05 + (r % 7) as f32 * 0.3;
        if (r * 31 + c * 17) % 97 == 0 {
            *v *= 12.0;
        }
    }
    w
}

/// Σ_i error_bound(w_i)·|x_i| per row: how far the quantized matrix may move `W·x`.
fn quantization_bound(format: Format, w: &[f32], x: &[f32], m: usize, k: usize) -> Vec<f64> {
    let q = quantize(format, w, m, k);
    (0..m)
        .map(|r| {
            (0..k)
                .map(|c| {
                    let i = r * k + c;
                    block::error_bound(format, w[i], block::effective_scale(&q, i))
                        * f64::from(x[c]).abs()
                })
                .sum()
        })
        .collect()
}

/// `got` against `want` with an allowed error of `tol`·`scale` + `extra` per element.
fn within(got: &[f32], want: &[f32], scale: &[f64], extra: &[f64], tol: Tolerance) -> Comparison {
    // compare_scaled allows rel·scale: fold the extra allowance into the scale.
    let widened: Vec<f64> = scale
        .iter()
        .zip(extra)
        .map(|(s, e)| s + e / tol.rel)
        .collect();
    compare_scaled(got, want, &widened, tol)
}

#[test]
pub fn gemv_reads_every_format_exactly_and_within_its_error() {
    let Some(ctx) = gpu() else { return };
    // 200 rows: a full and a partial 128-row FP8 block; 160 columns: a partial 128-column block,
    // five 1×32 blocks, ten 1×16 blocks. 2080 columns: two whole 1024-element x tiles and a tail
    // of 32 (one FP4 chunk), so the pipeline crosses tiles. Three tokens (grid z), two lane counts.
    for (m, k, t) in [(200usize, 160usize, 3usize), (70, 2080, 3)] {
        let w = weights(31, m, k);
        let x = uniform_f32(32, t * k, 1.0);
        let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
        for format in Format::ALL {
            let packed = matrix::encode(format, &w, m, k).unwrap();
            let w_buf = storage_buffer(&ctx, "w", &packed).unwrap();
            let deq = dequantize(&quantize(format, &w, m, k));
            for lanes in [32, 256] {
                let shape = GemvShape {
                    lanes,
                    ..GemvShape::new(m as u32, k as u32).with_format(format)
                };
                let y_buf = storage_buffer(&ctx, "y", &vec![f32::NAN; t * m]).unwrap();
                let got = run(&ctx, &y_buf, |pass| {
                    let layout = GemvLayout::rows(shape, t as u32);
                    gemv::dispatch_layout(
                        &ctx,
                        pass,
                        [&w_buf, &x_buf, &y_buf, &x_buf],
                        shape,
                        layout,
                    )
                    .unwrap();
                });
                let tol = gemv::tolerance_tile(format, k, lanes);
                for tok in 0..t {
                    let xt = &x[tok * k..(tok + 1) * k];
                    let got = &got[tok * m..(tok + 1) * m];
                    let exact = compare_scaled(
                        got,
                        &reference::gemv(&deq, xt, m, k),
                        &reference::gemv_magnitude(&deq, xt, m, k),
                        tol,
                    );
                    let what = format!("{} {m}x{k} lanes {lanes} token {tok}", format.name());
                    assert!(
                        exact.passed(),
                        "{}",
                        exact.describe(&format!("{what} vs dequantized"))
                    );
                    let lossy = within(
                        got,
                        &reference::gemv(&w, xt, m, k),
                        &reference::gemv_magnitude(&deq, xt, m, k),
                        &quantization_bound(format, &w, xt, m, k),
                        tol,
                    );
                    assert!(
                        lossy.passed(),
                        "{}",
                        lossy.describe(&format!("{what} vs f32"))
                    );
                }
            }
        }
    }
}

#[test]
pub fn grouped_experts_and_gate_up_swiglu_in_every_format() {
    let Some(ctx) = gpu() else { return };
    // 3 experts, each a [96, 64] gate and up matrix (gate_up_swiglu) and a [64, 96] down matrix
    // (grouped gemv); 4 tokens whose records name experts 2, 0, 2, 1.
    let (e_n, m, k) = (3usize, 96usize, 64usize);
    let ids = [2u32, 0, 2, 1];
    let xs: Vec<Vec<f32>> = (0..ids.len())
        .map(|t| uniform_f32(40 + t as u64, k, 1.0))
        .collect();
    let mut rec = Vec::new();
    for (t, (e, x)) in ids.iter().zip(&xs).enumerate() {
        rec.extend([f32::from_bits(*e), 0.5, 1.0, f32::from_bits(t as u32)]);
        rec.extend_from_slice(x);
    }
    let rec_buf = storage_buffer(&ctx, "records", &rec).unwrap();
    let record = (4 + k) as u32;
    let gates: Vec<Vec<f32>> = (0..e_n).map(|e| weights(50 + e as u64, m, k)).collect();
    let ups: Vec<Vec<f32>> = (0..e_n).map(|e| weights(60 + e as u64, m, k)).collect();
    for format in Format::ALL {
        let mut packed = Vec::new();
        for e in 0..e_n {
            packed.extend(matrix::encode(format, &gates[e], m, k).unwrap());
            packed.extend(matrix::encode(format, &ups[e], m, k).unwrap());
        }
        let w_buf = storage_buffer(&ctx, "w", &packed).unwrap();
        let y_buf = storage_zeroed(&ctx, "y", (4 * ids.len() * m) as u64).unwrap();
        let shape = GemvShape::new(m as u32, k as u32).with_format(format);
        let layout = GemvLayout {
            grouped: Some((e_n as u32, 2 * shape.matrix_chunks(), record)),
            x_stride: record / 4,
            x_offset: 1,
            ..GemvLayout::rows(shape, ids.len() as u32)
        };
        let got = run(&ctx, &y_buf, |pass| {
            let buffers = [&w_buf, &rec_buf, &y_buf, &rec_buf];
            gate_up_swiglu::dispatch(&ctx, pass, buffers, shape, layout).unwrap();
        });
        // The up matrix alone, through gemv at the up offset: the unfused path's addressing.
        let up_buf = storage_zeroed(&ctx, "up", (4 * ids.len() * m) as u64).unwrap();
        let up_got = run(&ctx, &up_buf, |pass| {
            let up_layout = GemvLayout {
                w_offset: shape.matrix_chunks(),
                ..layout
            };
            let buffers = [&w_buf, &rec_buf, &up_buf, &rec_buf];
            gemv::dispatch_layout(&ctx, pass, buffers, shape, up_layout).unwrap();
        });
        for (t, (&e, x)) in ids.iter().zip(&xs).enumerate() {
            let e = e as usize;
            let dg = dequantize(&quantize(format, &gates[e], m, k));
            let du = dequantize(&quantize(format, &ups[e], m, k));
            let want = SwigluReference::new(&dg, &du, x, m, k);
            let what = format!("{} token {t} (expert {e})", format.name());
            let c = compare_scaled(
                &got[t * m..(t + 1) * m],
                &want.act,
                &want.act_scale,
                gate_up_swiglu::tolerance(format, k, shape.lanes),
            );
            assert!(
                c.passed(),
                "{}",
                c.describe(&format!("gate_up_swiglu {what}"))
            );
            let c = compare_scaled(
                &up_got[t * m..(t + 1) * m],
                &want.up,
                &want.up_magnitude,
                gemv::tolerance_tile(format, k, shape.lanes),
            );
            assert!(
                c.passed(),
                "{}",
                c.describe(&format!("grouped gemv {what}"))
            );
        }
    }
}

#[test]
pub fn qkv_rope_scale_reads_every_format() {
    let Some(ctx) = gpu() else { return };
    // Two heads of [latent 32 | rope 16], K = 64, two tokens after 3 cached positions.
    let epilogue = RopeEpilogue {
        heads: 2,
        period: 48,
        dim: 16,
        theta: 10_000.0,
        scale: 0.25,
    };
    let (m, k, t, pos0) = (epilogue.rows(), 64usize, 2usize, 3usize);
    let w = weights(70, m, k);
    let x = uniform_f32(71, t * k, 1.0);
    let table = rope::cos_sin_table(pos0 + t, epilogue.dim, epilogue.theta);
    let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
    let cs_buf = storage_buffer(&ctx, "cos_sin", &table).unwrap();
    for format in Format::ALL {
        let w_buf = storage_buffer(&ctx, "w", &matrix::encode(format, &w, m, k).unwrap()).unwrap();
        let y_buf = storage_zeroed(&ctx, "y", (4 * t * m) as u64).unwrap();
        let p = epilogue.params(k, t, pos0);
        let got = run(&ctx, &y_buf, |pass| {
            let buffers = [&w_buf, &x_buf, &y_buf, &cs_buf];
            qkv_rope_scale::dispatch(&ctx, pass, buffers, p, format).unwrap();
        });
        let deq = dequantize(&quantize(format, &w, m, k));
        for tok in 0..t {
            let xt = &x[tok * k..(tok + 1) * k];
            let want = QkvRopeReference::new(&deq, xt, k, epilogue, pos0 + tok);
            let c = compare_scaled(
                &got[tok * m..(tok + 1) * m],
                &want.want,
                &want.magnitude,
                qkv_rope_scale::tolerance(format, k),
            );
            assert!(
                c.passed(),
                "{}",
                c.describe(&format!("{} token {tok}", format.name()))
            );
        }
    }
}

#[test]
pub fn a_k_that_splits_a_chunk_is_refused() {
    let Some(ctx) = gpu() else { return };
    // 48 columns fill f32, f16 and int8 chunks but not FP4's 32-element ones.
    let w_buf = storage_zeroed(&ctx, "w", 4096).unwrap();
    let x_buf = storage_zeroed(&ctx, "x", 4096).unwrap();
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let mut pass = encoder.begin_compute_pass(&Default::default());
    for (format, ok) in [
        (Format::Int8, true),
        (Format::Nvfp4, false),
        (Format::Mxfp4, false),
    ] {
        let shape = GemvShape::new(4, 48).with_format(format);
        let r = gemv::dispatch(&ctx, &mut pass, &w_buf, &x_buf, &x_buf, shape);
        assert_eq!(r.is_ok(), ok, "{format:?}: {r:?}");
    }
}

#[test]
pub fn a_nan_fp8_weight_makes_its_row_nan_as_dequantizing_does() {
    let Some(ctx) = gpu() else { return };
    let (m, k) = (4usize, 64usize);
    let mut w = weights(80, m, k);
    w[k + 5] = f32::NAN; // row 1
    let x = uniform_f32(81, k, 1.0);
    let format = Format::Fp8E4m3;
    let w_buf = storage_buffer(&ctx, "w", &matrix::encode(format, &w, m, k).unwrap()).unwrap();
    let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
    let y_buf = storage_zeroed(&ctx, "y", (4 * m) as u64).unwrap();
    let shape = GemvShape::new(m as u32, k as u32).with_format(format);
    let got = run(&ctx, &y_buf, |pass| {
        gemv::dispatch(&ctx, pass, &w_buf, &x_buf, &y_buf, shape).unwrap();
    });
    let deq = dequantize(&quantize(format, &w, m, k));
    let want = reference::gemv(&deq, &x, m, k);
    for r in 0..m {
        assert_eq!(
            got[r].is_nan(),
            want[r].is_nan(),
            "row {r}: {} vs {}",
            got[r],
            want[r]
        );
    }
    assert!(got[1].is_nan());
    // The other rows share row 1's FP8 block (and its scale): their values stand.
    let magnitude = reference::gemv_magnitude(&deq, &x, m, k);
    let tolerance = gemv::tolerance(shape);
    for r in [0, 2, 3] {
        let c = compare_scaled(&got[r..=r], &want[r..=r], &magnitude[r..=r], tolerance);
        assert!(c.passed(), "{}", c.describe(&format!("row {r}")));
    }
}

/// Large matrices run with several rows per lane group (`gemv::rows_per_lane`): the same
/// results, the last group partial. K = 1056 is a whole x tile and a tail of one FP4 chunk, so the
/// pipelined loads cross a tile with every row in flight (f32 takes K = 288, one partial tile, to
/// stay within one storage binding on lavapipe).
#[test]
pub fn grouped_rows_on_large_matrices() {
    let Some(ctx) = gpu() else { return };
    let m = 32_768 + 37;
    let wide = (weights(90, m, 1056), uniform_f32(91, 1056, 1.0));
    let narrow = (weights(92, m, 288), uniform_f32(93, 288, 1.0));
    for (format, rows, (w, x)) in [
        (Format::F32, 4, &narrow),
        (Format::Bf16, 4, &wide),
        (Format::Int8, 4, &wide),
        (Format::Fp8E4m3, 4, &wide),
        (Format::Nvfp4, 4, &wide),
        (Format::Mxfp4, 4, &wide),
    ] {
        let k = x.len();
        let x_buf = storage_buffer(&ctx, "x", x).unwrap();
        let shape = GemvShape::new(m as u32, k as u32).with_format(format);
        assert_eq!(gemv::rows_per_lane(shape), rows, "{format:?}");
        let w_buf = storage_buffer(&ctx, "w", &matrix::encode(format, w, m, k).unwrap()).unwrap();
        let y_buf = storage_buffer(&ctx, "y", &vec![f32::NAN; m]).unwrap();
        let got = run(&ctx, &y_buf, |pass| {
            gemv::dispatch(&ctx, pass, &w_buf, &x_buf, &y_buf, shape).unwrap();
        });
        let deq = dequantize(&quantize(format, w, m, k));
        let c = compare_scaled(
            &got,
            &reference::gemv(&deq, x, m, k),
            &reference::gemv_magnitude(&deq, x, m, k),
            gemv::tolerance_tile(format, k, shape.lanes),
        );
        assert!(c.passed(), "{}", c.describe(format.name()));
    }
}

/// x as FP8 dispatch records, one per token, in the layout the gemv kernels read with `X_FP8`:
/// the token's 1×128 tile scales (padded to a vec4), then its E4M3 codes, four to a word.
/// Returns the buffer's floats and (x_stride, x_offset) in vec4s; scales start at vec4 0.
fn fp8_records(x: &[f32], k: usize) -> (Vec<f32>, u32, u32) {
    let scale_x4 = (k / TILE).div_ceil(4);
    let stride = scale_x4 + k / 16;
    let mut out = vec![0.0f32; 4 * stride * (x.len() / k)];
    for (row, rec) in x.chunks(k).zip(out.chunks_mut(4 * stride)) {
        let (codes, scales) = quantize_row(row);
        rec[..scales.len()].copy_from_slice(&scales);
        for (word, c) in rec[4 * scale_x4..].iter_mut().zip(codes.chunks(4)) {
            *word = f32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        }
    }
    (out, stride as u32, scale_x4 as u32)
}

/// gemv_wide, the FP4 gemv with x in registers (which `gemv::dispatch_layout` picks only for
/// large matrices), on small ones: K = 8192 is one whole pass over K, 9216 a second pass of 32
/// chunks (the other lanes idle); 45 rows are a partial 16-row batch and a partial workgroup.
/// Plain rows for two tokens, then grouped experts reading FP8 dispatch records.
#[test]
pub fn gemv_wide_reads_fp4_exactly_and_within_its_error() {
    let Some(ctx) = gpu() else { return };
    let (m, t) = (45usize, 2usize);
    for k in [8192usize, 9216] {
        let w = weights(40, 2 * m, k);
        let x = uniform_f32(41, t * k, 1.0);
        let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
        for format in [Format::Nvfp4, Format::Mxfp4] {
            let shape = GemvShape::new(m as u32, k as u32).with_format(format);
            assert!(
                !gemv::is_wide(shape),
                "too few rows for the wide kernel's rule"
            );
            let tol = gemv::tolerance_wide(format, k);
            // Two experts' matrices, one after the other.
            let experts: Vec<&[f32]> = w.chunks(m * k).collect();
            let mut packed = Vec::new();
            for e in &experts {
                packed.extend(matrix::encode(format, e, m, k).unwrap());
            }
            let w_buf = storage_buffer(&ctx, "w", &packed).unwrap();
            let deq: Vec<Vec<f32>> = experts
                .iter()
                .map(|e| dequantize(&quantize(format, e, m, k)))
                .collect();
            let what =
                |case: &str, tok: usize| format!("{} K={k} {case} token {tok}", format.name());

            let y_buf = storage_buffer(&ctx, "y", &vec![f32::NAN; t * m]).unwrap();
            let got = run(&ctx, &y_buf, |pass| {
                let layout = GemvLayout::rows(shape, t as u32);
                gemv::dispatch_wide(&ctx, pass, [&w_buf, &x_buf, &y_buf, &x_buf], shape, layout)
                    .unwrap();
            });
            for tok in 0..t {
                let xt = &x[tok * k..(tok + 1) * k];
                let got = &got[tok * m..(tok + 1) * m];
                let magnitude = reference::gemv_magnitude(&deq[0], xt, m, k);
                let exact =
                    compare_scaled(got, &reference::gemv(&deq[0], xt, m, k), &magnitude, tol);
                assert!(exact.passed(), "{}", exact.describe(&what("rows", tok)));
                let lossy = within(
                    got,
                    &reference::gemv(experts[0], xt, m, k),
                    &magnitude,
                    &quantization_bound(format, experts[0], xt, m, k),
                    tol,
                );
                assert!(
                    lossy.passed(),
                    "{}",
                    lossy.describe(&what("rows vs f32", tok))
                );
            }

            // Three records routed to experts 1, 0, 1, their x as FP8 codes and tile scales.
            let ids = [1u32, 0, 1];
            let xs = uniform_f32(42, ids.len() * k, 1.0);
            let (records, stride, offset) = fp8_records(&xs, k);
            let rec_buf = storage_buffer(&ctx, "records", &records).unwrap();
            let ids_buf = storage_buffer(&ctx, "ids", &ids).unwrap();
            let layout = GemvLayout {
                grouped: Some((2, shape.matrix_chunks(), 1)),
                x_stride: stride,
                x_offset: offset,
                x_fp8_scales: Some(0),
                ..GemvLayout::rows(shape, ids.len() as u32)
            };
            let y_buf = storage_buffer(&ctx, "y", &vec![f32::NAN; ids.len() * m]).unwrap();
            let got = run(&ctx, &y_buf, |pass| {
                gemv::dispatch_wide(
                    &ctx,
                    pass,
                    [&w_buf, &rec_buf, &y_buf, &ids_buf],
                    shape,
                    layout,
                )
                .unwrap();
            });
            for (z, &e) in ids.iter().enumerate() {
                let xq = round_trip(&xs[z * k..(z + 1) * k]);
                let d = &deq[e as usize];
                let c = compare_scaled(
                    &got[z * m..(z + 1) * m],
                    &reference::gemv(d, &xq, m, k),
                    &reference::gemv_magnitude(d, &xq, m, k),
                    tol,
                );
                assert!(
                    c.passed(),
                    "{}",
                    c.describe(&what(&format!("expert {e}, FP8 x"), z))
                );
            }
        }
    }
}

/// Which gemv `dispatch_layout` records: the wide one only for FP4 with K a multiple of 8192
/// and rows for 512 workgroups of 32; everything else, and formats it does not read, refused
/// or left to the tile kernel.
#[test]
pub fn the_wide_gemv_is_chosen_for_long_fp4_rows_only() {
    let big = |format| GemvShape::new(58_112, 8192).with_format(format);
    assert!(gemv::is_wide(big(Format::Nvfp4)));
    assert!(gemv::is_wide(big(Format::Mxfp4)));
    assert!(!gemv::is_wide(big(Format::Fp8E4m3)));
    assert!(!gemv::is_wide(
        GemvShape::new(58_112, 7168).with_format(Format::Nvfp4)
    ));
    assert!(gemv::is_wide(
        GemvShape::new(512 * 32, 8192).with_format(Format::Mxfp4)
    ));
    assert!(!gemv::is_wide(
        GemvShape::new(512 * 32 - 32, 8192).with_format(Format::Mxfp4)
    ));
    let Some(ctx) = gpu() else { return };
    let buf = storage_zeroed(&ctx, "any", 1 << 16).unwrap();
    let mut errors = Vec::new();
    let _ = run(&ctx, &buf, |pass| {
        for (format, k) in [(Format::Int8, 8192u32), (Format::Nvfp4, 8192 + 32)] {
            let shape = GemvShape::new(4, k).with_format(format);
            let layout = GemvLayout::rows(shape, 1);
            errors.push(gemv::dispatch_wide(&ctx, pass, [&buf; 4], shape, layout).unwrap_err());
        }
    });
    assert!(errors[0].to_string().contains("int8"), "{}", errors[0]);
    assert!(
        errors[1].to_string().contains("multiple of 128"),
        "{}",
        errors[1]
    );
}
