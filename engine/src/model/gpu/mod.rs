//! The sandbox model on WebGPU. `GpuModel` holds the weights on the GPU and records one forward
//! pass per call; which kernels it records is set by `plan::Optimizations` (forward.rs), and how
//! they are submitted by the executor (eager: one submission per kernel; recorded: one command
//! buffer per step). With every switch off this is the eager baseline: one kernel per operation,
//! separate copy and concat kernels for MLA, and a host round trip to learn which experts the
//! router chose (as Hugging Face's eager MoE does), then one launch sequence per used expert.
//!
//! MLA runs in its absorbed form (DeepSeek-V2 §2.1.2 / V3's inference path): W_UK is folded into
//! the query projection and W_UV into the output projection when the weights are loaded, so
//! attention is multi-query attention over the latent cache rows `[c_kv | k_rope]` and keys and
//! values are never expanded per head. The reference computes the unabsorbed definition; the
//! tests compare the two.

mod executor;
mod forward;

use crate::gpu::{storage_buffer, storage_zeroed, GpuContext, Profiler};
use crate::kernels::{mla_split_k, moe_dispatch, rope};
use crate::plan::Optimizations;
use crate::quant::{matrix, Format};

use super::weights::{FeedForward, Ffn, Weights};
use super::{ModelError, MoeConfig};

/// One kernel launch of a forward pass, as the statistics and the timeline show it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelLaunch {
    pub kernel: &'static str,
    /// What it computed, e.g. `attn.wq_a` or `moe.expert7.w_down`.
    pub op: String,
    /// The layer, or `None` for the embedding and the head.
    pub layer: Option<usize>,
    /// Bytes it must read and write at least.
    pub bytes: u64,
    /// GPU time of its compute pass from timestamp queries, when profiling.
    pub gpu_us: Option<f64>,
}

/// What one forward recorded and submitted.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StepTrace {
    pub kernels: Vec<KernelLaunch>,
    pub submissions: usize,
    /// Host time spent recording the kernels (validation, bind groups, encoding), µs.
    pub record_us: f64,
    /// Host time spent in `queue.submit`, µs.
    pub submit_us: f64,
}

/// A SwiGLU FFN, or all routed experts of a layer stacked, in the model's weight format
/// (`quant::matrix` layout): expert e's `[inter, hidden]` gate matrix then its up matrix in
/// `w_gate_up`, its `[hidden, inter]` down matrix in `w_down`.
struct GpuFfn {
    w_gate_up: wgpu::Buffer,
    w_down: wgpu::Buffer,
    inter: u32,
    count: u32,
}

/// The routing of one MoE layer, kept on the GPU until the step's final read-back.
struct RouteBuffers {
    scores: wgpu::Buffer,
    ids: wgpu::Buffer,
    gates: wgpu::Buffer,
}

struct GpuMoe {
    router: wgpu::Buffer,
    bias: wgpu::Buffer,
    /// The bias on the host too: the routing margin is computed there.
    bias_host: Vec<f32>,
    experts: GpuFfn,
    shared: GpuFfn,
    route: RouteBuffers,
}

enum GpuFeedForward {
    Dense(GpuFfn),
    Moe(Box<GpuMoe>),
}

struct GpuLayer {
    attn_norm: wgpu::Buffer,
    wq_a: wgpu::Buffer,
    q_norm: wgpu::Buffer,
    /// The query projection, `[heads·(kv_lora_rank + qk_rope), q_lora_rank]`: per head, its
    /// `kv_lora_rank` rows W_UK_hᵀ · W_q_nope_h (absorbed), then its `qk_rope` RoPE rows of
    /// wq_b, so that one projection writes the query in the concatenated layout attention reads.
    w_q_cat: wgpu::Buffer,
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
    /// The query projection's own output, before the copies into `q_cat`.
    q_proj: wgpu::Buffer,
    kv: wgpu::Buffer,
    c_kv: wgpu::Buffer,
    q_cat: wgpu::Buffer,
    scores: wgpu::Buffer,
    partials: wgpu::Buffer,
    o_latent: wgpu::Buffer,
    sub_out: wgpu::Buffer,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    act: wgpu::Buffer,
    router_logits: wgpu::Buffer,
    route_index: wgpu::Buffer,
    route_gates: wgpu::Buffer,
    records: wgpu::Buffer,
    /// The eager MoE with FP8 dispatch: h as the experts see it (fp8_round_trip).
    h_dispatch: wgpu::Buffer,
    expert_in: wgpu::Buffer,
    expert_out: wgpu::Buffer,
    logits: wgpu::Buffer,
}

