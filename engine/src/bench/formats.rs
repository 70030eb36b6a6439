//! The weight-format benchmark: the same decode steps (all switches on) with the block
//! projections in each format, in one run on one set of weights, rounds interleaved as in
//! `bench::decode`; each format's accuracy against f32 (`model::accuracy`) comes with it, so one
//! command gives the whole table of docs/BENCHMARKS.md.

use serde::Serialize;
use web_time::Instant;

use super::decode::DecodeBenchOptions;
use crate::gpu::{AdapterReport, GpuContext};
use crate::model::accuracy::{self, Accuracy};
use crate::model::gpu::GpuModel;
use crate::model::{tokenizer, ModelError, MoeConfig, Weights};
use crate::plan::Optimizations;
use crate::quant::Format;

#[derive(Clone, Debug, Serialize)]
pub struct FormatRow {
    pub format: Format,
    /// Median host time per decode step, read-back included.
    pub ms_per_step: f64,
    pub tokens_per_s: f64,
    /// The f32 row's ms per step over this one's.
    pub speedup_vs_f32: f64,
    /// What the step's kernels must move, weights and activations (`KernelLaunch::bytes`).
    pub bytes_per_step: u64,
    pub accuracy: Accuracy,
}

#[derive(Clone, Debug, Serialize)]
pub struct FormatBench {
    pub adapter: AdapterReport,
    pub model: String,
    pub options: DecodeBenchOptions,
    pub rows: Vec<FormatRow>,
}

/// Runs every format on synthetic weights from `options.seed`.
pub async fn run(ctx: &GpuContext, options: DecodeBenchOptions) -> Result<FormatBench, ModelError> {
    let config = MoeConfig::deepseek_mini();
    // The prompt, a warm-up step and the timed steps.
    let needed = options.prompt_tokens + options.steps + 1;
    if options.prompt_tokens == 0 || options.steps == 0 || needed > config.max_seq_len {
        return Err(ModelError::ContextFull {
            needed,
            max: config.max_seq_len,
        });
    }
    let weights = Weights::synthetic(&config, options.seed)?;
    let mut models = Vec::with_capacity(Format::ALL.len());
    for format in Format::ALL {
        let mut model = GpuModel::with_format(ctx, &weights, format)?;
        model.set_optimizations(Optimizations::all());
        models.push(model);
    }
    let text = tokenizer::encode("Mixture-of-experts models route every token to a few experts. ");
    let tokens: Vec<u32> = text.iter().cycle().take(needed).copied().collect();
    let (prompt, decode) = tokens.split_at(options.prompt_tokens);

    let mut ms: Vec<Vec<f64>> = vec![Vec::new(); models.len()];
    let mut bytes = vec![0u64; models.len()];
    for _ in 0..options.rounds.max(1) {
        for (i, model) in models.iter_mut().enumerate() {
            model.reset();
            model.forward(ctx, prompt).await?;
            // Compiles this format's pipelines before the timed steps.
            model.forward(ctx, &decode[..1]).await?;
            for &token in &decode[1..] {
                let t0 = Instant::now();
                let (_, trace) = model.forward(ctx, &[token]).await?;
                ms[i].push(t0.elapsed().as_secs_f64() * 1e3);
                bytes[i] = trace.kernels.iter().map(|k| k.bytes).sum();
            }
        }
    }
    drop(models);
    let f32_ms = super::median(ms[0].clone());
    let mut rows = Vec::with_capacity(Format::ALL.len());
    for ((format, ms), bytes_per_step) in Format::ALL.into_iter().zip(ms).zip(bytes) {
        let ms_per_step = super::median(ms);
        rows.push(FormatRow {
            format,
            ms_per_step,
            tokens_per_s: 1e3 / ms_per_step,
            speedup_vs_f32: f32_ms / ms_per_step,
            bytes_per_step,
            accuracy: accuracy::measure(ctx, &weights, format, false).await?,
        });
    }
    Ok(FormatBench {
        adapter: ctx.adapter.clone(),
        model: config.name,
        options,
        rows,
    })
}
