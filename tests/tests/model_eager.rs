//! The eager WebGPU forward against the CPU reference, on a real adapter (lavapipe in CI): the
//! logits of a prefill and of 20 decode steps after it, and the routing of every token.
//!
//! Tolerance: see `check::tolerances::model_logits`.

use moescope_engine::check::{compare, tolerances};
use moescope_engine::model::gpu::GpuModel;
use moescope_engine::model::reference::{self, KvCache};
use moescope_engine::model::tokenizer::encode;
use moescope_engine::model::{MoeConfig, Weights};
use moescope_tests::gpu;

#[test]
fn eager_logits_match_the_reference_for_prefill_and_decode() {
    let Some(ctx) = gpu() else { return };
    let w = Weights::synthetic(&MoeConfig::deepseek_mini(), 3).unwrap();
    let mut model = GpuModel::new(&ctx, &w).unwrap();
    let mut cache = KvCache::new(&w.config);
    let v = w.config.vocab_size;
    let tol = tolerances::model_logits();

    // Prefill: 21 tokens, not a multiple of the 16-token matmul tile.
    let prompt = encode("Experts, route this: ");
    let want = reference::forward(&w, &prompt, &mut cache).unwrap();
    let (got, trace) = pollster::block_on(model.forward(&ctx, &prompt)).unwrap();
    let c = compare(&got.logits, &want.logits, tol);
    assert!(c.passed(), "{}", c.describe("prefill logits"));
    assert_eq!(got.routing.len(), prompt.len());
    for (g, r) in got.routing.iter().zip(&want.routing) {
        for (g, r) in g.iter().zip(r) {
            assert_eq!(
                g.experts, r.experts,
                "prefill routing (reference margin {})",
                r.margin
            );
        }
    }
    assert!(trace.iter().any(|k| k.kernel == "matmul"));
    let mut worst = c.max_abs_error;

    // Decode: feed the reference's greedy token back, one step at a time.
    let mut next = argmax(&want.logits[(prompt.len() - 1) * v..]);
    for step in 0..20 {
        let want = reference::forward(&w, &[next], &mut cache).unwrap();
        let (got, trace) = pollster::block_on(model.forward(&ctx, &[next])).unwrap();
        let c = compare(&got.logits, &want.logits, tol);
        assert!(
            c.passed(),
            "{}",
            c.describe(&format!("decode step {step} logits"))
        );
        for (g, r) in got.routing[0].iter().zip(&want.routing[0]) {
            assert_eq!(
                g.experts, r.experts,
                "step {step} (reference margin {})",
                r.margin
            );
            for (a, b) in g.gates.iter().zip(&r.gates) {
                assert!(
                    (a - b).abs() < 1e-5,
                    "step {step} gates {:?} vs {:?}",
                    g.gates,
                    r.gates
                );
            }
        }
        // One token: GEMVs only, and at least one kernel per op of every layer.
        assert!(trace.iter().all(|k| k.kernel != "matmul"));
        assert!(trace.len() > 100, "{} kernels", trace.len());
        worst = worst.max(c.max_abs_error);
        next = argmax(&want.logits);
    }
    assert_eq!(model.len(), prompt.len() + 20);
    eprintln!("eager vs reference: worst |logit error| {worst:.3e}");
}

#[test]
fn eager_forward_refuses_bad_input_without_changing_state() {
    let Some(ctx) = gpu() else { return };
    let w = Weights::synthetic(&MoeConfig::deepseek_mini(), 3).unwrap();
    let mut model = GpuModel::new(&ctx, &w).unwrap();
    assert!(pollster::block_on(model.forward(&ctx, &[])).is_err());
    assert!(pollster::block_on(model.forward(&ctx, &[256])).is_err());
    let too_long = vec![1u32; w.config.max_seq_len + 1];
    assert!(pollster::block_on(model.forward(&ctx, &too_long)).is_err());
    assert_eq!(model.len(), 0);
    // A one-token prefill works after the refusals.
    let (out, _) = pollster::block_on(model.forward(&ctx, &[65])).unwrap();
    assert_eq!(out.logits.len(), w.config.vocab_size);
}

fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[best] {
            best = i;
        }
    }
    best as u32
}
