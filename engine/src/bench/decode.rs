//! The fused-kernel benchmark: the same decode steps with every switch off (the eager baseline),
//! each switch alone, and all on, in one run on one model. Variants take turns round by round so
//! that drift (clocks, other load) hits all of them alike. Each step is timed on the host around
//! the forward and its read-back (what a user waits for); one more step per variant, after the
//! timed ones and not counted with them, is profiled with timestamp queries for the per-kernel
//! times. Every variant's logits are compared with the
//! baseline's on the same tokens, so the benchmark also shows that the switches change no math.

use std::collections::BTreeMap;

use serde::Serialize;
use web_time::Instant;

use crate::gpu::{AdapterReport, GpuContext, TimingSource};
use crate::model::gpu::{GpuModel, StepTrace};
use crate::model::{tokenizer, ModelError, MoeConfig, Weights};
use crate::plan::{Optimizations, NAMES};

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct DecodeBenchOptions {
    /// Context before the timed steps (prefilled, not timed).
    pub prompt_tokens: usize,
    /// Timed decode steps per variant per round.
    pub steps: usize,
    pub rounds: usize,
    pub seed: u64,
}

impl Default for DecodeBenchOptions {
    fn default() -> Self {
        Self {
            prompt_tokens: 64,
            steps: 16,
            rounds: 3,
            seed: 0,
        }
    }
}

/// One kernel's share of a profiled step.
#[derive(Clone, Debug, Serialize)]
pub struct KernelShare {
    pub kernel: &'static str,
    pub launches: usize,
    /// Sum of its passes' GPU time; `None` without timestamp queries.
    pub gpu_us: Option<f64>,
    pub bytes: u64,
}

