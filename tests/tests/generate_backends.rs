//! Greedy generation gives the same tokens on the GPU — the eager baseline and with every fusion
//! on — and on the CPU reference, or, where a near-tie makes that impossible, the run reports the
//! tie at or before the first difference.

use std::sync::Arc;

use moescope_engine::model::generate::{generate, Engine, GenerateOptions, Generation, Sampling};
use moescope_engine::model::tokenizer::encode;
use moescope_engine::model::{MoeConfig, Weights};
use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;
use moescope_tests::gpu;

#[test]
fn gpu_and_cpu_greedy_agree_or_report_the_tie() {
    let Some(ctx) = gpu() else { return };
    let ctx = Arc::new(ctx);
    for (seed, prompt) in [(0, "The router sends each token"), (7, "Byte by byte: ")] {
        let w = Weights::synthetic(&MoeConfig::deepseek_mini(), seed).unwrap();
        let opts = GenerateOptions {
            max_new_tokens: 24,
            sampling: Sampling::Greedy,
            seed,
        };
        let run = |mut engine: Engine| -> Generation {
            pollster::block_on(generate(
                &mut engine,
                &encode(prompt),
                opts.clone(),
                &mut |_| true,
            ))
            .unwrap()
        };
        let on_cpu = run(Engine::cpu(w.clone()));
        for o in [Optimizations::none(), Optimizations::all()] {
            let on_gpu = run(Engine::gpu(Arc::clone(&ctx), &w, o, Format::F32).unwrap());
            assert_eq!(on_gpu.optimizations, Some(o));
            assert_eq!(on_gpu.tokens.len(), 24);
            match on_gpu
                .tokens
                .iter()
                .zip(&on_cpu.tokens)
                .position(|(a, b)| a != b)
            {
                None => assert_eq!(on_gpu.experts, on_cpu.experts, "seed {seed}, {o}"),
                Some(step) => {
                    let reported = on_cpu.near_ties.iter().any(|t| t.step <= step);
                    assert!(
                        reported,
                        "seed {seed}, {o}: tokens differ at step {step} with no near tie reported \
                     (gpu {:?}, cpu {:?})",
                        on_gpu.tokens, on_cpu.tokens
                    );
                }
            }
        }
    }
}
