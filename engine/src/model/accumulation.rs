//! The accumulation lesson: the same FP8 dot products summed three ways. DeepSeek-V3 (§3.3.2)
//! found the H800's FP8 tensor cores keep only about 14 bits while accumulating, which costs ~2%
//! relative error at K = 4096, and promotes partial sums to f32 CUDA-core registers every 128
//! elements. Here: activations quantized to E4M3 in 1×128 tiles, weights in 128×128 blocks (as
//! DeepSeek-V3 does), each product formed exactly, then summed
//!
//! - in f16 (every addition rounded to f16: a low-precision accumulator),
//! - in f32,
//! - in f16 for 128 elements, then added into an f32 total (promotion every 128),
//!
//! and compared with the exact (f64) sum of the same products: only the accumulation differs.
//! The activations are real: the FFN inputs of the sandbox model on the fixed prompts.

use half::f16;
use serde::Serialize;

use super::reference::{self, KvCache};
use super::{accuracy, tokenizer, ModelError, Weights};
use crate::quant::{dequantize, quantize, Format};

/// Elements summed in f16 before each promotion (DeepSeek-V3's N_C).
pub const PROMOTION_INTERVAL: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accumulator {
    F16,
    F32,
    F16PromotedEvery128,
}

impl Accumulator {
    pub const ALL: [Accumulator; 3] = [
        Accumulator::F16,
        Accumulator::F32,
        Accumulator::F16PromotedEvery128,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Accumulator::F16 => "f16",
            Accumulator::F32 => "f32",
            Accumulator::F16PromotedEvery128 => "f16, promoted to f32 every 128",
        }
    }
}

/// Sums `products` as `acc` does.
pub fn accumulate(products: &[f32], acc: Accumulator) -> f32 {
    let f16_sum = |xs: &[f32]| {
        xs.iter()
            .fold(f16::ZERO, |a, &p| f16::from_f32(a.to_f32() + p))
            .to_f32()
    };
    match acc {
        Accumulator::F16 => f16_sum(products),
        Accumulator::F32 => products.iter().sum(),
        Accumulator::F16PromotedEvery128 => products.chunks(PROMOTION_INTERVAL).map(f16_sum).sum(),
    }
}

