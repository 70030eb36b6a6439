//! The eager WebGPU forward: one kernel per operation, each in its own command buffer and queue
//! submission, the way eager PyTorch launches one CUDA kernel per op. This is the baseline every
//! fusion is measured against, so it is deliberately plain: separate copy and concat kernels for
//! MLA, a host round trip to learn which experts the router chose (as Hugging Face's eager MoE
//! does), and one launch sequence per used expert.
//!
//! MLA runs in its absorbed form (DeepSeek-V2 §2.1.2 / V3's inference path): W_UK is folded into
//! the query projection and W_UV into the output projection when the weights are loaded, so
//! attention is multi-query attention over the latent cache rows `[c_kv | k_rope]` and keys and
//! values are never expanded per head. The reference computes the unabsorbed definition; the
//! tests compare the two.

use crate::gpu::{read_back, storage_buffer, storage_zeroed, GpuContext};
use crate::kernels::{
    add, copy_rows, embed, gather_rows, gemv, matmul, mla_scores, mla_values, moe_topk, rms_norm,
    rope, scatter_add, sigmoid, silu_mul, softmax, KernelError,
};

use super::reference::{check_input, ForwardOutput, Routing};
use super::weights::{FeedForward, Ffn, Weights};
use super::{GateFunction, ModelError, MoeConfig};

/// One kernel launch of a forward pass, as the statistics and the timeline show it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelLaunch {
    pub kernel: &'static str,
    /// What it computed, e.g. `attn.wq_a` or `moe.expert7.w_up`.
    pub op: String,
    /// The layer, or `None` for the embedding and the head.
    pub layer: Option<usize>,
    /// Bytes it must read and write at least.
    pub bytes: u64,
}

struct GpuFfn {
    w_gate: wgpu::Buffer,
    w_up: wgpu::Buffer,
    w_down: wgpu::Buffer,
    inter: u32,
}

enum GpuFeedForward {
    Dense(GpuFfn),
    Moe {
        router: wgpu::Buffer,
        bias: wgpu::Buffer,
        /// The bias on the host too: the routing margin is computed there.
        bias_host: Vec<f32>,
        experts: Vec<GpuFfn>,
        shared: GpuFfn,
    },
}

struct GpuLayer {
    attn_norm: wgpu::Buffer,
    wq_a: wgpu::Buffer,
    q_norm: wgpu::Buffer,
    /// `[heads·kv_lora_rank, q_lora_rank]`: W_UK_hᵀ · W_q_nope_h per head (absorbed).
    w_q_latent: wgpu::Buffer,
    /// `[heads·qk_rope, q_lora_rank]`: the RoPE rows of wq_b.
    w_q_rope: wgpu::Buffer,
    wkv_a: wgpu::Buffer,
    kv_norm: wgpu::Buffer,
    /// `[hidden, heads·kv_lora_rank]`: wo_h · W_UV_h per head (absorbed).
    w_o_latent: wgpu::Buffer,
    ffn_norm: wgpu::Buffer,
    ffn: GpuFeedForward,
    /// `[max_seq, kv_lora_rank + qk_rope]`.
    cache: wgpu::Buffer,
}

/// Activations, sized for `max_seq_len` tokens in one call.
struct Scratch {
    token_ids: wgpu::Buffer,
    x: wgpu::Buffer,
    h: wgpu::Buffer,
    cq_raw: wgpu::Buffer,
    cq: wgpu::Buffer,
    q_latent: wgpu::Buffer,
    q_rope: wgpu::Buffer,
    kv: wgpu::Buffer,
    c_kv: wgpu::Buffer,
    q_cat: wgpu::Buffer,
    scores: wgpu::Buffer,
    o_latent: wgpu::Buffer,
    sub_out: wgpu::Buffer,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    act: wgpu::Buffer,
    router_logits: wgpu::Buffer,
    router_scores: wgpu::Buffer,
    topk_ids: wgpu::Buffer,
    topk_gates: wgpu::Buffer,
    route_index: wgpu::Buffer,
    route_gates: wgpu::Buffer,
    expert_in: wgpu::Buffer,
    expert_out: wgpu::Buffer,
    logits: wgpu::Buffer,
}

