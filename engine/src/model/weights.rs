//! The model's weights: typed by role (so the reference forward reads like the math), named as
//! in the safetensors file (so every error names the tensor), and built from one of two sources:
//! seeded synthetic values or a safetensors file whose names, shapes and dtypes are all checked.
//!
//! Names and shapes (row-major `[out, in]` for every projection, as PyTorch's `nn.Linear`):
//!
//! | name | shape |
//! |---|---|
//! | `embed.weight` | `[vocab, hidden]` |
//! | `layers.{i}.attn_norm.weight`, `layers.{i}.ffn_norm.weight` | `[hidden]` |
//! | `layers.{i}.attn.wq_a.weight` | `[q_lora_rank, hidden]` |
//! | `layers.{i}.attn.q_norm.weight` | `[q_lora_rank]` |
//! | `layers.{i}.attn.wq_b.weight` | `[heads·(qk_nope+qk_rope), q_lora_rank]` |
//! | `layers.{i}.attn.wkv_a.weight` | `[kv_lora_rank+qk_rope, hidden]` |
//! | `layers.{i}.attn.kv_norm.weight` | `[kv_lora_rank]` |
//! | `layers.{i}.attn.wkv_b.weight` | `[heads·(qk_nope+v_head), kv_lora_rank]` |
//! | `layers.{i}.attn.wo.weight` | `[hidden, heads·v_head]` |
//! | `layers.{i}.ffn.{w_gate,w_up}.weight` (dense layers) | `[dense_intermediate, hidden]` |
//! | `layers.{i}.ffn.w_down.weight` | `[hidden, dense_intermediate]` |
//! | `layers.{i}.moe.router.weight`, `.bias` | `[routed_experts, hidden]`, `[routed_experts]` |
//! | `layers.{i}.moe.experts.{e}.{w_gate,w_up,w_down}.weight` | as dense, `expert_intermediate` |
//! | `layers.{i}.moe.shared.{w_gate,w_up,w_down}.weight` | `shared_experts·expert_intermediate` |
//! | `norm.weight` | `[hidden]` |
//! | `lm_head.weight` | `[vocab, hidden]` |
//!
//! Per head, `wq_b` rows are `[q_nope | q_rope]` and `wkv_b` rows are `[k_nope | v]`; the
//! `wkv_a` output is `[c_kv | k_rope]`. Several shared experts are one wider FFN, as in
//! DeepSeek-V3. The router bias only steers the top-k choice (auxiliary-loss-free balancing); it
//! never enters the gate weights.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::{ConfigError, MoeConfig};

/// A dense f32 tensor, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Tensor {
    /// Rows of a 2-D tensor (its first dimension).
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    /// Columns of a 2-D tensor (its second dimension; 1 for a vector).
    pub fn cols(&self) -> usize {
        self.shape.get(1).copied().unwrap_or(1)
    }
}

/// A SwiGLU feed-forward: `w_down · (silu(w_gate·x) ⊙ (w_up·x))`.
#[derive(Clone, Debug)]
pub struct Ffn {
    pub w_gate: Tensor,
    pub w_up: Tensor,
    pub w_down: Tensor,
}

#[derive(Clone, Debug)]
pub struct Moe {
    pub router: Tensor,
    /// Added to the gate scores for the top-k choice only.
    pub router_bias: Tensor,
    pub experts: Vec<Ffn>,
    pub shared: Ffn,
}

#[derive(Clone, Debug)]
pub enum FeedForward {
    Dense(Ffn),
    Moe(Moe),
}

/// Multi-head Latent Attention.
#[derive(Clone, Debug)]
pub struct Attention {
    pub wq_a: Tensor,
    pub q_norm: Tensor,
    pub wq_b: Tensor,
    pub wkv_a: Tensor,
    pub kv_norm: Tensor,
    pub wkv_b: Tensor,
    pub wo: Tensor,
}

#[derive(Clone, Debug)]
pub struct Layer {
    pub attn_norm: Tensor,
    pub attn: Attention,
    pub ffn_norm: Tensor,
    pub ffn: FeedForward,
}

