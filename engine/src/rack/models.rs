//! The model catalogue: the shapes that set FLOPs, weight bytes and KV bytes per token. Numbers
//! from shared/calibration/public-figures.toml (configs as published) and, for deepseek-mini,
//! from `model::config`.

use super::RackError;

#[derive(Debug, Clone, PartialEq)]
pub enum Attention {
    /// Multi-head latent attention: the cache holds one latent (kv_lora) plus one RoPE key per
    /// token, shared by all heads; decode uses the absorbed form.
    Mla {
        heads: u32,
        q_lora: u32,
        kv_lora: u32,
        nope: u32,
        rope: u32,
        v: u32,
    },
    /// Grouped-query attention: kv_heads keys and values per token.
    Gqa {
        heads: u32,
        kv_heads: u32,
        head_dim: u32,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Moe {
    pub routed: u32,
    pub shared: u32,
    pub top_k: u32,
    pub intermediate: u32,
    /// Layers that are MoE (the rest use the dense FFN).
    pub layers: u32,
    /// Expert groups for group-limited routing (DeepSeek-V3: 8 groups, top 4); 1 = plain top-k.
    pub router_groups: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub id: &'static str,
    pub name: &'static str,
    pub layers: u32,
    pub hidden: u32,
    pub vocab: u32,
    pub attention: Attention,
    /// Intermediate size of the dense SwiGLU FFN (GPT-3: the 4x GELU MLP, see `gated`).
    pub dense_intermediate: u32,
    /// SwiGLU (three matrices) or a plain two-matrix MLP (GPT-3).
    pub gated: bool,
    pub moe: Option<Moe>,
    /// Multi-token-prediction modules shipped with the model (DeepSeek-V3: 1).
    pub mtp_modules: u32,
}

impl ModelSpec {
    pub const NAMES: &'static str =
        "deepseek-r1, deepseek-v3, llama4-maverick, gpt3-175b, deepseek-mini";

    pub fn by_id(id: &str) -> Result<ModelSpec, RackError> {
        match id {
            "deepseek-r1" => Ok(deepseek_v3("deepseek-r1")),
            "deepseek-v3" => Ok(deepseek_v3("deepseek-v3")),
            "llama4-maverick" => Ok(llama4_maverick()),
            "gpt3-175b" => Ok(gpt3_175b()),
            "deepseek-mini" => Ok(deepseek_mini()),
            _ => Err(RackError::unknown("model", id, Self::NAMES)),
        }
    }

    pub fn moe_layers(&self) -> u32 {
        self.moe.as_ref().map_or(0, |m| m.layers)
    }

    pub fn dense_layers(&self) -> u32 {
        self.layers - self.moe_layers()
    }

    /// Attention projection weights of one layer.
    pub fn attention_params(&self) -> f64 {
        let d = self.hidden as f64;
        match self.attention {
            Attention::Mla {
                heads,
                q_lora,
                kv_lora,
                nope,
                rope,
                v,
            } => {
                let (h, q, kv) = (heads as f64, q_lora as f64, kv_lora as f64);
                let (n, r, v) = (nope as f64, rope as f64, v as f64);
                d * q + q * h * (n + r) + d * (kv + r) + kv * h * (n + v) + h * v * d
            }
            Attention::Gqa {
                heads,
                kv_heads,
                head_dim,
            } => {
                let hd = head_dim as f64;
                d * hd * (2.0 * heads as f64 + 2.0 * kv_heads as f64)
            }
        }
    }

    fn ffn_params(&self, intermediate: u32) -> f64 {
        let mats = if self.gated { 3.0 } else { 2.0 };
        mats * self.hidden as f64 * intermediate as f64
    }

    pub fn dense_ffn_params(&self) -> f64 {
        self.ffn_params(self.dense_intermediate)
    }

    /// One expert's weights.
    pub fn expert_params(&self) -> f64 {
        self.moe
            .as_ref()
            .map_or(0.0, |m| self.ffn_params(m.intermediate))
    }

    pub fn embedding_params(&self) -> f64 {
        self.vocab as f64 * self.hidden as f64
    }

    /// Weights of the routed experts (what FP4 checkpoints quantize).
    pub fn routed_expert_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| {
            m.layers as f64 * m.routed as f64 * self.expert_params()
        })
    }

    /// Everything else: attention, dense FFNs, shared experts, routers, embeddings and head.
    pub fn other_params(&self) -> f64 {
        let (shared, router) = self.moe.as_ref().map_or((0.0, 0.0), |m| {
            let per_layer = m.shared as f64 * self.expert_params();
            (
                m.layers as f64 * per_layer,
                m.layers as f64 * m.routed as f64 * self.hidden as f64,
            )
        });
        self.layers as f64 * self.attention_params()
            + self.dense_layers() as f64 * self.dense_ffn_params()
            + shared
            + router
            + 2.0 * self.embedding_params()
    }

    pub fn total_params(&self) -> f64 {
        self.routed_expert_params() + self.other_params()
    }

    /// Weights one token touches (embedding lookup not counted: it is a gather, not a GEMM).
    pub fn active_params(&self) -> f64 {
        let routed = self.moe.as_ref().map_or(0.0, |m| {
            m.layers as f64 * m.top_k as f64 * self.expert_params()
        });
        routed + self.other_params() - self.embedding_params()
    }

