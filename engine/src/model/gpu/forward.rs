//! One forward pass, recorded kernel by kernel. Each `Optimizations` switch picks between the
//! eager kernels and their fused replacement at exactly one place below; the math is the same
//! either way (the tests compare every switch with the reference).

use crate::gpu::{read_back_many, GpuContext};
use crate::kernels::copy_rows::CopyRowsParams;
use crate::kernels::gemv::{GemvLayout, GemvShape};
use crate::kernels::{
    add, add_rms_norm, copy_rows, embed, fp8_round_trip, gate_up_swiglu, gather_rows, gemv,
    mla_scores, mla_split_k, mla_values, moe_combine, moe_dispatch, moe_route, moe_topk,
    qkv_rope_scale, rms_norm, rope, scatter_add, sigmoid, silu_mul, softmax,
};
use crate::plan::Optimizations;
use crate::quant::Format;

use super::super::reference::{check_input, ForwardOutput, Routing};
use super::super::{GateFunction, ModelError, MoeConfig};
use super::executor::Executor;
use super::{GpuFeedForward, GpuFfn, GpuLayer, GpuModel, GpuMoe, RouteBuffers, Scratch, StepTrace};

/// The attention sizes of the config as the kernels take them: hidden, heads, the query and KV
/// latent ranks, the RoPE width, a cache row `[latent | rope]` and a token's query row (all heads).
#[derive(Clone, Copy)]
struct MlaDims {
    d: u32,
    heads: u32,
    qr: u32,
    kvr: u32,
    rope_d: u32,
    row: u32,
    q_row: u32,
}

impl MlaDims {
    fn of(c: &MoeConfig) -> Self {
        let (heads, row) = (c.heads as u32, c.cache_row() as u32);
        MlaDims {
            d: c.hidden as u32,
            heads,
            qr: c.q_lora_rank as u32,
            kvr: c.kv_lora_rank as u32,
            rope_d: c.qk_rope_head_dim as u32,
            row,
            q_row: heads * row,
        }
    }
}

/// Where the vectors RoPE rotates sit in each token's row: `count` of them, the first at
/// `offset`, `vec_stride` apart, in rows `row_stride` wide (all in floats).
#[derive(Clone, Copy)]
struct RopeVectors {
    count: u32,
    row_stride: u32,
    offset: u32,
    vec_stride: u32,
}

impl GpuModel {
    /// The forward pass over `tokens` after the cached positions: logits for every token, the
    /// routing of every token in every MoE layer, and every kernel launched.
    pub async fn forward(
        &mut self,
        ctx: &GpuContext,
        tokens: &[u32],
    ) -> Result<(ForwardOutput, StepTrace), ModelError> {
        check_input(&self.config, tokens, self.len)?;
        let o = self.optimizations;
        let c = &self.config;
        let s = &self.scratch;
        let t = tokens.len() as u32;
        ctx.queue
            .write_buffer(&s.token_ids, 0, bytemuck::cast_slice(tokens));
        let mut step = Step {
            ctx,
            c,
            s,
            o,
            cos_sin: &self.cos_sin,
            format: self.format,
            t,
            pos0: self.len as u32,
            e: Executor::new(ctx, o.recorded_submission, self.profiler.as_mut()),
        };

        step.e.run("embed", "embed", |pass| {
            embed::dispatch(
                ctx,
                pass,
                &self.embed,
                &s.token_ids,
                &s.x,
                embed::EmbedParams {
                    tokens: t,
                    hidden: c.hidden as u32,
                    vocab: c.vocab_size as u32,
                    _pad: 0,
                },
            )
        })?;
        for (i, l) in self.layers.iter().enumerate() {
            step.e.layer = Some(i);
            // The residual of the previous layer's FFN joins the stream here.
            step.norm("attn_norm", i > 0, &l.attn_norm)?;
            step.attention(l)?;
            step.norm("ffn_norm", true, &l.ffn_norm)?;
            match &l.ffn {
                GpuFeedForward::Dense(f) => step.ffn("ffn", f, 0, &s.h, &s.sub_out, t)?,
                GpuFeedForward::Moe(m) => step.moe(m).await?,
            }
        }
        step.e.layer = None;
        step.norm("norm", true, &self.norm)?;
        let (v, d) = (c.vocab_size as u32, c.hidden as u32);
        step.linear("lm_head", &self.lm_head, &s.h, &s.logits, v, d, Format::F32)?;

        let trace = step.e.finish().await?;
        let (logits, routing) = read_outputs(ctx, c, s, &self.layers, tokens.len()).await?;
        self.len += tokens.len();
        Ok((ForwardOutput { logits, routing }, trace))
    }
}

