//! Model configurations. `deepseek-mini` is DeepSeek-V3 scaled down until it runs in a browser:
//! the same kinds of layers (MLA attention with a latent KV cache and a decoupled RoPE key, a dense
//! first layer, then MoE layers of routed experts plus one shared expert), fewer and smaller.

use serde::{Deserialize, Serialize};

pub use crate::kernels::moe_route::GateFunction;

/// Every size of the model. All dimensions are multiples of 4 so that every GEMV reads vec4s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeConfig {
    pub name: String,
    /// Byte-level: 256 token ids, one per byte.
    pub vocab_size: usize,
    pub hidden: usize,
    pub layers: usize,
    /// Layers `0..dense_layers` have a dense SwiGLU FFN, the rest are MoE.
    pub dense_layers: usize,
    pub heads: usize,
    /// Rank of the compressed query `c_q`.
    pub q_lora_rank: usize,
    /// Rank of the compressed latent KV `c_kv`: what the cache stores per token, for all heads.
    pub kv_lora_rank: usize,
    /// Per-head query/key dimensions without RoPE (absorbed into the latent at decode).
    pub qk_nope_head_dim: usize,
    /// The decoupled RoPE part: per head for queries, one shared key per token.
    pub qk_rope_head_dim: usize,
    pub v_head_dim: usize,
    pub dense_intermediate: usize,
    pub routed_experts: usize,
    pub experts_per_token: usize,
    pub shared_experts: usize,
    pub expert_intermediate: usize,
    pub gate_function: GateFunction,
    /// Multiplies the normalized gates of the routed experts (DeepSeek-V3: 2.5 with 256 experts).
    pub routed_scaling: f32,
    pub rms_eps: f32,
    pub rope_theta: f32,
    pub max_seq_len: usize,
    /// The routed experts read their input as FP8 (E4M3, a power-of-two scale per 1×128 tile:
    /// quant::activation), as DeepSeek-V3's dispatch sends it; the shared expert reads it as is.
    /// A runtime choice like the weight format, not part of a checkpoint.
    #[serde(default, skip_serializing)]
    pub dispatch_fp8: bool,
}

/// Errors in a configuration, named by field.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("unknown model preset {0:?}; the presets are: deepseek-mini")]
    UnknownPreset(String),
    #[error("config field {field} = {value} is invalid: {why}")]
    Invalid {
        field: &'static str,
        value: usize,
        why: &'static str,
    },
}

