//! What a weight format costs in accuracy: the GPU model with its block projections in the
//! format (and, with `MoeConfig::dispatch_fp8`, FP8 expert inputs) against the f32 CPU reference
//! without either, on a fixed set of prompts, position by position (teacher-forced: both read the
//! same tokens, so one early disagreement does not snowball).

use serde::Serialize;

use super::gpu::GpuModel;
use super::reference::{self, KvCache};
use super::{tokenizer, ModelError, Weights};
use crate::gpu::GpuContext;
use crate::plan::Optimizations;
use crate::quant::Format;

/// The fixed prompt set: short English of different kinds (prose, code, numbers, a list).
pub const PROMPTS: [&str; 4] = [
    "The quick brown fox jumps over the lazy dog, then rests in the shade.",
    "fn main() { let x = vec![1, 2, 3]; println!(\"{}\", x.len()); }",
    "In 2024, 72 GPUs in one rack served 958 users at 83 tokens/s each.",
    "Mixture of experts: route, dispatch, compute, combine; repeat per layer.",
];

/// The accuracy of one format against f32, over every position of every prompt.
#[derive(Clone, Debug, Serialize)]
pub struct Accuracy {
    pub format: Format,
    /// The routed experts read FP8 records (`MoeConfig::dispatch_fp8`).
    pub dispatch_fp8: bool,
    /// Positions where the format's most likely next token is f32's.
    pub top1_agreement: f64,
    /// Mean over positions of KL(p_f32 ‖ p_format), nats.
    pub kl_divergence: f64,
    /// Largest |logit − f32 logit| over every position and token.
    pub max_logit_error: f64,
    /// Bytes per parameter of the quantized projections, scales included.
    pub bytes_per_parameter: f64,
    /// Every weight on the GPU (the f32 embedding, head, router and norms included), bytes.
    pub model_bytes: u64,
    pub positions: usize,
}

/// Measures `format` (with FP8 expert inputs when `dispatch_fp8`) on `PROMPTS` against the f32
/// reference with f32 dispatch (all optimizations on; they do not change the math).
pub async fn measure(
    ctx: &GpuContext,
    weights: &Weights,
    format: Format,
    dispatch_fp8: bool,
) -> Result<Accuracy, ModelError> {
    let mut model = GpuModel::with_format(ctx, weights, format)?;
    model.set_optimizations(Optimizations::all());
    model.set_dispatch_fp8(dispatch_fp8)?;
    let vocab = weights.config.vocab_size;
    // The baseline dispatches f32 activations, whatever the weights' config says.
    let f32_weights = weights.dispatching(false);
    let (mut agree, mut kl, mut max_err, mut positions) = (0usize, 0.0f64, 0.0f64, 0usize);
    for prompt in PROMPTS {
        let tokens = tokenizer::encode(prompt);
        let mut cache = KvCache::new(&weights.config);
        let want = reference::forward(&f32_weights, &tokens, &mut cache)?.logits;
        model.reset();
        let (got, _) = model.forward(ctx, &tokens).await?;
        for (w, g) in want.chunks_exact(vocab).zip(got.logits.chunks_exact(vocab)) {
            positions += 1;
            agree += usize::from(argmax(w) == argmax(g));
            kl += kl_divergence(w, g);
            for (a, b) in w.iter().zip(g) {
                max_err = max_err.max(f64::from((a - b).abs()));
            }
        }
    }
    Ok(Accuracy {
        format,
        dispatch_fp8,
        top1_agreement: agree as f64 / positions.max(1) as f64,
        kl_divergence: kl / positions.max(1) as f64,
        max_logit_error: max_err,
        bytes_per_parameter: model.bytes_per_parameter(),
        model_bytes: model.weight_bytes(),
        positions,
    })
}

/// A format's held-out loss: the mean next-byte cross-entropy over windows of unseen text, the
/// number the training script reports (docs/TRAINING.md).
#[derive(Clone, Debug, Serialize)]
pub struct HeldOut {
    pub format: Format,
    /// The routed experts read FP8 records (`MoeConfig::dispatch_fp8`).
    pub dispatch_fp8: bool,
    /// Nats per byte.
    pub loss: f64,
    /// Per byte: exp(loss).
    pub perplexity: f64,
    pub bits_per_byte: f64,
    pub windows: usize,
    /// Bytes predicted (each window of n + 1 bytes predicts n).
    pub predictions: usize,
}

