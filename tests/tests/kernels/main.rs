//! The kernel harness: every kernel of `kernels::SHADERS` on named edge shapes (one element, odd
//! sizes, sizes that do not fill a workgroup, the model's real shapes, the largest its limits
//! allow), each checked against the CPU reference on a real adapter (lavapipe in CI) with the
//! kernel's own tolerance (`kernels::NAME::tolerance`, derived from `check::gamma`). A kernel
//! added to `SHADERS` without an entry here fails `every_kernel_has_a_harness_entry`.
//!
//! The weight-streaming kernels (gemv, gemv_wide, gate_up_swiglu, qkv_rope_scale), split-K
//! attention and the FP8 kernels have their cases in the modules below, one per family (every
//! weight format, grouped experts, FP8 records); the table at the end names the tests that
//! check each against the reference.
//!
//! Pure data movement (embed, gather_rows, copy_rows, copy_vec4) and `add` (one correctly
//! rounded f32 operation on both sides) must match bit for bit.

mod fp8;
mod fused;
mod gemv;
mod quantized;

use moescope_engine::check::{compare, compare_scaled, Comparison, Tolerance};
use moescope_engine::gpu::{read_back, storage_buffer, storage_zeroed, GpuContext};
use moescope_engine::kernels::SHADERS;
use moescope_engine::kernels::*;
use moescope_engine::model::reference;
use moescope_engine::model::GateFunction;
use moescope_engine::rng::uniform_f32;
use moescope_tests::{gpu, run};

/// Bit-exact: the kernel computes what the reference computes, with the same single rounding.
const EXACT: Tolerance = Tolerance {
    abs: 0.0,
    rel: 0.0,
    why: "data movement or one correctly rounded f32 operation",
};

/// The largest buffer a harness case allocates: the adapter's storage binding limit, capped at
/// lavapipe's 128 MiB so that a GPU with a 4 GiB limit does not spend minutes here.
fn largest_binding_floats(ctx: &GpuContext) -> u32 {
    let bytes = ctx
        .adapter
        .limits
        .max_storage_buffer_binding_size
        .min(128 << 20);
    (bytes / 4) as u32
}

/// Workgroups per dimension of the grid: the most rows a one-workgroup-per-row kernel takes.
fn max_groups(ctx: &GpuContext) -> u32 {
    ctx.adapter.limits.max_compute_workgroups_per_dimension
}

fn upload<T: bytemuck::Pod>(ctx: &GpuContext, data: &[T]) -> wgpu::Buffer {
    storage_buffer(ctx, "harness input", data).expect("the input fits a binding")
}

fn zeros(ctx: &GpuContext, floats: usize) -> wgpu::Buffer {
    storage_zeroed(ctx, "harness output", 4 * floats as u64).expect("the output fits a binding")
}

fn read_u32(ctx: &GpuContext, buffer: &wgpu::Buffer) -> Vec<u32> {
    pollster::block_on(read_back::<u32>(ctx, buffer)).expect("reads back")
}

#[track_caller]
fn expect_pass(kernel: &str, case: &str, c: &Comparison) {
    assert!(c.passed(), "{}", c.describe(&format!("{kernel}, {case}")));
}

fn max_abs(x: &[f32]) -> f64 {
    x.iter().fold(0.0, |m, v| m.max(f64::from(v.abs())))
}

// ---- element-wise kernels -------------------------------------------------------------------

/// The sizes an element-wise kernel (256 invocations per workgroup, a 2D grid) is tried at.
fn flat_cases(ctx: &GpuContext) -> Vec<(&'static str, u32)> {
    vec![
        ("one element", 1),
        ("odd", 7),
        ("one past a workgroup", 257),
        ("the model's hidden row", 256),
        ("past the 65535-workgroup row of the grid", 65_535 * 256 + 3),
        ("largest binding", largest_binding_floats(ctx)),
    ]
}

fn add_matches_reference(ctx: &GpuContext) {
    for (case, n) in flat_cases(ctx) {
        let a = uniform_f32(1, n as usize, 4.0);
        let b = uniform_f32(2, n as usize, 4.0);
        let (a_buf, b_buf) = (upload(ctx, &a), upload(ctx, &b));
        let got = run(ctx, &a_buf, |pass| {
            add::dispatch(ctx, pass, &a_buf, &b_buf, n).expect("add records");
        });
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        expect_pass("add", case, &compare(&got, &want, EXACT));
    }
}

fn sigmoid_matches_reference(ctx: &GpuContext) {
    for (case, n) in flat_cases(ctx) {
        let x = uniform_f32(3, n as usize, 12.0);
        let (x_buf, y_buf) = (upload(ctx, &x), zeros(ctx, n as usize));
        let got = run(ctx, &y_buf, |pass| {
            sigmoid::dispatch(ctx, pass, &x_buf, &y_buf, n).expect("sigmoid records");
        });
        let want: Vec<f32> = x.iter().map(|v| reference::sigmoid(*v)).collect();
        let tol = sigmoid::tolerance(max_abs(&x));
        expect_pass("sigmoid", case, &compare(&got, &want, tol));
    }
}