/// One read-back, after the step's work: the logits of `tokens` tokens and every MoE layer's
/// routing of them.
async fn read_outputs(
    ctx: &GpuContext,
    c: &MoeConfig,
    s: &Scratch,
    layers: &[GpuLayer],
    tokens: usize,
) -> Result<(Vec<f32>, Vec<Vec<Routing>>), ModelError> {
    // One read-back for the logits and every MoE layer's routing.
    let mut reads = vec![(&s.logits, 4 * tokens as u64 * c.vocab_size as u64)];
    let routes: Vec<(&RouteBuffers, &[f32])> = layers
        .iter()
        .filter_map(|l| match &l.ffn {
            GpuFeedForward::Moe(m) => Some((&m.route, m.bias_host.as_slice())),
            GpuFeedForward::Dense(_) => None,
        })
        .collect();
    let (n_e, k) = (c.routed_experts as u64, c.experts_per_token as u64);
    for (r, _) in &routes {
        let tk = 4 * tokens as u64 * k;
        reads.extend([
            (&r.ids, tk),
            (&r.gates, tk),
            (&r.scores, 4 * tokens as u64 * n_e),
        ]);
    }
    let data = read_back_many(ctx, &reads).await?;
    let logits: Vec<f32> = bytemuck::pod_collect_to_vec(&data[0]);
    let mut routing: Vec<Vec<Routing>> = vec![Vec::new(); tokens];
    for ((_, bias), chunk) in routes.iter().zip(data[1..].chunks_exact(3)) {
        let ids: Vec<u32> = bytemuck::pod_collect_to_vec(&chunk[0]);
        let gates: Vec<f32> = bytemuck::pod_collect_to_vec(&chunk[1]);
        let scores: Vec<f32> = bytemuck::pod_collect_to_vec(&chunk[2]);
        for (tok, r) in routing.iter_mut().enumerate() {
            r.push(routing_of(&ids, &gates, &scores, bias, tok, c));
        }
    }
    Ok((logits, routing))
}

/// The state of one forward while it records.
struct Step<'a> {
    ctx: &'a GpuContext,
    c: &'a MoeConfig,
    s: &'a Scratch,
    o: Optimizations,
    cos_sin: &'a wgpu::Buffer,
    /// The format of the block projections.
    format: Format,
    t: u32,
    pos0: u32,
    e: Executor<'a>,
}

