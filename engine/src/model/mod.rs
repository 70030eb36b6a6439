//! The sandbox model, deepseek-mini: its config, its weights, the CPU reference forward (the
//! oracle), the eager WebGPU forward, and the decode loop over either.

pub mod config;
pub mod reference;
pub mod weights;

pub use config::{ConfigError, GateFunction, MoeConfig};
pub use weights::{Tensor, WeightError, Weights};
