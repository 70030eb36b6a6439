//! The decode loop over either engine: prefill the prompt, then one forward per generated token,
//! sampling greedily or with temperature and top-p from a seeded ChaCha stream, with statistics
//! for every step. A `Generator` advances one token per `next()` so the app can yield to the
//! browser between tokens; `generate` runs the whole loop with a callback.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use web_time::Instant;

use crate::gpu::GpuContext;

use crate::plan::Optimizations;
use crate::quant::Format;

use super::gpu::{GpuModel, KernelLaunch};
use super::reference::{self, ForwardOutput, KvCache};
use super::{tokenizer, ModelError, MoeConfig, Weights};

/// Which engine runs the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The CPU reference (f64 accumulation): native, or wasm when WebGPU is missing.
    Cpu,
    /// The eager WebGPU path.
    Gpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
        }
    }
}

/// A model ready to run on one backend, with its KV cache. There is one per backend, never a
/// collection of them, so the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Engine {
    Cpu {
        weights: Weights,
        cache: KvCache,
    },
    Gpu {
        ctx: Arc<GpuContext>,
        model: GpuModel,
    },
}

/// What one forward pass cost.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepCost {
    /// Kernels launched (0 on the CPU, which runs no kernels).
    pub kernels: usize,
    /// Queue submissions (0 on the CPU).
    pub submissions: usize,
    /// Bytes read and written: on the GPU the sum over kernels of the minimum each must move;
    /// on the CPU the weights and cache rows the reference reads (computed, not measured).
    pub bytes: u64,
    /// The kernels, in launch order (GPU only).
    pub trace: Vec<KernelLaunch>,
}

impl Engine {
    pub fn cpu(weights: Weights) -> Self {
        let cache = KvCache::new(&weights.config);
        Engine::Cpu { weights, cache }
    }

    /// The WebGPU engine running the kernels that `optimizations` selects, with the block
    /// projections quantized to `format` (`GpuModel::with_format`).
    pub fn gpu(
        ctx: Arc<GpuContext>,
        weights: &Weights,
        optimizations: Optimizations,
        format: Format,
    ) -> Result<Self, ModelError> {
        let mut model = GpuModel::with_format(&ctx, weights, format)?;
        model.set_optimizations(optimizations);
        Ok(Engine::Gpu { ctx, model })
    }

    /// Why the GPU device was lost, if this is a GPU engine whose device was.
    pub fn device_lost(&self) -> Option<String> {
        match self {
            Engine::Cpu { .. } => None,
            Engine::Gpu { ctx, .. } => ctx.lost(),
        }
    }

    /// The weight format: the GPU's, or f32 on the CPU reference.
    pub fn format(&self) -> Format {
        match self {
            Engine::Cpu { .. } => Format::F32,
            Engine::Gpu { model, .. } => model.format(),
        }
    }

    /// Bytes of weights the engine holds (GPU buffers with their scales; the CPU's f32 tensors).
    pub fn weight_bytes(&self) -> u64 {
        match self {
            Engine::Cpu { weights, .. } => 4 * weights.config.total_params() as u64,
            Engine::Gpu { model, .. } => model.weight_bytes(),
        }
    }

    /// The switches in force (GPU), or `None` on the CPU, which runs no kernels.
    pub fn optimizations(&self) -> Option<Optimizations> {
        match self {
            Engine::Cpu { .. } => None,
            Engine::Gpu { model, .. } => Some(model.optimizations()),
        }
    }

    /// Times every kernel of the next steps with timestamp queries where the adapter has them
    /// (GPU; the CPU has no kernels); `StepStats::trace` then carries the times.
    pub fn set_profiling(&mut self, on: bool) {
        if let Engine::Gpu { ctx, model } = self {
            model.set_profiling(ctx, on);
        }
    }

    /// Changes the kernels of the next steps (GPU; the CPU has none). The cache stays valid.
    pub fn set_optimizations(&mut self, o: Optimizations) {
        if let Engine::Gpu { model, .. } = self {
            model.set_optimizations(o);
        }
    }

    /// Whether the routed experts read FP8 records (`MoeConfig::dispatch_fp8`) from the next
    /// forward on. The math changes, so the cache is emptied.
    pub fn set_dispatch_fp8(&mut self, on: bool) -> Result<(), ModelError> {
        match self {
            Engine::Cpu { weights, cache } => {
                let c = weights.config.with_dispatch_fp8(on)?;
                if c != weights.config {
                    weights.config = c;
                    *cache = KvCache::new(&weights.config);
                }
                Ok(())
            }
            Engine::Gpu { model, .. } => model.set_dispatch_fp8(on),
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Engine::Cpu { .. } => Backend::Cpu,
            Engine::Gpu { .. } => Backend::Gpu,
        }
    }