pub struct GpuModel {
    config: MoeConfig,
    embed: wgpu::Buffer,
    layers: Vec<GpuLayer>,
    norm: wgpu::Buffer,
    lm_head: wgpu::Buffer,
    cos_sin: wgpu::Buffer,
    scratch: Scratch,
    /// Positions in the cache.
    len: usize,
}

impl GpuModel {
    /// Uploads the weights (absorbing W_UK and W_UV into the attention projections).
    pub fn new(ctx: &GpuContext, w: &Weights) -> Result<Self, ModelError> {
        let c = w.config.clone();
        c.validate()?;
        let up = |name: &str, data: &[f32]| storage_buffer(ctx, name, data);
        let ffn = |f: &Ffn| -> Result<GpuFfn, ModelError> {
            Ok(GpuFfn {
                w_gate: up("w_gate", &f.w_gate.data)?,
                w_up: up("w_up", &f.w_up.data)?,
                w_down: up("w_down", &f.w_down.data)?,
                inter: f.w_gate.rows() as u32,
            })
        };
        let mut layers = Vec::with_capacity(c.layers);
        for layer in &w.layers {
            let a = &layer.attn;
            let (w_q_latent, w_q_rope, w_o_latent) = absorb(&c, a);
            let ffn = match &layer.ffn {
                FeedForward::Dense(f) => GpuFeedForward::Dense(ffn(f)?),
                FeedForward::Moe(m) => GpuFeedForward::Moe {
                    router: up("router", &m.router.data)?,
                    bias: up("router bias", &m.router_bias.data)?,
                    bias_host: m.router_bias.data.clone(),
                    experts: m.experts.iter().map(&ffn).collect::<Result<_, _>>()?,
                    shared: ffn(&m.shared)?,
                },
            };
            layers.push(GpuLayer {
                attn_norm: up("attn_norm", &layer.attn_norm.data)?,
                wq_a: up("wq_a", &a.wq_a.data)?,
                q_norm: up("q_norm", &a.q_norm.data)?,
                w_q_latent: up("w_q_latent", &w_q_latent)?,
                w_q_rope: up("w_q_rope", &w_q_rope)?,
                wkv_a: up("wkv_a", &a.wkv_a.data)?,
                kv_norm: up("kv_norm", &a.kv_norm.data)?,
                w_o_latent: up("w_o_latent", &w_o_latent)?,
                ffn_norm: up("ffn_norm", &layer.ffn_norm.data)?,
                ffn,
                cache: storage_zeroed(ctx, "latent cache", bytes(c.max_seq_len * c.cache_row()))?,
            });
        }
        let cos_sin = rope::cos_sin_table(c.max_seq_len, c.qk_rope_head_dim, c.rope_theta);
        Ok(Self {
            embed: up("embed", &w.embed.data)?,
            norm: up("norm", &w.norm.data)?,
            lm_head: up("lm_head", &w.lm_head.data)?,
            cos_sin: storage_buffer(ctx, "rope cos/sin", &cos_sin)?,
            scratch: Scratch::new(ctx, &c)?,
            layers,
            config: c,
            len: 0,
        })
    }

    pub fn config(&self) -> &MoeConfig {
        &self.config
    }

