"""deepseek-mini in PyTorch: exactly the architecture of engine::model (engine/src/model/reference.rs
is the definition), batched for training.

Per layer: RMSNorm -> MLA -> residual, RMSNorm -> FFN -> residual. MLA: the query goes down to
q_lora_rank, through RMSNorm, up to every head's [q_nope | q_rope]; the token's latent row is
[c_kv | k_rope] with c_kv RMS-normalized and one RoPE key shared by all heads; keys and values
are expanded from c_kv per head ([k_nope | v] rows of wkv_b). RoPE is the half-split (GPT-NeoX)
layout. Layer 0 has a dense SwiGLU FFN; the others are MoE: sigmoid gate scores, the top-k of
score + bias choose the experts (the bias is DeepSeek-V3's auxiliary-loss-free balancing term and
never enters the gates), gates = chosen scores normalized to one, times routed_scaling; plus one
shared expert. Names and shapes of the parameters are the safetensors names of
engine/src/model/weights.rs.

`fp8=True` runs every projection inside the blocks (attention and FFN/expert matrices) as an FP8
GEMM emulated the DeepSeek-V3 way: activations quantized to E4M3 in 1x128 tiles, weights in
128x128 blocks, products accumulated in f32; in the backward pass the output gradient is
quantized in 1x128 tiles for the input gradient and both operands in 128x1 tiles (along the
tokens) for the weight gradient. Embedding, output head, router, norms and the attention core
stay in BF16, as in DeepSeek-V3 section 3.3.1.
"""

import json
import math

import torch
import torch.nn.functional as F
from torch import nn

CONFIG = {
    "name": "deepseek-mini",
    "vocab_size": 256,
    "hidden": 256,
    "layers": 4,
    "dense_layers": 1,
    "heads": 4,
    "q_lora_rank": 128,
    "kv_lora_rank": 64,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "dense_intermediate": 768,
    "routed_experts": 16,
    "experts_per_token": 2,
    "shared_experts": 1,
    "expert_intermediate": 256,
    "gate_function": "sigmoid",
    "routed_scaling": 1.0,
    "rms_eps": 1e-6,
    "rope_theta": 10000.0,
    "max_seq_len": 512,
}

E4M3_MAX = 448.0
TILE = 128


def _fake_e4m3(t, amax):
    """Quantize-dequantize to E4M3 with scale amax / 448 (a zero block stays zero)."""
    inv = torch.where(amax > 0, E4M3_MAX / amax, torch.zeros_like(amax))
    return (t * inv).to(torch.float8_e4m3fn).to(torch.float32) * (amax / E4M3_MAX)


def quant_rows(x):
    """E4M3 in 1x128 tiles along the last dimension (DeepSeek-V3's activation tiles)."""
    k = x.shape[-1]
    pad = (-k) % TILE
    xp = F.pad(x.float(), (0, pad))
    t = xp.reshape(*xp.shape[:-1], -1, TILE)
    q = _fake_e4m3(t, t.abs().amax(-1, keepdim=True))
    return q.reshape(xp.shape)[..., :k]