#[derive(Clone, Debug)]
pub struct Weights {
    pub config: MoeConfig,
    pub embed: Tensor,
    pub layers: Vec<Layer>,
    pub norm: Tensor,
    pub lm_head: Tensor,
}

/// Why a weight file was refused. Every variant names the tensor.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    #[error("the weight file is not valid safetensors: {0}")]
    Format(String),
    #[error("the weight file's config is invalid: {0}")]
    Config(#[from] ConfigError),
    #[error("the weight file's moescope.config metadata is not a valid config: {0}")]
    ConfigJson(String),
    #[error("tensor {name} is missing from the weight file")]
    Missing { name: String },
    #[error("tensor {name} has shape {got:?}, expected {expected:?}")]
    Shape {
        name: String,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error("tensor {name} has dtype {got}, expected F32 (or I8 with an F32 {name}.scales)")]
    Dtype { name: String, got: String },
    #[error("int8 tensor {name} needs an F32 tensor {name}.scales of shape {expected:?} (one scale per 1x32 block)")]
    Int8Scales { name: String, expected: Vec<usize> },
    #[error("tensor {name} contains a non-finite value at index {index}")]
    NonFinite { name: String, index: usize },
    #[error("the weight file has tensors this model does not use: {names}")]
    Unexpected { names: String },
}

/// How a synthetic tensor is initialised.
#[derive(Clone, Copy, Debug)]
enum Init {
    /// Uniform with variance `gain² / fan_in`: keeps `W·x` at the scale of `x`.
    Fan {
        fan_in: usize,
        gain: f32,
    },
    Ones,
    Zeros,
}

/// The metadata key under which a weight file carries its config as JSON.
pub const CONFIG_METADATA_KEY: &str = "moescope.config";

/// An int8-stored tensor `NAME` (dtype I8, codes row-major) comes with an F32 tensor
/// `NAME.scales` of shape `[rows, cols / 32]`: engine::quant's int8 format (1x32 blocks along a
/// row, value = code x scale). The shipped checkpoint stores its block projections so
/// (train/export.py writes it), which takes 45 MB of f32 down to 13 MB.
pub const INT8_SCALES_SUFFIX: &str = ".scales";

