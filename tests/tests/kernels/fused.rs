//! The fused kernels one at a time against `model::reference` on a real adapter, on shapes the
//! model never uses: gemv's layouts (grouped experts from dispatch records, an interleaved
//! output, an out-of-range expert), gate_up_swiglu, qkv_rope_scale, and split-K attention at
//! contexts around its 64-position chunk. Tolerances: each kernel's `tolerance`, with its reason.

use moescope_engine::check::compare_scaled;
use moescope_engine::gpu::{storage_buffer, storage_zeroed};
use moescope_engine::kernels::gemv::{self, GemvLayout, GemvShape};
use moescope_engine::kernels::{gate_up_swiglu, mla_split_k, qkv_rope_scale, rope};
use moescope_engine::model::reference;
use moescope_engine::quant::Format::F32;
use moescope_engine::rng::uniform_f32;
use moescope_tests::{gpu, run, QkvRopeReference, RopeEpilogue, SwigluReference};

/// Dispatch records as moe_dispatch writes them: `[expert, gate, scale, token | x]`.
fn records(experts: &[u32], xs: &[Vec<f32>]) -> Vec<f32> {
    let mut out = Vec::new();
    for (t, (e, x)) in experts.iter().zip(xs).enumerate() {
        out.extend([f32::from_bits(*e), 0.5, 1.0, f32::from_bits(t as u32)]);
        out.extend_from_slice(x);
    }
    out
}

#[test]
pub fn grouped_gemv_reads_each_tokens_expert_from_its_record() {
    let Some(ctx) = gpu() else { return };
    // 3 experts of [5, 12] (K not a multiple of the 1024-float tile, M smaller than a workgroup);
    // 5 tokens: expert 2 twice, expert 1 never, and an id past the last expert.
    let (e_n, m, k) = (3usize, 5usize, 12usize);
    let w = uniform_f32(11, e_n * m * k, 1.0);
    let ids = [2u32, 0, 2, 7, 0];
    let xs: Vec<Vec<f32>> = (0..ids.len())
        .map(|t| uniform_f32(20 + t as u64, k, 1.0))
        .collect();
    let rec = records(&ids, &xs);
    let w_buf = storage_buffer(&ctx, "w", &w).unwrap();
    let rec_buf = storage_buffer(&ctx, "records", &rec).unwrap();
    let y_buf = storage_buffer(&ctx, "y", &vec![f32::NAN; ids.len() * m]).unwrap();
    let shape = GemvShape::new(m as u32, k as u32);
    let record = (4 + k) as u32;
    let layout = GemvLayout {
        grouped: Some((e_n as u32, (m * k / 4) as u32, record)),
        x_stride: record / 4,
        x_offset: 1,
        ..GemvLayout::rows(shape, ids.len() as u32)
    };
    let got = run(&ctx, &y_buf, |pass| {
        gemv::dispatch_layout(
            &ctx,
            pass,
            [&w_buf, &rec_buf, &y_buf, &rec_buf],
            shape,
            layout,
        )
        .unwrap();
    });
    let tol = gemv::tolerance_f32(k, shape.lanes);
    for (t, (&e, x)) in ids.iter().zip(&xs).enumerate() {
        let got = &got[t * m..(t + 1) * m];
        if e as usize >= e_n {
            // An id past the last expert computes nothing rather than reading other bytes.
            assert!(got.iter().all(|v| *v == 0.0), "token {t}: {got:?}");
            continue;
        }
        let we = &w[e as usize * m * k..(e as usize + 1) * m * k];
        let want = reference::gemv(we, x, m, k);
        let c = compare_scaled(got, &want, &reference::gemv_magnitude(we, x, m, k), tol);
        assert!(
            c.passed(),
            "{}",
            c.describe(&format!("token {t}, expert {e}"))
        );
    }
}