impl MoeConfig {
    /// The sandbox model. Sizes: see docs/MODEL.md (11.27 M parameters, 45 MB in f32).
    pub fn deepseek_mini() -> Self {
        Self {
            name: "deepseek-mini".into(),
            vocab_size: 256,
            hidden: 256,
            layers: 4,
            dense_layers: 1,
            heads: 4,
            q_lora_rank: 128,
            kv_lora_rank: 64,
            qk_nope_head_dim: 32,
            qk_rope_head_dim: 16,
            v_head_dim: 32,
            dense_intermediate: 768,
            routed_experts: 16,
            experts_per_token: 2,
            shared_experts: 1,
            expert_intermediate: 256,
            gate_function: GateFunction::Sigmoid,
            routed_scaling: 1.0,
            rms_eps: 1e-6,
            rope_theta: 10_000.0,
            max_seq_len: 512,
            dispatch_fp8: false,
        }
    }

    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        match name {
            "deepseek-mini" => Ok(Self::deepseek_mini()),
            other => Err(ConfigError::UnknownPreset(other.into())),
        }
    }

    /// This config with the routed experts' inputs in FP8 or not (`dispatch_fp8`), checked.
    pub fn with_dispatch_fp8(&self, on: bool) -> Result<Self, ConfigError> {
        let c = Self {
            dispatch_fp8: on,
            ..self.clone()
        };
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let multiple_of_4 = [
            ("hidden", self.hidden),
            ("q_lora_rank", self.q_lora_rank),
            ("kv_lora_rank", self.kv_lora_rank),
            ("qk_nope_head_dim", self.qk_nope_head_dim),
            ("qk_rope_head_dim", self.qk_rope_head_dim),
            ("v_head_dim", self.v_head_dim),
            ("dense_intermediate", self.dense_intermediate),
            ("expert_intermediate", self.expert_intermediate),
            ("vocab_size", self.vocab_size),
        ];
        for (field, value) in multiple_of_4 {
            if value == 0 || !value.is_multiple_of(4) {
                return Err(ConfigError::Invalid {
                    field,
                    value,
                    why: "must be a positive multiple of 4 (kernels read vec4s)",
                });
            }
        }
        if self.dispatch_fp8 && (!self.hidden.is_multiple_of(16) || self.hidden > 8192) {
            return Err(ConfigError::Invalid {
                field: "hidden",
                value: self.hidden,
                why: "FP8 dispatch packs 16 elements per vec4 of codes and keeps at most 64 \
                      tiles of 128: a multiple of 16, at most 8192",
            });
        }
        if !self.qk_rope_head_dim.is_multiple_of(2) {
            return Err(ConfigError::Invalid {
                field: "qk_rope_head_dim",
                value: self.qk_rope_head_dim,
                why: "RoPE rotates pairs",
            });
        }
        if self.dense_layers > self.layers || self.layers == 0 {
            return Err(ConfigError::Invalid {
                field: "dense_layers",
                value: self.dense_layers,
                why: "must be at most layers (and layers ≥ 1)",
            });
        }
        if self.heads == 0 {
            return Err(ConfigError::Invalid {
                field: "heads",
                value: 0,
                why: "at least one head",
            });
        }
        if self.experts_per_token == 0 || self.experts_per_token > self.routed_experts {
            return Err(ConfigError::Invalid {
                field: "experts_per_token",
                value: self.experts_per_token,
                why: "must be between 1 and routed_experts",
            });
        }
        if self.routed_experts > 64 {
            return Err(ConfigError::Invalid {
                field: "routed_experts",
                value: self.routed_experts,
                why: "the top-k kernels keep one workgroup lane per expert (at most 64)",
            });
        }
        if self.max_seq_len == 0 || self.max_seq_len > 2048 {
            return Err(ConfigError::Invalid {
                field: "max_seq_len",
                value: self.max_seq_len,
                why: "between 1 and 2048 (attention scores of one row live in workgroup memory)",
            });
        }
        Ok(())
    }

    pub fn is_moe_layer(&self, layer: usize) -> bool {
        layer >= self.dense_layers
    }
    pub fn moe_layers(&self) -> usize {
        self.layers - self.dense_layers
    }
    /// Per-head query/key width: the no-RoPE part plus the RoPE part.
    pub fn qk_head_dim(&self) -> usize {
        self.qk_nope_head_dim + self.qk_rope_head_dim
    }
    /// One latent cache row: `[c_kv | k_pe]`, shared by all heads.
    pub fn cache_row(&self) -> usize {
        self.kv_lora_rank + self.qk_rope_head_dim
    }
    /// The attention scale, 1/sqrt of the per-head query/key width (before absorption).
    pub fn softmax_scale(&self) -> f32 {
        1.0 / (self.qk_head_dim() as f32).sqrt()
    }

    /// Parameters of one attention block (weights and norms).
    pub fn attention_params(&self) -> usize {
        let h = self.hidden;
        h * self.q_lora_rank
            + self.q_lora_rank
            + self.q_lora_rank * self.heads * self.qk_head_dim()
            + h * self.cache_row()
            + self.kv_lora_rank
            + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
            + self.heads * self.v_head_dim * h
    }
    pub fn ffn_params(&self, intermediate: usize) -> usize {
        3 * self.hidden * intermediate
    }
    /// Parameters of one MoE block: routed experts, shared experts, router weight and bias.
    pub fn moe_params(&self) -> usize {
        (self.routed_experts + self.shared_experts) * self.ffn_params(self.expert_intermediate)
            + self.routed_experts * self.hidden
            + self.routed_experts
    }
    pub fn total_params(&self) -> usize {
        let per_layer_norms = 2 * self.hidden;
        self.vocab_size * self.hidden * 2
            + self.hidden
            + self.layers * (self.attention_params() + per_layer_norms)
            + self.dense_layers * self.ffn_params(self.dense_intermediate)
            + self.moe_layers() * self.moe_params()
    }
    /// Parameters one token touches: everything but the routed experts it was not sent to
    /// (and one embedding row instead of the table).
    pub fn active_params(&self) -> usize {
        let inactive = self.moe_layers()
            * (self.routed_experts - self.experts_per_token)
            * self.ffn_params(self.expert_intermediate);
        self.total_params() - inactive - (self.vocab_size - 1) * self.hidden
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepseek_mini_is_valid_and_sized_as_documented() {
        let c = MoeConfig::deepseek_mini();
        c.validate().unwrap();
        // docs/MODEL.md quotes these numbers.
        assert_eq!(c.total_params(), 11_271_216);
        assert_eq!(c.active_params(), 2_948_400);
        assert_eq!(c.attention_params(), 127_168);
        assert!(c.total_params() * 4 < 80_000_000, "f32 under 80 MB");
        assert_eq!(c.cache_row(), 80);
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let mut c = MoeConfig::deepseek_mini();
        c.experts_per_token = 17;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Invalid {
                field: "experts_per_token",
                ..
            })
        ));
        let mut c = MoeConfig::deepseek_mini();
        c.hidden = 250;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Invalid {
                field: "hidden",
                ..
            })
        ));
        assert!(MoeConfig::preset("gpt-5").is_err());
    }
}