/// Little-endian f32s. The data of a tensor need not be 4-byte aligned in the file: decode,
/// don't cast.
fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Dequantizes an int8-stored tensor with its 1x32 block scales (`quant::dequantize`, the
/// same decoder the quantized kernels are checked against).
fn int8_values(
    name: &str,
    codes: &[u8],
    shape: &[usize],
    scales: Option<safetensors::tensor::TensorView<'_>>,
) -> Result<Vec<f32>, WeightError> {
    let (rows, cols) = match shape {
        [rows, cols] => (*rows, *cols),
        [n] => (1, *n),
        _ => (shape.iter().product(), 1),
    };
    let (_, block) = crate::quant::block::block_shape(crate::quant::Format::Int8);
    let expected = vec![rows, cols.div_ceil(block)];
    let scales = match scales {
        Some(v) if v.dtype() == safetensors::Dtype::F32 && v.shape() == expected.as_slice() => {
            f32_values(v.data())
        }
        _ => {
            return Err(WeightError::Int8Scales {
                name: name.to_owned(),
                expected,
            })
        }
    };
    if let Some(index) = scales.iter().position(|s| !s.is_finite() || *s < 0.0) {
        return Err(WeightError::NonFinite {
            name: format!("{name}{INT8_SCALES_SUFFIX}"),
            index,
        });
    }
    Ok(crate::quant::dequantize(&crate::quant::Quantized {
        format: crate::quant::Format::Int8,
        rows,
        cols,
        codes: codes.iter().map(|&b| u32::from(b)).collect(),
        scales,
        tensor_scale: 1.0,
    }))
}

impl Weights {
    /// These weights as the reference runs them with the routed experts' inputs in FP8 or not
    /// (the reference reads `MoeConfig::dispatch_fp8`): borrowed when the flag already matches,
    /// else a copy with it changed.
    pub fn dispatching(&self, fp8: bool) -> std::borrow::Cow<'_, Weights> {
        if self.config.dispatch_fp8 == fp8 {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut w = self.clone();
            w.config.dispatch_fp8 = fp8;
            std::borrow::Cow::Owned(w)
        }
    }

    /// Deterministic synthetic weights: the same seed gives the same model on every platform.
    /// Each tensor has its own ChaCha stream keyed by (seed, name), so the values do not depend
    /// on the order tensors are built in.
    pub fn synthetic(config: &MoeConfig, seed: u64) -> Result<Self, WeightError> {
        config.validate()?;
        Self::build(config, &mut |name, shape, init| {
            let n: usize = shape.iter().product();
            let data = match init {
                Init::Ones => vec![1.0; n],
                Init::Zeros => vec![0.0; n],
                Init::Fan { fan_in, gain } => {
                    // Uniform on [-a, a) has variance a²/3.
                    let a = gain * (3.0 / fan_in as f32).sqrt();
                    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ fnv1a(name));
                    (0..n).map(|_| rng.random_range(-a..a)).collect()
                }
            };
            Ok(Tensor {
                shape: shape.to_vec(),
                data,
            })
        })
    }

    /// Loads a safetensors file. The config comes from the file's `moescope.config` metadata
    /// (JSON) when present, else `default_config`. Every tensor must be present, of the right
    /// shape, F32 or int8 with its scales (`INT8_SCALES_SUFFIX`), and finite; tensors the model
    /// does not use are refused too (a misspelled name would otherwise silently fall back to
    /// nothing).
    pub fn from_safetensors(bytes: &[u8], default_config: &MoeConfig) -> Result<Self, WeightError> {
        let file = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| WeightError::Format(e.to_string()))?;
        let (_, metadata) = safetensors::SafeTensors::read_metadata(bytes)
            .map_err(|e| WeightError::Format(e.to_string()))?;
        let config = match metadata
            .metadata()
            .as_ref()
            .and_then(|m| m.get(CONFIG_METADATA_KEY))
        {
            Some(json) => serde_json::from_str::<MoeConfig>(json)
                .map_err(|e| WeightError::ConfigJson(e.to_string()))?,
            None => default_config.clone(),
        };
        config.validate()?;

        let mut used = std::collections::HashSet::new();
        let weights = Self::build(&config, &mut |name, shape, _| {
            let view = file.tensor(name).map_err(|_| WeightError::Missing {
                name: name.to_owned(),
            })?;
            if view.shape() != shape {
                return Err(WeightError::Shape {
                    name: name.to_owned(),
                    expected: shape.to_vec(),
                    got: view.shape().to_vec(),
                });
            }
            let data = match view.dtype() {
                safetensors::Dtype::F32 => f32_values(view.data()),
                safetensors::Dtype::I8 => {
                    let scales_name = format!("{name}{INT8_SCALES_SUFFIX}");
                    let data =
                        int8_values(name, view.data(), shape, file.tensor(&scales_name).ok())?;
                    used.insert(scales_name);
                    data
                }
                other => {
                    return Err(WeightError::Dtype {
                        name: name.to_owned(),
                        got: format!("{other:?}"),
                    })
                }
            };
            if let Some(index) = data.iter().position(|v| !v.is_finite()) {
                return Err(WeightError::NonFinite {
                    name: name.to_owned(),
                    index,
                });
            }
            used.insert(name.to_owned());
            Ok(Tensor {
                shape: shape.to_vec(),
                data,
            })
        })?;
        let mut unexpected: Vec<&str> = file
            .names()
            .into_iter()
            .filter(|n| !used.contains(*n))
            .collect();
        if !unexpected.is_empty() {
            unexpected.sort_unstable();
            return Err(WeightError::Unexpected {
                names: unexpected.join(", "),
            });
        }
        Ok(weights)
    }

    /// Serializes to safetensors, with the config in the metadata.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, WeightError> {
        let mut named = Vec::new();
        self.for_each(&mut |name, t| named.push((name.to_owned(), t)));
        let bytes: Vec<Vec<u8>> = named
            .iter()
            .map(|(_, t)| t.data.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let views = named
            .iter()
            .zip(&bytes)
            .map(|((name, t), b)| {
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, t.shape.clone(), b)
                    .map(|v| (name.clone(), v))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| WeightError::Format(e.to_string()))?;
        let config =
            serde_json::to_string(&self.config).map_err(|e| WeightError::Format(e.to_string()))?;
        let metadata = [(CONFIG_METADATA_KEY.to_owned(), config)]
            .into_iter()
            .collect();
        safetensors::serialize(views, Some(metadata))
            .map_err(|e| WeightError::Format(e.to_string()))
    }

    /// Visits every tensor with its file name, in a fixed order.
    pub fn for_each<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor)) {
        f("embed.weight", &self.embed);
        for (i, layer) in self.layers.iter().enumerate() {
            let p = format!("layers.{i}");
            f(&format!("{p}.attn_norm.weight"), &layer.attn_norm);
            let a = &layer.attn;
            for (n, t) in [
                ("wq_a", &a.wq_a),
                ("q_norm", &a.q_norm),
                ("wq_b", &a.wq_b),
                ("wkv_a", &a.wkv_a),
                ("kv_norm", &a.kv_norm),
                ("wkv_b", &a.wkv_b),
                ("wo", &a.wo),
            ] {
                f(&format!("{p}.attn.{n}.weight"), t);
            }
            f(&format!("{p}.ffn_norm.weight"), &layer.ffn_norm);
            fn ffn<'a>(f: &mut dyn FnMut(&str, &'a Tensor), prefix: &str, w: &'a Ffn) {
                f(&format!("{prefix}.w_gate.weight"), &w.w_gate);
                f(&format!("{prefix}.w_up.weight"), &w.w_up);
                f(&format!("{prefix}.w_down.weight"), &w.w_down);
            }
            match &layer.ffn {
                FeedForward::Dense(w) => ffn(f, &format!("{p}.ffn"), w),
                FeedForward::Moe(m) => {
                    f(&format!("{p}.moe.router.weight"), &m.router);
                    f(&format!("{p}.moe.router.bias"), &m.router_bias);
                    for (e, w) in m.experts.iter().enumerate() {
                        ffn(f, &format!("{p}.moe.experts.{e}"), w);
                    }
                    ffn(f, &format!("{p}.moe.shared"), &m.shared);
                }
            }
        }
        f("norm.weight", &self.norm);
        f("lm_head.weight", &self.lm_head);
    }

    /// Number of f32 values in all tensors.
    pub fn parameter_count(&self) -> usize {
        let mut n = 0;
        self.for_each(&mut |_, t| n += t.data.len());
        n
    }

    /// The one place that knows every tensor's name, shape and synthetic init.
    fn build(c: &MoeConfig, source: &mut Source<'_>) -> Result<Self, WeightError> {
        let d = c.hidden;
        let h = c.heads;
        // Output projections add into the residual stream twice per layer; scaling them by
        // 1/sqrt(2·layers) keeps the stream's variance bounded through all layers.
        let out_gain = 1.0 / ((2 * c.layers) as f32).sqrt();
        let fan = |fan_in: usize| Init::Fan { fan_in, gain: 1.0 };
        let mut layers = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let p = format!("layers.{i}");
            let mut w =
                |n: &str, shape: &[usize], init: Init| source(&format!("{p}.{n}"), shape, init);
            let attn_norm = w("attn_norm.weight", &[d], Init::Ones)?;
            let attn = Attention {
                wq_a: w("attn.wq_a.weight", &[c.q_lora_rank, d], fan(d))?,
                q_norm: w("attn.q_norm.weight", &[c.q_lora_rank], Init::Ones)?,
                wq_b: w(
                    "attn.wq_b.weight",
                    &[h * c.qk_head_dim(), c.q_lora_rank],
                    fan(c.q_lora_rank),
                )?,
                wkv_a: w("attn.wkv_a.weight", &[c.cache_row(), d], fan(d))?,
                kv_norm: w("attn.kv_norm.weight", &[c.kv_lora_rank], Init::Ones)?,
                wkv_b: w(
                    "attn.wkv_b.weight",
                    &[h * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank],
                    fan(c.kv_lora_rank),
                )?,
                wo: w(
                    "attn.wo.weight",
                    &[d, h * c.v_head_dim],
                    Init::Fan {
                        fan_in: h * c.v_head_dim,
                        gain: out_gain,
                    },
                )?,
            };
            let ffn_norm = w("ffn_norm.weight", &[d], Init::Ones)?;
            let ffn = if c.is_moe_layer(i) {
                let router = w("moe.router.weight", &[c.routed_experts, d], fan(d))?;
                let router_bias = w("moe.router.bias", &[c.routed_experts], Init::Zeros)?;
                let experts = (0..c.routed_experts)
                    .map(|e| {
                        swiglu(
                            source,
                            &format!("{p}.moe.experts.{e}"),
                            d,
                            c.expert_intermediate,
                            out_gain,
                        )
                    })
                    .collect::<Result<_, _>>()?;
                let shared = swiglu(
                    source,
                    &format!("{p}.moe.shared"),
                    d,
                    c.shared_experts * c.expert_intermediate,
                    out_gain,
                )?;
                FeedForward::Moe(Moe {
                    router,
                    router_bias,
                    experts,
                    shared,
                })
            } else {
                FeedForward::Dense(swiglu(
                    source,
                    &format!("{p}.ffn"),
                    d,
                    c.dense_intermediate,
                    out_gain,
                )?)
            };
            layers.push(Layer {
                attn_norm,
                attn,
                ffn_norm,
                ffn,
            });
        }
        Ok(Self {
            config: c.clone(),
            // Unit-variance embeddings: RMSNorm comes first in every block anyway.
            embed: source("embed.weight", &[c.vocab_size, d], fan(1))?,
            layers,
            norm: source("norm.weight", &[d], Init::Ones)?,
            lm_head: source("lm_head.weight", &[c.vocab_size, d], fan(d))?,
        })
    }
}

