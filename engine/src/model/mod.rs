//! The sandbox model, deepseek-mini: its config, its weights, the CPU reference forward (the
//! oracle), the eager WebGPU forward, and the decode loop over either.

pub mod accumulation;
pub mod accuracy;
pub mod config;
pub mod experts;
pub mod generate;
pub mod gpu;
pub mod reference;
pub mod tokenizer;
pub mod weights;

pub use config::{ConfigError, GateFunction, MoeConfig};
pub use weights::{Tensor, WeightError, Weights};

/// Why a forward pass or a generation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the input has no tokens")]
    EmptyInput,
    #[error("token id {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange { token: u32, vocab: usize },
    #[error("the context is full: {needed} positions needed, the model holds {max}")]
    ContextFull { needed: usize, max: usize },
    #[error("invalid sampling settings: {0}")]
    Sampling(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Weights(#[from] WeightError),
    #[error(transparent)]
    Kernel(#[from] crate::kernels::KernelError),
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
}