fn silu_mul_matches_reference(ctx: &GpuContext) {
    for (case, n) in flat_cases(ctx) {
        let g = uniform_f32(4, n as usize, 8.0);
        let u = uniform_f32(5, n as usize, 2.0);
        let (g_buf, u_buf, h_buf) = (upload(ctx, &g), upload(ctx, &u), zeros(ctx, n as usize));
        let got = run(ctx, &h_buf, |pass| {
            silu_mul::dispatch(ctx, pass, &g_buf, &u_buf, &h_buf, n).expect("silu_mul records");
        });
        let want: Vec<f32> = g
            .iter()
            .zip(&u)
            .map(|(g, u)| reference::silu(*g) * u)
            .collect();
        let tol = silu_mul::tolerance(max_abs(&g));
        expect_pass("silu_mul", case, &compare(&got, &want, tol));
    }
}

fn copy_vec4_matches_reference(ctx: &GpuContext) {
    for (case, n) in flat_cases(ctx) {
        let n_vec4 = n.div_ceil(4);
        let x = uniform_f32(6, 4 * n_vec4 as usize, 1.0);
        // One vec4 more than copied where the binding allows, to see that the kernel stops.
        let spare = if x.len() as u32 + 4 <= largest_binding_floats(ctx) {
            4
        } else {
            0
        };
        let (src, dst) = (upload(ctx, &x), zeros(ctx, x.len() + spare));
        let got = run(ctx, &dst, |pass| {
            copy_vec4::dispatch(ctx, pass, &src, &dst, n_vec4).expect("copy_vec4 records");
        });
        expect_pass("copy_vec4", case, &compare(&got[..x.len()], &x, EXACT));
        assert!(
            got[x.len()..].iter().all(|v| *v == 0.0),
            "copy_vec4, {case}: wrote past N"
        );
    }
}

// ---- rows: norms, softmax, copies -----------------------------------------------------------

/// (case, rows, width) for the one-workgroup-per-row kernels.
fn row_cases(ctx: &GpuContext) -> Vec<(&'static str, u32, u32)> {
    vec![
        ("1×1", 1, 1),
        ("odd width, smaller than a workgroup", 3, 7),
        ("width one past a workgroup", 2, 257),
        ("the model's hidden row, 5 tokens", 5, 256),
        ("the model's dense FF row", 1, 768),
        ("rows at the grid limit", max_groups(ctx), 4),
    ]
}

fn rms_norm_reference(x: &[f32], w: &[f32], rows: usize, width: usize, eps: f32) -> Vec<f32> {
    (0..rows)
        .flat_map(|r| reference::rms_norm(&x[r * width..(r + 1) * width], w, eps))
        .collect()
}

fn rms_norm_matches_reference(ctx: &GpuContext) {
    for (case, rows, width) in row_cases(ctx) {
        let (r, w) = (rows as usize, width as usize);
        let x = uniform_f32(7, r * w, 3.0);
        let weight = uniform_f32(8, w, 1.5);
        let (x_buf, w_buf, y_buf) = (upload(ctx, &x), upload(ctx, &weight), zeros(ctx, r * w));
        let p = rms_norm::RmsNormParams::dense(rows, width, 1e-6);
        let got = run(ctx, &y_buf, |pass| {
            rms_norm::dispatch(ctx, pass, &x_buf, &w_buf, &y_buf, p).expect("rms_norm records");
        });
        let want = rms_norm_reference(&x, &weight, r, w, 1e-6);
        expect_pass(
            "rms_norm",
            case,
            &compare(&got, &want, rms_norm::tolerance(width)),
        );
    }
    // MLA's use: normalize the first 64 of each [c_kv | k_rope] row of 80, copy the 16 after,
    // into rows of a wider cache at an offset.
    let (rows, width, tail, in_stride, out_stride, out_offset) = (3usize, 64, 16, 80, 96, 8);
    let x = uniform_f32(9, rows * in_stride, 2.0);
    let weight = uniform_f32(10, width, 1.0);
    let y0 = vec![f32::NAN; out_offset + rows * out_stride];
    let (x_buf, w_buf, y_buf) = (upload(ctx, &x), upload(ctx, &weight), upload(ctx, &y0));
    let p = rms_norm::RmsNormParams {
        rows: rows as u32,
        width: width as u32,
        in_stride: in_stride as u32,
        in_offset: 0,
        out_stride: out_stride as u32,
        out_offset: out_offset as u32,
        eps: 1e-6,
        tail: tail as u32,
    };
    let got = run(ctx, &y_buf, |pass| {
        rms_norm::dispatch(ctx, pass, &x_buf, &w_buf, &y_buf, p).expect("rms_norm records");
    });
    for r in 0..rows {
        let row = &x[r * in_stride..];
        let mut want = reference::rms_norm(&row[..width], &weight, 1e-6);
        want.extend_from_slice(&row[width..width + tail]);
        let at = out_offset + r * out_stride;
        let c = compare(&got[at..at + width + tail], &want, rms_norm::tolerance(64));
        expect_pass("rms_norm", &format!("strided row {r} with a tail"), &c);
        // Nothing outside the row was written.
        assert!(got[at + width + tail..at + out_stride]
            .iter()
            .all(|v| v.is_nan()));
    }
}