pub struct GpuModel {
    config: MoeConfig,
    /// The format of every projection inside the blocks (attention, dense FFN, experts).
    format: Format,
    /// Parameters and bytes (scales included) of those projections.
    quantized: (u64, u64),
    embed: wgpu::Buffer,
    layers: Vec<GpuLayer>,
    norm: wgpu::Buffer,
    lm_head: wgpu::Buffer,
    cos_sin: wgpu::Buffer,
    scratch: Scratch,
    optimizations: Optimizations,
    profiler: Option<Profiler>,
    /// Positions in the cache.
    len: usize,
}

/// Timed passes per forward when profiling: a prefill's eager launches fit.
/// Logits of the whole model on the GPU against the f64-accumulating reference.
///
/// Not a proven bound: the error compounds through 4 layers of f32 GEMVs (K ≤ 768), the
/// absorbed MLA weights (rounded once to f32 after an f64 product), and the shader's exp and
/// inverseSqrt (a few ULP each in Vulkan). Measured on lavapipe: 2.3e-6 worst over a 21-token
/// prefill and 20 decode steps (docs/MODEL.md), on logits of order 1, while any wiring mistake
/// (a wrong stride, a missed residual, a flipped expert) moves logits by O(0.1–1). The
/// tolerance sits between the two, ~40x above the measured error.
pub fn logits_tolerance() -> crate::check::Tolerance {
    crate::check::Tolerance {
        abs: 1e-4,
        rel: 1e-4,
        why: "f32 rounding through the whole model: empirical, ~40x the measured error",
    }
}

const PROFILED_PASSES: u32 = 2048;

impl GpuModel {
    /// Uploads the weights in f32 (absorbing W_UK and W_UV into the attention projections), with
    /// every optimization off.
    pub fn new(ctx: &GpuContext, w: &Weights) -> Result<Self, ModelError> {
        Self::with_format(ctx, w, Format::F32)
    }

    /// Uploads the weights with every projection inside the blocks quantized to `format` from
    /// the f32 source (after absorption, so that the kernels stream exactly the matrices they
    /// multiply by). As DeepSeek-V3 does for FP8 (§3.3.1), the embedding, the output head, the
    /// router and the norms stay in full precision.
    pub fn with_format(ctx: &GpuContext, w: &Weights, format: Format) -> Result<Self, ModelError> {
        let c = w.config.clone();
        c.validate()?;
        let up = Uploader {
            ctx,
            format,
            counted: std::cell::Cell::new((0, 0)),
        };
        let layers = w
            .layers
            .iter()
            .map(|layer| up.layer(&c, layer))
            .collect::<Result<Vec<_>, _>>()?;
        let cos_sin = rope::cos_sin_table(c.max_seq_len, c.qk_rope_head_dim, c.rope_theta);
        Ok(Self {
            embed: up.f32("embed", &w.embed.data)?,
            norm: up.f32("norm", &w.norm.data)?,
            lm_head: up.f32("lm_head", &w.lm_head.data)?,
            cos_sin: storage_buffer(ctx, "rope cos/sin", &cos_sin)?,
            scratch: Scratch::new(ctx, &c)?,
            layers,
            config: c,
            format,
            quantized: up.counted.get(),
            optimizations: Optimizations::none(),
            profiler: None,
            len: 0,
        })
    }

    pub fn config(&self) -> &MoeConfig {
        &self.config
    }

    /// The format of the projections inside the blocks.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Bytes per parameter of the projections in `format`, scales included.
    pub fn bytes_per_parameter(&self) -> f64 {
        let (params, bytes) = self.quantized;
        bytes as f64 / params.max(1) as f64
    }

    /// Bytes of weights on the GPU, scales included.
    pub fn weight_bytes(&self) -> u64 {
        let ffn = |f: &GpuFfn| f.w_gate_up.size() + f.w_down.size();
        let layers: u64 = self
            .layers
            .iter()
            .map(|l| {
                let mut b = [
                    &l.attn_norm,
                    &l.wq_a,
                    &l.q_norm,
                    &l.w_q_cat,
                    &l.wkv_a,
                    &l.kv_norm,
                ]
                .iter()
                .chain([&&l.w_o_latent, &&l.ffn_norm])
                .map(|b| b.size())
                .sum::<u64>();
                b += match &l.ffn {
                    GpuFeedForward::Dense(f) => ffn(f),
                    GpuFeedForward::Moe(m) => {
                        m.router.size() + m.bias.size() + ffn(&m.experts) + ffn(&m.shared)
                    }
                };
                b
            })
            .sum();
        layers + self.embed.size() + self.norm.size() + self.lm_head.size()
    }