    /// Positions already in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets the cached context (the next forward is a prefill).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// The forward pass over `tokens` after the cached positions: logits for every token, the
    /// routing of every token in every MoE layer, and every kernel launched.
    pub async fn forward(
        &mut self,
        ctx: &GpuContext,
        tokens: &[u32],
    ) -> Result<(ForwardOutput, Vec<KernelLaunch>), ModelError> {
        let c = self.config.clone();
        check_input(&c, tokens, self.len)?;
        let s = &self.scratch;
        let t = tokens.len() as u32;
        let pos0 = self.len as u32;
        let ctx_len = pos0 + t;
        let (d, heads) = (c.hidden as u32, c.heads as u32);
        let (kvr, rope_d, row) = (
            c.kv_lora_rank as u32,
            c.qk_rope_head_dim as u32,
            c.cache_row() as u32,
        );
        ctx.queue
            .write_buffer(&s.token_ids, 0, bytemuck::cast_slice(tokens));

        let dense = |width: u32| rms_norm::RmsNormParams::dense(t, width, c.rms_eps);
        let mut e = Eager::new(ctx);
        e.run("embed", "embed", |pass| {
            embed::dispatch(
                ctx,
                pass,
                &self.embed,
                &s.token_ids,
                &s.x,
                embed::EmbedParams {
                    tokens: t,
                    hidden: d,
                    vocab: c.vocab_size as u32,
                    _pad: 0,
                },
            )
        })?;

        let mut routing: Vec<Vec<Routing>> = vec![Vec::new(); tokens.len()];
        for (i, l) in self.layers.iter().enumerate() {
            e.layer = Some(i);
            // --- MLA ---
            e.rms_norm("attn_norm", &s.x, &l.attn_norm, &s.h, dense(d))?;
            e.linear(
                "attn.wq_a",
                &l.wq_a,
                &s.h,
                &s.cq_raw,
                t,
                c.q_lora_rank as u32,
                d,
            )?;
            e.rms_norm(
                "attn.q_norm",
                &s.cq_raw,
                &l.q_norm,
                &s.cq,
                dense(c.q_lora_rank as u32),
            )?;
            let qr = c.q_lora_rank as u32;
            e.linear(
                "attn.w_q_latent",
                &l.w_q_latent,
                &s.cq,
                &s.q_latent,
                t,
                heads * kvr,
                qr,
            )?;
            e.linear(
                "attn.w_q_rope",
                &l.w_q_rope,
                &s.cq,
                &s.q_rope,
                t,
                heads * rope_d,
                qr,
            )?;
            e.run("rope", "attn.q_rope", |pass| {
                rope::dispatch(
                    ctx,
                    pass,
                    &s.q_rope,
                    &self.cos_sin,
                    rope::RopeParams {
                        tokens: t,
                        count: heads,
                        dim: rope_d,
                        row_stride: heads * rope_d,
                        offset: 0,
                        vec_stride: rope_d,
                        pos0,
                        _pad: 0,
                    },
                )
            })?;
            e.linear("attn.wkv_a", &l.wkv_a, &s.h, &s.kv, t, row, d)?;
            // The first kv_lora_rank values of each [c_kv | k_rope] row.
            let kv_rows = rms_norm::RmsNormParams {
                in_stride: row,
                ..dense(kvr)
            };
            e.rms_norm("attn.kv_norm", &s.kv, &l.kv_norm, &s.c_kv, kv_rows)?;
            e.run("rope", "attn.k_rope", |pass| {
                rope::dispatch(
                    ctx,
                    pass,
                    &s.kv,
                    &self.cos_sin,
                    rope::RopeParams {
                        tokens: t,
                        count: 1,
                        dim: rope_d,
                        row_stride: row,
                        offset: kvr,
                        vec_stride: 0,
                        pos0,
                        _pad: 0,
                    },
                )
            })?;
            // The copies and concatenations that the fused path removes: query parts into
            // [q_latent | q_rope] per head, this step's [c_kv | k_rope] into the cache.
            let rows = |rows, width, src_base, src_stride, dst_base, dst_stride| {
                copy_rows::CopyRowsParams {
                    rows,
                    width,
                    src_base,
                    src_stride,
                    dst_base,
                    dst_stride,
                    _pad: [0; 2],
                }
            };
            e.copy(
                "attn.concat q_latent",
                &s.q_latent,
                &s.q_cat,
                rows(t * heads, kvr, 0, kvr, 0, row),
            )?;
            e.copy(
                "attn.concat q_rope",
                &s.q_rope,
                &s.q_cat,
                rows(t * heads, rope_d, 0, rope_d, kvr, row),
            )?;
            e.copy(
                "attn.cache c_kv",
                &s.c_kv,
                &l.cache,
                rows(t, kvr, 0, kvr, pos0 * row, row),
            )?;
            e.copy(
                "attn.cache k_rope",
                &s.kv,
                &l.cache,
                rows(t, rope_d, kvr, row, pos0 * row + kvr, row),
            )?;
            e.run("mla_scores", "attn.scores", |pass| {
                mla_scores::dispatch(
                    ctx,
                    pass,
                    &s.q_cat,
                    &l.cache,
                    &s.scores,
                    mla_scores::MlaScoresParams {
                        tokens: t,
                        heads,
                        ctx: ctx_len,
                        row,
                        pos0,
                        scale: c.softmax_scale(),
                        _pad: [0; 2],
                    },
                )
            })?;
            e.run("softmax", "attn.softmax", |pass| {
                softmax::dispatch(
                    ctx,
                    pass,
                    &s.scores,
                    softmax::SoftmaxParams::causal(t, heads, pos0),
                )
            })?;
            e.run("mla_values", "attn.values", |pass| {
                mla_values::dispatch(
                    ctx,
                    pass,
                    &s.scores,
                    &l.cache,
                    &s.o_latent,
                    mla_values::MlaValuesParams {
                        tokens: t,
                        heads,
                        ctx: ctx_len,
                        row,
                        latent: kvr,
                        _pad: [0; 3],
                    },
                )
            })?;
            e.linear(
                "attn.w_o_latent",
                &l.w_o_latent,
                &s.o_latent,
                &s.sub_out,
                t,
                d,
                heads * kvr,
            )?;
            e.add("attn.residual", &s.x, &s.sub_out, t * d)?;

            // --- FFN ---
            e.rms_norm("ffn_norm", &s.x, &l.ffn_norm, &s.h, dense(d))?;
            match &l.ffn {
                GpuFeedForward::Dense(f) => e.swiglu("ffn", f, s, &s.h, &s.sub_out, t)?,
                GpuFeedForward::Moe {
                    router,
                    bias,
                    bias_host,
                    experts,
                    shared,
                } => {
                    let n_e = c.routed_experts as u32;
                    let k = c.experts_per_token as u32;
                    e.linear("moe.router", router, &s.h, &s.router_logits, t, n_e, d)?;
                    match c.gate_function {
                        GateFunction::Sigmoid => e.run("sigmoid", "moe.gate", |pass| {
                            sigmoid::dispatch(
                                ctx,
                                pass,
                                &s.router_logits,
                                &s.router_scores,
                                t * n_e,
                            )
                        })?,
                        GateFunction::Softmax => {
                            let all = rows(1, t * n_e, 0, 0, 0, 0);
                            e.copy("moe.gate copy", &s.router_logits, &s.router_scores, all)?;
                            e.run("softmax", "moe.gate", |pass| {
                                softmax::dispatch(
                                    ctx,
                                    pass,
                                    &s.router_scores,
                                    softmax::SoftmaxParams::full(t, n_e),
                                )
                            })?
                        }
                    }
                    e.run("moe_topk", "moe.topk", |pass| {
                        moe_topk::dispatch(
                            ctx,
                            pass,
                            &s.router_scores,
                            bias,
                            &s.topk_ids,
                            &s.topk_gates,
                            moe_topk::MoeTopkParams {
                                tokens: t,
                                experts: n_e,
                                k,
                                routed_scaling: c.routed_scaling,
                            },
                        )
                    })?;
                    // The host round trip of eager MoE: which tokens go to which expert.
                    let n = (t * k) as usize;
                    let ids: Vec<u32> = read_back(ctx, &s.topk_ids).await?[..n].to_vec();
                    let gates: Vec<f32> = read_back(ctx, &s.topk_gates).await?[..n].to_vec();
                    let scores: Vec<f32> =
                        read_back(ctx, &s.router_scores).await?[..(t * n_e) as usize].to_vec();
                    let plan = RoutePlan::new(&ids, &gates, c.routed_experts, k as usize);
                    for (tok, r) in routing.iter_mut().enumerate() {
                        r.push(routing_of(&ids, &gates, &scores, bias_host, tok, &c));
                    }
                    ctx.queue
                        .write_buffer(&s.route_index, 0, bytemuck::cast_slice(&plan.token));
                    ctx.queue
                        .write_buffer(&s.route_gates, 0, bytemuck::cast_slice(&plan.gate));

                    e.swiglu("moe.shared", shared, s, &s.h, &s.sub_out, t)?;
                    for (ex, f) in experts.iter().enumerate() {
                        let (base, count) = plan.range(ex);
                        if count == 0 {
                            continue;
                        }
                        let op = format!("moe.expert{ex}");
                        let p = gather_rows::GatherParams {
                            rows: count,
                            width: d,
                            base,
                            _pad: 0,
                        };
                        e.run("gather_rows", &format!("{op}.dispatch"), |pass| {
                            gather_rows::dispatch(ctx, pass, &s.h, &s.route_index, &s.expert_in, p)
                        })?;
                        e.swiglu(&op, f, s, &s.expert_in, &s.expert_out, count)?;
                        let p = scatter_add::ScatterParams {
                            rows: count,
                            width: d,
                            base,
                            _pad: 0,
                        };
                        e.run("scatter_add", &format!("{op}.combine"), |pass| {
                            scatter_add::dispatch(
                                ctx,
                                pass,
                                &s.expert_out,
                                &s.route_index,
                                &s.route_gates,
                                &s.sub_out,
                                p,
                            )
                        })?;
                    }
                }
            }
            e.add("ffn.residual", &s.x, &s.sub_out, t * d)?;
        }

        e.layer = None;
        e.rms_norm("norm", &s.x, &self.norm, &s.h, dense(d))?;
        let v = c.vocab_size as u32;
        e.linear("lm_head", &self.lm_head, &s.h, &s.logits, t, v, d)?;
        let logits: Vec<f32> = read_back(ctx, &s.logits).await?[..(t * v) as usize].to_vec();
        self.len += tokens.len();
        Ok((ForwardOutput { logits, routing }, e.trace))
    }
}

