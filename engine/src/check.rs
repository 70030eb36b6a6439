//! The one comparison of computed numbers against the reference, shared by tests, the CLI and the
//! app's in-browser check: `|got − want| ≤ abs + rel·scale`, where `scale` is `|want|` unless the
//! caller knows a better magnitude (for a dot product, Σ|a·b| bounds the rounding error).

use serde::Serialize;

/// A tolerance with the reason it is what it is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
    pub why: &'static str,
}

/// One element outside the tolerance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mismatch {
    pub index: usize,
    pub got: f32,
    pub want: f32,
    pub allowed: f64,
}

/// The outcome of a comparison: the worst errors seen and the first mismatches.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub len: usize,
    pub max_abs_error: f64,
    /// The largest `|got − want| / allowed`: below 1 passes.
    pub worst_ratio_to_allowed: f64,
    pub mismatches: Vec<Mismatch>,
    pub mismatch_count: usize,
    pub length_mismatch: Option<(usize, usize)>,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.mismatch_count == 0 && self.length_mismatch.is_none()
    }

    /// A one-paragraph report for a failing test or the UI.
    pub fn describe(&self, what: &str) -> String {
        if let Some((got, want)) = self.length_mismatch {
            return format!("{what}: got {got} values, expected {want}");
        }
        let mut s = format!(
            "{what}: {} of {} values outside tolerance; max |err| {:.3e}, worst err/allowed {:.3}",
            self.mismatch_count, self.len, self.max_abs_error, self.worst_ratio_to_allowed
        );
        for m in &self.mismatches {
            s.push_str(&format!(
                "\n  [{}] got {} want {} (allowed ±{:.3e})",
                m.index, m.got, m.want, m.allowed
            ));
        }
        s
    }
}

const MAX_REPORTED: usize = 8;

/// Compares with `scale = |want|`.
pub fn compare(got: &[f32], want: &[f32], tol: Tolerance) -> Comparison {
    let scale: Vec<f64> = want.iter().map(|w| f64::from(*w).abs()).collect();
    compare_scaled(got, want, &scale, tol)
}