/// One accumulator at one length, over the dot products: the error |sum − exact| relative to
/// Σ|products| (well defined even when the sum cancels), and relative to |exact| (what a reader
/// of the result sees; its median, since a sum that cancels to near zero makes any error huge).
#[derive(Clone, Debug, Serialize)]
pub struct ErrorStats {
    pub accumulator: Accumulator,
    pub mean_relative_error: f64,
    pub max_relative_error: f64,
    pub median_error_relative_to_result: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LengthRow {
    /// Dot-product length.
    pub k: usize,
    pub dot_products: usize,
    pub errors: Vec<ErrorStats>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Lesson {
    /// Where the activations come from.
    pub activations: String,
    pub rows: Vec<LengthRow>,
}

/// The FFN inputs of every layer for every token of the fixed prompts.
fn activations(weights: &Weights) -> Result<Vec<Vec<f32>>, ModelError> {
    let mut out = Vec::new();
    for prompt in accuracy::PROMPTS {
        let mut cache = KvCache::new(&weights.config);
        reference::forward_tapped(
            weights,
            &tokenizer::encode(prompt),
            &mut cache,
            &mut |_, h| out.push(h.to_vec()),
        )?;
    }
    Ok(out)
}

/// Runs the lesson at each length in `lengths` (multiples of 128). A dot product of length K
/// joins K / hidden consecutive activation vectors (one token's, then the next one's) with the
/// matching stretch of consecutive rows of the dense FFN's gate matrix, so every value is a real
/// activation or weight of the model; `pairs` dot products per length.
pub fn run(weights: &Weights, lengths: &[usize], pairs: usize) -> Result<Lesson, ModelError> {
    let acts = activations(weights)?;
    let d = weights.config.hidden;
    let flat: Vec<f32> = acts.concat();
    // The first layer's FFN gate (dense in deepseek-mini; a MoE layer's shared expert otherwise).
    let gate = weights
        .layers
        .first()
        .map(|l| match &l.ffn {
            super::weights::FeedForward::Dense(f) => f.w_gate.data.clone(),
            super::weights::FeedForward::Moe(m) => m.shared.w_gate.data.clone(),
        })
        .unwrap_or_default();
    let mut rows = Vec::new();
    for &k in lengths {
        let k = k.max(PROMOTION_INTERVAL) / PROMOTION_INTERVAL * PROMOTION_INTERVAL;
        let n = pairs.min(flat.len() / k).min(gate.len() / k).max(1);
        // Activations: 1×128 tiles of each length-K vector; weights: K-wide rows in 128×128
        // blocks, so every 128 rows share a scale per 128 columns.
        // One row at a time: FP8's 128×128 block on a single row is a 1×128 tile.
        let a: Vec<f32> = flat[..n * k]
            .chunks_exact(k)
            .flat_map(|row| dequantize(&quantize(Format::Fp8E4m3, row, 1, k)))
            .collect();
        let w = dequantize(&quantize(Format::Fp8E4m3, &gate[..n * k], n, k));
        let mut errors: Vec<(f64, f64)> = vec![(0.0, 0.0); Accumulator::ALL.len()];
        let mut of_result: Vec<Vec<f64>> = vec![Vec::new(); Accumulator::ALL.len()];
        for i in 0..n {
            let (ai, wi) = (&a[i * k..(i + 1) * k], &w[i * k..(i + 1) * k]);
            // E4M3 × E4M3 times the two scales: exact in f32 away from the range's ends.
            let products: Vec<f32> = ai.iter().zip(wi).map(|(x, y)| x * y).collect();
            let exact: f64 = products.iter().map(|&p| f64::from(p)).sum();
            let magnitude: f64 = products.iter().map(|&p| f64::from(p).abs()).sum();
            for ((e, r), acc) in errors.iter_mut().zip(&mut of_result).zip(Accumulator::ALL) {
                let err = (f64::from(accumulate(&products, acc)) - exact).abs();
                let rel = if magnitude > 0.0 {
                    err / magnitude
                } else {
                    0.0
                };
                if exact != 0.0 {
                    r.push(err / exact.abs());
                }
                e.0 += rel;
                e.1 = e.1.max(rel);
            }
        }
        rows.push(LengthRow {
            k,
            dot_products: n,
            errors: Accumulator::ALL
                .into_iter()
                .zip(errors)
                .zip(of_result)
                .map(|((accumulator, (sum, max)), mut r)| {
                    r.sort_by(f64::total_cmp);
                    ErrorStats {
                        accumulator,
                        mean_relative_error: sum / n as f64,
                        max_relative_error: max,
                        median_error_relative_to_result: r.get(r.len() / 2).copied().unwrap_or(0.0),
                    }
                })
                .collect(),
        });
    }
    Ok(Lesson {
        activations: format!(
            "FFN inputs of {} ({} layers × {} tokens of {} fixed prompts), hidden size {d}",
            weights.config.name,
            weights.config.layers,
            acts.len() / weights.config.layers.max(1),
            accuracy::PROMPTS.len()
        ),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MoeConfig;

    #[test]
    fn small_integers_sum_exactly_every_way() {
        let p: Vec<f32> = (0..300).map(|i| (i % 7) as f32 - 3.0).collect();
        let exact: f32 = p.iter().sum();
        for acc in Accumulator::ALL {
            assert_eq!(accumulate(&p, acc), exact, "{acc:?}");
        }
    }

    #[test]
    fn f16_accumulation_stalls_where_f32_does_not() {
        // 4096 products of 1.0: f16 stops counting at 2048 (its spacing there is 2).
        let p = vec![1.0f32; 4096];
        assert_eq!(accumulate(&p, Accumulator::F16), 2048.0);
        assert_eq!(accumulate(&p, Accumulator::F32), 4096.0);
        assert_eq!(accumulate(&p, Accumulator::F16PromotedEvery128), 4096.0);
    }

    #[test]
    fn on_model_activations_promotion_recovers_most_of_f32() {
        let w = Weights::synthetic(&MoeConfig::deepseek_mini(), 0).expect("weights");
        let lesson = run(&w, &[4096], 32).expect("runs");
        let e = &lesson.rows[0].errors;
        let (f16, f32, promoted) = (
            e[0].mean_relative_error,
            e[1].mean_relative_error,
            e[2].mean_relative_error,
        );
        assert!(f32 < promoted && promoted < f16, "{f32} {promoted} {f16}");
        // Promotion keeps each f16 partial sum short: at least 4x better than one f16 sum.
        assert!(promoted * 4.0 < f16, "{promoted} vs {f16}");
    }
}
