//! Number formats for weights, activations and the KV cache: bytes per element (block scales
//! included) and which tensor-core rate a GEMM runs at.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Bf16,
    Fp8,
    Fp4,
}

impl Precision {
    pub const NAMES: &'static str = "bf16, fp8, fp4";

    pub fn name(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
            Precision::Fp4 => "fp4",
        }
    }

    /// Bytes per weight, scales included. FP8: one f32 scale per 128x128 block (DeepSeek-V3 TR
    /// s3.3.2). FP4 is NVFP4: 4-bit E2M1 plus one E4M3 scale per 16 values = 4.5 bits.
    pub fn weight_bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0 + 4.0 / (128.0 * 128.0),
            Precision::Fp4 => 0.5 + 1.0 / 16.0,
        }
    }

    /// Bytes per activation element. FP8 activations carry one f32 scale per 1x128 tile
    /// (DeepSeek-V3 TR s3.3.2); FP4 the NVFP4 layout.
    pub fn activation_bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0 + 4.0 / 128.0,
            Precision::Fp4 => 0.5 + 1.0 / 16.0,
        }
    }

    /// Bytes per KV-cache element (per-tensor scales: negligible).
    pub fn kv_bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0,
            Precision::Fp4 => 0.5 + 1.0 / 16.0,
        }
    }

    /// A GEMM runs at the rate of the wider of its two operands (W4A8 runs on FP8 tensor cores).
    pub fn gemm(weights: Precision, activations: Precision) -> Precision {
        weights.min(activations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvfp4_is_four_and_a_half_bits() {
        assert_eq!(Precision::Fp4.weight_bytes() * 8.0, 4.5);
    }

    #[test]
    fn the_wider_operand_sets_the_gemm_rate() {
        assert_eq!(
            Precision::gemm(Precision::Fp4, Precision::Fp8),
            Precision::Fp8
        );
        assert_eq!(
            Precision::gemm(Precision::Fp4, Precision::Fp4),
            Precision::Fp4
        );
        assert_eq!(
            Precision::gemm(Precision::Fp8, Precision::Bf16),
            Precision::Bf16
        );
    }
}