/// Absorbs W_UK into the query and W_UV into the output projection, in f64:
/// `w_q_latent[h·kvr + c, j] = Σ_i W_UK_h[i, c] · wq_b[h·qk + i, j]` (i < qk_nope),
/// `w_q_rope[h·rope + r, j] = wq_b[h·qk + nope + r, j]`,
/// `w_o_latent[o, h·kvr + c] = Σ_i wo[o, h·v + i] · W_UV_h[i, c]` (i < v_head).
fn absorb(c: &MoeConfig, a: &super::weights::Attention) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (h_n, nope, rope_d, v_d, kvr, qr, d) = (
        c.heads,
        c.qk_nope_head_dim,
        c.qk_rope_head_dim,
        c.v_head_dim,
        c.kv_lora_rank,
        c.q_lora_rank,
        c.hidden,
    );
    let qk = c.qk_head_dim();
    let per_head = nope + v_d;
    let wq_b = &a.wq_b.data;
    let wkv_b = &a.wkv_b.data;
    let wo = &a.wo.data;
    let mut q_latent = vec![0.0f32; h_n * kvr * qr];
    let mut q_rope = vec![0.0f32; h_n * rope_d * qr];
    let mut o_latent = vec![0.0f32; d * h_n * kvr];
    for h in 0..h_n {
        for cc in 0..kvr {
            for j in 0..qr {
                let sum: f64 = (0..nope)
                    .map(|i| {
                        f64::from(wkv_b[(h * per_head + i) * kvr + cc])
                            * f64::from(wq_b[(h * qk + i) * qr + j])
                    })
                    .sum();
                q_latent[(h * kvr + cc) * qr + j] = sum as f32;
            }
        }
        for r in 0..rope_d {
            let src = (h * qk + nope + r) * qr;
            q_rope[(h * rope_d + r) * qr..][..qr].copy_from_slice(&wq_b[src..src + qr]);
        }
        for o in 0..d {
            for cc in 0..kvr {
                let sum: f64 = (0..v_d)
                    .map(|i| {
                        f64::from(wo[o * h_n * v_d + h * v_d + i])
                            * f64::from(wkv_b[(h * per_head + nope + i) * kvr + cc])
                    })
                    .sum();
                o_latent[o * h_n * kvr + h * kvr + cc] = sum as f32;
            }
        }
    }
    (q_latent, q_rope, o_latent)
}