fn add_rms_norm_matches_reference(ctx: &GpuContext) {
    for (case, rows, width) in row_cases(ctx) {
        let (r, w) = (rows as usize, width as usize);
        let x = uniform_f32(11, r * w, 2.0);
        let res = uniform_f32(12, r * w, 2.0);
        let weight = uniform_f32(13, w, 1.5);
        let bufs = [
            upload(ctx, &x),
            upload(ctx, &res),
            upload(ctx, &weight),
            zeros(ctx, r * w),
        ];
        let p = add_rms_norm::AddRmsNormParams {
            rows,
            width,
            eps: 1e-6,
            _pad: 0,
        };
        let h = run(ctx, &bufs[3], |pass| {
            let [x, r, w, h] = &bufs;
            add_rms_norm::dispatch(ctx, pass, [x, r, w, h], p).expect("add_rms_norm records");
        });
        let sum: Vec<f32> = x.iter().zip(&res).map(|(a, b)| a + b).collect();
        let x_after = pollster::block_on(read_back::<f32>(ctx, &bufs[0])).expect("reads back");
        expect_pass(
            "add_rms_norm (residual)",
            case,
            &compare(&x_after, &sum, EXACT),
        );
        let want = rms_norm_reference(&sum, &weight, r, w, 1e-6);
        let tol = add_rms_norm::tolerance(width);
        expect_pass("add_rms_norm", case, &compare(&h, &want, tol));
    }
}

fn softmax_matches_reference(ctx: &GpuContext) {
    for (case, rows, width) in row_cases(ctx) {
        let (r, w) = (rows as usize, width as usize);
        let x = uniform_f32(14, r * w, 6.0);
        let buf = upload(ctx, &x);
        let got = run(ctx, &buf, |pass| {
            softmax::dispatch(ctx, pass, &buf, softmax::SoftmaxParams::full(rows, width))
                .expect("softmax records");
        });
        let want: Vec<f32> = (0..r)
            .flat_map(|i| reference::softmax(&x[i * w..(i + 1) * w]))
            .collect();
        let tol = softmax::tolerance(width, 12.0);
        expect_pass("softmax", case, &compare(&got, &want, tol));
    }
    // Causal attention rows: 3 tokens after 5 cached positions, 2 heads; token t sees 6 + t.
    let (tokens, heads, pos0) = (3u32, 2u32, 5u32);
    let p = softmax::SoftmaxParams::causal(tokens, heads, pos0);
    let stride = p.stride as usize;
    let x = uniform_f32(15, (tokens * heads) as usize * stride, 6.0);
    let buf = upload(ctx, &x);
    let got = run(ctx, &buf, |pass| {
        softmax::dispatch(ctx, pass, &buf, p).expect("softmax records");
    });
    for row in 0..(tokens * heads) as usize {
        let valid = (pos0 + 1) as usize + row / heads as usize;
        let mut want = reference::softmax(&x[row * stride..row * stride + valid]);
        want.resize(stride, 0.0);
        let c = compare(
            &got[row * stride..][..stride],
            &want,
            softmax::tolerance(8, 12.0),
        );
        expect_pass("softmax", &format!("causal row {row}"), &c);
    }
}

fn copy_rows_matches_reference(ctx: &GpuContext) {
    // (case, rows, width, src stride, dst stride, src base, dst base)
    for (case, rows, width, ss, ds, sb, db) in [
        ("1×1", 1u32, 1u32, 1u32, 1u32, 0u32, 0u32),
        ("odd width into an interleaved layout", 3, 7, 9, 20, 2, 5),
        (
            "a query part into [latent | rope], 4 heads",
            4,
            16,
            16,
            80,
            0,
            64,
        ),
        ("rows at the grid limit", max_groups(ctx), 3, 3, 4, 0, 1),
    ] {
        let (r, w) = (rows as usize, width as usize);
        let src = uniform_f32(16, sb as usize + r * ss as usize, 1.0);
        let dst0 = vec![-7.0f32; db as usize + r * ds as usize];
        let (s_buf, d_buf) = (upload(ctx, &src), upload(ctx, &dst0));
        let p = copy_rows::CopyRowsParams {
            rows,
            width,
            src_base: sb,
            src_stride: ss,
            dst_base: db,
            dst_stride: ds,
            _pad: [0; 2],
        };
        let got = run(ctx, &d_buf, |pass| {
            copy_rows::dispatch(ctx, pass, &s_buf, &d_buf, p).expect("copy_rows records");
        });
        let mut want = dst0.clone();
        for i in 0..r {
            for j in 0..w {
                want[db as usize + i * ds as usize + j] = src[sb as usize + i * ss as usize + j];
            }
        }
        expect_pass("copy_rows", case, &compare(&got, &want, EXACT));
    }
}