    /// The adapter's name, or "cpu".
    pub fn device_name(&self) -> String {
        match self {
            Engine::Cpu { .. } => "cpu (reference, f64 accumulation)".into(),
            Engine::Gpu { ctx, .. } => ctx.adapter.name.clone(),
        }
    }

    pub fn config(&self) -> &MoeConfig {
        match self {
            Engine::Cpu { weights, .. } => &weights.config,
            Engine::Gpu { model, .. } => model.config(),
        }
    }

    /// Positions in the cache.
    pub fn len(&self) -> usize {
        match self {
            Engine::Cpu { cache, .. } => cache.len,
            Engine::Gpu { model, .. } => model.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&mut self) {
        match self {
            Engine::Cpu { weights, cache } => *cache = KvCache::new(&weights.config),
            Engine::Gpu { model, .. } => model.reset(),
        }
    }

    pub async fn forward(
        &mut self,
        tokens: &[u32],
    ) -> Result<(ForwardOutput, StepCost), ModelError> {
        match self {
            Engine::Cpu { weights, cache } => {
                let pos0 = cache.len;
                let out = reference::forward(weights, tokens, cache)?;
                let bytes = cpu_bytes(&weights.config, pos0, tokens.len());
                Ok((
                    out,
                    StepCost {
                        kernels: 0,
                        submissions: 0,
                        bytes,
                        trace: Vec::new(),
                    },
                ))
            }
            Engine::Gpu { ctx, model } => {
                let (out, trace) = model.forward(ctx, tokens).await?;
                Ok((
                    out,
                    StepCost {
                        kernels: trace.kernels.len(),
                        submissions: trace.submissions,
                        bytes: trace.kernels.iter().map(|k| k.bytes).sum(),
                        trace: trace.kernels,
                    },
                ))
            }
        }
    }
}

/// The engine's logits for `tokens` (a fresh prefill) against the CPU reference's.
#[derive(Clone, Debug, Serialize)]
pub struct ReferenceCheck {
    pub tokens: usize,
    pub format: Format,
    pub comparison: crate::check::Comparison,
    pub tolerance: crate::check::Tolerance,
    /// The engine computes the reference's math (f32 weights); a quantized engine differs by
    /// design, and the comparison then only reports how far.
    pub comparable: bool,
    /// FP8 dispatch: how close the reference's expert inputs come to an FP8 rounding tie
    /// (`quant::activation::margin`). Below `FP8_TIE_MARGIN` the engine's f32 rounding may pick
    /// the other code, so the comparison is not a test of the kernels and is not counted.
    pub dispatch_margin: Option<f64>,
}

/// Expert inputs this far (relative) from every FP8 rounding tie quantize the same on the GPU and
/// the CPU: about 40 ulp, where the GPU's hidden state differs from the reference's by a few.
pub const FP8_TIE_MARGIN: f64 = 5e-6;

impl ReferenceCheck {
    pub fn passed(&self) -> bool {
        self.comparable && self.comparison.passed()
    }
}

/// Re-runs `tokens` through `engine` from an empty cache and through the reference on `weights`,
/// and compares every position's logits (`model::gpu::logits_tolerance`). Leaves the engine's
/// cache holding `tokens`.
pub async fn check_against_reference(
    engine: &mut Engine,
    weights: &Weights,
    tokens: &[u32],
) -> Result<ReferenceCheck, ModelError> {
    engine.reset();
    let (got, _) = engine.forward(tokens).await?;
    // The reference dispatches as the engine does.
    let fp8 = engine.config().dispatch_fp8;
    let weights = weights.dispatching(fp8);
    let mut cache = KvCache::new(&weights.config);
    let (want, margin) = reference::forward_with_dispatch_margin(&weights, tokens, &mut cache)?;
    let dispatch_margin = fp8.then_some(margin);
    let tolerance = crate::model::gpu::logits_tolerance();
    Ok(ReferenceCheck {
        tokens: tokens.len(),
        format: engine.format(),
        comparison: crate::check::compare(&got.logits, &want.logits, tolerance),
        tolerance,
        comparable: engine.format() == Format::F32
            && dispatch_margin.is_none_or(|m| m >= FP8_TIE_MARGIN),
        dispatch_margin,
    })
}

/// Bytes the reference reads for `tokens` tokens after `pos0` cached positions: per token, every
/// weight it touches (one embedding row, the routed experts it chose, everything else) and the
/// cache rows its attention reads, plus its logits written.
fn cpu_bytes(c: &MoeConfig, pos0: usize, tokens: usize) -> u64 {
    let per_token_weights = c.active_params() as u64 * 4;
    let mut total = 0u64;
    for t in 0..tokens {
        let ctx = (pos0 + t + 1) as u64;
        total += per_token_weights
            + c.layers as u64 * ctx * c.cache_row() as u64 * 4
            + c.vocab_size as u64 * 4;
    }
    total
}

/// How the next token is picked.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Sampling {
    /// The most likely token (ties to the lower id).
    Greedy,
    /// Softmax of logits / temperature, restricted to the smallest set of top tokens whose
    /// probability reaches `top_p`.
    Temperature { temperature: f32, top_p: f32 },
}

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_new_tokens: usize,
    pub sampling: Sampling,
    pub seed: u64,
}

