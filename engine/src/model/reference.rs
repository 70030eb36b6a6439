//! The CPU f32 oracle every kernel is tested against: plain loops, f64 accumulation, no shortcuts.
//! It is careful, not fast. The forward pass is MLA written out naively — keys and values are
//! expanded from the latent cache for every head and position, with no weight absorption — so that
//! the GPU path's absorbed form is checked against the definition, not against itself.

use super::weights::{FeedForward, Ffn, Moe, Weights};
use super::{GateFunction, ModelError, MoeConfig};

/// `y[m] = Σ_k w[m·K + k] · x[k]` for a row-major `[M, K]` matrix, accumulated in f64.
///
/// Panics (an internal invariant, not user input) if the slice lengths do not match the shape.
#[track_caller]
pub fn gemv(w: &[f32], x: &[f32], m: usize, k: usize) -> Vec<f32> {
    assert_eq!(
        w.len(),
        m * k,
        "gemv: w has {} values, expected M·K = {}",
        w.len(),
        m * k
    );
    assert_eq!(
        x.len(),
        k,
        "gemv: x has {} values, expected K = {k}",
        x.len()
    );
    w.chunks_exact(k.max(1))
        .take(m)
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum::<f64>() as f32
        })
        .collect()
}

/// `Σ_k |w[m·K + k] · x[k]|` per row: the magnitude that bounds a dot product's rounding error.
#[track_caller]
pub fn gemv_magnitude(w: &[f32], x: &[f32], m: usize, k: usize) -> Vec<f64> {
    assert_eq!(w.len(), m * k);
    assert_eq!(x.len(), k);
    w.chunks_exact(k.max(1))
        .take(m)
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(a, b)| (f64::from(*a) * f64::from(*b)).abs())
                .sum()
        })
        .collect()
}

/// `x / rms(x) ⊙ w` with `rms(x) = sqrt(mean(x²) + eps)`.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let mean_sq = x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / x.len().max(1) as f64;
    let inv = 1.0 / (mean_sq + f64::from(eps)).sqrt();
    x.iter()
        .zip(w)
        .map(|(v, g)| (f64::from(*v) * inv * f64::from(*g)) as f32)
        .collect()
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Numerically stable softmax.
pub fn softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f64> = x.iter().map(|v| f64::from(v - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|e| (e / sum) as f32).collect()
}

/// Rotary position embedding of one vector at position `pos`, in the half-split (GPT-NeoX)
/// layout: element `i` of the first half pairs with element `i + d/2`, rotated by the angle
/// `pos · theta^(−2i/d)`.
pub fn rope(x: &mut [f32], pos: usize, theta: f32) {
    let half = x.len() / 2;
    for i in 0..half {
        let (sin, cos) = crate::kernels::rope::rope_angle(pos, i, x.len(), theta).sin_cos();
        let (a, b) = (f64::from(x[i]), f64::from(x[i + half]));
        x[i] = (a * cos - b * sin) as f32;
        x[i + half] = (a * sin + b * cos) as f32;
    }
}

/// One token's routing in one MoE layer.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Routing {
    /// Chosen experts, best first.
    pub experts: Vec<usize>,
    /// Their gate weights: the gate scores normalized over the chosen experts, times
    /// `routed_scaling`.
    pub gates: Vec<f32>,
    /// The margin of the choice: the k-th chosen selection score minus the best unchosen one.
    /// Where it is tiny, f32 rounding elsewhere may pick a different expert.
    pub margin: f32,
}

/// Gate scores from router logits (sigmoid or softmax over all experts).
pub fn gate_scores(logits: &[f32], gate: GateFunction) -> Vec<f32> {
    match gate {
        GateFunction::Sigmoid => logits.iter().map(|l| sigmoid(*l)).collect(),
        GateFunction::Softmax => softmax(logits),
    }
}