// ---- token and expert movement --------------------------------------------------------------

fn embed_matches_reference(ctx: &GpuContext) {
    for (case, tokens, hidden, vocab) in [
        ("one token of one value", 1u32, 1u32, 1u32),
        ("odd sizes", 5, 7, 11),
        (
            "the model's vocabulary and hidden size, a 300-token prompt",
            300,
            256,
            256,
        ),
    ] {
        let table = uniform_f32(17, (vocab * hidden) as usize, 1.0);
        let ids: Vec<u32> = (0..tokens).map(|t| (t * 7 + 3) % vocab).collect();
        let (t_buf, i_buf) = (upload(ctx, &table), upload(ctx, &ids));
        let x_buf = zeros(ctx, (tokens * hidden) as usize);
        let p = embed::EmbedParams {
            tokens,
            hidden,
            vocab,
            _pad: 0,
        };
        let got = run(ctx, &x_buf, |pass| {
            embed::dispatch(ctx, pass, &t_buf, &i_buf, &x_buf, p).expect("embed records");
        });
        let h = hidden as usize;
        let want: Vec<f32> = ids
            .iter()
            .flat_map(|&id| table[id as usize * h..(id as usize + 1) * h].to_vec())
            .collect();
        expect_pass("embed", case, &compare(&got, &want, EXACT));
    }
}

/// (case, rows routed to the expert, width, base slot): an expert with no tokens, one token,
/// an odd batch, all 64 tokens of a prefill to one expert.
const EXPERT_BATCHES: [(&str, u32, u32, u32); 4] = [
    ("an expert with no tokens", 0, 256, 0),
    ("one token", 1, 256, 3),
    ("odd batch and width", 5, 7, 2),
    ("every token to one expert", 64, 256, 0),
];

fn gather_rows_matches_reference(ctx: &GpuContext) {
    let tokens = 64usize;
    for (case, rows, width, base) in EXPERT_BATCHES {
        let w = width as usize;
        let src = uniform_f32(18, tokens * w, 1.0);
        let index: Vec<u32> = (0..base + rows.max(1))
            .map(|j| (j * 37 + 5) % tokens as u32)
            .collect();
        let (s_buf, i_buf) = (upload(ctx, &src), upload(ctx, &index));
        let d0 = vec![-3.0f32; rows.max(1) as usize * w];
        let d_buf = upload(ctx, &d0);
        let p = gather_rows::GatherParams {
            rows,
            width,
            base,
            _pad: 0,
        };
        let got = run(ctx, &d_buf, |pass| {
            gather_rows::dispatch(ctx, pass, &s_buf, &i_buf, &d_buf, p).expect("gather records");
        });
        let mut want = d0.clone();
        for j in 0..rows as usize {
            let t = index[base as usize + j] as usize;
            want[j * w..(j + 1) * w].copy_from_slice(&src[t * w..(t + 1) * w]);
        }
        expect_pass("gather_rows", case, &compare(&got, &want, EXACT));
    }
}

fn scatter_add_matches_reference(ctx: &GpuContext) {
    let tokens = 64usize;
    for (case, rows, width, base) in EXPERT_BATCHES {
        let w = width as usize;
        let y = uniform_f32(19, rows.max(1) as usize * w, 2.0);
        // Distinct tokens within one dispatch, as routing guarantees.
        let index: Vec<u32> = (0..base + rows.max(1))
            .map(|j| (j * 37 + 5) % tokens as u32)
            .collect();
        let weight = uniform_f32(20, index.len(), 1.0);
        let out0 = uniform_f32(21, tokens * w, 1.0);
        let bufs = [
            upload(ctx, &y),
            upload(ctx, &index),
            upload(ctx, &weight),
            upload(ctx, &out0),
        ];
        let p = scatter_add::ScatterParams {
            rows,
            width,
            base,
            _pad: 0,
        };
        let got = run(ctx, &bufs[3], |pass| {
            let [y, i, g, o] = &bufs;
            scatter_add::dispatch(ctx, pass, y, i, g, o, p).expect("scatter_add records");
        });
        let mut want: Vec<f64> = out0.iter().map(|v| f64::from(*v)).collect();
        let mut scale: Vec<f64> = out0.iter().map(|v| f64::from(v.abs())).collect();
        for j in 0..rows as usize {
            let (t, g) = (index[base as usize + j] as usize, weight[base as usize + j]);
            for c in 0..w {
                let term = f64::from(g) * f64::from(y[j * w + c]);
                want[t * w + c] += term;
                scale[t * w + c] += term.abs();
            }
        }
        let want: Vec<f32> = want.iter().map(|v| *v as f32).collect();
        let c = compare_scaled(&got, &want, &scale, scatter_add::tolerance());
        expect_pass("scatter_add", case, &c);
    }
}