/// The tokens of each expert, contiguous by expert: slot `offset[e]..offset[e+1]` holds the
/// (token, gate) pairs routed to expert e.
struct RoutePlan {
    token: Vec<u32>,
    gate: Vec<f32>,
    offset: Vec<u32>,
}

impl RoutePlan {
    fn new(ids: &[u32], gates: &[f32], experts: usize, k: usize) -> Self {
        let mut token = Vec::with_capacity(ids.len());
        let mut gate = Vec::with_capacity(ids.len());
        let mut offset = Vec::with_capacity(experts + 1);
        for e in 0..experts as u32 {
            offset.push(token.len() as u32);
            for (slot, &id) in ids.iter().enumerate() {
                if id == e {
                    token.push((slot / k) as u32);
                    gate.push(gates[slot]);
                }
            }
        }
        offset.push(token.len() as u32);
        Self {
            token,
            gate,
            offset,
        }
    }

    /// (first slot, number of tokens) of expert `e`.
    fn range(&self, e: usize) -> (u32, u32) {
        (self.offset[e], self.offset[e + 1] - self.offset[e])
    }
}

fn routing_of(
    ids: &[u32],
    gates: &[f32],
    scores: &[f32],
    bias: &[f32],
    tok: usize,
    c: &MoeConfig,
) -> Routing {
    let k = c.experts_per_token;
    let experts: Vec<usize> = ids[tok * k..(tok + 1) * k]
        .iter()
        .map(|&e| e as usize)
        .collect();
    let row = &scores[tok * c.routed_experts..(tok + 1) * c.routed_experts];
    let kth = experts
        .iter()
        .map(|&e| row[e] + bias[e])
        .fold(f32::INFINITY, f32::min);
    let best_other = (0..c.routed_experts)
        .filter(|e| !experts.contains(e))
        .map(|e| row[e] + bias[e])
        .fold(f32::NEG_INFINITY, f32::max);
    Routing {
        experts,
        gates: gates[tok * k..(tok + 1) * k].to_vec(),
        margin: kth - best_other,
    }
}