/// Compares with a caller-given magnitude per element.
pub fn compare_scaled(got: &[f32], want: &[f32], scale: &[f64], tol: Tolerance) -> Comparison {
    let mut out = Comparison {
        len: want.len(),
        max_abs_error: 0.0,
        worst_ratio_to_allowed: 0.0,
        mismatches: Vec::new(),
        mismatch_count: 0,
        length_mismatch: None,
    };
    if got.len() != want.len() || scale.len() != want.len() {
        out.length_mismatch = Some((got.len(), want.len()));
        return out;
    }
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (f64::from(g) - f64::from(w)).abs();
        let allowed = tol.abs + tol.rel * s;
        // NaN in either side is a mismatch: `err <= allowed` is false for NaN.
        let ok = err <= allowed;
        out.max_abs_error = if err.is_nan() {
            f64::NAN
        } else {
            out.max_abs_error.max(err)
        };
        let ratio = if allowed > 0.0 {
            err / allowed
        } else {
            f64::INFINITY
        };
        if !ratio.is_nan() {
            out.worst_ratio_to_allowed = out.worst_ratio_to_allowed.max(ratio);
        }
        if !ok {
            out.mismatch_count += 1;
            if out.mismatches.len() < MAX_REPORTED {
                out.mismatches.push(Mismatch {
                    index: i,
                    got: g,
                    want: w,
                    allowed,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Tolerance = Tolerance {
        abs: 1e-3,
        rel: 1e-2,
        why: "test",
    };

    #[test]
    fn equal_values_pass_and_report_zero_error() {
        let c = compare(&[1.0, -2.0], &[1.0, -2.0], TOL);
        assert!(c.passed());
        assert_eq!(c.max_abs_error, 0.0);
    }

    #[test]
    fn error_beyond_abs_plus_rel_fails_with_index() {
        // allowed at 100.0 is 1e-3 + 1.0 = 1.001; an error of 1.5 fails, 0.9 passes.
        let c = compare(&[0.0, 101.5, 100.9], &[0.0, 100.0, 100.0], TOL);
        assert_eq!(c.mismatch_count, 1);
        assert_eq!(c.mismatches[0].index, 1);
        assert!(!c.passed());
    }

    #[test]
    fn nan_is_a_mismatch() {
        let c = compare(&[f32::NAN], &[1.0], TOL);
        assert!(!c.passed());
    }

    #[test]
    fn length_difference_fails() {
        let c = compare(&[1.0], &[1.0, 2.0], TOL);
        assert_eq!(c.length_mismatch, Some((1, 2)));
        assert!(!c.passed());
    }
}

/// The tolerance table: one entry per kernel, each with its reason.
pub mod tolerances {
    use super::Tolerance;
    use crate::quant::Format;

    /// f32 unit roundoff.
    const U: f64 = 1.0 / (1u64 << 24) as f64;

    /// gemv in f32, compared with `scale = Σ|w·x|` per row. The classical bound for a computed
    /// dot product is γ_n·Σ|w·x| with γ_n ≈ n·u, n the longest chain of roundings one term goes
    /// through. In our kernel: 1 product, 3 adds inside the vec4 `dot`, ⌈K/(4·lanes)⌉ adds into
    /// the lane's accumulator, log2(lanes) levels of the tree. (FMA contraction only removes
    /// roundings.)
    pub fn gemv_f32(k: usize, lanes: u32) -> Tolerance {
        let lanes = lanes.max(1);
        let n = 1 + 3 + k.div_ceil(4 * lanes as usize) + lanes.ilog2() as usize;
        Tolerance {
            abs: 0.0,
            rel: n as f64 * U / (1.0 - n as f64 * U),
            why: "forward error bound γ_n·Σ|w·x| of the kernel's summation order",
        }
    }

    /// gemv with weights in `format`, against the reference on the dequantized weights. As
    /// `gemv_f32`, for the kernel's order: the roundings of one term inside its chunk
    /// (`chunk_roundings`), then ⌈K/(E·lanes)⌉ adds into the lane's accumulator (E elements per
    /// chunk) and log2(lanes) in the tree.
    pub fn gemv_quantized(format: Format, k: usize, lanes: u32) -> Tolerance {
        if format == Format::F32 {
            return gemv_f32(k, lanes);
        }
        let lanes = lanes.max(1);
        let e = crate::quant::matrix::elements_per_chunk(format);
        let n = chunk_roundings(format) + k.div_ceil(e * lanes as usize) + lanes.ilog2() as usize;
        Tolerance {
            abs: 0.0,
            rel: n as f64 * U / (1.0 - n as f64 * U),
            why: "forward error bound γ_n·Σ|w·x| of the quantized kernel's summation order",
        }
    }

    /// The roundings one term of a chunk goes through before the chunk's sum reaches the lane's
    /// accumulator, in weights.wgsl's order. FP4 chains its products as FMAs through a whole
    /// scale block (32 elements for MXFP4, 16 for NVFP4); the other formats take 1 product and 3
    /// adds inside a vec4 `dot`, then E/4 − 1 adds between dots. Scaled formats add the multiply
    /// by the block scale and the reference's own rounding of code × scale, NVFP4 two more (its
    /// tensor scale, applied to each row sum, and in the reference to each weight).
    fn chunk_roundings(format: Format) -> usize {
        let e = crate::quant::matrix::elements_per_chunk(format);
        let chain = match format {
            Format::Mxfp4 => 32,
            Format::Nvfp4 => 16,
            _ => 1 + 3 + (e / 4 - 1),
        };
        chain + scale_roundings(format)
    }

    fn scale_roundings(format: Format) -> usize {
        match format {
            Format::F32 | Format::F16 | Format::Bf16 => 0,
            Format::Nvfp4 => 4,
            _ => 2,
        }
    }

    /// gemv_wide (FP4, x in registers), against the reference on the dequantized weights: a
    /// term goes through its half chunk's chain of 16 FMAs, the block scale (with the
    /// reference's rounding, `scale_roundings`), the add of the chunk's two halves, four 4-to-1
    /// steps of the workgroup's reduction (3 adds each), and one add per later pass over K
    /// (`gemv::WIDE_K` elements a pass).
    pub fn gemv_wide(format: Format, k: usize) -> Tolerance {
        let passes = k.div_ceil(crate::kernels::gemv::WIDE_K as usize);
        let n = 16 + scale_roundings(format) + 1 + 4 * 3 + (passes - 1);
        Tolerance {
            abs: 0.0,
            rel: n as f64 * U / (1.0 - n as f64 * U),
            why: "forward error bound γ_n·Σ|w·x| of gemv_wide's summation order",
        }
    }

    /// gate_up_swiglu: silu(g)·u of two gemv rows, compared with
    /// `scale = 1.1·Σ|wg·x|·|u| + |silu(g)|·Σ|wu·x| + |silu(g)·u|`: each dot product carries the
    /// gemv bound, silu's slope is below 1.1, and exp, the division and the product add a few
    /// roundings (Vulkan's exp: 3 ulp + 2 for the rest).
    pub fn swiglu_f32(k: usize, lanes: u32) -> Tolerance {
        swiglu_quantized(Format::F32, k, lanes)
    }

    /// `swiglu_f32` with both matrices in `format` (the `gemv_quantized` bound).
    pub fn swiglu_quantized(format: Format, k: usize, lanes: u32) -> Tolerance {
        Tolerance {
            why: "the gemv bound through silu's slope, plus exp (3 ulp) and 2 roundings",
            rel: gemv_quantized(format, k, lanes).rel + 5.0 * U,
            abs: 0.0,
        }
    }

    /// qkv_rope_scale: a gemv row, rotated with its pair by an f32 cos/sin and scaled, compared
    /// with `scale = s·(Σ|w_a·x| + Σ|w_b·x|)` over the pair (s the softmax scale): the gemv
    /// bound of each row, the table's rounding (1 ulp each) and 3 roundings of the rotation.
    pub fn rope_epilogue_f32(k: usize) -> Tolerance {
        rope_epilogue_quantized(Format::F32, k)
    }

    /// `rope_epilogue_f32` with the weights in `format` (the `gemv_quantized` bound).
    pub fn rope_epilogue_quantized(format: Format, k: usize) -> Tolerance {
        Tolerance {
            why: "the gemv bound of both rows of a pair, plus cos/sin rounding and 3 roundings",
            rel: gemv_quantized(format, k, 16).rel + 5.0 * U,
            abs: 0.0,
        }
    }

    /// Split-K attention against the f64 reference, compared with `scale = Σ_s p_s·|v_s|`.
    ///
    /// Not a proven bound: a score's error (γ_row·Σ|q·k|) moves its probability by a relative
    /// amount of the same order, exp adds 3 ulp, and the merge of chunks rescales by e^(m_j−M).
    /// With row 80 and scores of order 1 that is a few 1e-6 relative; 1e-4 leaves room for the
    /// 3 levels of summation while a wrong mask, a dropped chunk or a bad merge weight moves the
    /// output by O(0.1–1).
    pub fn split_k_attention() -> Tolerance {
        Tolerance {
            why: "score rounding through softmax and the chunk merge: empirical, ~30x measured",
            rel: 1e-4,
            abs: 1e-6,
        }
    }

    /// Logits of the whole model on the GPU against the f64-accumulating reference.
    ///
    /// Not a proven bound: the error compounds through 4 layers of f32 GEMVs (K ≤ 768), the
    /// absorbed MLA weights (rounded once to f32 after an f64 product), and the shader's exp and
    /// inverseSqrt (a few ULP each in Vulkan). Measured on lavapipe: 2.3e-6 worst over a
    /// 21-token prefill and 20 decode steps (docs/MODEL.md), on logits of order 1, while any
    /// wiring mistake (a wrong stride, a missed residual, a flipped expert) moves logits by
    /// O(0.1–1). The tolerance sits between the two, ~40x above the measured error.
    pub fn model_logits() -> Tolerance {
        Tolerance {
            abs: 1e-4,
            rel: 1e-4,
            why: "f32 rounding through the whole model: empirical, ~40x the measured error",
        }
    }
}
