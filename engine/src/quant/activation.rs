//! FP8 activations as the MoE dispatch sends them: E4M3 codes with one scale per 1×128 tile of a
//! token's row (DeepSeek-V3's activation tiles), the scale a power of two.
//!
//! Why a power of two (DeepSeek-V3.1 and DeepGEMM's UE8M0 scales do the same): dividing by it is
//! exact, so the GPU's encoder (shaders/include/fp8_tiles.wgsl) and this one give the same codes
//! bit for bit, where an f32 `amax / 448` scale would leave them to two different divisions. The
//! cost is at most one bit of range: a tile's largest magnitude lands in (224, 448] instead of on
//! 448.
//!
//! The scale of a tile with largest magnitude `amax > 0` is `2^e` with `e` the smallest integer
//! for which `amax ≤ 448 · 2^e`, found from amax's bits: `e = exponent(amax) − 8`, plus one when
//! amax's significand exceeds 1.75 (448 = 1.75 · 2^8). A tile of zeros has scale 1. Exponents are
//! clamped to f32's normal range [−126, 127].

use super::minifloat::E4M3;

/// Elements per scale.
pub const TILE: usize = 128;

/// The tile scale for largest magnitude `amax` (finite, ≥ 0).
pub fn tile_scale(amax: f32) -> f32 {
    if amax == 0.0 || !amax.is_finite() {
        return 1.0;
    }
    let bits = amax.to_bits();
    // Subnormal amax: exponent(amax) < −126, so e < −134: clamped below anyway.
    let exponent = ((bits >> 23) & 0xFF) as i32 - 127;
    let significand_over_175 = (bits & 0x7F_FFFF) > 0x60_0000;
    let e = (exponent - 8 + i32::from(significand_over_175)).clamp(-126, 127);
    f32::from_bits(((e + 127) as u32) << 23)
}

/// One row in tiles: E4M3 codes (one per element) and one scale per tile (the last may be
/// partial).
pub fn quantize_row(x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let mut codes = Vec::with_capacity(x.len());
    let mut scales = Vec::with_capacity(x.len().div_ceil(TILE));
    for tile in x.chunks(TILE) {
        let amax = tile.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s = tile_scale(amax);
        codes.extend(tile.iter().map(|v| E4M3.encode(v / s)));
        scales.push(s);
    }
    (codes, scales)
}

/// What an expert computes with: each element decoded and scaled back.
pub fn round_trip(x: &[f32]) -> Vec<f32> {
    let (codes, scales) = quantize_row(x);
    codes
        .iter()
        .enumerate()
        .map(|(i, &c)| E4M3.decode(c) * scales[i / TILE])
        .collect()
}

/// How far `x` is from quantizing differently, relative: the smallest over its elements of the
/// distance of `x_i / scale` to the nearest E4M3 rounding tie over `|x_i / scale|`, and over its
/// tiles of the distance of amax to the edges of its scale's range (224·s, 448·s]. FP8
/// quantization is discontinuous: a computation of x that is off by a relative ε can change a
/// code (or a whole tile's scale) only where the margin is below ε. Zeros are skipped (they stay
/// zero under any small error).
pub fn margin(x: &[f32]) -> f64 {
    let mut m = f64::INFINITY;
    for tile in x.chunks(TILE) {
        let amax = tile.iter().fold(0f32, |m, v| m.max(v.abs()));
        if amax == 0.0 {
            continue;
        }
        let s = tile_scale(amax);
        let r = f64::from(amax) / (448.0 * f64::from(s));
        m = m.min((r - 0.5).abs() / 0.5).min((1.0 - r).abs());
        for &v in tile {
            let y = f64::from(v.abs() / s);
            if y == 0.0 {
                continue;
            }
            let code = E4M3.encode(y as f32);
            let here = f64::from(E4M3.decode(code));
            let next = |c: u8| f64::from(E4M3.decode(c));
            // Ties with the neighbouring codes (none above 448: values saturate).
            let up = (code < E4M3.max_code()).then(|| (here + next(code + 1)) / 2.0);
            let down = (code > 0).then(|| (here + next(code - 1)) / 2.0);
            for tie in [up, down].into_iter().flatten() {
                m = m.min((y - tie).abs() / y);
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn scales_put_the_largest_magnitude_in_the_top_binade() {
        assert_eq!(tile_scale(448.0), 1.0);
        assert_eq!(tile_scale(448.1), 2.0);
        assert_eq!(tile_scale(256.0), 1.0);
        assert_eq!(tile_scale(224.0), 0.5);
        assert_eq!(tile_scale(1.0), 2f32.powi(-8));
        assert_eq!(tile_scale(0.0), 1.0);
        assert_eq!(tile_scale(1e-40), 2f32.powi(-126));
    }

    #[test]
    fn zeros_stay_zero_and_the_tile_maximum_is_kept_to_its_rounding() {
        let mut x = vec![0.0f32; 200];
        x[5] = 3.0;
        x[150] = -0.01;
        let y = round_trip(&x);
        assert_eq!(y[0], 0.0);
        assert_eq!(y[5], 3.0);
        // Second tile: -0.01 is its own maximum, rounded to E4M3's 3 mantissa bits.
        assert!((y[150] + 0.01).abs() <= 0.01 / 16.0);
    }

    #[test]
    fn margin_is_the_distance_to_the_nearest_tie() {
        // amax 320 gives scale 1 (320/448 = 0.71 of the range: far from both edges), and 320 is
        // a code (ties 304 and 336: 5% away). 1.0625 is the tie of 1.0 and 1.125.
        let mut x = vec![0.0f32; 128];
        x[0] = 320.0;
        x[1] = 1.0625;
        assert_eq!(margin(&x), 0.0);
        // 1.0's ties are 0.96875 and 1.0625: 3.125% below it is the closest of all.
        x[1] = 1.0;
        assert!((margin(&x) - 0.03125).abs() < 1e-12, "{}", margin(&x));
        // amax just above 448·2^-1 = 224: its scale is about to halve.
        x[0] = 224.001;
        assert!(margin(&x) < 1e-5, "{}", margin(&x));
    }

    proptest! {
        /// Every element within half a quantum of its binade (relative 2^-4), or of the
        /// subnormal step 2^-9 · scale; the largest in each tile
        /// in [224, 448] · scale (rounding may take 224.5 down to 224).
        #[test]
        fn round_trip_error_is_within_e4m3_rounding(
            x in proptest::collection::vec(
                prop_oneof![-1e4f32..1e4, -1e-3f32..1e-3, Just(0.0f32)], 1..400)
        ) {
            let (codes, scales) = quantize_row(&x);
            let y = round_trip(&x);
            for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
                let s = f64::from(scales[i / TILE]);
                let bound = (f64::from(a.abs()) / 16.0).max(s * 2f64.powi(-10));
                prop_assert!((f64::from(a) - f64::from(b)).abs() <= bound * 1.000001,
                    "x {a} -> {b} (scale {s})");
            }
            for (t, tile) in codes.chunks(TILE).enumerate() {
                let top = tile.iter().map(|&c| E4M3.decode(c).abs()).fold(0f32, f32::max);
                let amax = x[t * TILE..].iter().take(TILE).fold(0f32, |m, v| m.max(v.abs()));
                if amax / scales[t] > 224.0 {
                    prop_assert!((224.0..=448.0).contains(&top), "tile {t}: top code {top}");
                }
            }
        }
    }
}