fn bytes(floats: usize) -> u64 {
    4 * floats as u64
}

impl Scratch {
    fn new(ctx: &GpuContext, c: &MoeConfig) -> Result<Self, ModelError> {
        let t = c.max_seq_len;
        let inter = c
            .dense_intermediate
            .max(c.shared_experts * c.expert_intermediate)
            .max(c.expert_intermediate);
        let z = |name: &str, floats: usize| storage_zeroed(ctx, name, bytes(floats));
        let tk = t * c.experts_per_token;
        Ok(Self {
            token_ids: z("token ids", t)?,
            x: z("x (residual)", t * c.hidden)?,
            h: z("h (normed)", t * c.hidden)?,
            cq_raw: z("c_q raw", t * c.q_lora_rank)?,
            cq: z("c_q", t * c.q_lora_rank)?,
            q_latent: z("q latent", t * c.heads * c.kv_lora_rank)?,
            q_rope: z("q rope", t * c.heads * c.qk_rope_head_dim)?,
            kv: z("kv", t * c.cache_row())?,
            c_kv: z("c_kv", t * c.kv_lora_rank)?,
            q_cat: z("q concat", t * c.heads * c.cache_row())?,
            scores: z("attention scores", t * c.heads * c.max_seq_len)?,
            o_latent: z("o latent", t * c.heads * c.kv_lora_rank)?,
            sub_out: z("block output", t * c.hidden)?,
            gate: z("ffn gate", t * inter)?,
            up: z("ffn up", t * inter)?,
            act: z("ffn act", t * inter)?,
            router_logits: z("router logits", t * c.routed_experts)?,
            router_scores: z("router scores", t * c.routed_experts)?,
            topk_ids: z("top-k ids", tk)?,
            topk_gates: z("top-k gates", tk)?,
            route_index: z("route index", tk)?,
            route_gates: z("route gates", tk)?,
            expert_in: z("expert input", t * c.hidden)?,
            expert_out: z("expert output", t * c.hidden)?,
            logits: z("logits", t * c.vocab_size)?,
        })
    }
}

