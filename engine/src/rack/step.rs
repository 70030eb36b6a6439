//! One forward step of a model instance, layer by layer, on one GPU: the kernels it launches,
//! each placed on the roofline, the collectives between them, and the gaps. Decode, prefill
//! chunks and speculative verification are all this one step with different token counts.

use serde::Serialize;

use super::hardware::Protocol;
use super::mechanisms::{self, Peers, Roofline};
use super::models::Attention;
use super::params::Params;
use super::precision::Precision;
use super::scenario::{Optimization as O, Scenario, SpecMethod};

/// What both attention variants of one layer's step share: the step's shape and phase, the TP
/// split of attention, and the switches and precisions that decide the kernels.
#[derive(Clone, Copy)]
struct AttentionStep {
    shape: Shape,
    prefill: bool,
    weights: Precision,
    tp: u32,
    tpf: f64,
    d: f64,
    seqs: f64,
    tokens: f64,
    fused_qkv: bool,
    attn_precision: Precision,
    sms: u32,
    split_k: bool,
    kv_b: f64,
    /// The busiest attention group's sequences over the mean (decode under attention DP):
    /// `Tally::attention_imbalance`.
    imbalance: f64,
}

/// MLA's widths as the step counts them: query heads in all and on this GPU (`h`), the query
/// and KV latent ranks, the non-RoPE and RoPE key widths and the value width.
#[derive(Clone, Copy)]
struct MlaWidths {
    heads: f64,
    h: f64,
    q: f64,
    kv: f64,
    n: f64,
    r: f64,
    v: f64,
}

/// Query heads one decode attention CTA of absorbed MLA covers (FlashMLA's tile: 64 heads of a
/// sequence share one pass over its latent cache).
const MLA_HEADS_PER_CTA: f64 = 64.0;
/// Context positions per split of split-K (flash-decoding) attention: one CTA per chunk.
const SPLIT_K_POSITIONS: f64 = 256.0;
/// Query tokens per prefill attention CTA (a FlashAttention tile of 128 rows).
const PREFILL_TOKENS_PER_CTA: f64 = 128.0;
/// Where a step's time goes, µs. `overlap_us` is negative: communication hidden under compute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Breakdown {
    pub compute_us: f64,
    pub memory_us: f64,
    pub communication_us: f64,
    pub launch_us: f64,
    pub overlap_us: f64,
}

impl Breakdown {
    pub fn total_us(&self) -> f64 {
        self.compute_us + self.memory_us + self.communication_us + self.launch_us + self.overlap_us
    }

    pub fn scaled(self, k: f64) -> Breakdown {
        Breakdown {
            compute_us: self.compute_us * k,
            memory_us: self.memory_us * k,
            communication_us: self.communication_us * k,
            launch_us: self.launch_us * k,
            overlap_us: self.overlap_us * k,
        }
    }

    pub fn plus(self, o: Breakdown) -> Breakdown {
        Breakdown {
            compute_us: self.compute_us + o.compute_us,
            memory_us: self.memory_us + o.memory_us,
            communication_us: self.communication_us + o.communication_us,
            launch_us: self.launch_us + o.launch_us,
            overlap_us: self.overlap_us + o.overlap_us,
        }
    }
}

/// The work of one step on one GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Step {
    pub breakdown: Breakdown,
    pub time_us: f64,
    pub kernels: f64,
    /// Tensor FLOPs executed.
    pub flops: f64,
    /// Bytes through HBM.
    pub hbm_bytes: f64,
    /// One layer's MLA copy/concat kernel (0 for GQA models), µs.
    pub copy_concat_us: f64,
}

/// What one forward carries: `batch` sequences per GPU, `tokens` new tokens each, attending to
/// `context` tokens on average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub batch: f64,
    pub tokens: f64,
    pub context: f64,
}

/// Accumulates kernels for one GPU.
struct Tally<'a> {
    s: &'a Scenario,
    p: &'a Params,
    compute_us: f64,
    memory_us: f64,
    comm_us: f64,
    /// Kernel time below the floor (`Params::kernel_floor_us`), µs.
    floor_us: f64,
    kernels: f64,
    flops: f64,
    bytes: f64,
    copy_concat_us: f64,
}

impl<'a> Tally<'a> {
    fn new(s: &'a Scenario, p: &'a Params) -> Self {
        Tally {
            s,
            p,
            compute_us: 0.0,
            memory_us: 0.0,
            comm_us: 0.0,
            floor_us: 0.0,
            kernels: 0.0,
            flops: 0.0,
            bytes: 0.0,
            copy_concat_us: 0.0,
        }
    }

    /// Achieved FLOP/s in `precision`, less the SMs given to communication.
    fn flops_s(&self, precision: Precision) -> f64 {
        let gpu = &self.s.system.gpu;
        let sms_left = 1.0 - self.s.comm_sms as f64 / gpu.sms as f64;
        gpu.flops(precision) * self.p.flops_eff * sms_left
    }

    fn bytes_s(&self, eff: f64) -> f64 {
        self.s.system.gpu.hbm_bytes_s() * eff
    }

    /// One kernel: its roofline time, filed under compute or memory by which side bound it,
    /// and, for a kernel shorter than the floor, the rest of the floor (filed with the launch
    /// cost: it is fixed per kernel, not work).
    fn kernel(&mut self, r: Roofline, flops: f64, bytes: f64) -> f64 {
        let roof = r.time_us();
        let t = roof.max(self.p.kernel_floor_us);
        if r.compute_bound() {
            self.compute_us += roof;
        } else {
            self.memory_us += roof;
        }
        self.floor_us += t - roof;
        self.kernels += 1.0;
        self.flops += flops;
        self.bytes += bytes;
        t
    }