    pub fn optimizations(&self) -> Optimizations {
        self.optimizations
    }

    /// Which kernels the next forwards record. The cache stays valid: the switches change the
    /// kernels, never the math.
    pub fn set_optimizations(&mut self, o: Optimizations) {
        self.optimizations = o;
    }

    /// Whether the routed experts read FP8 records (`MoeConfig::dispatch_fp8`) from the next
    /// forward on. The math changes, so the cache is emptied.
    pub fn set_dispatch_fp8(&mut self, on: bool) -> Result<(), ModelError> {
        let c = self.config.with_dispatch_fp8(on)?;
        if c != self.config {
            self.config = c;
            self.reset();
        }
        Ok(())
    }

    /// Times every kernel with timestamp queries (where the adapter has them) from the next
    /// forward on; `KernelLaunch::gpu_us` then carries each kernel's time.
    pub fn set_profiling(&mut self, ctx: &GpuContext, on: bool) {
        self.profiler = (on && ctx.has_timestamps()).then(|| Profiler::new(ctx, PROFILED_PASSES));
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
}

/// Uploads a model's weights: f32 as they are, the block projections encoded in `format`
/// (their parameters and bytes counted), the per-layer buffers zeroed.
struct Uploader<'a> {
    ctx: &'a GpuContext,
    format: Format,
    /// Parameters and bytes of the quantized projections so far.
    counted: std::cell::Cell<(u64, u64)>,
}