def quant_blocks(w):
    """E4M3 in 128x128 blocks (DeepSeek-V3's weight blocks)."""
    n, k = w.shape
    wp = F.pad(w.float(), (0, (-k) % TILE, 0, (-n) % TILE))
    t = wp.reshape(wp.shape[0] // TILE, TILE, wp.shape[1] // TILE, TILE)
    q = _fake_e4m3(t, t.abs().amax(dim=(1, 3), keepdim=True))
    return q.reshape(wp.shape)[:n, :k]


class Fp8Matmul(torch.autograd.Function):
    """y = x @ w.T with FP8 operands and f32 accumulation, forward and backward."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, x, w):
        wq = quant_blocks(w)
        # Kept for the backward pass: the quantized weight, and x for its 128x1 tiles.
        ctx.save_for_backward(x, wq)
        return quant_rows(x) @ wq.t()

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, gy):
        x, wq = ctx.saved_tensors
        gy = gy.float()
        grad_x = quant_rows(gy) @ wq
        grad_w = quant_rows(gy.t()) @ quant_rows(x.t()).t()
        return grad_x, grad_w


class Proj(nn.Module):
    """A bias-free projection, weight [out, in] as nn.Linear."""

    def __init__(self, d_in, d_out, gain=1.0, fp8=False):
        super().__init__()
        bound = gain * math.sqrt(3.0 / d_in)
        self.weight = nn.Parameter(torch.empty(d_out, d_in).uniform_(-bound, bound))
        self.fp8 = fp8

    def forward(self, x):
        if self.fp8 and torch.is_grad_enabled():
            shape = x.shape
            y = Fp8Matmul.apply(x.reshape(-1, shape[-1]), self.weight)
            return y.reshape(*shape[:-1], -1)
        if self.fp8:
            # Evaluation of an FP8 run: the same quantized operands, no autograd.
            return (quant_rows(x) @ quant_blocks(self.weight).t()).to(x.dtype)
        return F.linear(x, self.weight)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(x.dtype)


def rope_tables(c, device):
    d = c["qk_rope_head_dim"]
    pos = torch.arange(c["max_seq_len"], dtype=torch.float64, device=device)
    inv = c["rope_theta"] ** (-2.0 * torch.arange(d // 2, dtype=torch.float64, device=device) / d)
    angle = pos[:, None] * inv[None, :]
    return angle.cos().float(), angle.sin().float()


def rope(x, cos, sin):
    """Half-split RoPE on the last dimension; cos/sin are [T, d/2]."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Mla(nn.Module):
    def __init__(self, c, out_gain, fp8):
        super().__init__()
        d, h = c["hidden"], c["heads"]
        self.c = c
        qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
        self.wq_a = Proj(d, c["q_lora_rank"], fp8=fp8)
        self.q_norm = RMSNorm(c["q_lora_rank"], c["rms_eps"])
        self.wq_b = Proj(c["q_lora_rank"], h * qk, fp8=fp8)
        self.wkv_a = Proj(d, c["kv_lora_rank"] + c["qk_rope_head_dim"], fp8=fp8)
        self.kv_norm = RMSNorm(c["kv_lora_rank"], c["rms_eps"])
        self.wkv_b = Proj(c["kv_lora_rank"], h * (c["qk_nope_head_dim"] + c["v_head_dim"]), fp8=fp8)
        self.wo = Proj(h * c["v_head_dim"], d, gain=out_gain, fp8=fp8)

    def forward(self, x, cos, sin):
        c = self.c
        b, t, _ = x.shape
        h, nope, rd, vd = c["heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        q = self.wq_b(self.q_norm(self.wq_a(x))).view(b, t, h, nope + rd)
        q = torch.cat([q[..., :nope], rope(q[..., nope:], cos[:, None], sin[:, None])], dim=-1)
        kv = self.wkv_a(x)
        c_kv = self.kv_norm(kv[..., : c["kv_lora_rank"]])
        k_rope = rope(kv[..., c["kv_lora_rank"]:], cos, sin)
        kv = self.wkv_b(c_kv).view(b, t, h, nope + vd)
        k = torch.cat([kv[..., :nope], k_rope[:, :, None, :].expand(b, t, h, rd)], dim=-1)
        v = kv[..., nope:]
        q, k, v = (z.transpose(1, 2) for z in (q, k.to(q.dtype), v.to(q.dtype)))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(nope + rd))
        return self.wo(o.transpose(1, 2).reshape(b, t, h * vd))


class Ffn(nn.Module):
    def __init__(self, d, inter, out_gain, fp8):
        super().__init__()
        self.w_gate = Proj(d, inter, fp8=fp8)
        self.w_up = Proj(d, inter, fp8=fp8)
        self.w_down = Proj(inter, d, gain=out_gain, fp8=fp8)

    def forward(self, x):
        if self.w_gate.fp8 and torch.is_grad_enabled():
            # One FP8 GEMM for gate and up: x is quantized once, and the 128x128 blocks of the
            # stacked matrix are those of each half (their rows are multiples of 128).
            shape = x.shape
            gu = Fp8Matmul.apply(x.reshape(-1, shape[-1]),
                                 torch.cat([self.w_gate.weight, self.w_up.weight]))
            g, u = gu.reshape(*shape[:-1], -1).chunk(2, dim=-1)
        else:
            g, u = self.w_gate(x), self.w_up(x)
        return self.w_down(F.silu(g) * u)


class Moe(nn.Module):
    def __init__(self, c, out_gain, fp8):
        super().__init__()
        d = c["hidden"]
        self.c = c
        self.router = nn.Parameter(torch.empty(c["routed_experts"], d).uniform_(
            -math.sqrt(3.0 / d), math.sqrt(3.0 / d)))
        # Auxiliary-loss-free balancing: steers the top-k only, updated outside the optimizer.
        self.register_buffer("bias", torch.zeros(c["routed_experts"]))
        self.experts = nn.ModuleList(
            Ffn(d, c["expert_intermediate"], out_gain, fp8) for _ in range(c["routed_experts"]))
        self.shared = Ffn(d, c["shared_experts"] * c["expert_intermediate"], out_gain, fp8)
        self.load = None

    def forward(self, x):
        c = self.c
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        # The router runs in f32, as in the reference and in DeepSeek-V3.
        scores = torch.sigmoid(F.linear(x.float(), self.router))
        ids = (scores + self.bias).topk(c["experts_per_token"], dim=-1).indices
        gates = scores.gather(-1, ids)
        gates = gates / gates.sum(-1, keepdim=True) * c["routed_scaling"]
        out = self.shared(x).float()
        self.load = torch.bincount(ids.flatten(), minlength=c["routed_experts"])
        order = ids.flatten().argsort()
        token = order // c["experts_per_token"]
        counts = self.load.tolist()
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            sel = order[start:start + n]
            tok = token[start:start + n]
            start += n
            g = gates.flatten()[sel][:, None]
            out.index_add_(0, tok, (self.experts[e](x[tok]).float() * g))
        return out.to(x.dtype).reshape(shape)


class Block(nn.Module):
    def __init__(self, c, i, fp8):
        super().__init__()
        out_gain = 1.0 / math.sqrt(2 * c["layers"])
        self.attn_norm = RMSNorm(c["hidden"], c["rms_eps"])
        self.attn = Mla(c, out_gain, fp8)
        self.ffn_norm = RMSNorm(c["hidden"], c["rms_eps"])
        if i < c["dense_layers"]:
            self.ffn = Ffn(c["hidden"], c["dense_intermediate"], out_gain, fp8)
            self.moe = None
        else:
            self.ffn = None
            self.moe = Moe(c, out_gain, fp8)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + (self.ffn(h) if self.ffn is not None else self.moe(h))


class DeepseekMini(nn.Module):
    def __init__(self, c=CONFIG, fp8=False):
        super().__init__()
        self.c = c
        self.embed = nn.Parameter(torch.empty(c["vocab_size"], c["hidden"]).uniform_(
            -math.sqrt(3.0), math.sqrt(3.0)))
        self.layers = nn.ModuleList(Block(c, i, fp8) for i in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"], c["rms_eps"])
        self.lm_head = Proj(c["hidden"], c["vocab_size"])
        self.rope_cache = None

    def forward(self, tokens):
        t = tokens.shape[1]
        if self.rope_cache is None or self.rope_cache[0].device != tokens.device:
            self.rope_cache = rope_tables(self.c, tokens.device)
        cos, sin = (z[:t] for z in self.rope_cache)
        x = self.embed[tokens]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x)).float()

    def moe_layers(self):
        return [layer.moe for layer in self.layers if layer.moe is not None]

    def state_for_export(self):
        """Every tensor under its engine::model::weights name, f32, contiguous."""
        out = {"embed.weight": self.embed}
        for i, layer in enumerate(self.layers):
            p = f"layers.{i}"
            out[f"{p}.attn_norm.weight"] = layer.attn_norm.weight
            for n in ("wq_a", "wq_b", "wkv_a", "wkv_b", "wo"):
                out[f"{p}.attn.{n}.weight"] = getattr(layer.attn, n).weight
            out[f"{p}.attn.q_norm.weight"] = layer.attn.q_norm.weight
            out[f"{p}.attn.kv_norm.weight"] = layer.attn.kv_norm.weight
            out[f"{p}.ffn_norm.weight"] = layer.ffn_norm.weight

            def ffn(prefix, f):
                for n in ("w_gate", "w_up", "w_down"):
                    out[f"{prefix}.{n}.weight"] = getattr(f, n).weight

            if layer.ffn is not None:
                ffn(f"{p}.ffn", layer.ffn)
            else:
                out[f"{p}.moe.router.weight"] = layer.moe.router
                out[f"{p}.moe.router.bias"] = layer.moe.bias
                for e, f in enumerate(layer.moe.experts):
                    ffn(f"{p}.moe.experts.{e}", f)
                ffn(f"{p}.moe.shared", layer.moe.shared)
        out["norm.weight"] = self.norm.weight
        out["lm_head.weight"] = self.lm_head.weight
        return {k: v.detach().float().contiguous().cpu() for k, v in out.items()}

    def load_export(self, tensors):
        """The inverse of state_for_export."""
        own = self.state_for_export()
        params = dict(self.named_parameters())
        params.update(dict(self.named_buffers()))
        by_export = {}
        for name in own:
            by_export[name] = _module_name(name)
        with torch.no_grad():
            for name, mod_name in by_export.items():
                params[mod_name].copy_(tensors[name].to(params[mod_name].device))


def _module_name(export_name):
    """engine name -> this module's parameter name."""
    n = export_name
    if n == "embed.weight":
        return "embed"
    n = n.replace(".moe.router.weight", ".moe.router").replace(".moe.router.bias", ".moe.bias")
    return n


def config_json():
    return json.dumps(CONFIG)
