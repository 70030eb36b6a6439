//! Block-scaled quantization of a row-major matrix (see the table in `quant`), and its exact
//! inverse for the reference: `dequantize(quantize(w))` is what a quantized kernel multiplies by.

use half::{bf16, f16};

use super::minifloat::{e8m0_decode, E2M1, E4M3};
use super::Format;

/// A quantized matrix: one code per element (row-major, unpacked here), one scale per block.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    /// The element codes: f16/bf16 bits, int8 as two's complement, minifloat codes, f32 bits.
    pub codes: Vec<u32>,
    /// Block scales as decoded values (exactly representable in the format's scale encoding),
    /// row-major over blocks.
    pub scales: Vec<f32>,
    /// NVFP4's per-tensor scale (1 elsewhere).
    pub tensor_scale: f32,
}

/// `(block rows, block cols)` of a format.
pub fn block_shape(format: Format) -> (usize, usize) {
    match format {
        Format::F32 | Format::F16 | Format::Bf16 => (1, 1),
        Format::Int8 | Format::Mxfp4 => (1, 32),
        Format::Fp8E4m3 => (128, 128),
        Format::Nvfp4 => (1, 16),
    }
}

/// The largest finite magnitude: a NaN or ∞ weight does not poison its block's scale (it encodes
/// as the format's NaN, or saturates).
fn amax(values: impl Iterator<Item = f32>) -> f32 {
    values
        .filter(|v| v.is_finite())
        .fold(0.0f32, |m, v| m.max(v.abs()))
}

/// Quantizes `data` (`rows × cols`, row-major) to `format`.
pub fn quantize(format: Format, data: &[f32], rows: usize, cols: usize) -> Quantized {
    assert_eq!(data.len(), rows * cols, "quantize: data is not rows × cols");
    let (br, bc) = block_shape(format);
    let (nbr, nbc) = (rows.div_ceil(br), cols.div_ceil(bc));
    let mut codes = vec![0u32; data.len()];
    let mut scales = Vec::with_capacity(nbr * nbc);
    let tensor_scale = match format {
        // Block scales then span E4M3's range: amax_block / 6 / tensor_scale ≤ 448.
        Format::Nvfp4 => {
            let a = amax(data.iter().copied());
            if a > 0.0 {
                a / (6.0 * E4M3.max())
            } else {
                1.0
            }
        }
        _ => 1.0,
    };
    for bi in 0..nbr {
        for bj in 0..nbc {
            let cells: Vec<usize> = (bi * br..((bi + 1) * br).min(rows))
                .flat_map(|r| (bj * bc..((bj + 1) * bc).min(cols)).map(move |c| r * cols + c))
                .collect();
            let a = amax(cells.iter().map(|&i| data[i]));
            let scale = match format {
                Format::F32 | Format::F16 | Format::Bf16 => 1.0,
                Format::Int8 => a / 127.0,
                Format::Fp8E4m3 => a / E4M3.max(),
                Format::Nvfp4 => E4M3.decode(E4M3.encode(a / E2M1.max() / tensor_scale)),
                Format::Mxfp4 => mx_scale(a),
            };
            scales.push(scale);
            let effective = scale * tensor_scale;
            for i in cells {
                codes[i] = encode(format, data[i], effective);
            }
        }
    }
    Quantized {
        format,
        rows,
        cols,
        codes,
        scales,
        tensor_scale,
    }
}

/// OCP MX: shared exponent ⌊log2 amax⌋ − emax(E2M1) = ⌊log2 amax⌋ − 2, as an E8M0 value. The
/// exponent stops at −126 (code 1), not −127: 2^-127 would be an f32 subnormal, which GPUs may
/// flush to zero, and blocks that small (amax < 2^-124) lose nothing to the larger scale.
fn mx_scale(a: f32) -> f32 {
    if a == 0.0 || !a.is_finite() {
        return 1.0;
    }
    let x = (f64::from(a).log2().floor() as i32 - 2).clamp(-126, 127);
    e8m0_decode((x + 127) as u8)
}

fn encode(format: Format, x: f32, scale: f32) -> u32 {
    let scaled = |x: f32| if scale > 0.0 { x / scale } else { 0.0 };
    match format {
        Format::F32 => x.to_bits(),
        // Saturating like the other formats: f16 would otherwise turn weights above 65504 into ∞.
        Format::F16 => u32::from(f16::from_f32(x.clamp(-65504.0, 65504.0)).to_bits()),
        Format::Bf16 => u32::from(bf16::from_f32(x).to_bits()),
        Format::Int8 => {
            let q = scaled(x).round_ties_even().clamp(-127.0, 127.0);
            // NaN clamps to NaN and casts to 0.
            u32::from((q as i8) as u8)
        }
        Format::Fp8E4m3 => u32::from(E4M3.encode(scaled(x))),
        Format::Nvfp4 | Format::Mxfp4 => u32::from(E2M1.encode(scaled(x))),
    }
}

/// The values a kernel computes with: code value × block scale (× tensor scale).
pub fn dequantize(q: &Quantized) -> Vec<f32> {
    let (br, bc) = block_shape(q.format);
    let nbc = q.cols.div_ceil(bc);
    q.codes
        .iter()
        .enumerate()
        .map(|(i, &code)| {
            let (r, c) = (i / q.cols, i % q.cols);
            let scale = q.scales[(r / br) * nbc + c / bc] * q.tensor_scale;
            match q.format {
                Format::F32 => f32::from_bits(code),
                Format::F16 => f16::from_bits(code as u16).to_f32(),
                Format::Bf16 => bf16::from_bits(code as u16).to_f32(),
                Format::Int8 => f32::from(code as u8 as i8) * scale,
                Format::Fp8E4m3 => E4M3.decode(code as u8) * scale,
                Format::Nvfp4 | Format::Mxfp4 => E2M1.decode(code as u8) * scale,
            }
        })
        .collect()
}

