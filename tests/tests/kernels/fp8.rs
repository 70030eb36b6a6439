//! FP8 activations in the MoE dispatch on a real adapter (lavapipe in CI), against
//! `quant::activation`: moe_dispatch's FP8 records and fp8_round_trip's rows must be the CPU's
//! codes, scales and values bit for bit (the scales are powers of two, so both sides divide
//! exactly and round the same bits); gemv and gate_up_swiglu reading FP8 records must match the
//! reference on the decoded activations within f32 summation (`gemv::tolerance_f32`, scaled by
//! Σ|w·x|).

use moescope_engine::check::compare_scaled;
use moescope_engine::gpu::{storage_buffer, storage_zeroed};
use moescope_engine::kernels::gemv::{self, GemvLayout, GemvShape};
use moescope_engine::kernels::moe_dispatch::{self, MoeDispatchParams, RecordLayout};
use moescope_engine::kernels::{fp8_round_trip, gate_up_swiglu};
use moescope_engine::quant::activation::{quantize_row, round_trip};
use moescope_engine::quant::Format;
use moescope_engine::rng::uniform_f32;
use moescope_tests::{gpu, run, SwigluReference};

/// Rows that exercise the encoder: tiles of very different magnitudes, exact zeros, values on
/// E4M3 rounding ties, subnormal codes, and a tile whose largest value is exactly 448·2^e.
fn activations(rows: usize, d: usize) -> Vec<f32> {
    let mut x = uniform_f32(17, rows * d, 1.0);
    for (i, v) in x.iter_mut().enumerate() {
        let (r, c) = (i / d, i % d);
        let tile = c / 128;
        *v *= [1.0, 300.0, 1e-3, 7.0][(r + tile) % 4];
        match c % 29 {
            0 => *v = 0.0,
            // 1.0625 lies halfway between E4M3's 1.0 and 1.125 (at scale 1): ties to even.
            1 => *v = 1.0625 * [1.0, 300.0, 1e-3, 7.0][(r + tile) % 4],
            // Far below the tile's maximum: an E4M3 subnormal code.
            2 => *v *= 1e-4,
            _ => {}
        }
    }
    x[3] = 448.0;
    x
}

#[test]
pub fn fp8_round_trip_gives_the_cpus_values_bit_for_bit() {
    let Some(ctx) = gpu() else { return };
    let (rows, d) = (5usize, 400usize);
    let x = activations(rows, d);
    let x_buf = storage_buffer(&ctx, "x", &x).unwrap();
    let y_buf = storage_zeroed(&ctx, "y", (4 * rows * d) as u64).unwrap();
    let got = run(&ctx, &y_buf, |pass| {
        fp8_round_trip::dispatch(&ctx, pass, &x_buf, &y_buf, rows as u32, d as u32).unwrap();
    });
    for r in 0..rows {
        let want = round_trip(&x[r * d..(r + 1) * d]);
        for (c, (g, w)) in got[r * d..(r + 1) * d].iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "row {r} col {c}: {g} vs {w}");
        }
    }
}

#[test]
pub fn moe_dispatch_writes_the_cpus_fp8_records() {
    let Some(ctx) = gpu() else { return };
    let (t, k, d) = (3u32, 2u32, 400u32);
    let x = activations(t as usize, d as usize);
    let ids: Vec<u32> = vec![4, 1, 0, 7, 2, 2];
    let gates: Vec<f32> = vec![0.25, 0.5, 0.75, 1.0, 1.25, 1.5];
    let layout = RecordLayout {
        hidden: d,
        fp8: true,
    };
    let record = layout.words();
    let h = storage_buffer(&ctx, "h", &x).unwrap();
    let ids_buf = storage_buffer(&ctx, "ids", &ids).unwrap();
    let gates_buf = storage_buffer(&ctx, "gates", &gates).unwrap();
    let rec_buf = storage_zeroed(&ctx, "records", u64::from(4 * t * k * record)).unwrap();
    let p = MoeDispatchParams {
        tokens: t,
        k,
        hidden: d,
        record,
    };
    let got = run(&ctx, &rec_buf, |pass| {
        moe_dispatch::dispatch(&ctx, pass, [&h, &ids_buf, &gates_buf, &rec_buf], p, true).unwrap();
    });
    let words: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
    let d = d as usize;
    for slot in 0..(t * k) as usize {
        let rec = &words[slot * record as usize..(slot + 1) * record as usize];
        let token = slot / k as usize;
        assert_eq!(rec[0], ids[slot]);
        assert_eq!(f32::from_bits(rec[1]), gates[slot]);
        assert_eq!(f32::from_bits(rec[2]), 1.0);
        assert_eq!(rec[3] as usize, token);
        let (codes, scales) = quantize_row(&x[token * d..(token + 1) * d]);
        for (i, s) in scales.iter().enumerate() {
            assert_eq!(f32::from_bits(rec[4 + i]), *s, "slot {slot} scale {i}");
        }
        let first = 4 * layout.x_offset_x4() as usize;
        for (i, c) in codes.iter().enumerate() {
            let code = (rec[first + i / 4] >> (8 * (i % 4))) & 0xFF;
            assert_eq!(code, u32::from(*c), "slot {slot} element {i}");
        }
    }
}