/// DeepSeek-V3 routing: the top-k of `score + bias` (ties to the lower index) choose the
/// experts; the gates are the plain scores of the chosen, normalized to sum to one, scaled.
pub fn route(logits: &[f32], bias: &[f32], config: &MoeConfig) -> Routing {
    let scores = gate_scores(logits, config.gate_function);
    let select: Vec<f32> = scores.iter().zip(bias).map(|(s, b)| s + b).collect();
    let mut order: Vec<usize> = (0..select.len()).collect();
    // Stable sort by descending selection score: equal scores keep index order.
    order.sort_by(|&a, &b| select[b].total_cmp(&select[a]));
    let k = config.experts_per_token;
    let experts: Vec<usize> = order[..k].to_vec();
    let margin = match order.get(k) {
        Some(&next) => select[order[k - 1]] - select[next],
        None => f32::INFINITY,
    };
    let sum: f64 = experts.iter().map(|&e| f64::from(scores[e])).sum();
    let gates = experts
        .iter()
        .map(|&e| (f64::from(scores[e]) / sum * f64::from(config.routed_scaling)) as f32)
        .collect();
    Routing {
        experts,
        gates,
        margin,
    }
}

/// A SwiGLU FFN applied to one token.
pub fn swiglu(ffn: &Ffn, x: &[f32]) -> Vec<f32> {
    let inter = ffn.w_gate.rows();
    let d = x.len();
    let g = gemv(&ffn.w_gate.data, x, inter, d);
    let u = gemv(&ffn.w_up.data, x, inter, d);
    let h: Vec<f32> = g.iter().zip(&u).map(|(g, u)| silu(*g) * u).collect();
    gemv(&ffn.w_down.data, &h, d, inter)
}

/// An MoE block on one token: shared expert plus the gate-weighted routed experts.
pub fn moe(m: &Moe, x: &[f32], config: &MoeConfig) -> (Vec<f32>, Routing) {
    let logits = gemv(&m.router.data, x, config.routed_experts, x.len());
    let routing = route(&logits, &m.router_bias.data, config);
    let mut out: Vec<f64> = swiglu(&m.shared, x).iter().map(|v| f64::from(*v)).collect();
    let dispatched = if config.dispatch_fp8 {
        crate::quant::activation::round_trip(x)
    } else {
        x.to_vec()
    };
    for (&e, &g) in routing.experts.iter().zip(&routing.gates) {
        for (o, y) in out.iter_mut().zip(swiglu(&m.experts[e], &dispatched)) {
            *o += f64::from(g) * f64::from(y);
        }
    }
    (out.iter().map(|v| *v as f32).collect(), routing)
}

/// The latent KV cache: per layer, one row `[c_kv | k_rope]` per position, shared by all heads.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    pub layers: Vec<Vec<f32>>,
    /// Positions filled.
    pub len: usize,
}

impl KvCache {
    pub fn new(config: &MoeConfig) -> Self {
        Self {
            layers: vec![Vec::new(); config.layers],
            len: 0,
        }
    }
}

/// What one forward call returns.
#[derive(Clone, Debug)]
pub struct ForwardOutput {
    /// `[tokens, vocab]` logits, one row per input token.
    pub logits: Vec<f32>,
    /// Per input token, per MoE layer: the routing.
    pub routing: Vec<Vec<Routing>>,
}

/// Checks tokens and room in the cache: shared by every backend.
pub fn check_input(config: &MoeConfig, tokens: &[u32], cached: usize) -> Result<(), ModelError> {
    if tokens.is_empty() {
        return Err(ModelError::EmptyInput);
    }
    if let Some(&t) = tokens.iter().find(|&&t| t as usize >= config.vocab_size) {
        return Err(ModelError::TokenOutOfRange {
            token: t,
            vocab: config.vocab_size,
        });
    }
    if cached + tokens.len() > config.max_seq_len {
        return Err(ModelError::ContextFull {
            needed: cached + tokens.len(),
            max: config.max_seq_len,
        });
    }
    Ok(())
}

/// The forward pass over `tokens`, which follow the `cache.len` positions already cached (prefill
/// when the cache is empty, decode for one token after it). Tokens are processed one after the
/// other, each attending to every position up to its own: causal by construction.
pub fn forward(
    w: &Weights,
    tokens: &[u32],
    cache: &mut KvCache,
) -> Result<ForwardOutput, ModelError> {
    forward_tapped(w, tokens, cache, &mut |_, _| {})
}