/// `count` non-overlapping windows of `len + 1` bytes, evenly spaced over `text` (fewer if the
/// text is short). Each is read from an empty cache, as training evaluated them.
pub fn windows(text: &[u8], len: usize, count: usize) -> Vec<Vec<u32>> {
    let available = text.len().saturating_sub(1) / len.max(1);
    let count = count.min(available);
    let stride = available.checked_div(count).unwrap_or(0);
    (0..count)
        .map(|i| {
            let start = i * stride * len;
            text[start..start + len + 1]
                .iter()
                .map(|&b| u32::from(b))
                .collect()
        })
        .collect()
}

/// The held-out loss of the GPU model in `format` (FP8 expert inputs when `dispatch_fp8`; all
/// switches on) over `windows`.
pub async fn held_out(
    ctx: &GpuContext,
    weights: &Weights,
    (format, dispatch_fp8): (Format, bool),
    windows: &[Vec<u32>],
) -> Result<HeldOut, ModelError> {
    let mut model = GpuModel::with_format(ctx, weights, format)?;
    model.set_optimizations(Optimizations::all());
    model.set_dispatch_fp8(dispatch_fp8)?;
    let vocab = weights.config.vocab_size;
    let (mut total, mut predictions) = (0.0f64, 0usize);
    for window in windows.iter().filter(|w| w.len() >= 2) {
        let (input, target) = (&window[..window.len() - 1], &window[1..]);
        model.reset();
        let (out, _) = model.forward(ctx, input).await?;
        for (row, &t) in out.logits.chunks_exact(vocab).zip(target) {
            total -= log_probs(row)[t as usize];
            predictions += 1;
        }
    }
    let loss = total / predictions.max(1) as f64;
    Ok(HeldOut {
        format,
        dispatch_fp8,
        loss,
        perplexity: loss.exp(),
        bits_per_byte: loss / std::f64::consts::LN_2,
        windows: windows.len(),
        predictions,
    })
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &x)| {
            if x > best.1 {
                (i, x)
            } else {
                best
            }
        })
        .0
}

/// log-softmax in f64.
fn log_probs(logits: &[f32]) -> Vec<f64> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
    let sum: f64 = logits.iter().map(|&x| (f64::from(x) - max).exp()).sum();
    let log_z = max + sum.ln();
    logits.iter().map(|&x| f64::from(x) - log_z).collect()
}

/// KL(softmax(p) ‖ softmax(q)) in nats.
pub fn kl_divergence(p: &[f32], q: &[f32]) -> f64 {
    let (lp, lq) = (log_probs(p), log_probs(q));
    lp.iter().zip(&lq).map(|(a, b)| a.exp() * (a - b)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_is_zero_for_equal_and_known_for_two_outcomes() {
        assert!(kl_divergence(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]).abs() < 1e-12);
        // Shifting every logit changes nothing.
        assert!(kl_divergence(&[1.0, 2.0], &[11.0, 12.0]).abs() < 1e-12);
        // p = (1/2, 1/2), q = (e, 1)/(1 + e): KL = ½·ln((1+e)/(2e)) + ½·ln((1+e)/2)
        //   = ln(1 + e) − ln 2 − ½.
        let e = std::f64::consts::E;
        let want = (1.0 + e).ln() - 2f64.ln() - 0.5;
        assert!((kl_divergence(&[0.0, 0.0], &[1.0, 0.0]) - want).abs() < 1e-12);
        assert_eq!(argmax(&[0.5, 3.0, -1.0]), 1);
    }

    #[test]
    fn windows_are_evenly_spaced_and_do_not_overlap() {
        let text: Vec<u8> = (0..=100u8).collect();
        let w = windows(&text, 10, 3);
        assert_eq!(w.len(), 3);
        // 10 windows fit; every third is taken.
        assert_eq!(w[0][0], 0);
        assert_eq!(w[1][0], 30);
        assert_eq!(w[2][0], 60);
        assert!(w.iter().all(|w| w.len() == 11));
        assert_eq!(windows(&text, 10, 99).len(), 10);
        assert!(windows(&text[..5], 10, 3).is_empty());
    }

    #[test]
    fn the_prompts_fit_the_model() {
        let c = super::super::MoeConfig::deepseek_mini();
        for p in PROMPTS {
            assert!(tokenizer::encode(p).len() <= c.max_seq_len, "{p}");
        }
    }
}