/// Where a greedy choice or an expert choice was too close to call across backends.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NearTie {
    /// The generated token's index (0 = the first generated token).
    pub step: usize,
    /// `logits`: top-1 minus top-2 logit; `routing`: k-th chosen minus best unchosen expert score.
    pub kind: &'static str,
    /// The MoE layer, for routing ties (0 = the first MoE layer).
    pub layer: Option<usize>,
    pub margin: f32,
}

/// Logit margins below this can change the greedy token between backends: the GPU and CPU
/// logits differ by up to ~1e-5 (model::gpu::logits_tolerance), so 1e-3 leaves a wide margin.
pub const NEAR_TIE_LOGITS: f32 = 1e-3;
/// Expert-score margins below this can change an expert choice between backends (sigmoid scores
/// differ by ~1e-6).
pub const NEAR_TIE_ROUTING: f32 = 1e-4;

/// One generated token. Deserializable so that the app's CPU worker can send it to the page
/// (without the trace: the CPU runs no kernels).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct StepStats {
    pub step: usize,
    pub token: u32,
    /// Its text (one byte: may be part of a multi-byte character).
    pub text: String,
    /// Time of the forward pass that fed this token through the model.
    pub ms: f64,
    pub kernels: usize,
    pub submissions: usize,
    pub bytes: u64,
    /// Per MoE layer, the experts this token was routed to.
    pub experts: Vec<Vec<usize>>,
    /// Top-1 minus top-2 logit of the distribution this token was picked from.
    pub logit_margin: f32,
    #[serde(skip)]
    pub trace: Vec<KernelLaunch>,
}

/// The whole run, as the CLI prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Generation {
    pub text: String,
    pub tokens: Vec<u32>,
    pub prompt_tokens: usize,
    pub backend: Backend,
    pub adapter: String,
    pub prefill_ms: f64,
    pub ms_per_step: f64,
    pub tokens_per_s: f64,
    pub kernels_per_step: f64,
    pub submissions_per_step: f64,
    pub bytes_per_step: f64,
    /// The switches that chose the kernels (GPU only).
    pub optimizations: Option<Optimizations>,
    /// The format of the block projections (f32 on the CPU).
    pub format: Format,
    /// Bytes of weights the engine holds, scales included.
    pub weight_bytes: u64,
    /// How many times each kernel ran in the last decode step (GPU only).
    pub kernel_counts: std::collections::BTreeMap<&'static str, usize>,
    /// For each generated token and MoE layer, the chosen expert ids.
    pub experts: Vec<Vec<Vec<usize>>>,
    pub step_ms: Vec<f64>,
    pub near_ties: Vec<NearTie>,
    pub sampling: Sampling,
    pub seed: u64,
}

/// Decodes one token at a time.
pub struct Generator {
    opts: GenerateOptions,
    rng: ChaCha8Rng,
    logits: Vec<f32>,
    prompt_tokens: usize,
    prefill_ms: f64,
    steps: Vec<StepStats>,
    near_ties: Vec<NearTie>,
}

impl Generator {
    /// Resets the engine and runs the prompt through it.
    pub async fn start(
        engine: &mut Engine,
        prompt: &[u32],
        opts: GenerateOptions,
    ) -> Result<Self, ModelError> {
        if let Sampling::Temperature { temperature, top_p } = opts.sampling {
            let valid = temperature.is_finite() && temperature > 0.0 && top_p > 0.0 && top_p <= 1.0;
            if !valid {
                return Err(ModelError::Sampling(format!(
                    "temperature must be > 0 and top-p in (0, 1], got {temperature} and {top_p}"
                )));
            }
        }
        let c = engine.config();
        // Saturating: a request for usize::MAX tokens is refused, not wrapped round.
        let needed = prompt.len().saturating_add(opts.max_new_tokens);
        if needed > c.max_seq_len {
            return Err(ModelError::ContextFull {
                needed,
                max: c.max_seq_len,
            });
        }
        let vocab = c.vocab_size;
        engine.reset();
        let t0 = Instant::now();
        let (out, _) = engine.forward(prompt).await?;
        let prefill_ms = t0.elapsed().as_secs_f64() * 1e3;
        let logits = out.logits[out.logits.len() - vocab..].to_vec();
        Ok(Self {
            rng: ChaCha8Rng::seed_from_u64(opts.seed),
            opts,
            logits,
            prompt_tokens: prompt.len(),
            prefill_ms,
            steps: Vec::new(),
            near_ties: Vec::new(),
        })
    }