#[test]
pub fn gemv_scatters_rows_into_an_interleaved_layout_and_nowhere_else() {
    let Some(ctx) = gpu() else { return };
    // M = 6 rows in segments of 2, each segment 5 apart, from offset 1; 2 tokens 20 apart.
    let (m, k, t) = (6usize, 8usize, 2usize);
    let w = uniform_f32(3, m * k, 1.0);
    let x = uniform_f32(4, t * k, 1.0);
    let w_buf = storage_buffer(&ctx, "w", &w).unwrap();
    let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
    let y_buf = storage_buffer(&ctx, "y", &[f32::NAN; 40]).unwrap();
    let shape = GemvShape::new(m as u32, k as u32);
    let layout = GemvLayout {
        y_stride: 20,
        y_offset: 1,
        seg: 2,
        seg_stride: 5,
        ..GemvLayout::rows(shape, t as u32)
    };
    let got = run(&ctx, &y_buf, |pass| {
        gemv::dispatch_layout(&ctx, pass, [&w_buf, &x_buf, &y_buf, &x_buf], shape, layout).unwrap();
    });
    let mut written = [false; 40];
    for tok in 0..t {
        let xt = &x[tok * k..(tok + 1) * k];
        let want = reference::gemv(&w, xt, m, k);
        let mag = reference::gemv_magnitude(&w, xt, m, k);
        for row in 0..m {
            let at = 1 + tok * 20 + (row / 2) * 5 + row % 2;
            written[at] = true;
            let c = compare_scaled(
                &got[at..=at],
                &want[row..=row],
                &mag[row..=row],
                gemv::tolerance_f32(k, shape.lanes),
            );
            assert!(
                c.passed(),
                "{}",
                c.describe(&format!("token {tok} row {row}"))
            );
        }
    }
    for (i, w) in written.iter().enumerate() {
        assert!(*w || got[i].is_nan(), "y[{i}] = {} was overwritten", got[i]);
    }
}

#[test]
pub fn gate_up_swiglu_matches_the_reference() {
    let Some(ctx) = gpu() else { return };
    for (m, k, t) in [(1usize, 4usize, 1usize), (37, 1028, 3), (256, 256, 2)] {
        let gate_up = uniform_f32(5, 2 * m * k, 0.5);
        let x = uniform_f32(6, t * k, 1.0);
        let w_buf = storage_buffer(&ctx, "w", &gate_up).unwrap();
        let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
        let y_buf = storage_zeroed(&ctx, "y", (4 * t * m) as u64).unwrap();
        let shape = GemvShape::new(m as u32, k as u32);
        let got = run(&ctx, &y_buf, |pass| {
            let layout = GemvLayout::rows(shape, t as u32);
            gate_up_swiglu::dispatch(&ctx, pass, [&w_buf, &x_buf, &y_buf, &x_buf], shape, layout)
                .unwrap();
        });
        let (wg, wu) = gate_up.split_at(m * k);
        for tok in 0..t {
            let xt = &x[tok * k..(tok + 1) * k];
            let want = SwigluReference::new(wg, wu, xt, m, k);
            let c = compare_scaled(
                &got[tok * m..(tok + 1) * m],
                &want.act,
                &want.act_scale,
                gate_up_swiglu::tolerance(F32, k, shape.lanes),
            );
            assert!(
                c.passed(),
                "{}",
                c.describe(&format!("[{m}, {k}] token {tok}"))
            );
        }
    }
}

#[test]
pub fn qkv_rope_scale_matches_projection_then_rope_then_scale() {
    let Some(ctx) = gpu() else { return };
    // Two heads of [latent 32 | rope 16] (period 48), 3 tokens after 5 cached positions.
    let epilogue = RopeEpilogue {
        heads: 2,
        period: 48,
        dim: 16,
        theta: 10_000.0,
        scale: 0.3,
    };
    let (m, k, t, pos0) = (epilogue.rows(), 20usize, 3usize, 5usize);
    let w = uniform_f32(7, m * k, 1.0);
    let x = uniform_f32(8, t * k, 1.0);
    let table = rope::cos_sin_table(pos0 + t, epilogue.dim, epilogue.theta);
    let w_buf = storage_buffer(&ctx, "w", &w).unwrap();
    let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
    let cs_buf = storage_buffer(&ctx, "cos_sin", &table).unwrap();
    let y_buf = storage_zeroed(&ctx, "y", (4 * t * m) as u64).unwrap();
    let p = epilogue.params(k, t, pos0);
    let got = run(&ctx, &y_buf, |pass| {
        qkv_rope_scale::dispatch(&ctx, pass, [&w_buf, &x_buf, &y_buf, &cs_buf], p, F32).unwrap();
    });
    for tok in 0..t {
        let xt = &x[tok * k..(tok + 1) * k];
        let want = QkvRopeReference::new(&w, xt, k, epilogue, pos0 + tok);
        let c = compare_scaled(
            &got[tok * m..(tok + 1) * m],
            &want.want,
            &want.magnitude,
            qkv_rope_scale::tolerance(F32, k),
        );
        assert!(c.passed(), "{}", c.describe(&format!("token {tok}")));
    }
    // A layout whose rotated pairs would straddle two workgroups is refused, not computed.
    let bad = qkv_rope_scale::QkvRopeScaleParams {
        rope_period: 40,
        ..p
    };
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let mut pass = encoder.begin_compute_pass(&Default::default());
    assert!(
        qkv_rope_scale::dispatch(&ctx, &mut pass, [&w_buf, &x_buf, &y_buf, &cs_buf], bad, F32)
            .is_err()
    );
}

