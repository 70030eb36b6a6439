//! Number formats for weights and activations on the CPU: the encoders that produce what the
//! quantized kernels read (`matrix`: the one GPU layout, unpacked by
//! shaders/include/weights.wgsl) and the decoders the reference uses.
//!
//! Block scaling (each block stores its own scale; decode = code value × scale):
//!
//! | format | element | block | scale |
//! |---|---|---|---|
//! | int8 | signed 8-bit, symmetric, ±127 | 1×32 along a row | f32 = amax / 127 |
//! | fp8-e4m3 (DeepSeek-V3) | E4M3 | 128×128 for weights, 1×128 for activations | f32 = amax / 448 |
//! | nvfp4 | E2M1 | 1×16 along a row | E4M3 block scale × one f32 per-tensor scale |
//! | mxfp4 (OCP MX) | E2M1 | 1×32 along a row | E8M0 = 2^(⌊log2 amax⌋ − 2), at least 2^-126 |
//!
//! Blocks at the right or bottom edge may be partial; their scale covers what they hold.
//! Packing for the GPU (`pack`): codes little-endian in u32 words, element i of a row in bits
//! `bits·(i mod (32/bits))` of the row's word `i / (32/bits)`, each row starting on a new word.

pub mod activation;
pub mod block;
pub mod matrix;
pub mod minifloat;
pub mod pack;

pub use block::{dequantize, quantize, Quantized};

use serde::{Deserialize, Serialize};

/// A weight format the sandbox can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    F32,
    F16,
    Bf16,
    Int8,
    Fp8E4m3,
    Nvfp4,
    Mxfp4,
}

impl Format {
    pub const ALL: [Format; 7] = [
        Format::F32,
        Format::F16,
        Format::Bf16,
        Format::Int8,
        Format::Fp8E4m3,
        Format::Nvfp4,
        Format::Mxfp4,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::F16 => "f16",
            Format::Bf16 => "bf16",
            Format::Int8 => "int8",
            Format::Fp8E4m3 => "fp8-e4m3",
            Format::Nvfp4 => "nvfp4",
            Format::Mxfp4 => "mxfp4",
        }
    }

    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The element type and block scaling, in words (the table above).
    pub fn scaling(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::F16 => "f16",
            Format::Bf16 => "bf16",
            Format::Int8 => "int8, f32 scale per 1×32",
            Format::Fp8E4m3 => "FP8 E4M3, f32 scale per 128×128",
            Format::Nvfp4 => "NVFP4: E2M1, E4M3 scale per 1×16",
            Format::Mxfp4 => "MXFP4: E2M1, E8M0 scale per 1×32",
        }
    }

    /// Storage per weight, scales included, for a large matrix (full blocks): f16/bf16 2, int8
    /// 1 + 4/32, fp8 1 + 4/16384, nvfp4 0.5 + 1/16 (+ one f32 per tensor), mxfp4 0.5 + 1/32.
    pub fn bytes_per_parameter(self) -> f64 {
        match self {
            Format::F32 => 4.0,
            Format::F16 | Format::Bf16 => 2.0,
            Format::Int8 => 1.0 + 4.0 / 32.0,
            Format::Fp8E4m3 => 1.0 + 4.0 / (128.0 * 128.0),
            Format::Nvfp4 => 0.5 + 1.0 / 16.0,
            Format::Mxfp4 => 0.5 + 1.0 / 32.0,
        }
    }
}