fn moe_combine_matches_reference(ctx: &GpuContext) {
    for (case, tokens, k, hidden) in [
        ("one token, top-1, one value", 1u32, 1u32, 1u32),
        ("odd sizes", 3, 2, 7),
        (
            "the model: a 20-token prefill, top-2 of hidden 256",
            20,
            2,
            256,
        ),
        ("top-k = experts = 16", 2, 16, 256),
    ] {
        let layout = moe_dispatch::RecordLayout {
            hidden: hidden.next_multiple_of(4),
            fp8: false,
        };
        let record = layout.words();
        let slots = (tokens * k) as usize;
        let d = hidden as usize;
        // Records: only the gate (word 1) is read by the combine.
        let gates = uniform_f32(22, slots, 1.0);
        let mut records = vec![0.0f32; slots * record as usize];
        for (s, g) in gates.iter().enumerate() {
            records[s * record as usize + 1] = *g;
        }
        let expert_out = uniform_f32(23, slots * d, 2.0);
        let out0 = uniform_f32(24, tokens as usize * d, 1.0);
        let bufs = [
            upload(ctx, &records),
            upload(ctx, &expert_out),
            upload(ctx, &out0),
        ];
        let p = moe_dispatch::MoeDispatchParams {
            tokens,
            k,
            hidden,
            record,
        };
        let got = run(ctx, &bufs[2], |pass| {
            let [r, e, o] = &bufs;
            moe_combine::dispatch(ctx, pass, [r, e, o], p).expect("moe_combine records");
        });
        let (mut want, mut scale) = (Vec::new(), Vec::new());
        for t in 0..tokens as usize {
            for c in 0..d {
                let mut acc = f64::from(out0[t * d + c]);
                let mut mag = acc.abs();
                for j in 0..k as usize {
                    let s = t * k as usize + j;
                    let term = f64::from(gates[s]) * f64::from(expert_out[s * d + c]);
                    acc += term;
                    mag += term.abs();
                }
                want.push(acc as f32);
                scale.push(mag);
            }
        }
        let c = compare_scaled(&got, &want, &scale, moe_combine::tolerance(k));
        expect_pass("moe_combine", case, &c);
    }
}

// ---- routing --------------------------------------------------------------------------------

/// (case, tokens, experts, k): top-1, top-k = E, the model's 16 experts top-2, the kernels' 64.
const ROUTING: [(&str, u32, u32, u32); 5] = [
    ("one token, one expert", 1, 1, 1),
    ("top-1 of 5", 3, 5, 1),
    ("top-k = experts", 2, 6, 6),
    ("the model: 16 experts, top-2, 7 tokens", 7, 16, 2),
    ("the most experts a workgroup routes: 64, top-8", 4, 64, 8),
];

/// Scores whose top-k choices are separated from the rest by more than rounding: distinct
/// multiples of 1/64 plus a little noise, shuffled per token.
fn separated_scores(tokens: u32, experts: u32) -> Vec<f32> {
    let noise = uniform_f32(25, (tokens * experts) as usize, 1e-3);
    (0..tokens * experts)
        .map(|i| {
            let (t, e) = (i / experts, i % experts);
            let rank = (e * 29 + t * 11) % experts;
            rank as f32 / 64.0 + noise[i as usize]
        })
        .collect()
}

fn topk_reference(scores: &[f32], bias: &[f32], k: usize, scaling: f32) -> (Vec<u32>, Vec<f32>) {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| (scores[b] + bias[b]).total_cmp(&(scores[a] + bias[a])));
    let ids: Vec<u32> = order[..k].iter().map(|&e| e as u32).collect();
    let sum: f64 = order[..k].iter().map(|&e| f64::from(scores[e])).sum();
    let gates = order[..k]
        .iter()
        .map(|&e| (f64::from(scores[e]) / sum * f64::from(scaling)) as f32)
        .collect();
    (ids, gates)
}

fn moe_topk_matches_reference(ctx: &GpuContext) {
    for (case, tokens, experts, k) in ROUTING {
        let scores = separated_scores(tokens, experts);
        let bias: Vec<f32> = (0..experts).map(|e| (e % 3) as f32 / 256.0).collect();
        let (ids_buf, gates_buf) = (
            zeros(ctx, (tokens * k) as usize),
            zeros(ctx, (tokens * k) as usize),
        );
        let (s_buf, b_buf) = (upload(ctx, &scores), upload(ctx, &bias));
        let p = moe_topk::MoeTopkParams {
            tokens,
            experts,
            k,
            routed_scaling: 2.5,
        };
        let gates = run(ctx, &gates_buf, |pass| {
            moe_topk::dispatch(ctx, pass, &s_buf, &b_buf, &ids_buf, &gates_buf, p)
                .expect("moe_topk records");
        });
        let ids = read_u32(ctx, &ids_buf);
        let (e, kk) = (experts as usize, k as usize);
        for t in 0..tokens as usize {
            let (want_ids, want_gates) =
                topk_reference(&scores[t * e..(t + 1) * e], &bias, kk, 2.5);
            assert_eq!(
                &ids[t * kk..(t + 1) * kk],
                want_ids.as_slice(),
                "moe_topk, {case}, token {t}"
            );
            let c = compare(
                &gates[t * kk..(t + 1) * kk],
                &want_gates,
                moe_topk::tolerance(k),
            );
            expect_pass("moe_topk", &format!("{case}, token {t}"), &c);
        }
    }
    // Ties go to the lower index, as in the reference: equal scores, no bias.
    let (tokens, experts, k) = (1u32, 8u32, 3u32);
    let scores = vec![0.5f32; experts as usize];
    let bias = vec![0.0f32; experts as usize];
    let (ids_buf, gates_buf) = (zeros(ctx, 3), zeros(ctx, 3));
    let (s_buf, b_buf) = (upload(ctx, &scores), upload(ctx, &bias));
    let p = moe_topk::MoeTopkParams {
        tokens,
        experts,
        k,
        routed_scaling: 1.0,
    };
    run(ctx, &gates_buf, |pass| {
        moe_topk::dispatch(ctx, pass, &s_buf, &b_buf, &ids_buf, &gates_buf, p).expect("records");
    });
    assert_eq!(
        read_u32(ctx, &ids_buf),
        [0, 1, 2],
        "moe_topk ties to the lower index"
    );
}

