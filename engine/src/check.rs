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

/// f32 unit roundoff, 2^-24.
pub const F32_UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 24) as f64;

/// γ_n = n·u / (1 − n·u): the classical bound on the relative error of a result that went
/// through `n` f32 roundings in a chain (Higham, "Accuracy and Stability of Numerical
/// Algorithms", §3.1). A computed dot product is within γ_n·Σ|a·b| of the exact one, n the
/// longest chain of roundings one term goes through.
pub fn gamma(n: usize) -> f64 {
    let nu = n as f64 * F32_UNIT_ROUNDOFF;
    nu / (1.0 - nu)
}

impl Tolerance {
    /// A relative tolerance of γ_n (`gamma`), for a kernel whose summation order puts at most
    /// `n` roundings on one term.
    pub fn gamma(n: usize, why: &'static str) -> Self {
        Tolerance {
            abs: 0.0,
            rel: gamma(n),
            why,
        }
    }
}

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
    fn gamma_is_n_units_to_first_order() {
        assert_eq!(gamma(0), 0.0);
        let g = gamma(1000);
        assert!(g > 1000.0 * F32_UNIT_ROUNDOFF && g < 1000.0 * F32_UNIT_ROUNDOFF * 1.001);
    }

    #[test]
    fn length_difference_fails() {
        let c = compare(&[1.0], &[1.0, 2.0], TOL);
        assert_eq!(c.length_mismatch, Some((1, 2)));
        assert!(!c.passed());
    }
}