/// The most `dequantize(quantize(x))` can be off by for one finite element `x` whose block has
/// the effective scale `s` (block scale × tensor scale): the format's half spacing near |x|, its
/// subnormal half quantum, and saturation beyond its largest value.
pub fn error_bound(format: Format, x: f32, s: f32) -> f64 {
    let (x, s) = (f64::from(x.abs()), f64::from(s));
    match format {
        Format::F32 => 0.0,
        Format::F16 => x * 2f64.powi(-11) + 2f64.powi(-25) + (x - 65504.0).max(0.0),
        Format::Bf16 => x * 2f64.powi(-8) + 1e-38,
        // Half a step, plus the f32 roundings of x / s (which can move a near-tie to the farther
        // code: at most 2^-24 of |x|) and of code × s (2^-24 of |y| ≤ |x| + s/2).
        Format::Int8 => 0.5 * s + (2.0 * x + 0.5 * s) * 2f64.powi(-24),
        // Half a unit in the last place (3 mantissa bits), or half the subnormal quantum.
        Format::Fp8E4m3 => x * 2f64.powi(-4) + s * 2f64.powi(-10),
        // E2M1: relative half-spacing at most 1/4 (between 4 and 6), subnormal half-quantum
        // 1/4; values beyond 6·s (a block scale rounded down, or MX's power-of-two scale)
        // saturate.
        Format::Nvfp4 | Format::Mxfp4 => 0.25 * x + 0.25 * s + (x - 6.0 * s).max(0.0),
    }
}

/// The effective scale (block × tensor) of element `i` of a quantized matrix.
pub fn effective_scale(q: &Quantized, i: usize) -> f32 {
    let (br, bc) = block_shape(q.format);
    let nbc = q.cols.div_ceil(bc);
    q.scales[(i / q.cols / br) * nbc + (i % q.cols) / bc] * q.tensor_scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check_bounds(format: Format, data: &[f32], rows: usize, cols: usize) {
        let q = quantize(format, data, rows, cols);
        let back = dequantize(&q);
        for (i, (&x, &y)) in data.iter().zip(&back).enumerate() {
            let s = effective_scale(&q, i);
            let err = (f64::from(x) - f64::from(y)).abs();
            let bound = error_bound(format, x, s);
            assert!(
                err <= bound * (1.0 + 1e-6),
                "{format:?} [{i}] {x} -> {y} (scale {s}, err {err}, bound {bound})"
            );
        }
    }

    fn matrix() -> impl Strategy<Value = (usize, usize, Vec<f32>)> {
        (1usize..40, 1usize..140).prop_flat_map(|(r, c)| {
            let values = prop_oneof![
                4 => -8.0f32..8.0,
                1 => -1e-6f32..1e-6,
                1 => -1e4f32..1e4,
                1 => Just(0.0f32),
            ];
            (Just(r), Just(c), proptest::collection::vec(values, r * c))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn every_format_stays_within_its_error_bound((rows, cols, data) in matrix()) {
            for format in Format::ALL {
                check_bounds(format, &data, rows, cols);
            }
        }
    }

    #[test]
    fn adversarial_blocks() {
        let cases: [(&str, Vec<f32>); 5] = [
            ("zeros", vec![0.0; 256]),
            ("all equal", vec![3.3; 256]),
            (
                "one huge value",
                (0..256).map(|i| if i == 5 { 1e30 } else { 0.01 }).collect(),
            ),
            ("subnormal f32", vec![1e-40; 256]),
            (
                "alternating signs",
                (0..256)
                    .map(|i| if i % 2 == 0 { 1.0 } else { -7.0 })
                    .collect(),
            ),
        ];
        for (what, data) in cases {
            for format in Format::ALL {
                let back = dequantize(&quantize(format, &data, 2, 128));
                assert!(back.iter().all(|v| v.is_finite()), "{what} {format:?}");
                check_bounds(format, &data, 2, 128);
            }
        }
        // An all-equal block is its own maximum: it maps to the top code, off only by the
        // rounding of the scale (NVFP4's E4M3 scale: at most 2^-4 relative).
        for format in [Format::Int8, Format::Fp8E4m3, Format::Nvfp4] {
            let back = dequantize(&quantize(format, &[3.3; 64], 1, 64));
            assert!(
                back.iter().all(|v| (v - 3.3).abs() < 3.3 * 0.07),
                "{format:?} {back:?}"
            );
        }
    }

    #[test]
    fn nan_and_infinity_become_finite_codes_or_nan_as_the_format_says() {
        let data = [f32::NAN, f32::INFINITY, 1.0, -2.0];
        let fp8 = dequantize(&quantize(Format::Fp8E4m3, &data, 1, 4));
        assert!(fp8[0].is_nan());
        // ∞ saturates to the block's largest value; the finite values keep the block's scale.
        assert_eq!(&fp8[1..], &[2.0, 1.0, -2.0][..]);
        let f16 = dequantize(&quantize(Format::F16, &[1e6, -1e6], 1, 2));
        assert_eq!(f16, [65504.0, -65504.0]);
        let int8 = dequantize(&quantize(Format::Int8, &data, 1, 4));
        assert_eq!(int8[0], 0.0);
    }

    #[test]
    fn bytes_per_parameter_follow_the_block_shapes() {
        assert_eq!(Format::Nvfp4.bytes_per_parameter(), 0.5625);
        assert_eq!(Format::Mxfp4.bytes_per_parameter(), 0.53125);
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
        }
    }
}