    /// A GEMM of `tokens` rows through a k x n weight of which this GPU holds 1/`split`.
    fn gemm(&mut self, tokens: f64, k: f64, n: f64, split: f64, weights: Precision) {
        let act = self.s.activations;
        let flops = 2.0 * tokens * k * n / split;
        let bytes = k * n / split * weights.weight_bytes()
            + tokens * (k + n / split) * act.activation_bytes();
        let r = Roofline::new(
            flops,
            self.flops_s(Precision::gemm(weights, act)),
            bytes,
            self.bytes_s(self.p.bw_eff),
        );
        self.kernel(r, flops, bytes);
    }

    /// A memory-bound kernel (norm, activation, copy) moving `bytes` at efficiency `eff`.
    fn stream(&mut self, bytes: f64, eff: f64) -> f64 {
        let r = Roofline::new(0.0, 1.0, bytes, self.bytes_s(eff));
        self.kernel(r, 0.0, bytes)
    }

    fn collective(&mut self, us: f64) {
        self.comm_us += us;
        self.kernels += 1.0;
    }

    fn nvlink_bytes_s(&self) -> f64 {
        self.s.system.nvlink_gb_s * 1e9 * self.p.link_eff
    }

    fn network_bytes_s(&self) -> f64 {
        self.s.system.scale_out_gb_s * 1e9 * self.p.link_eff
    }

    fn allreduce(&mut self, bytes: f64, ranks: u32) {
        if ranks > 1 {
            let us = mechanisms::allreduce_us(
                bytes,
                ranks,
                self.nvlink_bytes_s(),
                self.p.collective_base_us,
            );
            self.collective(us);
        }
    }

    /// The residual add and the RMSNorm that follows it (one kernel in every serious stack),
    /// preceded under TP by the all-reduce of the block's partial sums. Fused, the all-reduce
    /// kernel adds and normalizes on the way out: one kernel and one pass fewer.
    fn residual_norm(&mut self, tokens: f64, tp: u32) {
        let d = self.s.model.hidden as f64;
        let row = tokens * d * 2.0;
        // Unfused, the add+norm kernel reads the block output and the residual and writes the
        // new residual and the normalized row; fused, the all-reduce writes both directly.
        if tp > 1 && self.s.optimizations.has(O::FusedAllreduceRmsnorm) {
            self.allreduce(row, tp);
            self.bytes += 2.0 * row;
        } else {
            self.allreduce(row, tp);
            self.stream(4.0 * row, self.p.bw_eff);
        }
    }

    /// Decode under attention DP: each attention group serves its own sequences and the step
    /// waits for the group with the most. Requests come and go at random, so a group's count
    /// is Poisson about the mean `seqs` and the busiest of `groups` holds
    /// `mechanisms::busiest_rank_load(seqs, groups)`, never more than all of them. Returned as
    /// a factor on the mean; 1 with one group.
    fn attention_imbalance(&self, seqs: f64) -> f64 {
        let s = self.s;
        let groups = s.gpus / s.pp / s.attention_tp();
        if groups <= 1 || seqs <= 0.0 {
            return 1.0;
        }
        let busiest = mechanisms::busiest_rank_load(seqs, groups).min(seqs * groups as f64);
        busiest / seqs
    }

    fn attention(&mut self, shape: Shape, prefill: bool, weights: Precision) {
        let s = self.s;
        let tp = s.attention_tp();
        let tpf = tp as f64;
        let seqs = shape.batch * tpf;
        let a = AttentionStep {
            shape,
            prefill,
            weights,
            tp,
            tpf,
            d: s.model.hidden as f64,
            seqs,
            tokens: seqs * shape.tokens,
            fused_qkv: s.optimizations.has(O::FusedQkvRopeScale),
            attn_precision: if s.kv_cache == Precision::Bf16 {
                Precision::Bf16
            } else {
                Precision::Fp8
            },
            sms: s.system.gpu.sms,
            split_k: s.optimizations.has(O::SplitKAttention),
            kv_b: s.kv_cache.kv_bytes(),
            imbalance: if prefill {
                1.0
            } else {
                self.attention_imbalance(seqs)
            },
        };
        match s.model.attention {
            Attention::Mla {
                heads,
                q_lora,
                kv_lora,
                nope,
                rope,
                v,
            } => self.mla(
                a,
                MlaWidths {
                    heads: heads as f64,
                    h: heads as f64 / a.tpf,
                    q: q_lora as f64,
                    kv: kv_lora as f64,
                    n: nope as f64,
                    r: rope as f64,
                    v: v as f64,
                },
            ),
            Attention::Gqa {
                heads,
                kv_heads,
                head_dim,
            } => self.gqa(a, heads, kv_heads, head_dim),
        }
    }