    pub fn is_done(&self) -> bool {
        self.steps.len() >= self.opts.max_new_tokens
    }

    /// Picks the next token and feeds it through the model (which yields its experts and the
    /// logits for the token after it). `None` once `max_new_tokens` are generated.
    pub async fn next(&mut self, engine: &mut Engine) -> Result<Option<&StepStats>, ModelError> {
        if self.is_done() {
            return Ok(None);
        }
        let step = self.steps.len();
        let (token, margin) = pick(&self.logits, self.opts.sampling, &mut self.rng);
        if self.opts.sampling == Sampling::Greedy && margin < NEAR_TIE_LOGITS {
            self.near_ties.push(NearTie {
                step,
                kind: "logits",
                layer: None,
                margin,
            });
        }
        let t0 = Instant::now();
        let (out, cost) = engine.forward(&[token]).await?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let routing = out.routing.into_iter().next().unwrap_or_default();
        for (layer, r) in routing.iter().enumerate() {
            if r.margin < NEAR_TIE_ROUTING {
                self.near_ties.push(NearTie {
                    step,
                    kind: "routing",
                    layer: Some(layer),
                    margin: r.margin,
                });
            }
        }
        self.logits = out.logits;
        self.steps.push(StepStats {
            step,
            token,
            text: tokenizer::decode(&[token]),
            ms,
            kernels: cost.kernels,
            submissions: cost.submissions,
            bytes: cost.bytes,
            experts: routing.into_iter().map(|r| r.experts).collect(),
            logit_margin: margin,
            trace: cost.trace,
        });
        Ok(self.steps.last())
    }

    pub fn finish(self, engine: &Engine) -> Generation {
        let tokens: Vec<u32> = self.steps.iter().map(|s| s.token).collect();
        let n = self.steps.len().max(1) as f64;
        let ms_per_step = self.steps.iter().map(|s| s.ms).sum::<f64>() / n;
        Generation {
            text: tokenizer::decode(&tokens),
            prompt_tokens: self.prompt_tokens,
            backend: engine.backend(),
            adapter: engine.device_name(),
            prefill_ms: self.prefill_ms,
            ms_per_step,
            tokens_per_s: if ms_per_step > 0.0 {
                1e3 / ms_per_step
            } else {
                0.0
            },
            kernels_per_step: self.steps.iter().map(|s| s.kernels as f64).sum::<f64>() / n,
            submissions_per_step: self.steps.iter().map(|s| s.submissions as f64).sum::<f64>() / n,
            bytes_per_step: self.steps.iter().map(|s| s.bytes as f64).sum::<f64>() / n,
            optimizations: engine.optimizations(),
            format: engine.format(),
            weight_bytes: engine.weight_bytes(),
            kernel_counts: self.steps.last().map_or_else(Default::default, |s| {
                let mut counts = std::collections::BTreeMap::new();
                for k in &s.trace {
                    *counts.entry(k.kernel).or_insert(0) += 1;
                }
                counts
            }),
            experts: self.steps.iter().map(|s| s.experts.clone()).collect(),
            step_ms: self.steps.iter().map(|s| s.ms).collect(),
            near_ties: self.near_ties,
            sampling: self.opts.sampling,
            seed: self.opts.seed,
            tokens,
        }
    }
}

/// Runs the whole loop; `on_step` sees each token as it is generated and may stop the run by
/// returning false.
pub async fn generate(
    engine: &mut Engine,
    prompt: &[u32],
    opts: GenerateOptions,
    on_step: &mut dyn FnMut(&StepStats) -> bool,
) -> Result<Generation, ModelError> {
    let mut g = Generator::start(engine, prompt, opts).await?;
    while let Some(step) = g.next(engine).await? {
        if !on_step(step) {
            break;
        }
    }
    Ok(g.finish(engine))
}