impl Step<'_> {
    /// `h = rms_norm(x)`, after `x += sub_out` when the block output is pending
    /// (fuse_residual_rmsnorm: one kernel for both).
    fn norm(&mut self, op: &str, residual: bool, w: &wgpu::Buffer) -> Result<(), ModelError> {
        let (ctx, s, t) = (self.ctx, self.s, self.t);
        let d = self.c.hidden as u32;
        let eps = self.c.rms_eps;
        if residual && self.o.fuse_residual_rmsnorm {
            let p = add_rms_norm::AddRmsNormParams {
                rows: t,
                width: d,
                eps,
                _pad: 0,
            };
            return self
                .e
                .run("add_rms_norm", &format!("residual+{op}"), |pass| {
                    add_rms_norm::dispatch(ctx, pass, [&s.x, &s.sub_out, w, &s.h], p)
                });
        }
        if residual {
            self.e.run("add", "residual", |pass| {
                add::dispatch(ctx, pass, &s.x, &s.sub_out, t * d)
            })?;
        }
        let p = rms_norm::RmsNormParams::dense(t, d, eps);
        self.e.run("rms_norm", op, |pass| {
            rms_norm::dispatch(ctx, pass, &s.x, w, &s.h, p)
        })
    }

    /// `y[t] = W · x[t]` for contiguous rows, W in `format`.
    #[allow(clippy::too_many_arguments)]
    fn linear(
        &mut self,
        op: &str,
        w: &wgpu::Buffer,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        m: u32,
        k: u32,
        format: Format,
    ) -> Result<(), ModelError> {
        let shape = GemvShape::new(m, k).with_format(format);
        self.linear_layout(op, [w, x, y, x], shape, GemvLayout::rows(shape, self.t))
    }

    fn linear_layout(
        &mut self,
        op: &str,
        buffers: [&wgpu::Buffer; 4],
        shape: GemvShape,
        layout: GemvLayout,
    ) -> Result<(), ModelError> {
        let ctx = self.ctx;
        self.e.run("gemv", op, |pass| {
            gemv::dispatch_layout(ctx, pass, buffers, shape, layout)
        })
    }

    fn copy(
        &mut self,
        op: &str,
        src: &wgpu::Buffer,
        dst: &wgpu::Buffer,
        p: CopyRowsParams,
    ) -> Result<(), ModelError> {
        let ctx = self.ctx;
        self.e.run("copy_rows", op, |pass| {
            copy_rows::dispatch(ctx, pass, src, dst, p)
        })
    }

    /// RoPE in place on `count` vectors per token row.
    fn rope(&mut self, op: &str, x: &wgpu::Buffer, v: RopeVectors) -> Result<(), ModelError> {
        let (ctx, cos_sin) = (self.ctx, self.cos_sin);
        let p = rope::RopeParams {
            tokens: self.t,
            count: v.count,
            dim: self.c.qk_rope_head_dim as u32,
            row_stride: v.row_stride,
            offset: v.offset,
            vec_stride: v.vec_stride,
            pos0: self.pos0,
            _pad: 0,
        };
        self.e
            .run("rope", op, |pass| rope::dispatch(ctx, pass, x, cos_sin, p))
    }

    /// Absorbed MLA: writes the attention block's output to `sub_out`.
    fn attention(&mut self, l: &GpuLayer) -> Result<(), ModelError> {
        self.attention_queries(l)?;
        self.attention_keys(l)?;
        self.attention_over_cache(l)?;
        let (c, s) = (self.c, self.s);
        let (d, heads, kvr) = (c.hidden as u32, c.heads as u32, c.kv_lora_rank as u32);
        self.linear(
            "attn.w_o_latent",
            &l.w_o_latent,
            &s.o_latent,
            &s.sub_out,
            d,
            heads * kvr,
            self.format,
        )
    }

    /// The queries, `q_cat[t, h] = [q_latent | rope(q_rope)]`, scaled by 1/sqrt(d) when fused.
    fn attention_queries(&mut self, l: &GpuLayer) -> Result<(), ModelError> {
        let (ctx, c, s, o, t) = (self.ctx, self.c, self.s, self.o, self.t);
        let f = self.format;
        let MlaDims {
            d,
            heads,
            qr,
            kvr,
            row,
            q_row,
            ..
        } = MlaDims::of(c);
        self.linear("attn.wq_a", &l.wq_a, &s.h, &s.cq_raw, qr, d, f)?;
        let p = rms_norm::RmsNormParams::dense(t, qr, c.rms_eps);
        self.e.run("rms_norm", "attn.q_norm", |pass| {
            rms_norm::dispatch(ctx, pass, &s.cq_raw, &l.q_norm, &s.cq, p)
        })?;

        // Queries: `q_cat[t, h] = [q_latent | rope(q_rope)]`, scaled by 1/sqrt(d) when fused.
        if o.fuse_qkv_rope_scale {
            let out = if o.fuse_mla_copy_concat {
                &s.q_cat
            } else {
                &s.q_proj
            };
            self.qkv_rope_scale(
                "attn.q",
                &l.w_q_cat,
                &s.cq,
                out,
                q_row,
                qr,
                c.softmax_scale(),
            )?;
            if !o.fuse_mla_copy_concat {
                self.copy(
                    "attn.copy q",
                    &s.q_proj,
                    &s.q_cat,
                    CopyRowsParams::contiguous(t, q_row),
                )?;
            }
        } else {
            // One projection writes each head's [latent | rope] row, and RoPE rotates the rope
            // parts in place. Unfused, the projection has its own buffer and two copies build
            // the concatenation, as an eager `torch.cat` of the split halves does.
            let out = if o.fuse_mla_copy_concat {
                &s.q_cat
            } else {
                &s.q_proj
            };
            self.linear("attn.w_q_cat", &l.w_q_cat, &s.cq, out, q_row, qr, f)?;
            self.rope(
                "attn.q_rope",
                out,
                RopeVectors {
                    count: heads,
                    row_stride: q_row,
                    offset: kvr,
                    vec_stride: row,
                },
            )?;
            if !o.fuse_mla_copy_concat {
                self.concat_query_parts()?;
            }
        }
        Ok(())
    }

    /// The eager `torch.cat`: each head's latent and rope parts copied from the projection's
    /// buffer into the concatenated query.
    fn concat_query_parts(&mut self) -> Result<(), ModelError> {
        let (s, t) = (self.s, self.t);
        let MlaDims {
            heads,
            kvr,
            rope_d,
            row,
            ..
        } = MlaDims::of(self.c);
        self.copy(
            "attn.concat q_latent",
            &s.q_proj,
            &s.q_cat,
            CopyRowsParams {
                src_base: 0,
                src_stride: row,
                dst_base: 0,
                dst_stride: row,
                ..CopyRowsParams::contiguous(t * heads, kvr)
            },
        )?;
        self.copy(
            "attn.concat q_rope",
            &s.q_proj,
            &s.q_cat,
            CopyRowsParams {
                src_base: kvr,
                src_stride: row,
                dst_base: kvr,
                dst_stride: row,
                ..CopyRowsParams::contiguous(t * heads, rope_d)
            },
        )
    }

    /// This step's keys, `[kv_norm(c_kv) | rope(k_rope)]` rows, into the latent cache at pos0.
    fn attention_keys(&mut self, l: &GpuLayer) -> Result<(), ModelError> {
        let (ctx, c, s, o, t, pos0) = (self.ctx, self.c, self.s, self.o, self.t, self.pos0);
        let f = self.format;
        let MlaDims {
            d,
            kvr,
            rope_d,
            row,
            ..
        } = MlaDims::of(c);
        // Keys: this step's `[kv_norm(c_kv) | rope(k_rope)]` rows into the cache at pos0.
        if o.fuse_qkv_rope_scale {
            self.qkv_rope_scale("attn.kv", &l.wkv_a, &s.h, &s.kv, row, d, 1.0)?;
        } else {
            self.linear("attn.wkv_a", &l.wkv_a, &s.h, &s.kv, row, d, f)?;
            self.rope(
                "attn.k_rope",
                &s.kv,
                RopeVectors {
                    count: 1,
                    row_stride: row,
                    offset: kvr,
                    vec_stride: 0,
                },
            )?;
        }
        if o.fuse_mla_copy_concat {
            let p = rms_norm::RmsNormParams {
                in_stride: row,
                out_stride: row,
                out_offset: pos0 * row,
                tail: rope_d,
                ..rms_norm::RmsNormParams::dense(t, kvr, c.rms_eps)
            };
            self.e.run("rms_norm", "attn.kv_norm→cache", |pass| {
                rms_norm::dispatch(ctx, pass, &s.kv, &l.kv_norm, &l.cache, p)
            })?;
        } else {
            let p = rms_norm::RmsNormParams {
                in_stride: row,
                ..rms_norm::RmsNormParams::dense(t, kvr, c.rms_eps)
            };
            self.e.run("rms_norm", "attn.kv_norm", |pass| {
                rms_norm::dispatch(ctx, pass, &s.kv, &l.kv_norm, &s.c_kv, p)
            })?;
            self.copy(
                "attn.cache c_kv",
                &s.c_kv,
                &l.cache,
                CopyRowsParams {
                    src_base: 0,
                    src_stride: kvr,
                    dst_base: pos0 * row,
                    dst_stride: row,
                    ..CopyRowsParams::contiguous(t, kvr)
                },
            )?;
            self.copy(
                "attn.cache k_rope",
                &s.kv,
                &l.cache,
                CopyRowsParams {
                    src_base: kvr,
                    src_stride: row,
                    dst_base: pos0 * row + kvr,
                    dst_stride: row,
                    ..CopyRowsParams::contiguous(t, rope_d)
                },
            )?;
        }
        Ok(())
    }

    /// Attention of the queries over the latent cache, into `o_latent`.
    fn attention_over_cache(&mut self, l: &GpuLayer) -> Result<(), ModelError> {
        let (ctx, c, s, o, t, pos0) = (self.ctx, self.c, self.s, self.o, self.t, self.pos0);
        let MlaDims {
            heads, kvr, row, ..
        } = MlaDims::of(c);
        // Attention over the latent cache; the query is pre-scaled when fused.
        let scale = if o.fuse_qkv_rope_scale {
            1.0
        } else {
            c.softmax_scale()
        };
        let ctx_len = pos0 + t;
        if o.split_k_attention {
            let p = mla_split_k::MlaSplitKParams {
                tokens: t,
                heads,
                row,
                latent: kvr,
                pos0,
                splits: mla_split_k::MlaSplitKParams::splits_for(ctx_len),
                scale,
                _pad: 0,
            };
            self.e.run("mla_split_k", "attn.split_k", |pass| {
                mla_split_k::dispatch(ctx, pass, [&s.q_cat, &l.cache, &s.partials], p)
            })?;
            self.e
                .run("mla_split_k_reduce", "attn.split_k reduce", |pass| {
                    mla_split_k::dispatch_reduce(ctx, pass, [&s.partials, &s.o_latent], p)
                })?;
        } else {
            let p = mla_scores::MlaScoresParams {
                tokens: t,
                heads,
                ctx: ctx_len,
                row,
                pos0,
                scale,
                _pad: [0; 2],
            };
            self.e.run("mla_scores", "attn.scores", |pass| {
                mla_scores::dispatch(ctx, pass, &s.q_cat, &l.cache, &s.scores, p)
            })?;
            self.e.run("softmax", "attn.softmax", |pass| {
                softmax::dispatch(
                    ctx,
                    pass,
                    &s.scores,
                    softmax::SoftmaxParams::causal(t, heads, pos0),
                )
            })?;
            let p = mla_values::MlaValuesParams {
                tokens: t,
                heads,
                ctx: ctx_len,
                row,
                latent: kvr,
                _pad: [0; 3],
            };
            self.e.run("mla_values", "attn.values", |pass| {
                mla_values::dispatch(ctx, pass, &s.scores, &l.cache, &s.o_latent, p)
            })?;
        }
        Ok(())
    }

    /// One launch of the fused projection + RoPE + scale over every token: rotated rows are the
    /// last qk_rope rows of each cache-row-sized period (a head of `w_q_cat`, or the one KV row).
    #[allow(clippy::too_many_arguments)]
    fn qkv_rope_scale(
        &mut self,
        op: &str,
        w: &wgpu::Buffer,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        m: u32,
        k: u32,
        scale: f32,
    ) -> Result<(), ModelError> {
        let (ctx, cos_sin, format) = (self.ctx, self.cos_sin, self.format);
        let p = qkv_rope_scale::QkvRopeScaleParams {
            m,
            k,
            tokens: self.t,
            pos0: self.pos0,
            x_stride: k / 4,
            y_stride: m,
            rope_from: 0,
            rope_period: self.c.cache_row() as u32,
            rope_dim: self.c.qk_rope_head_dim as u32,
            scale,
            _pad: [0; 2],
        };
        self.e.run("qkv_rope_scale", op, |pass| {
            qkv_rope_scale::dispatch(ctx, pass, [w, x, y, cos_sin], p, format)
        })
    }

    /// `out[r] = w_down · (silu(w_gate·x[r]) ⊙ w_up·x[r])` for `rows` rows, with matrix `expert`
    /// of a stacked FFN.
    fn ffn(
        &mut self,
        op: &str,
        f: &GpuFfn,
        expert: u32,
        x: &wgpu::Buffer,
        out: &wgpu::Buffer,
        rows: u32,
    ) -> Result<(), ModelError> {
        let s = self.s;
        let (d, inter) = (self.c.hidden as u32, f.inter);
        let shape = GemvShape::new(inter, d).with_format(self.format);
        let input = GemvLayout {
            w_offset: expert * 2 * shape.matrix_chunks(),
            ..GemvLayout::rows(shape, rows)
        };
        self.gate_up(op, f, [x, x], shape, input)?;
        let shape = GemvShape::new(d, inter).with_format(self.format);
        let layout = GemvLayout {
            w_offset: expert * shape.matrix_chunks(),
            ..GemvLayout::rows(shape, rows)
        };
        let buffers = [&f.w_down, &s.act, out, &s.act];
        self.linear_layout(&format!("{op}.w_down"), buffers, shape, layout)
    }

    /// `act = silu(gate) ⊙ up` for the rows `layout` names (`[x, meta]` as gemv's), fused or as
    /// gate, up and silu_mul.
    fn gate_up(
        &mut self,
        op: &str,
        f: &GpuFfn,
        [x, meta]: [&wgpu::Buffer; 2],
        shape: GemvShape,
        layout: GemvLayout,
    ) -> Result<(), ModelError> {
        let (ctx, s) = (self.ctx, self.s);
        if self.o.fuse_gate_up_swiglu {
            return self
                .e
                .run("gate_up_swiglu", &format!("{op}.gate_up"), |pass| {
                    gate_up_swiglu::dispatch(
                        ctx,
                        pass,
                        [&f.w_gate_up, x, &s.act, meta],
                        shape,
                        layout,
                    )
                });
        }
        let up_layout = GemvLayout {
            w_offset: layout.w_offset + shape.matrix_chunks(),
            ..layout
        };
        self.linear_layout(
            &format!("{op}.w_gate"),
            [&f.w_gate_up, x, &s.gate, meta],
            shape,
            layout,
        )?;
        self.linear_layout(
            &format!("{op}.w_up"),
            [&f.w_gate_up, x, &s.up, meta],
            shape,
            up_layout,
        )?;
        let n = layout.tokens * shape.m;
        self.e.run("silu_mul", &format!("{op}.silu_mul"), |pass| {
            silu_mul::dispatch(ctx, pass, &s.gate, &s.up, &s.act, n)
        })
    }

    /// The MoE block: routing, the shared expert into `sub_out`, then the routed experts added.
    async fn moe(&mut self, m: &GpuMoe) -> Result<(), ModelError> {
        let (ctx, c, s, t) = (self.ctx, self.c, self.s, self.t);
        let (router, bias, route) = (&m.router, &m.bias, &m.route);
        let (n_e, k, d) = (
            c.routed_experts as u32,
            c.experts_per_token as u32,
            c.hidden as u32,
        );
        if self.o.fuse_moe_route {
            let p = moe_route::MoeRouteParams {
                tokens: t,
                experts: n_e,
                k,
                hidden: d,
                routed_scaling: c.routed_scaling,
                gate: moe_route::MoeRouteParams::gate_code(c.gate_function),
                _pad: [0; 2],
            };
            self.e.run("moe_route", "moe.route", |pass| {
                moe_route::dispatch(
                    ctx,
                    pass,
                    [router, &s.h, bias, &route.scores, &route.ids, &route.gates],
                    p,
                )
            })?;
        } else {
            self.linear(
                "moe.router",
                router,
                &s.h,
                &s.router_logits,
                n_e,
                d,
                Format::F32,
            )?;
            match c.gate_function {
                GateFunction::Sigmoid => self.e.run("sigmoid", "moe.gate", |pass| {
                    sigmoid::dispatch(ctx, pass, &s.router_logits, &route.scores, t * n_e)
                })?,
                GateFunction::Softmax => {
                    self.copy(
                        "moe.gate copy",
                        &s.router_logits,
                        &route.scores,
                        CopyRowsParams::contiguous(1, t * n_e),
                    )?;
                    self.e.run("softmax", "moe.gate", |pass| {
                        softmax::dispatch(
                            ctx,
                            pass,
                            &route.scores,
                            softmax::SoftmaxParams::full(t, n_e),
                        )
                    })?
                }
            }
            let p = moe_topk::MoeTopkParams {
                tokens: t,
                experts: n_e,
                k,
                routed_scaling: c.routed_scaling,
            };
            self.e.run("moe_topk", "moe.topk", |pass| {
                moe_topk::dispatch(ctx, pass, &route.scores, bias, &route.ids, &route.gates, p)
            })?;
        }
        self.ffn("moe.shared", &m.shared, 0, &s.h, &s.sub_out, t)?;
        if self.o.fuse_moe_dispatch_combine {
            self.experts_on_gpu(&m.experts, route)
        } else {
            self.experts_from_host(&m.experts, route).await
        }
    }

    /// fuse_moe_dispatch_combine: records, one grouped launch per expert projection over all
    /// (token, choice) slots, and the combine. Nothing returns to the host.
    fn experts_on_gpu(&mut self, f: &GpuFfn, route: &RouteBuffers) -> Result<(), ModelError> {
        let (ctx, c, s, t) = (self.ctx, self.c, self.s, self.t);
        let (k, d, inter) = (c.experts_per_token as u32, c.hidden as u32, f.inter);
        let slots = t * k;
        let fp8 = c.dispatch_fp8;
        let layout = moe_dispatch::RecordLayout { hidden: d, fp8 };
        let record = layout.words();
        let p = moe_dispatch::MoeDispatchParams {
            tokens: t,
            k,
            hidden: d,
            record,
        };
        self.e.run("moe_dispatch", "moe.dispatch", |pass| {
            let buffers = [&s.h, &route.ids, &route.gates, &s.records];
            moe_dispatch::dispatch(ctx, pass, buffers, p, fp8)
        })?;
        // Inputs are the records' activations (after the 16-byte header, and the tile scales of
        // FP8 records), the expert id their first word.
        let shape = GemvShape::new(inter, d).with_format(self.format);
        let input = GemvLayout {
            grouped: Some((f.count, 2 * shape.matrix_chunks(), record)),
            x_stride: record / 4,
            x_offset: layout.x_offset_x4(),
            x_fp8_scales: fp8.then_some(moe_dispatch::HEADER_FLOATS / 4),
            ..GemvLayout::rows(shape, slots)
        };
        self.gate_up("moe.experts", f, [&s.records, &s.records], shape, input)?;
        let shape = GemvShape::new(d, inter).with_format(self.format);
        let layout = GemvLayout {
            grouped: Some((f.count, shape.matrix_chunks(), record)),
            ..GemvLayout::rows(shape, slots)
        };
        let buffers = [&f.w_down, &s.act, &s.expert_out, &s.records];
        self.linear_layout("moe.experts.w_down", buffers, shape, layout)?;
        self.e.run("moe_combine", "moe.combine", |pass| {
            moe_combine::dispatch(ctx, pass, [&s.records, &s.expert_out, &s.sub_out], p)
        })
    }

    /// The eager MoE: read the router's choice back to the host, then gather, FFN and
    /// scatter-add once per expert that received tokens.
    async fn experts_from_host(
        &mut self,
        f: &GpuFfn,
        route: &RouteBuffers,
    ) -> Result<(), ModelError> {
        let (ctx, c, s, t) = (self.ctx, self.c, self.s, self.t);
        let (k, d) = (c.experts_per_token as u32, c.hidden as u32);
        let n = 4 * u64::from(t * k);
        self.e.flush();
        let data = read_back_many(ctx, &[(&route.ids, n), (&route.gates, n)]).await?;
        let ids: Vec<u32> = bytemuck::pod_collect_to_vec(&data[0]);
        let gates: Vec<f32> = bytemuck::pod_collect_to_vec(&data[1]);
        let plan = RoutePlan::new(&ids, &gates, c.routed_experts, k as usize);
        ctx.queue
            .write_buffer(&s.route_index, 0, bytemuck::cast_slice(&plan.token));
        ctx.queue
            .write_buffer(&s.route_gates, 0, bytemuck::cast_slice(&plan.gate));
        // FP8 dispatch: the experts gather from h as an FP8 record would carry it.
        let h_experts = if c.dispatch_fp8 {
            self.e.run("fp8_round_trip", "moe.dispatch fp8", |pass| {
                fp8_round_trip::dispatch(ctx, pass, &s.h, &s.h_dispatch, t, d)
            })?;
            &s.h_dispatch
        } else {
            &s.h
        };
        for ex in 0..c.routed_experts {
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
            self.e
                .run("gather_rows", &format!("{op}.dispatch"), |pass| {
                    gather_rows::dispatch(ctx, pass, h_experts, &s.route_index, &s.expert_in, p)
                })?;
            self.ffn(&op, f, ex as u32, &s.expert_in, &s.expert_out, count)?;
            let p = scatter_add::ScatterParams {
                rows: count,
                width: d,
                base,
                _pad: 0,
            };
            self.e
                .run("scatter_add", &format!("{op}.combine"), |pass| {
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
        Ok(())
    }
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