    /// Multi-head latent attention: the low-rank projections, the copy/concat, and attention
    /// over per-head keys (prefill) or absorbed over the shared latent cache (decode).
    fn mla(&mut self, a: AttentionStep, w: MlaWidths) {
        let AttentionStep {
            shape,
            prefill,
            weights,
            tpf,
            d,
            tokens,
            fused_qkv,
            attn_precision,
            ..
        } = a;
        let s = self.s;
        let MlaWidths {
            heads,
            h,
            q,
            kv,
            n,
            r,
            v,
        } = w;
        // The low-rank down-projections (q_a and kv_a as one weight) are replicated
        // across TP ranks.
        self.gemm(tokens, d, q + kv + r, 1.0, weights);
        self.stream(tokens * q * 4.0, self.p.bw_eff);
        self.stream(tokens * kv * 4.0, self.p.bw_eff);
        self.gemm(tokens, q, heads * (n + r), tpf, weights);
        if !fused_qkv {
            self.stream(tokens * h * r * 4.0 + tokens * r * 4.0, self.p.bw_eff);
        }
        // The MLA copy/concat: assemble per-head operands from the latent and RoPE
        // parts. Prefill builds K = [k_nope | k_rope] per head (the seed's 306 µs);
        // decode builds q = [q_nope W_UK | q_rope] and appends to the latent cache.
        let copy_eff = if s.optimizations.has(O::FusedCopyConcat) {
            self.p.bw_eff
        } else {
            self.p.naive_copy_bw_eff
        };
        let copy_bytes = if prefill {
            tokens * h * n * 2.0 * 2.0
        } else {
            tokens * h * (kv + r) * 2.0 * 2.0 + tokens * (kv + r) * 2.0
        };
        self.copy_concat_us = self.stream(copy_bytes, copy_eff);
        if prefill {
            // Up-project the latent into per-head keys and values.
            self.gemm(tokens, kv, heads * (n + v), tpf, weights);
            let flops = tokens * h * shape.context * 2.0 * (n + r + v);
            let bytes = tokens * h * (n + r + v) * 2.0 * 2.0;
            let roof = Roofline::new(
                flops,
                self.flops_s(attn_precision),
                bytes,
                self.bytes_s(self.p.bw_eff),
            );
            self.kernel(roof, flops, bytes);
        } else {
            self.mla_absorbed_decode(a, w);
        }
        self.gemm(tokens, heads * v, d, tpf, weights);
    }

    /// Absorbed decode: q_nope through W_UK into the latent space, attention over the latent
    /// cache that every head shares (split-K where switched on), then W_UV back out.
    fn mla_absorbed_decode(&mut self, a: AttentionStep, w: MlaWidths) {
        let MlaWidths {
            heads,
            h,
            kv,
            n,
            r,
            v,
            ..
        } = w;
        let AttentionStep {
            shape,
            weights,
            tpf,
            seqs,
            tokens,
            attn_precision,
            sms,
            split_k,
            kv_b,
            ..
        } = a;
        // Absorbed: q_nope through W_UK into the latent space, then attention over
        // the latent cache that every head shares, then W_UV back out.
        self.gemm(tokens, n, kv * heads, tpf, weights);
        let flops = tokens * h * shape.context * 2.0 * (kv + r + kv) * a.imbalance;
        let bytes = seqs * shape.context * (kv + r) * kv_b * a.imbalance;
        let ctas = seqs * a.imbalance * (h / MLA_HEADS_PER_CTA).ceil();
        let partials = tokens * h * kv * 4.0 * 2.0;
        self.decode_attention(
            1e6 * flops / self.flops_s(attn_precision),
            (flops, bytes),
            ctas,
            shape.context,
            split_k.then_some(partials),
            sms,
        );
        self.gemm(tokens, kv, heads * v, tpf, weights);
    }

    /// Decode attention over the KV cache in `ctas` blocks, `compute_us` of tensor work and a
    /// memory time set by the bandwidth its blocks can draw (`mechanisms::occupancy`). With split-K allowed (`partials`: the bytes of the partial
    /// results the combine kernel reads and writes), the context is cut into chunks of
    /// `SPLIT_K_POSITIONS`, one block each, and a combine kernel merges them; like
    /// flash-decoding's heuristic, the step splits only when that is faster, counting the
    /// combine kernel's own launch gap. Small batches at long context split; large ones do not.
    fn decode_attention(
        &mut self,
        compute_us: f64,
        (flops, bytes): (f64, f64),
        ctas: f64,
        context: f64,
        partials: Option<f64>,
        sms: u32,
    ) {
        let on = |ctas: f64| Roofline {
            compute_us,
            memory_us: 1e6 * bytes / self.bytes_s(self.p.bw_eff * mechanisms::occupancy(ctas, sms)),
        };
        let plain = on(ctas);
        let Some(partials) = partials else {
            self.kernel(plain, flops, bytes);
            return;
        };
        let splits = (context / SPLIT_K_POSITIONS).ceil().max(1.0);
        let split = on(ctas * splits);
        let combine_us = 1e6 * partials / self.bytes_s(self.p.bw_eff) + self.gap_us();
        if splits > 1.0 && split.time_us() + combine_us < plain.time_us() {
            self.kernel(split, flops, bytes);
            self.stream(partials, self.p.bw_eff);
        } else {
            self.kernel(plain, flops, bytes);
        }
    }

    /// The GPU's idle time between two dependent kernels under this scenario's launch mode.
    fn gap_us(&self) -> f64 {
        if self.s.optimizations.has(O::Pdl) {
            self.p.pdl_gap_us
        } else {
            self.p.kernel_gap_us
        }
    }