    /// KV-cache elements per token per layer.
    pub fn kv_elems_per_token_layer(&self) -> f64 {
        match self.attention {
            Attention::Mla { kv_lora, rope, .. } => (kv_lora + rope) as f64,
            Attention::Gqa {
                kv_heads, head_dim, ..
            } => 2.0 * kv_heads as f64 * head_dim as f64,
        }
    }

    pub fn heads(&self) -> u32 {
        match self.attention {
            Attention::Mla { heads, .. } | Attention::Gqa { heads, .. } => heads,
        }
    }
}

/// DeepSeek-V3 and R1 share one architecture (config_671B.json): 61 layers, 3 dense, 58 MoE
/// with 256 routed experts (top 8) + 1 shared, MLA with 128 heads.
fn deepseek_v3(id: &'static str) -> ModelSpec {
    ModelSpec {
        id,
        name: if id == "deepseek-r1" {
            "DeepSeek-R1"
        } else {
            "DeepSeek-V3"
        },
        layers: 61,
        hidden: 7168,
        vocab: 129280,
        attention: Attention::Mla {
            heads: 128,
            q_lora: 1536,
            kv_lora: 512,
            nope: 128,
            rope: 64,
            v: 128,
        },
        dense_intermediate: 18432,
        gated: true,
        moe: Some(Moe {
            routed: 256,
            shared: 1,
            top_k: 8,
            intermediate: 2048,
            layers: 58,
            router_groups: 8,
        }),
        mtp_modules: 1,
    }
}

/// Llama 4 Maverick: 48 layers alternating dense and MoE (interleave step 2), GQA 40/8 heads
/// of 128, 128 routed experts (top 1) + 1 shared of 8192, dense FFN 16384.
fn llama4_maverick() -> ModelSpec {
    ModelSpec {
        id: "llama4-maverick",
        name: "Llama 4 Maverick",
        layers: 48,
        hidden: 5120,
        vocab: 202048,
        attention: Attention::Gqa {
            heads: 40,
            kv_heads: 8,
            head_dim: 128,
        },
        dense_intermediate: 16384,
        gated: true,
        moe: Some(Moe {
            routed: 128,
            shared: 1,
            top_k: 1,
            intermediate: 8192,
            layers: 24,
            router_groups: 1,
        }),
        mtp_modules: 0,
    }
}

/// GPT-3 175B (Brown et al. 2020): 96 layers, d 12288, 96 heads of 128, 4x GELU MLP.
fn gpt3_175b() -> ModelSpec {
    ModelSpec {
        id: "gpt3-175b",
        name: "GPT-3 175B",
        layers: 96,
        hidden: 12288,
        vocab: 50257,
        attention: Attention::Gqa {
            heads: 96,
            kv_heads: 96,
            head_dim: 128,
        },
        dense_intermediate: 4 * 12288,
        gated: false,
        moe: None,
        mtp_modules: 0,
    }
}

/// The sandbox's model (`model::config::MoeConfig::deepseek_mini`), so the rack can put the toy
/// next to the real thing.
fn deepseek_mini() -> ModelSpec {
    ModelSpec {
        id: "deepseek-mini",
        name: "deepseek-mini",
        layers: 4,
        hidden: 256,
        vocab: 256,
        attention: Attention::Mla {
            heads: 4,
            q_lora: 128,
            kv_lora: 64,
            nope: 32,
            rope: 16,
            v: 32,
        },
        dense_intermediate: 768,
        gated: true,
        moe: Some(Moe {
            routed: 16,
            shared: 1,
            top_k: 2,
            intermediate: 256,
            layers: 3,
            router_groups: 1,
        }),
        mtp_modules: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str) -> ModelSpec {
        ModelSpec::by_id(id).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The published totals: 671B / 37B (DeepSeek-V3 without its 14B MTP module), 400B / 17B,
    /// 175B. Our counts leave out norms and biases, hence 2%.
    #[test]
    fn parameter_counts_match_the_published_totals() {
        let cases = [
            ("deepseek-v3", 671e9, 37e9),
            ("llama4-maverick", 400e9, 17e9),
            ("gpt3-175b", 175e9, 175e9),
        ];
        for (id, total, active) in cases {
            let m = model(id);
            let t = m.total_params();
            assert!((t / total - 1.0).abs() < 0.02, "{id}: total {t:e}");
            let a = m.active_params() + m.embedding_params();
            assert!((a / active - 1.0).abs() < 0.06, "{id}: active {a:e}");
        }
    }

    #[test]
    fn deepseek_mini_matches_the_sandbox_config() {
        let m = model("deepseek-mini");
        // model::config counts norms too (a few thousand weights).
        let t = m.total_params();
        assert!((t / 11_271_216.0 - 1.0).abs() < 0.01, "{t}");
    }

    #[test]
    fn mla_caches_576_elements_per_token_per_layer() {
        assert_eq!(model("deepseek-r1").kv_elems_per_token_layer(), 576.0);
        assert_eq!(model("llama4-maverick").kv_elems_per_token_layer(), 2048.0);
    }
}