impl Uploader<'_> {
    fn f32(&self, name: &str, data: &[f32]) -> Result<wgpu::Buffer, ModelError> {
        Ok(storage_buffer(self.ctx, name, data)?)
    }

    fn zeroed(&self, name: &str, floats: usize) -> Result<wgpu::Buffer, ModelError> {
        Ok(storage_zeroed(self.ctx, name, bytes(floats))?)
    }

    /// `matrices` (data, rows, cols) stacked in one buffer, each in the upload format.
    fn quantized(
        &self,
        name: &str,
        matrices: &[(&[f32], usize, usize)],
    ) -> Result<wgpu::Buffer, ModelError> {
        let mut words = Vec::new();
        for &(data, rows, cols) in matrices {
            let (p, b) = self.counted.get();
            self.counted.set((
                p + (rows * cols) as u64,
                b + matrix::matrix_bytes(self.format, rows, cols),
            ));
            words.extend(
                matrix::encode(self.format, data, rows, cols)
                    .map_err(|e| ModelError::Kernel(e.into()))?,
            );
        }
        Ok(storage_buffer(self.ctx, name, &words)?)
    }

    /// FFNs of one shape stacked: every gate-then-up matrix in one buffer, every down in another.
    fn ffns(&self, name: &str, fs: &[&Ffn]) -> Result<GpuFfn, ModelError> {
        let mut gate_up = Vec::new();
        let mut down = Vec::new();
        for f in fs {
            for m in [&f.w_gate, &f.w_up] {
                gate_up.push((m.data.as_slice(), m.rows(), m.cols()));
            }
            down.push((f.w_down.data.as_slice(), f.w_down.rows(), f.w_down.cols()));
        }
        Ok(GpuFfn {
            w_gate_up: self.quantized(&format!("{name} w_gate_up"), &gate_up)?,
            w_down: self.quantized(&format!("{name} w_down"), &down)?,
            inter: fs.first().map_or(0, |f| f.w_gate.rows()) as u32,
            count: fs.len() as u32,
        })
    }

    /// One block: MLA absorbed, its FFN (dense or the MoE's experts, shared expert and router),
    /// its latent cache.
    fn layer(&self, c: &MoeConfig, layer: &super::weights::Layer) -> Result<GpuLayer, ModelError> {
        let t = c.max_seq_len;
        let a = &layer.attn;
        let (w_q_latent, w_q_rope, w_o_latent) = absorb(c, a);
        let w_q_cat = interleave_heads(c, &w_q_latent, &w_q_rope);
        let (d, qr) = (c.hidden, c.q_lora_rank);
        let q_rows = c.heads * c.cache_row();
        let ffn = match &layer.ffn {
            FeedForward::Dense(f) => GpuFeedForward::Dense(self.ffns("dense", &[f])?),
            FeedForward::Moe(m) => GpuFeedForward::Moe(Box::new(GpuMoe {
                router: self.f32("router", &m.router.data)?,
                bias: self.f32("router bias", &m.router_bias.data)?,
                bias_host: m.router_bias.data.clone(),
                experts: self.ffns("experts", &m.experts.iter().collect::<Vec<_>>())?,
                shared: self.ffns("shared", &[&m.shared])?,
                route: RouteBuffers {
                    scores: self.zeroed("router scores", t * c.routed_experts)?,
                    ids: self.zeroed("top-k ids", t * c.experts_per_token)?,
                    gates: self.zeroed("top-k gates", t * c.experts_per_token)?,
                },
            })),
        };
        Ok(GpuLayer {
            attn_norm: self.f32("attn_norm", &layer.attn_norm.data)?,
            wq_a: self.quantized("wq_a", &[(&a.wq_a.data, qr, d)])?,
            q_norm: self.f32("q_norm", &a.q_norm.data)?,
            w_q_cat: self.quantized("w_q_cat", &[(&w_q_cat, q_rows, qr)])?,
            wkv_a: self.quantized("wkv_a", &[(&a.wkv_a.data, c.cache_row(), d)])?,
            kv_norm: self.f32("kv_norm", &a.kv_norm.data)?,
            w_o_latent: self
                .quantized("w_o_latent", &[(&w_o_latent, d, c.heads * c.kv_lora_rank)])?,
            ffn_norm: self.f32("ffn_norm", &layer.ffn_norm.data)?,
            ffn,
            cache: self.zeroed("latent cache", c.max_seq_len * c.cache_row())?,
        })
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

/// `w_q_cat` rows for head h: its `kv_lora_rank` latent rows, then its `qk_rope` RoPE rows.
fn interleave_heads(c: &MoeConfig, q_latent: &[f32], q_rope: &[f32]) -> Vec<f32> {
    let (kvr, rope_d, qr) = (c.kv_lora_rank, c.qk_rope_head_dim, c.q_lora_rank);
    let mut out = Vec::with_capacity(q_latent.len() + q_rope.len());
    for h in 0..c.heads {
        out.extend_from_slice(&q_latent[h * kvr * qr..(h + 1) * kvr * qr]);
        out.extend_from_slice(&q_rope[h * rope_d * qr..(h + 1) * rope_d * qr]);
    }
    out
}

fn bytes(floats: usize) -> u64 {
    4 * floats as u64
}

impl Scratch {
    fn new(ctx: &GpuContext, c: &MoeConfig) -> Result<Self, ModelError> {
        let t = c.max_seq_len;
        let tk = t * c.experts_per_token;
        let inter = c
            .dense_intermediate
            .max(c.shared_experts * c.expert_intermediate)
            .max(c.expert_intermediate);
        let act = (t * inter).max(tk * c.expert_intermediate);
        let z = |name: &str, floats: usize| storage_zeroed(ctx, name, bytes(floats));
        let q_cat = t * c.heads * c.cache_row();
        let splits = mla_split_k::MlaSplitKParams::splits_for(t as u32) as usize;
        // f32 records are the larger layout; FP8 ones fit in the same buffer.
        let record = moe_dispatch::RecordLayout {
            hidden: c.hidden as u32,
            fp8: false,
        }
        .words() as usize;
        Ok(Self {
            token_ids: z("token ids", t)?,
            x: z("x (residual)", t * c.hidden)?,
            h: z("h (normed)", t * c.hidden)?,
            cq_raw: z("c_q raw", t * c.q_lora_rank)?,
            cq: z("c_q", t * c.q_lora_rank)?,
            q_proj: z("q projection", q_cat)?,
            kv: z("kv", t * c.cache_row())?,
            c_kv: z("c_kv", t * c.kv_lora_rank)?,
            q_cat: z("q concat", q_cat)?,
            scores: z("attention scores", t * c.heads * c.max_seq_len)?,
            partials: z(
                "split-k partials",
                t * c.heads * splits * (c.kv_lora_rank + 2),
            )?,
            o_latent: z("o latent", t * c.heads * c.kv_lora_rank)?,
            sub_out: z("block output", t * c.hidden)?,
            gate: z("ffn gate", act)?,
            up: z("ffn up", act)?,
            act: z("ffn act", act)?,
            router_logits: z("router logits", t * c.routed_experts)?,
            route_index: z("route index", tk)?,
            route_gates: z("route gates", tk)?,
            records: z("dispatch records", tk * record)?,
            h_dispatch: z("h as dispatched", t * c.hidden)?,
            expert_in: z("expert input", t * c.hidden)?,
            expert_out: z("expert output", tk * c.hidden)?,
            logits: z("logits", t * c.vocab_size)?,
        })
    }
}