    /// Grouped-query attention: one QKV weight, K/V heads split over TP as far as they go.
    fn gqa(&mut self, a: AttentionStep, heads: u32, kv_heads: u32, head_dim: u32) {
        let AttentionStep {
            shape,
            prefill,
            weights,
            tp,
            tpf,
            d,
            seqs,
            tokens,
            fused_qkv,
            attn_precision,
            sms,
            split_k,
            kv_b,
            ..
        } = a;
        let hd = head_dim as f64;
        let h = heads as f64 / tpf;
        let kv_split = tp.min(kv_heads) as f64;
        let kvh = kv_heads as f64 / kv_split;
        // One QKV weight. Unfused, one elementwise pass applies RoPE and the 1/sqrt(d)
        // scaling to q and k; fused, they ride in the GEMM's epilogue (the seed's
        // "FC_QKV + attention scaling").
        self.gemm(tokens, d, h * hd + 2.0 * kvh * hd, 1.0, weights);
        if !fused_qkv {
            self.stream(tokens * (h + kvh) * hd * 4.0, self.p.bw_eff);
        }
        self.stream(tokens * 2.0 * kvh * hd * (2.0 + kv_b), self.p.bw_eff);
        let flops = tokens * h * shape.context * 2.0 * 2.0 * hd;
        let bytes = if prefill {
            tokens * (h + 2.0 * kvh) * hd * 2.0 * 2.0
        } else {
            seqs * shape.context * 2.0 * kvh * hd * kv_b
        };
        let ctas = seqs * kvh;
        if prefill {
            let ctas = ctas * (shape.tokens / PREFILL_TOKENS_PER_CTA).ceil();
            let roof = Roofline::new(
                flops,
                self.flops_s(attn_precision),
                bytes,
                self.bytes_s(self.p.bw_eff * mechanisms::occupancy(ctas, sms)),
            );
            self.kernel(roof, flops, bytes);
        } else {
            let (flops, bytes) = (flops * a.imbalance, bytes * a.imbalance);
            let partials = tokens * h * hd * 4.0 * 2.0;
            self.decode_attention(
                1e6 * flops / self.flops_s(attn_precision),
                (flops, bytes),
                ctas * a.imbalance,
                shape.context,
                split_k.then_some(partials),
                sms,
            );
        }
        self.gemm(tokens, heads as f64 * hd, d, tpf, weights);
    }

    /// A (Swi)GLU or plain MLP of width `inter`, of which this GPU holds 1/`split`. Gate and up
    /// are one weight (FC13) everywhere; the fusion moves the activation into its epilogue.
    fn mlp(&mut self, tokens: f64, inter: f64, split: f64, weights: Precision) {
        let d = self.s.model.hidden as f64;
        let act_b = self.s.activations.activation_bytes();
        let width = inter / split;
        let up = if self.s.model.gated { 2.0 } else { 1.0 };
        self.gemm(tokens, d, up * inter, split, weights);
        if !self.s.optimizations.has(O::FusedGateUpSwiglu) {
            self.stream(tokens * width * (up + 1.0) * act_b, self.p.bw_eff);
        }
        self.gemm(tokens, inter, d, split, weights);
    }

    /// One MoE block: router, shared expert, routed experts on this GPU's EP rank, and the
    /// communication that brings tokens to their experts and back.
    fn moe(&mut self, shape: Shape, experts_precision: Precision) {
        let s = self.s;
        let Some(moe) = s.model.moe.as_ref() else {
            return;
        };
        let d = s.model.hidden as f64;
        let tp = s.attention_tp();
        let own = shape.batch * shape.tokens;
        let group_tokens = own * tp as f64;
        self.gemm(own, d, moe.routed as f64, 1.0, Precision::Bf16);
        // Plain top-k is one kernel. Group-limited routing (DeepSeek) is five unfused: scores
        // plus bias, per-group scores, top groups and mask, top-k, normalize and scale.
        let routing_kernels = if moe.router_groups > 1 { 5 } else { 1 };
        for _ in 0..routing_kernels {
            self.stream(own * moe.routed as f64 * 4.0 * 2.0, self.p.bw_eff);
        }
        if moe.shared > 0 {
            let inter = moe.shared as f64 * moe.intermediate as f64;
            self.mlp(group_tokens, inter, tp as f64, s.dense_weights());
        }

        let gpus = (s.gpus / s.pp) as f64;
        let ep = s.ep;
        let moe_tp = (gpus / ep as f64).max(1.0);
        let mean_pairs = own * gpus * moe.top_k as f64 / ep as f64;
        let pairs = mechanisms::busiest_rank_load(mean_pairs, ep);
        let experts = moe.routed as f64 / ep as f64;
        let touched = mechanisms::experts_touched(experts, pairs);
        let inter = moe.intermediate as f64;
        let mats = if s.model.gated { 3.0 } else { 2.0 };
        let w = experts_precision;
        let act_b = s.activations.activation_bytes();
        let rate = self.flops_s(Precision::gemm(w, s.activations));
        let fused = s.optimizations.has(O::FusedGateUpSwiglu);
        // Grouped GEMMs over the local experts: FC13 (activation in its epilogue when fused),
        // then down.
        let grouped = |t: &mut Self, n_mats: f64| {
            let flops = 2.0 * pairs * d * inter * n_mats / moe_tp;
            let bytes = touched * d * inter * n_mats / moe_tp * w.weight_bytes()
                + pairs * (d + inter * n_mats / moe_tp) * act_b;
            let r = Roofline::new(flops, rate, bytes, t.bytes_s(t.p.bw_eff));
            t.kernel(r, flops, bytes);
        };
        grouped(self, mats - 1.0);
        if !fused {
            self.stream(pairs * inter / moe_tp * mats * act_b, self.p.bw_eff);
        }
        grouped(self, 1.0);

        // After attention every rank of a TP group holds the group's tokens, so experts inside
        // the group need no exchange (their partial sums ride the next all-reduce). Experts
        // beyond it do: each rank dispatches its 1/tp share of the group's tokens to the `ep`
        // ranks and gets the results back (attention DP is the case tp = 1).
        if ep > tp {
            self.expert_alltoall(own * moe.top_k as f64, act_b);
        }
        // Weighted sum of the top-k expert outputs.
        self.stream(own * (moe.top_k as f64 + 1.0) * d * 2.0, self.p.bw_eff);
        // Under attention TP the shared and routed partial sums are all-reduced by the next
        // `residual_norm`, like any row-parallel output.
    }