/// The next token and the top-1 minus top-2 logit margin.
pub fn pick(logits: &[f32], sampling: Sampling, rng: &mut ChaCha8Rng) -> (u32, f32) {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    // Stable: equal logits keep the lower id first.
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    let margin = match order.as_slice() {
        [a, b, ..] => logits[*a] - logits[*b],
        _ => f32::INFINITY,
    };
    let token = match sampling {
        Sampling::Greedy => order[0],
        Sampling::Temperature { temperature, top_p } => {
            let max = logits[order[0]];
            let weights: Vec<f64> = order
                .iter()
                .map(|&i| (f64::from(logits[i] - max) / f64::from(temperature)).exp())
                .collect();
            let total: f64 = weights.iter().sum();
            // The nucleus: the top tokens until their probability reaches top_p.
            let mut kept = 0;
            let mut mass = 0.0;
            while kept < order.len() && (kept == 0 || mass < f64::from(top_p) * total) {
                mass += weights[kept];
                kept += 1;
            }
            let mut u = rng.random::<f64>() * mass;
            let mut chosen = order[kept - 1];
            for (i, w) in weights[..kept].iter().enumerate() {
                if u < *w {
                    chosen = order[i];
                    break;
                }
                u -= w;
            }
            chosen
        }
    };
    (token as u32, margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_the_argmax_with_its_margin() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (t, m) = pick(&[0.1, 2.0, 1.5, 2.0], Sampling::Greedy, &mut rng);
        assert_eq!((t, m), (1, 0.0));
        let (t, m) = pick(&[0.1, 3.0, 1.5], Sampling::Greedy, &mut rng);
        assert_eq!(t, 1);
        assert!((m - 1.5).abs() < 1e-6);
    }

    #[test]
    fn top_p_keeps_only_the_nucleus_and_temperature_is_seeded() {
        // Probabilities ∝ e^logit: token 0 holds ~0.87 of the mass; top-p 0.5 keeps only it.
        let logits = [4.0, 2.0, 0.0, -1.0];
        let s = Sampling::Temperature {
            temperature: 1.0,
            top_p: 0.5,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..100 {
            assert_eq!(pick(&logits, s, &mut rng).0, 0);
        }
        // With top-p 1 and a high temperature every token appears, and the same seed repeats.
        let s = Sampling::Temperature {
            temperature: 10.0,
            top_p: 1.0,
        };
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..200)
                .map(|_| pick(&logits, s, &mut rng).0)
                .collect::<Vec<_>>()
        };
        let a = draw(5);
        assert_eq!(a, draw(5));
        assert_ne!(a, draw(6));
        for t in 0..4 {
            assert!(a.contains(&t), "token {t} never drawn");
        }
    }

    #[test]
    fn cpu_generation_streams_every_token_with_its_experts() {
        let w = Weights::synthetic(&MoeConfig::deepseek_mini(), 1).unwrap();
        let moe_layers = w.config.moe_layers();
        let mut engine = Engine::cpu(w);
        let opts = GenerateOptions {
            max_new_tokens: 6,
            sampling: Sampling::Greedy,
            seed: 0,
        };
        let mut seen = Vec::new();
        let g = pollster::block_on(generate(
            &mut engine,
            &tokenizer::encode("Hi"),
            opts.clone(),
            &mut |s| {
                seen.push(s.token);
                true
            },
        ))
        .unwrap();
        assert_eq!(g.tokens, seen);
        assert_eq!(g.tokens.len(), 6);
        assert_eq!(g.experts.len(), 6);
        assert!(g.experts.iter().all(|e| e.len() == moe_layers));
        assert!(g.bytes_per_step > 0.0);
        assert_eq!(engine.len(), 2 + 6);

        // Stopping early from the callback.
        let g = pollster::block_on(generate(
            &mut engine,
            &tokenizer::encode("Hi"),
            opts,
            &mut |s| s.step < 2,
        ))
        .unwrap();
        assert_eq!(g.tokens.len(), 3);
    }

    #[test]
    fn too_long_a_request_and_bad_sampling_are_refused() {
        let w = Weights::synthetic(&MoeConfig::deepseek_mini(), 1).unwrap();
        let mut engine = Engine::cpu(w);
        let mut opts = GenerateOptions {
            max_new_tokens: 600,
            sampling: Sampling::Greedy,
            seed: 0,
        };
        let r = pollster::block_on(Generator::start(&mut engine, &[65], opts.clone()));
        assert!(matches!(r, Err(ModelError::ContextFull { .. })));
        opts.max_new_tokens = 1;
        opts.sampling = Sampling::Temperature {
            temperature: 0.0,
            top_p: 1.0,
        };
        let r = pollster::block_on(Generator::start(&mut engine, &[65], opts));
        assert!(matches!(r, Err(ModelError::Sampling(_))));
    }
}