fn moe_route_matches_reference(ctx: &GpuContext) {
    for gate in [GateFunction::Sigmoid, GateFunction::Softmax] {
        for (case, tokens, experts, k) in ROUTING {
            let hidden = 256u32;
            let (t_n, e, d, kk) = (
                tokens as usize,
                experts as usize,
                hidden as usize,
                k as usize,
            );
            // Router rows that make the logits `separated_scores` (scaled), so that the choice
            // is far from a tie: h is one-hot per token, the router row holds the wanted logits.
            let logits = separated_scores(tokens, experts);
            let mut h = uniform_f32(26, t_n * d, 1e-3);
            let mut router = vec![0.0f32; e * d];
            for t in 0..t_n {
                h[t * d + t] = 1.0;
                for x in 0..e {
                    router[x * d + t] = 8.0 * logits[t * e + x];
                }
            }
            let bias: Vec<f32> = (0..experts).map(|x| (x % 3) as f32 / 512.0).collect();
            let bufs = [
                upload(ctx, &router),
                upload(ctx, &h),
                upload(ctx, &bias),
                zeros(ctx, t_n * e),
                zeros(ctx, t_n * kk),
                zeros(ctx, t_n * kk),
            ];
            let p = moe_route::MoeRouteParams {
                tokens,
                experts,
                k,
                hidden,
                routed_scaling: 2.5,
                gate: moe_route::MoeRouteParams::gate_code(gate),
                _pad: [0; 2],
            };
            let gates = run(ctx, &bufs[5], |pass| {
                let [r, h, b, s, i, g] = &bufs;
                moe_route::dispatch(ctx, pass, [r, h, b, s, i, g], p).expect("moe_route records");
            });
            let (scores, ids) = (
                pollster::block_on(read_back::<f32>(ctx, &bufs[3])).expect("reads back"),
                read_u32(ctx, &bufs[4]),
            );
            for t in 0..t_n {
                let l = reference::gemv(&router, &h[t * d..(t + 1) * d], e, d);
                let mag = reference::gemv_magnitude(&router, &h[t * d..(t + 1) * d], e, d);
                let magnitude = mag.iter().fold(0.0f64, |a, b| a.max(*b));
                let spread = match gate {
                    GateFunction::Sigmoid => max_abs(&l),
                    GateFunction::Softmax => {
                        let (lo, hi) = l
                            .iter()
                            .fold((f32::MAX, f32::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
                        f64::from(hi - lo)
                    }
                };
                let want_scores = reference::gate_scores(&l, gate);
                let at = format!("{gate:?}, {case}, token {t}");
                let tol = moe_route::score_tolerance(hidden, magnitude, spread);
                expect_pass(
                    "moe_route scores",
                    &at,
                    &compare(&scores[t * e..(t + 1) * e], &want_scores, tol),
                );
                let (want_ids, want_gates) = topk_reference(&want_scores, &bias, kk, 2.5);
                assert_eq!(
                    &ids[t * kk..(t + 1) * kk],
                    want_ids.as_slice(),
                    "moe_route ids, {at}"
                );
                let tol = moe_route::gate_tolerance(hidden, magnitude, spread, k);
                expect_pass(
                    "moe_route gates",
                    &at,
                    &compare(&gates[t * kk..(t + 1) * kk], &want_gates, tol),
                );
            }
        }
    }
}

// ---- attention ------------------------------------------------------------------------------

/// (case, tokens, heads, row, cached positions before the tokens).
const ATTENTION: [(&str, u32, u32, u32, u32); 5] = [
    ("one token, one head, a context of one", 1, 1, 1, 0),
    ("odd sizes", 3, 3, 7, 4),
    (
        "the model's decode: 4 heads of [64 | 16], 80 cached",
        1,
        4,
        80,
        79,
    ),
    ("the model's prefill: 20 tokens", 20, 4, 80, 0),
    ("the model's longest context: 512", 1, 4, 80, 511),
];

fn mla_scores_matches_reference(ctx: &GpuContext) {
    for (case, tokens, heads, row, pos0) in ATTENTION {
        let ctx_len = pos0 + tokens;
        let (th, r, s_n) = ((tokens * heads) as usize, row as usize, ctx_len as usize);
        let q = uniform_f32(27, th * r, 1.0);
        let cache = uniform_f32(28, s_n * r, 1.0);
        let scale = 0.125f32;
        let (q_buf, c_buf) = (upload(ctx, &q), upload(ctx, &cache));
        let out = upload(ctx, &vec![f32::NAN; th * s_n]);
        let p = mla_scores::MlaScoresParams {
            tokens,
            heads,
            ctx: ctx_len,
            row,
            pos0,
            scale,
            _pad: [0; 2],
        };
        let got = run(ctx, &out, |pass| {
            mla_scores::dispatch(ctx, pass, &q_buf, &c_buf, &out, p).expect("mla_scores records");
        });
        let (mut want, mut mag) = (Vec::new(), Vec::new());
        for i in 0..th {
            let t = i / heads as usize;
            for s in 0..s_n {
                if s > pos0 as usize + t {
                    want.push(0.0);
                    mag.push(0.0);
                    continue;
                }
                let (dot, m) = q[i * r..(i + 1) * r]
                    .iter()
                    .zip(&cache[s * r..(s + 1) * r])
                    .fold((0.0f64, 0.0f64), |(d, m), (a, b)| {
                        let p = f64::from(*a) * f64::from(*b);
                        (d + p, m + p.abs())
                    });
                want.push((dot * f64::from(scale)) as f32);
                mag.push(m * f64::from(scale));
            }
        }
        let c = compare_scaled(&got, &want, &mag, mla_scores::tolerance(row));
        expect_pass("mla_scores", case, &c);
    }
}

fn mla_values_matches_reference(ctx: &GpuContext) {
    for (case, tokens, heads, row, pos0) in ATTENTION {
        let ctx_len = pos0 + tokens;
        let latent = if row > 16 { row - 16 } else { row };
        let (th, r, s_n, l) = (
            (tokens * heads) as usize,
            row as usize,
            ctx_len as usize,
            latent as usize,
        );
        // Probabilities: non-negative, zero past each token's causal limit.
        let mut p = uniform_f32(29, th * s_n, 0.5);
        for (i, v) in p.iter_mut().enumerate() {
            let (t, s) = ((i / s_n) / heads as usize, i % s_n);
            *v = if s > pos0 as usize + t { 0.0 } else { v.abs() };
        }
        let cache = uniform_f32(30, s_n * r, 1.0);
        let (p_buf, c_buf, out) = (upload(ctx, &p), upload(ctx, &cache), zeros(ctx, th * l));
        let params = mla_values::MlaValuesParams {
            tokens,
            heads,
            ctx: ctx_len,
            row,
            latent,
            _pad: [0; 3],
        };
        let got = run(ctx, &out, |pass| {
            mla_values::dispatch(ctx, pass, &p_buf, &c_buf, &out, params)
                .expect("mla_values records");
        });
        let (mut want, mut mag) = (Vec::new(), Vec::new());
        for i in 0..th {
            for c in 0..l {
                let (sum, m) = (0..s_n).fold((0.0f64, 0.0f64), |(a, m), s| {
                    let term = f64::from(p[i * s_n + s]) * f64::from(cache[s * r + c]);
                    (a + term, m + term.abs())
                });
                want.push(sum as f32);
                mag.push(m);
            }
        }
        let c = compare_scaled(&got, &want, &mag, mla_values::tolerance(ctx_len));
        expect_pass("mla_values", case, &c);
    }
}

fn rope_matches_reference(ctx: &GpuContext) {
    let max_seq = 512usize;
    // (case, tokens, vectors per row, dim, row stride, offset, vector stride, pos0)
    for (case, tokens, count, dim, row_stride, offset, vec_stride, pos0) in [
        (
            "one pair at position 0",
            1u32,
            1u32,
            2u32,
            2u32,
            0u32,
            2u32,
            0u32,
        ),
        ("odd count, strided vectors", 3, 3, 6, 31, 1, 9, 7),
        (
            "the model's query: 4 heads of [32 | 16], rope part",
            5,
            4,
            16,
            192,
            32,
            48,
            100,
        ),
        ("the model's last position", 1, 1, 16, 80, 64, 16, 511),
    ] {
        let x = uniform_f32(31, (tokens * row_stride) as usize, 1.0);
        let table = rope::cos_sin_table(max_seq, dim as usize, 10_000.0);
        let (x_buf, t_buf) = (upload(ctx, &x), upload(ctx, &table));
        let p = rope::RopeParams {
            tokens,
            count,
            dim,
            row_stride,
            offset,
            vec_stride,
            pos0,
            _pad: 0,
        };
        let got = run(ctx, &x_buf, |pass| {
            rope::dispatch(ctx, pass, &x_buf, &t_buf, p).expect("rope records");
        });
        let mut want = x.clone();
        for t in 0..tokens as usize {
            for j in 0..count as usize {
                let at = t * row_stride as usize + offset as usize + j * vec_stride as usize;
                reference::rope(
                    &mut want[at..at + dim as usize],
                    pos0 as usize + t,
                    10_000.0,
                );
            }
        }
        let c = compare_scaled(
            &got,
            &want,
            &pair_magnitudes(
                &x,
                &want,
                (tokens, count, dim, row_stride, offset, vec_stride),
            ),
            rope::tolerance(),
        );
        expect_pass("rope", case, &c);
    }
}

/// |a| + |b| of each rotated element's pair (what a rotation's rounding scales with), and the
/// element itself where it is not rotated (must be unchanged).
fn pair_magnitudes(
    x: &[f32],
    want: &[f32],
    (tokens, count, dim, row_stride, offset, vec_stride): (u32, u32, u32, u32, u32, u32),
) -> Vec<f64> {
    let mut mag: Vec<f64> = want.iter().map(|_| 0.0).collect();
    let half = dim as usize / 2;
    for t in 0..tokens as usize {
        for j in 0..count as usize {
            let at = t * row_stride as usize + offset as usize + j * vec_stride as usize;
            for i in 0..half {
                let m = f64::from(x[at + i].abs()) + f64::from(x[at + i + half].abs());
                mag[at + i] = m;
                mag[at + i + half] = m;
            }
        }
    }
    mag
}

/// One test per kernel of this file, `matches_reference::NAME`; the kernels whose cases live in
/// the family modules, with the tests that check them against the reference (naming a test
/// that does not exist fails to compile); and the list of every kernel covered.
macro_rules! harness {
    (
        cases { $($name:ident => $case:ident),* $(,)? }
        covered { $($kernel:ident => [$($test:path),+ $(,)?]),* $(,)? }
    ) => {
        const HARNESS: &[&str] = &[$(stringify!($name),)* $(stringify!($kernel)),*];
        /// For each kernel of the family modules, its tests.
        const COVERED: &[(&str, &[fn()])] = &[$((stringify!($kernel), &[$($test as fn()),+])),*];
        mod matches_reference {
            $(
                #[test]
                fn $name() {
                    if let Some(ctx) = super::gpu() {
                        super::$case(&ctx);
                    }
                }
            )*
        }
    };
}

harness! {
    cases {
        add => add_matches_reference,
        add_rms_norm => add_rms_norm_matches_reference,
        copy_rows => copy_rows_matches_reference,
        copy_vec4 => copy_vec4_matches_reference,
        embed => embed_matches_reference,
        gather_rows => gather_rows_matches_reference,
        mla_scores => mla_scores_matches_reference,
        mla_values => mla_values_matches_reference,
        moe_combine => moe_combine_matches_reference,
        moe_route => moe_route_matches_reference,
        moe_topk => moe_topk_matches_reference,
        rms_norm => rms_norm_matches_reference,
        rope => rope_matches_reference,
        scatter_add => scatter_add_matches_reference,
        sigmoid => sigmoid_matches_reference,
        silu_mul => silu_mul_matches_reference,
        softmax => softmax_matches_reference,
    }
    covered {
        gemv => [
            gemv::gemv_matches_reference,
            fused::grouped_gemv_reads_each_tokens_expert_from_its_record,
            fused::gemv_scatters_rows_into_an_interleaved_layout_and_nowhere_else,
            quantized::gemv_reads_every_format_exactly_and_within_its_error,
            quantized::grouped_rows_on_large_matrices,
        ],
        gemv_wide => [quantized::gemv_wide_reads_fp4_exactly_and_within_its_error],
        gate_up_swiglu => [
            fused::gate_up_swiglu_matches_the_reference,
            quantized::grouped_experts_and_gate_up_swiglu_in_every_format,
        ],
        qkv_rope_scale => [
            fused::qkv_rope_scale_matches_projection_then_rope_then_scale,
            quantized::qkv_rope_scale_reads_every_format,
        ],
        mla_split_k => [fused::split_k_attention_matches_the_reference_around_its_chunk_size],
        mla_split_k_reduce => [fused::split_k_attention_matches_the_reference_around_its_chunk_size],
        fp8_round_trip => [fp8::fp8_round_trip_gives_the_cpus_values_bit_for_bit],
        moe_dispatch => [fp8::moe_dispatch_writes_the_cpus_fp8_records],
    }
}

#[test]
fn every_kernel_has_a_harness_entry() {
    let mut missing: Vec<&str> = SHADERS
        .iter()
        .map(|s| s.name)
        .filter(|name| !HARNESS.contains(name))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "kernels without a harness entry: {missing:?}"
    );
    // Each kernel of the family modules names at least one test, and no kernel is listed twice.
    assert!(COVERED.iter().all(|(_, tests)| !tests.is_empty()));
    let mut names = HARNESS.to_vec();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), HARNESS.len(), "a kernel is listed twice");
}