    /// Expert parallelism's AllToAll over the `ep` ranks: `pairs` (token, expert) records out
    /// (dispatch, activations of `act_b` bytes) and back (combine, BF16); unfused, a count
    /// exchange first.
    fn expert_alltoall(&mut self, pairs: f64, act_b: f64) {
        let s = self.s;
        let (d, ep) = (s.model.hidden as f64, s.ep);
        let peers = Peers::new(ep, s.system.nvlink_domain);
        let dispatch = pairs * d * act_b;
        let combine = pairs * d * 2.0;
        let fused_a2a = s.optimizations.has(O::FusedAlltoallLl128);
        let protocol = if fused_a2a {
            Protocol::Ll128
        } else {
            Protocol::Simple
        };
        let phase = |bytes: f64| {
            mechanisms::alltoall_us(
                bytes,
                peers,
                protocol,
                self.nvlink_bytes_s(),
                self.network_bytes_s(),
                self.p.collective_base_us,
            )
        };
        let (d_us, c_us) = (phase(dispatch), phase(combine));
        if !fused_a2a {
            // Unfused: a kernel computes per-rank counts and a separate AllToAll exchanges
            // them before the tokens can move.
            let counts = phase(pairs * 8.0);
            self.stream(pairs * 8.0, self.p.bw_eff);
            self.collective(counts);
        }
        self.collective(d_us);
        self.collective(c_us);
    }

    /// One decoder layer; `moe` picks the MoE FFN over the dense one. Draft layers are BF16.
    fn layer(&mut self, shape: Shape, prefill: bool, moe: bool, draft: bool) {
        let tp = self.s.attention_tp();
        let group_tokens = shape.batch * tp as f64 * shape.tokens;
        let (attention, weights) = if draft {
            (Precision::Bf16, Precision::Bf16)
        } else {
            (self.s.attention_weights, self.s.dense_weights())
        };
        self.residual_norm(group_tokens, tp);
        self.attention(shape, prefill, attention);
        self.residual_norm(group_tokens, tp);
        if moe {
            // Draft (MTP) layers ship in BF16, experts included (TensorRT-LLM tech blog 1).
            self.moe(
                shape,
                if draft {
                    Precision::Bf16
                } else {
                    self.s.weights
                },
            );
        } else {
            let inter = self.s.model.dense_intermediate as f64;
            self.mlp(group_tokens, inter, tp as f64, weights);
        }
    }

    /// Final norm, the vocabulary projection (split over the instance's GPUs) and sampling.
    fn head(&mut self, shape: Shape) {
        let s = self.s;
        let d = s.model.hidden as f64;
        let gpus = (s.gpus / s.pp) as f64;
        let tokens = shape.batch * shape.tokens * gpus;
        self.stream(tokens / gpus * d * 4.0, self.p.bw_eff);
        self.gemm(tokens, d, s.model.vocab as f64, gpus, Precision::Bf16);
        self.stream(
            tokens / gpus * s.model.vocab as f64 / gpus * 4.0,
            self.p.bw_eff,
        );
    }

    /// `handoffs` point-to-point sends of the activations between pipeline stages: each GPU
    /// passes its rows of the hidden state (BF16) to the next stage's GPU, over NVLink when the
    /// whole instance sits in one NVLink domain, else over the network
    /// (`mechanisms::p2p_us`).
    fn pipeline_handoffs(&mut self, shape: Shape, handoffs: f64) {
        let s = self.s;
        let bytes = shape.batch * shape.tokens * s.model.hidden as f64 * 2.0;
        let (bytes_s, latency) = if s.gpus <= s.system.nvlink_domain {
            (self.nvlink_bytes_s(), Protocol::Simple.nvlink_latency_us())
        } else {
            (
                self.network_bytes_s(),
                Protocol::Simple.network_latency_us(),
            )
        };
        let one = mechanisms::p2p_us(bytes, bytes_s, latency, self.p.collective_base_us);
        self.comm_us += one * handoffs;
        self.kernels += handoffs;
    }

    /// Adds `times` copies of another tally's kernels.
    fn absorb(&mut self, other: &Tally, times: f64) {
        self.compute_us += other.compute_us * times;
        self.memory_us += other.memory_us * times;
        self.comm_us += other.comm_us * times;
        self.floor_us += other.floor_us * times;
        self.kernels += other.kernels * times;
        self.flops += other.flops * times;
        self.bytes += other.bytes * times;
        self.copy_concat_us = other.copy_concat_us;
    }

    fn busy_us(&self) -> f64 {
        self.compute_us + self.memory_us + self.comm_us + self.floor_us
    }