/// Launches kernels one submission each and records them.
struct Eager<'a> {
    ctx: &'a GpuContext,
    layer: Option<usize>,
    trace: Vec<KernelLaunch>,
}

impl<'a> Eager<'a> {
    fn new(ctx: &'a GpuContext) -> Self {
        Self {
            ctx,
            layer: None,
            trace: Vec::new(),
        }
    }

    fn run(
        &mut self,
        kernel: &'static str,
        op: &str,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>) -> Result<u64, KernelError>,
    ) -> Result<(), ModelError> {
        let mut encoder = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(kernel),
            });
        let bytes = {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(kernel),
                timestamp_writes: None,
            });
            record(&mut pass)?
        };
        self.ctx.queue.submit([encoder.finish()]);
        self.trace.push(KernelLaunch {
            kernel,
            op: op.to_owned(),
            layer: self.layer,
            bytes,
        });
        Ok(())
    }

    /// `y[t, m] = x[t, k] · W[m, k]ᵀ`: gemv for one token, matmul for several.
    #[allow(clippy::too_many_arguments)]
    fn linear(
        &mut self,
        op: &str,
        w: &wgpu::Buffer,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        t: u32,
        m: u32,
        k: u32,
    ) -> Result<(), ModelError> {
        let ctx = self.ctx;
        if t == 1 {
            self.run("gemv", op, |pass| {
                gemv::dispatch(ctx, pass, w, x, y, gemv::GemvShape::new(m, k))
            })
        } else {
            self.run("matmul", op, |pass| {
                matmul::dispatch(
                    ctx,
                    pass,
                    w,
                    x,
                    y,
                    matmul::MatmulParams { t, m, k, _pad: 0 },
                )
            })
        }
    }

    fn rms_norm(
        &mut self,
        op: &str,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        y: &wgpu::Buffer,
        p: rms_norm::RmsNormParams,
    ) -> Result<(), ModelError> {
        let ctx = self.ctx;
        self.run("rms_norm", op, |pass| {
            rms_norm::dispatch(ctx, pass, x, w, y, p)
        })
    }

    fn copy(
        &mut self,
        op: &str,
        src: &wgpu::Buffer,
        dst: &wgpu::Buffer,
        p: copy_rows::CopyRowsParams,
    ) -> Result<(), ModelError> {
        let ctx = self.ctx;
        self.run("copy_rows", op, |pass| {
            copy_rows::dispatch(ctx, pass, src, dst, p)
        })
    }

    fn add(
        &mut self,
        op: &str,
        a: &wgpu::Buffer,
        b: &wgpu::Buffer,
        n: u32,
    ) -> Result<(), ModelError> {
        let ctx = self.ctx;
        self.run("add", op, |pass| add::dispatch(ctx, pass, a, b, n))
    }

    /// `out = w_down · (silu(w_gate·x) ⊙ w_up·x)` for `t` rows of `x`.
    fn swiglu(
        &mut self,
        op: &str,
        f: &GpuFfn,
        s: &Scratch,
        x: &wgpu::Buffer,
        out: &wgpu::Buffer,
        t: u32,
    ) -> Result<(), ModelError> {
        let ctx = self.ctx;
        let d = f.w_down.size() as u32 / 4 / f.inter;
        self.linear(
            &format!("{op}.w_gate"),
            &f.w_gate,
            x,
            &s.gate,
            t,
            f.inter,
            d,
        )?;
        self.linear(&format!("{op}.w_up"), &f.w_up, x, &s.up, t, f.inter, d)?;
        self.run("silu_mul", &format!("{op}.silu_mul"), |pass| {
            silu_mul::dispatch(ctx, pass, &s.gate, &s.up, &s.act, t * f.inter)
        })?;
        self.linear(
            &format!("{op}.w_down"),
            &f.w_down,
            &s.act,
            out,
            t,
            d,
            f.inter,
        )
    }
}