/// The expert kernels reading FP8 records: grouped gemv and gate_up_swiglu, 3 experts, tokens
/// routed to them by the records' first word.
#[test]
pub fn expert_kernels_read_fp8_records() {
    let Some(ctx) = gpu() else { return };
    let (e_n, m, k) = (3usize, 40usize, 400usize);
    let slots = 4usize;
    let ids = [2u32, 0, 2, 1];
    let x = activations(slots, k);
    let layout = RecordLayout {
        hidden: k as u32,
        fp8: true,
    };
    let record = layout.words();
    let gates = vec![1.0f32; slots];
    let h = storage_buffer(&ctx, "h", &x).unwrap();
    let ids_buf = storage_buffer(&ctx, "ids", &ids).unwrap();
    let gates_buf = storage_buffer(&ctx, "gates", &gates).unwrap();
    let rec_buf = storage_zeroed(&ctx, "records", (4 * slots) as u64 * u64::from(record)).unwrap();
    let p = MoeDispatchParams {
        tokens: slots as u32,
        k: 1,
        hidden: k as u32,
        record,
    };
    run(&ctx, &rec_buf, |pass| {
        moe_dispatch::dispatch(&ctx, pass, [&h, &ids_buf, &gates_buf, &rec_buf], p, true).unwrap();
    });
    // Gate and up matrices of each expert, one after the other.
    let w = uniform_f32(23, e_n * 2 * m * k, 0.1);
    let w_buf = storage_buffer(&ctx, "w", &w).unwrap();
    let shape = GemvShape::new(m as u32, k as u32);
    let input = GemvLayout {
        grouped: Some((e_n as u32, 2 * shape.matrix_chunks(), record)),
        x_stride: record / 4,
        x_offset: layout.x_offset_x4(),
        x_fp8_scales: Some(moe_dispatch::HEADER_FLOATS / 4),
        ..GemvLayout::rows(shape, slots as u32)
    };
    let y_buf = storage_zeroed(&ctx, "y", (4 * slots * m) as u64).unwrap();
    let gemv_out = run(&ctx, &y_buf, |pass| {
        gemv::dispatch_layout(
            &ctx,
            pass,
            [&w_buf, &rec_buf, &y_buf, &rec_buf],
            shape,
            input,
        )
        .unwrap();
    });
    let act_buf = storage_zeroed(&ctx, "act", (4 * slots * m) as u64).unwrap();
    let swiglu_out = run(&ctx, &act_buf, |pass| {
        let buffers = [&w_buf, &rec_buf, &act_buf, &rec_buf];
        gate_up_swiglu::dispatch(&ctx, pass, buffers, shape, input).unwrap();
    });
    for (z, &e) in ids.iter().enumerate() {
        let xq = round_trip(&x[z * k..(z + 1) * k]);
        let gate_w = &w[e as usize * 2 * m * k..][..m * k];
        let up_w = &w[(e as usize * 2 + 1) * m * k..][..m * k];
        let want = SwigluReference::new(gate_w, up_w, &xq, m, k);
        let what = format!("slot {z} (expert {e})");
        let tol = gemv::tolerance_f32(k, shape.lanes);
        let got = &gemv_out[z * m..(z + 1) * m];
        let c = compare_scaled(got, &want.gate, &want.gate_magnitude, tol);
        assert!(c.passed(), "{}", c.describe(&format!("gemv {what}")));
        let tol = gate_up_swiglu::tolerance(Format::F32, k, shape.lanes);
        let got = &swiglu_out[z * m..(z + 1) * m];
        let c = compare_scaled(got, &want.act, &want.act_scale, tol);
        assert!(
            c.passed(),
            "{}",
            c.describe(&format!("gate_up_swiglu {what}"))
        );
    }
}
