//! Small floating-point formats, encoded from f32 by round-to-nearest-even and saturation, as the
//! GPU kernels will decode them. One generic codec over (exponent bits, mantissa bits, bias),
//! with each format's rules for its top codes:
//!
//! | format | bits | bias | max finite | NaN | ∞ |
//! |---|---|---|---|---|---|
//! | FP8 E4M3 (OCP "E4M3FN", NVIDIA) | s.eeee.mmm | 7 | 448 = 1.75·2⁸ | s.1111.111 | none |
//! | FP8 E5M2 | s.eeeee.mm | 15 | 57344 = 1.75·2¹⁵ | s.11111.{01,10,11} | s.11111.00 |
//! | FP4 E2M1 (NVFP4, MXFP4 elements) | s.ee.m | 1 | 6 | none | none |
//!
//! Encoding saturates: finite values beyond the largest finite value, and ±∞, become ±max
//! (NVIDIA's `satfinite` conversions). NaN becomes the format's NaN (E2M1 has none: 0). Exponent
//! field 0 holds the subnormals `m · 2^(1 − bias − mbits)`.

/// A minifloat layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Minifloat {
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    pub bias: i32,
    /// How the all-ones exponent is used.
    pub top: Top,
}

/// What the all-ones exponent field means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Top {
    /// Ordinary numbers (E2M1).
    Finite,
    /// Ordinary numbers except all-ones mantissa, which is NaN (E4M3FN).
    NanOnly,
    /// IEEE: mantissa 0 is ∞, the rest NaN (E5M2).
    Ieee,
}

pub const E4M3: Minifloat = Minifloat {
    exponent_bits: 4,
    mantissa_bits: 3,
    bias: 7,
    top: Top::NanOnly,
};

pub const E5M2: Minifloat = Minifloat {
    exponent_bits: 5,
    mantissa_bits: 2,
    bias: 15,
    top: Top::Ieee,
};

pub const E2M1: Minifloat = Minifloat {
    exponent_bits: 2,
    mantissa_bits: 1,
    bias: 1,
    top: Top::Finite,
};

impl Minifloat {
    pub fn bits(self) -> u32 {
        1 + self.exponent_bits + self.mantissa_bits
    }

    fn sign_bit(self) -> u8 {
        1 << (self.exponent_bits + self.mantissa_bits)
    }

    /// The code of the largest finite magnitude.
    pub fn max_code(self) -> u8 {
        let all_ones_exp = (1u8 << self.exponent_bits) - 1;
        let mant_mask = (1u8 << self.mantissa_bits) - 1;
        match self.top {
            Top::Finite => (all_ones_exp << self.mantissa_bits) | mant_mask,
            Top::NanOnly => (all_ones_exp << self.mantissa_bits) | (mant_mask - 1),
            Top::Ieee => ((all_ones_exp - 1) << self.mantissa_bits) | mant_mask,
        }
    }

    pub fn max(self) -> f32 {
        self.decode(self.max_code())
    }

    /// The canonical NaN code (positive), or 0 for a format without NaN.
    pub fn nan_code(self) -> u8 {
        let all_ones_exp = (1u8 << self.exponent_bits) - 1;
        let mant_mask = (1u8 << self.mantissa_bits) - 1;
        match self.top {
            Top::Finite => 0,
            Top::NanOnly | Top::Ieee => (all_ones_exp << self.mantissa_bits) | mant_mask,
        }
    }

    /// Smallest positive normal value, `2^(1 − bias)`.
    pub fn min_normal(self) -> f64 {
        2f64.powi(1 - self.bias)
    }

    /// Round to nearest, ties to even; saturating; NaN to NaN.
    pub fn encode(self, x: f32) -> u8 {
        if x.is_nan() {
            return self.nan_code();
        }
        let sign = if x.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        let a = f64::from(x.abs());
        let max = f64::from(self.max());
        if a >= max {
            return sign | self.max_code();
        }
        let mbits = self.mantissa_bits as i32;
        let code = if a < self.min_normal() {
            // Subnormal: code = m. A round up to 2^mbits lands exactly on the smallest normal,
            // whose code is also 2^mbits.
            let quantum = 2f64.powi(1 - self.bias - mbits);
            (a / quantum).round_ties_even() as u32
        } else {
            let mut e = a.log2().floor() as i32;
            // log2 of values just below a power of two can round up: correct it.
            if 2f64.powi(e) > a {
                e -= 1;
            }
            let quantum = 2f64.powi(e - mbits);
            let mut q = (a / quantum).round_ties_even() as u32;
            if q == 1 << (mbits + 1) {
                e += 1;
                q = 1 << mbits;
            }
            (((e + self.bias) as u32) << mbits) | (q - (1 << mbits))
        };
        let code = code as u8;
        // Rounding up from just below max can only reach max itself (max is a code), never
        // beyond; but guard the NaN/∞ codes anyway.
        if code > self.max_code() {
            sign | self.max_code()
        } else {
            sign | code
        }
    }