    fn finish(self) -> Step {
        let s = self.s;
        let gap = self.gap_us();
        let cpu = (!s.optimizations.has(O::CudaGraphs)).then_some(self.p.cpu_launch_us);
        let launch = mechanisms::launch_us(self.kernels, gap, cpu, self.busy_us());
        let breakdown = Breakdown {
            compute_us: self.compute_us,
            memory_us: self.memory_us,
            communication_us: self.comm_us,
            launch_us: launch + self.floor_us,
            overlap_us: 0.0,
        };
        Step {
            breakdown,
            time_us: breakdown.total_us(),
            kernels: self.kernels,
            flops: self.flops,
            hbm_bytes: self.bytes,
            copy_concat_us: self.copy_concat_us,
        }
    }
}

/// One forward of the target model as its tokens see it: through every pipeline stage in turn
/// (the largest stage's layers, `Scenario::stage_layers`, once per stage), the hand-offs
/// between stages, and the head. While one micro-batch crosses the pipeline each GPU works on
/// `pp` of them, so the FLOPs and bytes counted are one GPU's over that time.
fn forward(s: &Scenario, p: &Params, shape: Shape, prefill: bool) -> Step {
    let mut t = Tally::new(s, p);
    let (dense, moe_layers) = s.stage_layers();
    let stages = s.pp as f64;
    // Layers of one kind are identical: cost one of each and count it as many times.
    for (moe, count) in [(false, dense), (true, moe_layers)] {
        if count > 0 {
            let mut one = Tally::new(s, p);
            one.layer(shape, prefill, moe, false);
            t.absorb(&one, count as f64 * stages);
        }
    }
    if s.pp > 1 {
        t.pipeline_handoffs(shape, stages - 1.0);
    }
    t.head(shape);
    t.finish()
}

/// One decoder layer's forward on one GPU (training composes these).
pub fn layer_forward(s: &Scenario, p: &Params, shape: Shape, moe: bool) -> Step {
    let mut t = Tally::new(s, p);
    t.layer(shape, true, moe, false);
    t.finish()
}

/// One forward, with two-batch overlap when on: the batch is split in two and each half's
/// communication runs under the other half's compute, at the price of reading the weights twice
/// and launching every kernel twice. Like a real scheduler, it is used only where it pays.
pub fn forward_step(s: &Scenario, p: &Params, shape: Shape, prefill: bool) -> Step {
    let plain = forward(s, p, shape, prefill);
    if !s.optimizations.has(O::TwoBatchOverlap) || shape.batch < 2.0 {
        return plain;
    }
    let half = forward(
        s,
        p,
        Shape {
            batch: shape.batch / 2.0,
            ..shape
        },
        prefill,
    );
    let b = half.breakdown.scaled(2.0);
    let hidden = b.communication_us.min(b.compute_us + b.memory_us);
    let breakdown = Breakdown {
        overlap_us: -hidden,
        ..b
    };
    let overlapped = Step {
        breakdown,
        time_us: breakdown.total_us(),
        kernels: 2.0 * half.kernels,
        flops: 2.0 * half.flops,
        hbm_bytes: 2.0 * half.hbm_bytes,
        copy_concat_us: half.copy_concat_us,
    };
    if overlapped.time_us < plain.time_us {
        overlapped
    } else {
        plain
    }
}

/// A speculative decode step: draft `k` tokens one at a time with the small draft network, then
/// verify all k + 1 in one target forward. Returns the step and the tokens it yields per
/// sequence on average.
pub fn decode_step(s: &Scenario, p: &Params, batch: f64, context: f64) -> (Step, f64) {
    let Some(spec) = s.speculative else {
        let step = forward_step(
            s,
            p,
            Shape {
                batch,
                tokens: 1.0,
                context,
            },
            false,
        );
        return (step, 1.0);
    };
    let k = spec.draft_tokens;
    let verify = forward_step(
        s,
        p,
        Shape {
            batch,
            tokens: k as f64 + 1.0,
            context,
        },
        false,
    );
    let draft = draft_step(s, p, batch, context, spec.method);
    let accepted = spec.acceptance_length.unwrap_or(match spec.method {
        SpecMethod::Mtp => mechanisms::mtp_acceptance_deepseek(k),
        SpecMethod::Eagle3 => mechanisms::chain_acceptance(p.eagle3_accept, k),
    });
    let kf = k as f64;
    let breakdown = verify.breakdown.plus(draft.breakdown.scaled(kf));
    let step = Step {
        breakdown,
        time_us: breakdown.total_us(),
        kernels: verify.kernels + kf * draft.kernels,
        flops: verify.flops + kf * draft.flops,
        hbm_bytes: verify.hbm_bytes + kf * draft.hbm_bytes,
        copy_concat_us: verify.copy_concat_us,
    };
    (step, accepted)
}