/// Where `build` gets each tensor: (name, shape, synthetic init) → tensor.
type Source<'a> = dyn FnMut(&str, &[usize], Init) -> Result<Tensor, WeightError> + 'a;

fn swiglu(
    source: &mut Source<'_>,
    prefix: &str,
    hidden: usize,
    inter: usize,
    out_gain: f32,
) -> Result<Ffn, WeightError> {
    let fan = Init::Fan {
        fan_in: hidden,
        gain: 1.0,
    };
    Ok(Ffn {
        w_gate: source(&format!("{prefix}.w_gate.weight"), &[inter, hidden], fan)?,
        w_up: source(&format!("{prefix}.w_up.weight"), &[inter, hidden], fan)?,
        w_down: source(
            &format!("{prefix}.w_down.weight"),
            &[hidden, inter],
            Init::Fan {
                fan_in: inter,
                gain: out_gain,
            },
        )?,
    })
}

/// FNV-1a of a tensor name: a stable per-tensor seed offset.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The tensor names a config expects, with their shapes (for docs and error messages).
pub fn expected_tensors(config: &MoeConfig) -> Result<HashMap<String, Vec<usize>>, WeightError> {
    let mut out = HashMap::new();
    Weights::build(config, &mut |name, shape, _| {
        out.insert(name.to_owned(), shape.to_vec());
        Ok(Tensor {
            shape: shape.to_vec(),
            data: Vec::new(),
        })
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mini() -> MoeConfig {
        MoeConfig::deepseek_mini()
    }

    #[test]
    fn synthetic_is_deterministic_and_sized_by_the_config() {
        let a = Weights::synthetic(&mini(), 7).unwrap();
        let b = Weights::synthetic(&mini(), 7).unwrap();
        let c = Weights::synthetic(&mini(), 8).unwrap();
        assert_eq!(a.parameter_count(), mini().total_params());
        assert_eq!(a.embed, b.embed);
        assert_ne!(a.embed, c.embed);
        assert_eq!(expected_tensors(&mini()).unwrap().len(), {
            let mut n = 0;
            a.for_each(&mut |_, _| n += 1);
            n
        });
    }

    #[test]
    fn safetensors_round_trip() {
        let w = Weights::synthetic(&mini(), 1).unwrap();
        let bytes = w.to_safetensors().unwrap();
        let back = Weights::from_safetensors(&bytes, &mini()).unwrap();
        assert_eq!(back.config, w.config);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        w.for_each(&mut |n, t| x.push((n.to_owned(), t.clone())));
        back.for_each(&mut |n, t| y.push((n.to_owned(), t.clone())));
        assert_eq!(x, y);
    }

    /// The synthetic model with one matrix stored as int8 codes plus `scales` (as given).
    fn with_int8(name: &str, scales: Option<(Vec<usize>, Vec<f32>)>) -> (Vec<u8>, Vec<f32>) {
        let w = Weights::synthetic(&mini(), 1).unwrap();
        let mut list = Vec::new();
        let mut expected = Vec::new();
        w.for_each(&mut |n, t| {
            if n == name {
                let q =
                    crate::quant::quantize(crate::quant::Format::Int8, &t.data, t.rows(), t.cols());
                expected = crate::quant::dequantize(&q);
                let codes: Vec<u8> = q.codes.iter().map(|&c| c as u8).collect();
                list.push((n.to_owned(), t.shape.clone(), safetensors::Dtype::I8, codes));
                let (shape, values) = scales
                    .clone()
                    .unwrap_or((vec![t.rows(), t.cols() / 32], q.scales.clone()));
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                list.push((format!("{n}.scales"), shape, safetensors::Dtype::F32, bytes));
            } else {
                let bytes: Vec<u8> = t.data.iter().flat_map(|v| v.to_le_bytes()).collect();
                list.push((
                    n.to_owned(),
                    t.shape.clone(),
                    safetensors::Dtype::F32,
                    bytes,
                ));
            }
        });
        let refs: Vec<_> = list
            .iter()
            .map(|(n, s, d, b)| (n.as_str(), s.clone(), *d, b.clone()))
            .collect();
        (file_with(&refs), expected)
    }

    #[test]
    fn int8_tensors_load_as_their_dequantized_values() {
        let name = "layers.1.moe.experts.3.w_up.weight";
        let (file, expected) = with_int8(name, None);
        let w = Weights::from_safetensors(&file, &mini()).unwrap();
        let mut got = Vec::new();
        w.for_each(&mut |n, t| {
            if n == name {
                got = t.data.clone();
            }
        });
        assert_eq!(got, expected);
    }

    #[test]
    fn int8_tensors_need_well_formed_scales() {
        let name = "layers.0.attn.wq_a.weight"; // [128, 256]: scales [128, 8]
        let e = Weights::from_safetensors(
            &with_int8(name, Some((vec![128, 4], vec![1.0; 512]))).0,
            &mini(),
        )
        .unwrap_err();
        assert!(
            matches!(e, WeightError::Int8Scales { ref expected, .. } if expected == &vec![128, 8]),
            "{e}"
        );
        let mut bad = vec![0.01f32; 128 * 8];
        bad[5] = f32::NAN;
        let e = Weights::from_safetensors(&with_int8(name, Some((vec![128, 8], bad))).0, &mini())
            .unwrap_err();
        assert!(
            matches!(e, WeightError::NonFinite { ref name, index: 5 } if name.ends_with(".scales")),
            "{e}"
        );
        // Codes without any scales tensor.
        let mut file = Vec::new();
        let (full, _) = with_int8(name, None);
        let st = safetensors::SafeTensors::deserialize(&full).unwrap();
        let kept: Vec<_> = st
            .tensors()
            .into_iter()
            .filter(|(n, _)| !n.ends_with(".scales"))
            .map(|(n, v)| (n, v.shape().to_vec(), v.dtype(), v.data().to_vec()))
            .collect();
        let refs: Vec<_> = kept
            .iter()
            .map(|(n, s, d, b)| (n.as_str(), s.clone(), *d, b.clone()))
            .collect();
        file.extend(file_with(&refs));
        let e = Weights::from_safetensors(&file, &mini()).unwrap_err();
        assert!(matches!(e, WeightError::Int8Scales { .. }), "{e}");
    }

    /// A small file with the given tensors (name, shape, dtype, values as bytes).
    fn file_with(tensors: &[(&str, Vec<usize>, safetensors::Dtype, Vec<u8>)]) -> Vec<u8> {
        let views: Vec<_> = tensors
            .iter()
            .map(|(n, s, d, b)| {
                (
                    n.to_string(),
                    safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
                )
            })
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    fn all_but(skip: &str, replace: Option<(Vec<usize>, safetensors::Dtype)>) -> Vec<u8> {
        let w = Weights::synthetic(&mini(), 1).unwrap();
        let mut list = Vec::new();
        w.for_each(&mut |n, t| {
            if n == skip {
                if let Some((shape, dtype)) = &replace {
                    let len: usize = shape.iter().product::<usize>() * dtype.bitsize() / 8;
                    list.push((n.to_owned(), shape.clone(), *dtype, vec![0u8; len]));
                }
            } else {
                let b = t.data.iter().flat_map(|v| v.to_le_bytes()).collect();
                list.push((n.to_owned(), t.shape.clone(), safetensors::Dtype::F32, b));
            }
        });
        let refs: Vec<_> = list
            .iter()
            .map(|(n, s, d, b)| (n.as_str(), s.clone(), *d, b.clone()))
            .collect();
        file_with(&refs)
    }

    #[test]
    fn missing_tensor_is_named() {
        let bytes = all_but("layers.2.moe.experts.5.w_up.weight", None);
        let e = Weights::from_safetensors(&bytes, &mini()).unwrap_err();
        assert!(
            e.to_string().contains("layers.2.moe.experts.5.w_up.weight"),
            "{e}"
        );
        assert!(matches!(e, WeightError::Missing { .. }));
    }

    #[test]
    fn wrong_shape_and_dtype_are_named() {
        let name = "layers.0.attn.wkv_b.weight";
        let bytes = all_but(name, Some((vec![8, 8], safetensors::Dtype::F32)));
        let e = Weights::from_safetensors(&bytes, &mini()).unwrap_err();
        assert!(matches!(e, WeightError::Shape { .. }), "{e}");
        assert!(e.to_string().contains(name));

        let bytes = all_but(name, Some((vec![256, 64], safetensors::Dtype::F16)));
        let e = Weights::from_safetensors(&bytes, &mini()).unwrap_err();
        assert!(matches!(e, WeightError::Dtype { .. }), "{e}");
        assert!(e.to_string().contains(name));
    }

    #[test]
    fn truncated_and_garbage_files_are_errors() {
        let bytes = Weights::synthetic(&mini(), 1)
            .unwrap()
            .to_safetensors()
            .unwrap();
        for cut in [0, 7, 100, bytes.len() / 2, bytes.len() - 1] {
            let e = Weights::from_safetensors(&bytes[..cut], &mini()).unwrap_err();
            assert!(matches!(e, WeightError::Format(_)), "cut at {cut}: {e}");
        }
        assert!(Weights::from_safetensors(b"not a weight file at all", &mini()).is_err());
    }

    #[test]
    fn unexpected_and_non_finite_tensors_are_named() {
        let w = Weights::synthetic(&mini(), 1).unwrap();
        let mut list = Vec::new();
        w.for_each(&mut |n, t| {
            let mut data = t.data.clone();
            if n == "norm.weight" {
                data[3] = f32::NAN;
            }
            let b: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
            list.push((n.to_owned(), t.shape.clone(), safetensors::Dtype::F32, b));
        });
        let refs: Vec<_> = list
            .iter()
            .map(|(n, s, d, b)| (n.as_str(), s.clone(), *d, b.clone()))
            .collect();
        let e = Weights::from_safetensors(&file_with(&refs), &mini()).unwrap_err();
        assert!(matches!(e, WeightError::NonFinite { index: 3, .. }), "{e}");

        let mut refs = refs;
        refs.retain(|(n, ..)| *n != "norm.weight");
        refs.push((
            "norm.weight",
            vec![256],
            safetensors::Dtype::F32,
            vec![0; 1024],
        ));
        refs.push((
            "layers.9.extra",
            vec![1],
            safetensors::Dtype::F32,
            vec![0; 4],
        ));
        let e = Weights::from_safetensors(&file_with(&refs), &mini()).unwrap_err();
        assert!(e.to_string().contains("layers.9.extra"), "{e}");
    }
}
