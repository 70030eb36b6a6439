//! MoEscope's engine: everything that computes. The sandbox model (its CPU reference and its WGSL
//! kernels on wgpu) and, standing alone, the rack model. No web-sys, no leptos: it builds for the
//! host (tests, CLI, benchmarks) and for wasm32 (the app).

pub mod bench;
pub mod check;
pub mod gpu;
pub mod kernels;
pub mod model;
pub mod plan;
pub mod quant;
pub mod rack;
pub mod rng;