/// One set of switches, measured.
#[derive(Clone, Debug, Serialize)]
pub struct Variant {
    /// `none`, a switch name, or `all`.
    pub name: String,
    pub optimizations: Optimizations,
    /// Median over every timed step of every round (host time, read-back included).
    pub ms_per_step: f64,
    /// The baseline's ms per step over this variant's.
    pub speedup_vs_baseline: f64,
    /// Median host time recording the kernels (validation, bind groups, encoding) per step.
    pub record_us_per_step: f64,
    /// Median host time in `queue.submit` per step.
    pub submit_us_per_step: f64,
    /// Sum of per-kernel GPU times of the profiled step; `None` without timestamp queries.
    pub gpu_us_per_step: Option<f64>,
    pub kernels_per_step: usize,
    pub submissions_per_step: usize,
    pub bytes_per_step: u64,
    /// Largest |logit − baseline logit| over every timed step.
    pub max_logit_diff_vs_baseline: f64,
    /// Per kernel name, from the profiled step.
    pub kernels: Vec<KernelShare>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DecodeBench {
    pub adapter: AdapterReport,
    pub model: String,
    pub options: DecodeBenchOptions,
    pub timing: TimingSource,
    /// Baseline first, then each switch alone, then all.
    pub variants: Vec<Variant>,
}

/// The variants in report order: none, each switch alone, all.
pub fn variants() -> Vec<(String, Optimizations)> {
    let mut v = vec![("none".to_string(), Optimizations::none())];
    for name in NAMES {
        let mut o = Optimizations::none();
        // NAMES are exactly the switch names.
        let _ = o.set(name, true);
        v.push((name.to_string(), o));
    }
    v.push(("all".to_string(), Optimizations::all()));
    v
}

struct Samples {
    ms: Vec<f64>,
    record_us: Vec<f64>,
    submit_us: Vec<f64>,
    logits: Vec<Vec<f32>>,
    max_diff: f64,
}

/// Runs the benchmark on synthetic weights from `options.seed`.
pub async fn run(ctx: &GpuContext, options: DecodeBenchOptions) -> Result<DecodeBench, ModelError> {
    run_variants(ctx, options, variants()).await
}

/// One round of one variant: from an empty cache, the prompt, one untimed step (it compiles
/// any pipeline the variant has not used yet), then each of the other `steps` timed.
async fn time_steps(
    ctx: &GpuContext,
    model: &mut GpuModel,
    (prompt, steps): (&[u32], &[u32]),
    samples: &mut Samples,
) -> Result<(), ModelError> {
    model.reset();
    model.forward(ctx, prompt).await?;
    model.forward(ctx, &steps[..1]).await?;
    let mut logits = Vec::with_capacity(steps.len());
    for &token in &steps[1..] {
        let t0 = Instant::now();
        let (out, trace) = model.forward(ctx, &[token]).await?;
        samples.ms.push(t0.elapsed().as_secs_f64() * 1e3);
        samples.record_us.push(trace.record_us);
        samples.submit_us.push(trace.submit_us);
        logits.push(out.logits);
    }
    samples.logits = logits;
    Ok(())
}

/// A variant's medians and its profiled step's counts.
fn variant(
    name: String,
    o: Optimizations,
    s: Samples,
    trace: &StepTrace,
    baseline_ms: f64,
) -> Variant {
    let ms_per_step = super::median(s.ms);
    Variant {
        speedup_vs_baseline: baseline_ms / ms_per_step,
        ms_per_step,
        record_us_per_step: super::median(s.record_us),
        submit_us_per_step: super::median(s.submit_us),
        gpu_us_per_step: trace.kernels.iter().map(|k| k.gpu_us).sum::<Option<f64>>(),
        kernels_per_step: trace.kernels.len(),
        submissions_per_step: trace.submissions,
        bytes_per_step: trace.kernels.iter().map(|k| k.bytes).sum(),
        max_logit_diff_vs_baseline: s.max_diff,
        kernels: shares(trace),
        optimizations: o,
        name,
    }
}

/// The benchmark over `list` only; its first entry is the baseline the others are compared with.
pub async fn run_variants(
    ctx: &GpuContext,
    options: DecodeBenchOptions,
    list: Vec<(String, Optimizations)>,
) -> Result<DecodeBench, ModelError> {
    let config = MoeConfig::deepseek_mini();
    // The prompt, a warm-up step, the timed steps and the profiled step.
    let needed = options.prompt_tokens + options.steps + 2;
    if options.prompt_tokens == 0 || options.steps == 0 || needed > config.max_seq_len {
        return Err(ModelError::ContextFull {
            needed,
            max: config.max_seq_len,
        });
    }
    let weights = Weights::synthetic(&config, options.seed)?;
    let mut model = GpuModel::new(ctx, &weights)?;
    drop(weights);
    // The same tokens for every variant: a fixed text, repeated to the length asked for.
    let text = tokenizer::encode("Mixture-of-experts models route every token to a few experts. ");
    let tokens: Vec<u32> = text.iter().cycle().take(needed).copied().collect();
    let (prompt, decode) = tokens.split_at(options.prompt_tokens);

    let mut samples: Vec<Samples> = list
        .iter()
        .map(|_| Samples {
            ms: Vec::new(),
            record_us: Vec::new(),
            submit_us: Vec::new(),
            logits: Vec::new(),
            max_diff: 0.0,
        })
        .collect();
    // Each variant's last round ends with one profiled step (not timed), for the per-kernel
    // times, kernels, submissions and bytes.
    let rounds = options.rounds.max(1);
    let mut profiled: Vec<Option<StepTrace>> = vec![None; list.len()];
    for round in 0..rounds {
        for (i, (_, o)) in list.iter().enumerate() {
            model.set_optimizations(*o);
            time_steps(
                ctx,
                &mut model,
                (prompt, &decode[..=options.steps]),
                &mut samples[i],
            )
            .await?;
            if round + 1 == rounds {
                model.set_profiling(ctx, true);
                let (_, trace) = model.forward(ctx, &decode[options.steps + 1..]).await?;
                model.set_profiling(ctx, false);
                profiled[i] = Some(trace);
            }
        }
        let (base, rest) = samples.split_at_mut(1);
        for s in rest {
            s.max_diff = s.max_diff.max(max_diff(&s.logits, &base[0].logits));
        }
    }

    let baseline_ms = super::median(samples[0].ms.clone());
    let out = list
        .into_iter()
        .zip(samples)
        .zip(profiled)
        .map(|(((name, o), s), trace)| variant(name, o, s, &trace.unwrap_or_default(), baseline_ms))
        .collect();
    Ok(DecodeBench {
        adapter: ctx.adapter.clone(),
        model: config.name,
        options,
        timing: if ctx.has_timestamps() {
            TimingSource::TimestampQuery
        } else {
            TimingSource::WallClock
        },
        variants: out,
    })
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max)
}

fn shares(trace: &StepTrace) -> Vec<KernelShare> {
    let mut by_kernel: BTreeMap<&'static str, KernelShare> = BTreeMap::new();
    for k in &trace.kernels {
        let e = by_kernel.entry(k.kernel).or_insert(KernelShare {
            kernel: k.kernel,
            launches: 0,
            gpu_us: Some(0.0),
            bytes: 0,
        });
        e.launches += 1;
        e.bytes += k.bytes;
        e.gpu_us = e.gpu_us.zip(k.gpu_us).map(|(a, b)| a + b);
    }
    by_kernel.into_values().collect()
}
