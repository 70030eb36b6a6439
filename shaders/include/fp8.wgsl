// fp8: the E4M3 codec of the kernels, and FP8 activations in 1×128 tiles (the encoder of
// engine::quant::activation, where the layout and the reason for power-of-two scales are
// documented once). Encoding gives the CPU's codes bit for bit: the scale comes from amax's bits,
// dividing by it is exact, and E4M3 rounding is done on the bits, to nearest with ties to even.
// Decoding goes through f16, as weights.wgsl explains. Prepended to every kernel that reads or
// writes FP8 (before weights.wgsl where both are).

const FP8_TILE: u32 = 128u;

// e for the tile scale 2^e: the smallest power of two with amax ≤ 448·2^e (448 = 1.75·2^8),
// clamped to [-126, 127]; 0 for a tile of zeros. `amax_bits`: the bits of a finite amax ≥ 0.
fn fp8_tile_exponent(amax_bits: u32) -> i32 {
    if (amax_bits == 0u) {
        return 0i;
    }
    let over_175 = select(0i, 1i, (amax_bits & 0x7FFFFFu) > 0x600000u);
    return clamp(i32(amax_bits >> 23u) - 127i - 8i + over_175, -126i, 127i);
}

// 2^e for e in [-126, 127], built from bits (no division, no pow: both exact).
fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127i) << 23u);
}

// The E4M3 code of y, |y| ≤ 448 (the tile scale guarantees it), round to nearest even.
fn e4m3_encode(y: f32) -> u32 {
    let bits = bitcast<u32>(y);
    let sign = (bits >> 24u) & 0x80u;
    let a = bits & 0x7FFFFFFFu;
    var code: u32;
    if (a < 0x3C800000u) {
        // Below 2^-6, E4M3's subnormals: multiples of 2^-9. |y|·512 is exact; round() ties to
        // even. A round up to 8 is the smallest normal, whose code is also 8.
        code = u32(round(bitcast<f32>(a) * 512.0));
    } else {
        // Normal: keep 3 of the 23 mantissa bits, to nearest even; a carry moves the exponent.
        let e = (a >> 23u) - 120u;                  // E4M3 exponent field (bias 7)
        let m = a & 0x7FFFFFu;
        let q = m >> 20u;
        let rest = m & 0xFFFFFu;
        let up = select(0u, 1u, rest > 0x80000u || (rest == 0x80000u && (q & 1u) == 1u));
        code = min((e << 3u) + q + up, 0x7Eu);
    }
    return sign | code;
}

// Four values' codes in one word, element order (v.x in the low byte).
fn e4m3_encode_word(v: vec4<f32>) -> u32 {
    return e4m3_encode(v.x) | (e4m3_encode(v.y) << 8u) | (e4m3_encode(v.z) << 16u)
        | (e4m3_encode(v.w) << 24u);
}

// The four E4M3 codes of a word (element order) × 2^-8, as two f16 pairs s.0eeee.mmm0000000.
// Codes 1 and 3 sit in the high byte of each half, sign already on bit 15: the magnitude moves
// down one bit. Codes 0 and 2 move up: magnitude by 7 bits, sign by 8.
fn e4m3_word(word: u32) -> vec4<f32> {
    let odd = unpack2x16float(((word >> 1u) & 0x3F803F80u) | (word & 0x80008000u));
    let even = unpack2x16float(((word << 7u) & 0x3F803F80u) | ((word << 8u) & 0x80008000u));
    return vec4(even.x, odd.x, even.y, odd.y);
}

// Bit 7 of each byte that is an E4M3 NaN (S.1111.111): the decoder above would read it as 480.
fn e4m3_nan_bytes(word: u32) -> u32 {
    return ((word & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
}