/// One draft token: MTP runs DeepSeek's extra decoder layer (with its MoE) on the last hidden
/// state; EAGLE-3 runs a one-layer dense BF16 draft model. Both end in the shared head.
fn draft_step(s: &Scenario, p: &Params, batch: f64, context: f64, method: SpecMethod) -> Step {
    let mut t = Tally::new(s, p);
    let shape = Shape {
        batch,
        tokens: 1.0,
        context,
    };
    let d = s.model.hidden as f64;
    let tp = s.attention_tp();
    let tokens = batch * tp as f64;
    // Fuse the token embedding with the target's hidden state (MTP: 2d -> d; EAGLE-3 fuses
    // three hidden states: 3d -> d).
    let inputs = if method == SpecMethod::Mtp { 2.0 } else { 3.0 };
    t.gemm(tokens, inputs * d, d, tp as f64, Precision::Bf16);
    t.layer(shape, false, method == SpecMethod::Mtp, true);
    t.head(shape);
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::scenario::Scenario;

    fn scenario(toml: &str) -> Scenario {
        Scenario::from_text("t.toml", toml).unwrap_or_else(|e| panic!("{e}"))
    }

    fn prior() -> Params {
        Params::PRIOR
    }

    /// The seed's SoL: 8192 tokens x 128 heads x 128 x 2 bytes, read and written, at 80% of
    /// 8 TB/s = 83.9 µs; at the naive kernel's efficiency e it takes 0.8/e times that.
    #[test]
    fn the_mla_copy_concat_is_a_pure_bandwidth_kernel() {
        let s = scenario(
            "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"prefill\"\n\
             gpus = 4\nweights = \"fp4\"\ninput_tokens = 8192\n\
             optimizations = [\"attention_dp\"]\n",
        );
        let mut p = prior();
        p.naive_copy_bw_eff = 0.2;
        let step = forward(
            &s,
            &p,
            Shape {
                batch: 1.0,
                tokens: 8192.0,
                context: 4096.0,
            },
            true,
        );
        let sol = 8192.0 * 128.0 * 128.0 * 2.0 * 2.0 / (8e12 * 0.8) * 1e6;
        assert!((step.copy_concat_us / sol - 0.8 / 0.2).abs() < 1e-9);
    }

    fn decode(s: &Scenario, p: &Params, batch: f64) -> Step {
        decode_step(s, p, batch, 2048.0).0
    }

    #[test]
    fn pdl_shortens_only_the_launch_gaps() {
        let base = "system = \"dgx-b200\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                    weights = \"fp4\"\nbatch_per_gpu = 1\ntp = 8\n";
        let a = scenario(&format!("{base}optimizations = [\"cuda_graphs\"]\n"));
        let b = scenario(&format!(
            "{base}optimizations = [\"cuda_graphs\", \"pdl\"]\n"
        ));
        let p = prior();
        let (x, y) = (decode(&a, &p, 1.0), decode(&b, &p, 1.0));
        assert_eq!(x.kernels, y.kernels);
        assert_eq!(x.breakdown.compute_us, y.breakdown.compute_us);
        assert_eq!(x.breakdown.memory_us, y.breakdown.memory_us);
        let saved = x.breakdown.launch_us - y.breakdown.launch_us;
        let expect = x.kernels * (p.kernel_gap_us - p.pdl_gap_us);
        assert!((saved - expect).abs() < 1e-6, "{saved} vs {expect}");
    }

    #[test]
    fn fusions_remove_kernels_and_bytes() {
        let base = "system = \"dgx-b200\"\nmodel = \"llama4-maverick\"\nphase = \"decode\"\n\
                    batch_per_gpu = 1\ntp = 8\nep = 1\n";
        let p = prior();
        let plain = decode(&scenario(base), &p, 1.0);
        for o in [
            "fused_gate_up_swiglu",
            "fused_qkv_rope_scale",
            "fused_allreduce_rmsnorm",
        ] {
            let f = decode(
                &scenario(&format!("{base}optimizations = [\"{o}\"]\n")),
                &p,
                1.0,
            );
            assert!(f.kernels < plain.kernels, "{o}");
            assert!(f.hbm_bytes < plain.hbm_bytes, "{o}");
            assert!(f.time_us < plain.time_us, "{o}");
        }
    }

    #[test]
    fn ll128_fused_alltoall_cuts_communication() {
        let base = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                    weights = \"fp4\"\nbatch_per_gpu = 16\n";
        let p = prior();
        let a = decode(
            &scenario(&format!("{base}optimizations = [\"attention_dp\"]\n")),
            &p,
            16.0,
        );
        let b = decode(
            &scenario(&format!(
                "{base}optimizations = [\"attention_dp\", \"fused_alltoall_ll128\"]\n"
            )),
            &p,
            16.0,
        );
        assert!(b.breakdown.communication_us < a.breakdown.communication_us);
        assert_eq!(a.breakdown.compute_us, b.breakdown.compute_us);
    }

    /// 20 of 132 SMs given to communication leave 112 for a compute-bound GEMM.
    #[test]
    fn comm_sms_slow_compute_bound_work() {
        let base = "system = \"hgx-h800\"\nmodel = \"deepseek-v3\"\nphase = \"prefill\"\n\
                    gpus = 16\ninput_tokens = 8192\n";
        let p = prior();
        let time = |s: &Scenario| {
            let mut t = Tally::new(s, &p);
            t.gemm(8192.0, 7168.0, 18432.0, 1.0, Precision::Fp8);
            assert_eq!(t.memory_us, 0.0, "a 8192-token GEMM is compute bound");
            t.compute_us
        };
        let a = time(&scenario(base));
        let b = time(&scenario(&format!("{base}comm_sms = 20\n")));
        assert!((b / a - 132.0 / 112.0).abs() < 1e-9, "{}", b / a);
    }

    /// A pipeline hands one sequence's token from stage to stage: one user on PP8 (TP1) is no
    /// faster than on TP8 and pays seven hand-offs; the FLOPs of its step are the whole model's.
    #[test]
    fn a_pipeline_does_not_speed_up_one_user() {
        let base = "system = \"dgx-b200\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                    weights = \"fp4\"\ngpus = 8\nep = 1\nbatch_per_gpu = 0.125\n\
                    optimizations = [\"cuda_graphs\"]\n";
        let p = Params::fitted();
        let tp8 = decode(&scenario(&format!("{base}tp = 8\n")), &p, 0.125);
        let pp8 = decode(&scenario(&format!("{base}tp = 1\npp = 8\n")), &p, 0.125);
        assert!(
            pp8.time_us > tp8.time_us,
            "PP8 {} vs TP8 {}",
            pp8.time_us,
            tp8.time_us
        );
        let (dense, moe) = scenario(&format!("{base}tp = 1\npp = 8\n")).stage_layers();
        assert_eq!(dense + moe, 8, "61 layers on 8 stages: 8 in the largest");
        assert!(pp8.breakdown.communication_us > 0.0, "the hand-offs");
    }

    /// Split-K is chosen per batch and context: it helps one sequence at long context and is
    /// left off at a large batch; switched on it never makes a step slower.
    #[test]
    fn split_k_is_used_only_where_it_helps() {
        let base = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                    weights = \"fp4\"\ngpus = 72\nep = 72\nbatch_per_gpu = 1\n";
        let p = Params::fitted();
        let off = scenario(&format!("{base}optimizations = [\"attention_dp\"]\n"));
        let on = scenario(&format!(
            "{base}optimizations = [\"attention_dp\", \"split_k_attention\"]\n"
        ));
        let at = |s: &Scenario, batch: f64, context: f64| decode_step(s, &p, batch, context).0;
        let (a, b) = (at(&off, 1.0, 32768.0), at(&on, 1.0, 32768.0));
        assert!(
            b.time_us < a.time_us,
            "one sequence at 32K: {} vs {}",
            b.time_us,
            a.time_us
        );
        assert!(b.kernels > a.kernels, "the combine kernel");
        let (c, d) = (at(&off, 256.0, 1024.0), at(&on, 256.0, 1024.0));
        assert_eq!(
            c.time_us, d.time_us,
            "256 sequences fill the GPU without splitting"
        );
        assert_eq!(c.kernels, d.kernels);
    }

    /// Experts beyond the attention TP group need an AllToAll: attention TP 4 with EP 8 on 8
    /// GPUs exchanges tokens; EP 4 inside the TP group does not.
    #[test]
    fn experts_beyond_the_tp_group_are_reached_by_an_alltoall() {
        let base = "system = \"dgx-b200\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                    weights = \"fp4\"\ngpus = 8\ntp = 4\nbatch_per_gpu = 8\n\
                    optimizations = [\"cuda_graphs\"]\n";
        let p = Params::fitted();
        let inside = decode(&scenario(&format!("{base}ep = 4\n")), &p, 8.0);
        let beyond = decode(&scenario(&format!("{base}ep = 8\n")), &p, 8.0);
        let moe_layers = 58.0;
        // Dispatch and combine, plus the unfused count exchange and its kernel, per MoE layer.
        assert_eq!(beyond.kernels - inside.kernels, 4.0 * moe_layers);
        assert!(beyond.breakdown.communication_us > inside.breakdown.communication_us);
    }

    /// Under attention DP the busiest of 72 groups sets the attention time: at 13 sequences per
    /// GPU it holds 13 + sqrt(2 ln 72 x 13) = 23.5 of them, so the attention kernel reads 1.8x
    /// the mean KV cache; one group (TP attention) has no imbalance.
    #[test]
    fn attention_dp_waits_for_the_busiest_group() {
        let s = scenario(R1_NVL72_DP);
        let t = Tally::new(&s, &Params::PRIOR);
        let expect = (13.0 + (2.0 * 72f64.ln() * 13.0).sqrt()) / 13.0;
        assert!((t.attention_imbalance(13.0) - expect).abs() < 1e-12);
        assert!((expect - 1.81).abs() < 0.01, "{expect}");
        let tp = scenario(&R1_NVL72_DP.replace("\"attention_dp\"", "\"cuda_graphs\""));
        assert_eq!(
            Tally::new(&tp, &Params::PRIOR).attention_imbalance(13.0),
            (13.0 + (2.0 * 9f64.ln() * 13.0).sqrt()) / 13.0
        );
    }

    const R1_NVL72_DP: &str = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\n\
        phase = \"decode\"\nweights = \"fp4\"\ngpus = 72\nep = 72\nbatch_per_gpu = 13\n\
        optimizations = [\"attention_dp\"]\n";

    #[test]
    fn speculation_trades_verification_cost_for_accepted_tokens() {
        let base = "system = \"dgx-b200\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                    weights = \"fp4\"\nbatch_per_gpu = 1\ntp = 8\n";
        let p = prior();
        let plain = scenario(base);
        let mtp = scenario(&format!(
            "{base}[speculative]\nmethod = \"mtp\"\ndraft_tokens = 3\n"
        ));
        let (a, one) = decode_step(&plain, &p, 1.0, 2048.0);
        let (b, accepted) = decode_step(&mtp, &p, 1.0, 2048.0);
        assert_eq!(one, 1.0);
        assert_eq!(accepted, 2.82);
        assert!(
            b.time_us > a.time_us,
            "verifying 4 tokens and drafting 3 costs more"
        );
        assert!(
            accepted / b.time_us > 1.0 / a.time_us,
            "but yields more tokens per µs"
        );
    }
}