/// Causal attention over a latent cache in f64: `o[t, h, c] = Σ_s p_s·cache[s, c]` with
/// `p = softmax(scale · q[t, h]·cache[s])` over `s ≤ pos0 + t`; also returns `Σ_s p_s·|cache[s, c]|`.
fn attention(
    q: &[f32],
    cache: &[f32],
    (t_n, heads, row, latent, pos0, scale): (usize, usize, usize, usize, usize, f32),
) -> (Vec<f32>, Vec<f64>) {
    let mut out = Vec::new();
    let mut mag = Vec::new();
    for t in 0..t_n {
        for h in 0..heads {
            let qv = &q[(t * heads + h) * row..][..row];
            let scores: Vec<f32> = (0..=pos0 + t)
                .map(|s| {
                    let dot: f64 = qv
                        .iter()
                        .zip(&cache[s * row..(s + 1) * row])
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum();
                    (dot * f64::from(scale)) as f32
                })
                .collect();
            let p = reference::softmax(&scores);
            for c in 0..latent {
                let v = |s: usize| f64::from(cache[s * row + c]);
                out.push(
                    p.iter()
                        .enumerate()
                        .map(|(s, p)| f64::from(*p) * v(s))
                        .sum::<f64>() as f32,
                );
                mag.push(
                    p.iter()
                        .enumerate()
                        .map(|(s, p)| f64::from(*p) * v(s).abs())
                        .sum(),
                );
            }
        }
    }
    (out, mag)
}

#[test]
pub fn split_k_attention_matches_the_reference_around_its_chunk_size() {
    let Some(ctx) = gpu() else { return };
    let (heads, row, latent, scale) = (3usize, 20usize, 12usize, 0.4f32);
    // (tokens, cached positions): one position; a chunk minus one; exactly a chunk; a chunk plus
    // one; a prefill of 3 tokens whose causal limits straddle a chunk edge; a long context.
    for (t_n, pos0) in [
        (1usize, 0usize),
        (1, 62),
        (1, 63),
        (1, 64),
        (3, 62),
        (1, 299),
    ] {
        let ctx_len = pos0 + t_n;
        let q = uniform_f32(30 + pos0 as u64, t_n * heads * row, 1.0);
        let cache = uniform_f32(40 + pos0 as u64, ctx_len * row, 1.0);
        let p = mla_split_k::MlaSplitKParams {
            tokens: t_n as u32,
            heads: heads as u32,
            row: row as u32,
            latent: latent as u32,
            pos0: pos0 as u32,
            splits: mla_split_k::MlaSplitKParams::splits_for(ctx_len as u32),
            scale,
            _pad: 0,
        };
        let q_buf = storage_buffer(&ctx, "q", &q).unwrap();
        let cache_buf = storage_buffer(&ctx, "cache", &cache).unwrap();
        let partials = storage_zeroed(&ctx, "partials", 4 * p.partial_floats()).unwrap();
        let o_buf = storage_buffer(&ctx, "o", &vec![f32::NAN; t_n * heads * latent]).unwrap();
        let got = run(&ctx, &o_buf, |pass| {
            mla_split_k::dispatch(&ctx, pass, [&q_buf, &cache_buf, &partials], p).unwrap();
            mla_split_k::dispatch_reduce(&ctx, pass, [&partials, &o_buf], p).unwrap();
        });
        let (want, mag) = attention(&q, &cache, (t_n, heads, row, latent, pos0, scale));
        let c = compare_scaled(&got, &want, &mag, mla_split_k::tolerance());
        assert!(
            c.passed(),
            "{}",
            c.describe(&format!("{t_n} tokens after {pos0}"))
        );
    }
}