    pub fn decode(self, code: u8) -> f32 {
        let mbits = self.mantissa_bits;
        let total = self.exponent_bits + mbits;
        let negative = code >> total & 1 == 1;
        let exp = u32::from(code >> mbits) & ((1 << self.exponent_bits) - 1);
        let mant = u32::from(code) & ((1 << mbits) - 1);
        let all_ones = (1 << self.exponent_bits) - 1;
        let magnitude = match (self.top, exp == all_ones) {
            (Top::NanOnly, true) if mant == (1 << mbits) - 1 => f64::NAN,
            (Top::Ieee, true) if mant == 0 => f64::INFINITY,
            (Top::Ieee, true) => f64::NAN,
            _ if exp == 0 => f64::from(mant) * 2f64.powi(1 - self.bias - mbits as i32),
            _ => {
                (1.0 + f64::from(mant) / f64::from(1u32 << mbits))
                    * 2f64.powi(exp as i32 - self.bias)
            }
        };
        let v = magnitude as f32;
        if negative {
            -v
        } else {
            v
        }
    }
}

/// The E8M0 scale of MXFP4: `2^(e − 127)`, code 255 is NaN.
pub fn e8m0_decode(code: u8) -> f32 {
    if code == 255 {
        f32::NAN
    } else {
        2f32.powi(i32::from(code) - 127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_e2m1_value_is_the_nvfp4_table() {
        let values: Vec<f32> = (0..16).map(|c| E2M1.decode(c)).collect();
        assert_eq!(
            values,
            [
                0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0,
                -6.0
            ]
        );
    }

    #[test]
    fn limits_and_special_codes() {
        assert_eq!(E4M3.max(), 448.0);
        assert_eq!(E5M2.max(), 57344.0);
        assert_eq!(E2M1.max(), 6.0);
        assert!(E4M3.decode(0x7F).is_nan());
        assert!(E4M3.decode(0xFF).is_nan());
        assert_eq!(E5M2.decode(0x7C), f32::INFINITY);
        assert!(E5M2.decode(0x7D).is_nan());
        // Smallest subnormals: 2^-9 and 2^-16.
        assert_eq!(E4M3.decode(1), 2f32.powi(-9));
        assert_eq!(E5M2.decode(1), 2f32.powi(-16));
        assert_eq!(e8m0_decode(127), 1.0);
        assert!(e8m0_decode(255).is_nan());
    }

    #[test]
    fn encoding_rounds_to_nearest_even_and_saturates() {
        // 1.0625 lies halfway between 1.0 and 1.125 in E4M3: ties to the even mantissa (1.0).
        assert_eq!(E4M3.decode(E4M3.encode(1.0625)), 1.0);
        assert_eq!(E4M3.decode(E4M3.encode(1.1875)), 1.25);
        assert_eq!(E2M1.decode(E2M1.encode(5.0)), 4.0); // tie between 4 and 6: even code
        assert_eq!(E2M1.decode(E2M1.encode(2.5)), 2.0);
        assert_eq!(E4M3.decode(E4M3.encode(1e6)), 448.0);
        assert_eq!(E4M3.decode(E4M3.encode(f32::NEG_INFINITY)), -448.0);
        assert_eq!(E5M2.decode(E5M2.encode(f32::INFINITY)), 57344.0);
        assert!(E4M3.decode(E4M3.encode(f32::NAN)).is_nan());
        assert!(E5M2.decode(E5M2.encode(f32::NAN)).is_nan());
        assert_eq!(E2M1.decode(E2M1.encode(f32::NAN)), 0.0);
        // Below half the smallest subnormal: zero, keeping the sign.
        assert_eq!(E4M3.encode(-1e-9), 0x80);
    }

    #[test]
    fn every_finite_code_round_trips() {
        for f in [E4M3, E5M2, E2M1] {
            for code in 0..(1u16 << f.bits()) {
                let code = code as u8;
                let v = f.decode(code);
                if v.is_finite() {
                    assert_eq!(
                        f.decode(f.encode(v)).to_bits(),
                        v.to_bits(),
                        "{f:?} code {code:#x}"
                    );
                }
            }
        }
    }
}