/// `forward`, calling `tap(layer, h)` with every layer's FFN input (the normalized hidden state
/// the FFN or the experts multiply), token by token: real activations for the lessons.
pub fn forward_tapped(
    w: &Weights,
    tokens: &[u32],
    cache: &mut KvCache,
    tap: &mut dyn FnMut(usize, &[f32]),
) -> Result<ForwardOutput, ModelError> {
    let c = &w.config;
    check_input(c, tokens, cache.len)?;
    let d = c.hidden;
    let mut logits = Vec::with_capacity(tokens.len() * c.vocab_size);
    let mut routing = Vec::with_capacity(tokens.len());
    for &token in tokens {
        let pos = cache.len;
        let row = token as usize * d;
        let mut x = w.embed.data[row..row + d].to_vec();
        let mut token_routing = Vec::new();
        for (i, layer) in w.layers.iter().enumerate() {
            let h = rms_norm(&x, &layer.attn_norm.data, c.rms_eps);
            let a = mla(w, i, &h, pos, &mut cache.layers[i]);
            add_into(&mut x, &a);
            let h = rms_norm(&x, &layer.ffn_norm.data, c.rms_eps);
            tap(i, &h);
            let f = match &layer.ffn {
                FeedForward::Dense(ffn) => swiglu(ffn, &h),
                FeedForward::Moe(m) => {
                    let (out, r) = moe(m, &h, c);
                    token_routing.push(r);
                    out
                }
            };
            add_into(&mut x, &f);
        }
        cache.len += 1;
        let h = rms_norm(&x, &w.norm.data, c.rms_eps);
        logits.extend(gemv(&w.lm_head.data, &h, c.vocab_size, d));
        routing.push(token_routing);
    }
    Ok(ForwardOutput { logits, routing })
}

/// `forward`, and how close the routed experts' FP8 inputs came to quantizing differently: the
/// least `quant::activation::margin` of every MoE layer's input (infinite without FP8 dispatch).
/// Another computation of this forward whose hidden states are off by less than that (relative)
/// quantizes every expert input the same way.
pub fn forward_with_dispatch_margin(
    w: &Weights,
    tokens: &[u32],
    cache: &mut KvCache,
) -> Result<(ForwardOutput, f64), ModelError> {
    let (fp8, dense) = (w.config.dispatch_fp8, w.config.dense_layers);
    let mut margin = f64::INFINITY;
    let out = forward_tapped(w, tokens, cache, &mut |layer, h| {
        if fp8 && layer >= dense {
            margin = margin.min(crate::quant::activation::margin(h));
        }
    })?;
    Ok((out, margin))
}

fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Multi-head Latent Attention for one token at `pos`: appends its latent row to `cache` and
/// attends over positions `0..=pos`.
fn mla(w: &Weights, layer: usize, x: &[f32], pos: usize, cache: &mut Vec<f32>) -> Vec<f32> {
    let c = &w.config;
    let a = &w.layers[layer].attn;
    let (nope, rope_d, v_d, kvr) = (
        c.qk_nope_head_dim,
        c.qk_rope_head_dim,
        c.v_head_dim,
        c.kv_lora_rank,
    );
    let qk = c.qk_head_dim();

    // Queries: down-project, normalize, up-project to every head's [q_nope | q_rope].
    let c_q = rms_norm(
        &gemv(&a.wq_a.data, x, c.q_lora_rank, c.hidden),
        &a.q_norm.data,
        c.rms_eps,
    );
    let mut q = gemv(&a.wq_b.data, &c_q, c.heads * qk, c.q_lora_rank);
    for head in q.chunks_exact_mut(qk) {
        rope(&mut head[nope..], pos, c.rope_theta);
    }

    // This token's cache row: the normalized latent and the shared, rotated RoPE key.
    let kv = gemv(&a.wkv_a.data, x, c.cache_row(), c.hidden);
    let mut row = rms_norm(&kv[..kvr], &a.kv_norm.data, c.rms_eps);
    let mut k_rope = kv[kvr..].to_vec();
    rope(&mut k_rope, pos, c.rope_theta);
    row.extend(k_rope);
    cache.extend(row);

    // Per head: expand every cached latent to a key and a value, attend.
    let scale = f64::from(c.softmax_scale());
    let per_head = nope + v_d;
    let mut out = Vec::with_capacity(c.heads * v_d);
    for h in 0..c.heads {
        let w_uk = &a.wkv_b.data[h * per_head * kvr..(h * per_head + nope) * kvr];
        let w_uv = &a.wkv_b.data[(h * per_head + nope) * kvr..(h + 1) * per_head * kvr];
        let q_h = &q[h * qk..(h + 1) * qk];
        let mut scores = Vec::with_capacity(pos + 1);
        let mut values = Vec::with_capacity(pos + 1);
        for s in 0..=pos {
            let cached = &cache[s * c.cache_row()..(s + 1) * c.cache_row()];
            let k_nope = gemv(w_uk, &cached[..kvr], nope, kvr);
            let dot: f64 = q_h[..nope]
                .iter()
                .zip(&k_nope)
                .chain(q_h[nope..].iter().zip(&cached[kvr..kvr + rope_d]))
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            scores.push((dot * scale) as f32);
            values.push(gemv(w_uv, &cached[..kvr], v_d, kvr));
        }
        let p = softmax(&scores);
        for i in 0..v_d {
            let o: f64 = p
                .iter()
                .zip(&values)
                .map(|(p, v)| f64::from(*p) * f64::from(v[i]))
                .sum();
            out.push(o as f32);
        }
    }
    gemv(&a.wo.data, &out, c.hidden, c.heads * v_d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_hand_computed() {
        // [[1, 2, 3], [4, 5, 6]] · [1, 0, -1] = [-2, -2]
        let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(gemv(&w, &[1.0, 0.0, -1.0], 2, 3), vec![-2.0, -2.0]);
        assert_eq!(gemv_magnitude(&w, &[1.0, 0.0, -1.0], 2, 3), vec![4.0, 10.0]);
    }

    #[test]
    fn gemv_accumulates_without_cancellation_loss() {
        // 1e8 + 1 − 1e8 loses the 1 in f32 summation; f64 keeps it.
        let w = [1e8, 1.0, -1e8];
        assert_eq!(gemv(&w, &[1.0, 1.0, 1.0], 1, 3), vec![1.0]);
    }

    use std::sync::OnceLock;

    use crate::model::tokenizer::encode;

    fn model() -> &'static Weights {
        static W: OnceLock<Weights> = OnceLock::new();
        W.get_or_init(|| Weights::synthetic(&MoeConfig::deepseek_mini(), 1).unwrap())
    }

    fn logits_of(tokens: &[u32]) -> Vec<f32> {
        let w = model();
        forward(w, tokens, &mut KvCache::new(&w.config))
            .unwrap()
            .logits
    }

    #[test]
    fn rms_norm_of_a_constant_vector_is_the_weight() {
        // x = c·1: mean(x²) = c², so y = sign(c)·w / sqrt(1 + eps/c²) ≈ sign(c)·w·(1 − eps/2c²).
        for c in [3.0f32, -0.5, 1e3] {
            let w: Vec<f32> = (0..8).map(|i| i as f32 * 0.25).collect();
            let y = rms_norm(&[c; 8], &w, 1e-6);
            let rel = 1e-6 / (2.0 * c * c) + 2.0 * f32::EPSILON;
            for (y, w) in y.iter().zip(&w) {
                assert!((y - c.signum() * w).abs() <= rel * w.abs(), "{y} vs {w}");
            }
        }
    }

    #[test]
    fn rope_preserves_pair_norms_and_is_identity_at_zero() {
        let x: Vec<f32> = (0..16).map(|i| (i as f32 - 7.5) * 0.3).collect();
        let mut at0 = x.clone();
        rope(&mut at0, 0, 1e4);
        assert_eq!(at0, x);
        let mut y = x.clone();
        rope(&mut y, 37, 1e4);
        for i in 0..8 {
            let before = x[i].hypot(x[i + 8]);
            let after = y[i].hypot(y[i + 8]);
            assert!((before - after).abs() < 1e-5);
        }
        assert_ne!(y, x);
    }

    #[test]
    fn routing_picks_the_top_k_and_gates_sum_to_one() {
        let config = MoeConfig::deepseek_mini();
        let logits: Vec<f32> = (0..16).map(|i| ((i * 7) % 16) as f32 * 0.1 - 0.8).collect();
        let r = route(&logits, &[0.0; 16], &config);
        // Largest logits: (i·7) % 16 = 15 at i = 9, 14 at i = 2.
        assert_eq!(r.experts, vec![9, 2]);
        let sum: f32 = r.gates.iter().sum();
        assert!((sum - 1.0).abs() < 1e-6);
        assert!(r.gates[0] > r.gates[1]);

        // The bias steers the choice only: expert 0 (the smallest score) gets chosen, and its
        // gate is its unbiased score, normalized.
        let mut bias = [0.0; 16];
        bias[0] = 10.0;
        let r = route(&logits, &bias, &config);
        assert_eq!(r.experts, vec![0, 9]);
        let (s0, s9) = (sigmoid(logits[0]), sigmoid(logits[9]));
        assert!((r.gates[0] - s0 / (s0 + s9)).abs() < 1e-6);

        let mut softmax_config = config.clone();
        softmax_config.gate_function = GateFunction::Softmax;
        softmax_config.routed_scaling = 2.5;
        let r = route(&logits, &[0.0; 16], &softmax_config);
        assert_eq!(r.experts, vec![9, 2]);
        assert!((r.gates.iter().sum::<f32>() - 2.5).abs() < 1e-5);
    }

    #[test]
    fn a_later_token_cannot_change_an_earlier_logit() {
        let v = model().config.vocab_size;
        let a = logits_of(&encode("The cat sat"));
        let b = logits_of(&encode("The cat sit"));
        // "The cat s" (9 bytes) is shared; byte 9 differs.
        let earlier = 9 * v;
        assert_eq!(a[..earlier], b[..earlier]);
        assert_ne!(a[earlier..], b[earlier..]);
    }

    #[test]
    fn decode_with_the_cache_equals_full_recompute() {
        let w = model();
        let v = w.config.vocab_size;
        let prompt = encode("Mixture of experts");
        let full = logits_of(&prompt);
        let mut cache = KvCache::new(&w.config);
        forward(w, &prompt[..10], &mut cache).unwrap();
        for (i, &t) in prompt.iter().enumerate().skip(10) {
            let step = forward(w, &[t], &mut cache).unwrap();
            assert_eq!(step.logits, full[i * v..(i + 1) * v], "position {i}");
        }
        assert_eq!(cache.len, prompt.len());
    }

    #[test]
    fn activations_stay_in_range_through_all_layers() {
        let w = model();
        let out = forward(
            w,
            &(0..64).collect::<Vec<u32>>(),
            &mut KvCache::new(&w.config),
        )
        .unwrap();
        let n = out.logits.len() as f64;
        let rms = (out
            .logits
            .iter()
            .map(|v| f64::from(*v).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
        // lm_head has unit gain on a normalized state: logits of order 1, neither 0 nor huge.
        assert!((0.3..3.0).contains(&rms), "logit rms {rms}");
        // Routing is not collapsed: 64 tokens use more than a handful of the 16 experts.
        let mut used = std::collections::HashSet::new();
        for t in &out.routing {
            for r in t {
                used.extend(r.experts.iter().copied());
            }
        }
        assert!(used.len() >= 8, "only experts {used:?} used");
    }

    #[test]
    fn bad_input_is_an_error() {
        let w = model();
        let mut cache = KvCache::new(&w.config);
        assert!(matches!(
            forward(w, &[], &mut cache),
            Err(ModelError::EmptyInput)
        ));
        assert!(matches!(
            forward(w, &[300], &mut cache),
            Err(ModelError::TokenOutOfRange { token: 300, .. })
        ));
        cache.len = w.config.max_seq_len;
        assert!(matches!(
            forward(w, &[1], &mut cache),
            Err(ModelError::ContextFull { .. })
        ));
    }
}
