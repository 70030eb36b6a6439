// weights: reading one weight matrix in any of the sandbox's formats, dequantized in registers.
// Prepended to every kernel that streams weights (gemv, gate_up_swiglu, qkv_rope_scale); those
// declare `w: array<vec4<u32>>` and `x_tile: array<vec4<f32>, ...>`, which the functions here use.
//
// The layout is engine::quant::matrix's (documented there once): a matrix is a run of 16-byte
// chunks, first its codes row-major (K / elements-per-chunk chunks per row, little-endian in each
// u32), then its scales as u32 words. One invocation loads one whole chunk per step, so every
// format streams 16-byte loads as the f32 kernel did; only the unpacking differs.
//
// FORMAT   element            chunk = CHUNK_X4 vec4s of x   scale
// 0 f32    32-bit float       4 elements  (1)                none
// 1 f16    IEEE half          8 elements  (2)                none
// 2 bf16   bfloat16           8 elements  (2)                none
// 3 int8   two's complement   16 elements (4)                f32 per 1×32 block
// 4 fp8    E4M3               16 elements (4)                f32 per 128×128 block
// 5 nvfp4  E2M1               32 elements (8)                E4M3 byte per 1×16 block × f32 tensor scale
// 6 mxfp4  E2M1               32 elements (8)                E8M0 byte per 1×32 block
//
// Every product is accumulated in f32. A chunk's codes are dotted with x first and the block scale
// applied once per block, which is the same sum up to f32 rounding as dequantizing each weight.

override FORMAT: u32 = 0u;
override CHUNK_X4: u32 = 1u;

// The x tile is read by every lane at its own chunk: lane l reads vec4s l·CHUNK_X4 + j, lanes
// CHUNK_X4·16 bytes apart, which for 8- and 4-bit weights would all fall into the same few
// shared-memory banks. Slot i ^ ((i / 8) mod CHUNK_X4) spreads each group of 8 vec4s (128 bytes,
// one pass of the banks) so that the lanes reading vec4 j of their chunks hit distinct banks;
// for f32 (CHUNK_X4 = 1) it is the identity.
fn x_slot(i: u32) -> u32 {
    return i ^ ((i >> 3u) & (CHUNK_X4 - 1u));
}

fn x_at(i: u32) -> vec4<f32> {
    return x_tile[x_slot(i)];
}

// x as FP8 dispatch records (engine::quant::activation): E4M3 codes, 4 per word, from vec4
// `codes`, and one power-of-two f32 scale per 1×128 tile from vec4 `scales`. Decoded once, while
// staging the tile, so the weight loop is the same for both; the values are exactly the CPU's
// decode × scale (the f16 route below is exact, so are the power-of-two products).
override X_FP8: bool = false;

// The j-th vec4 of a token's x row.
fn load_x(codes: u32, scales: u32, j: u32) -> vec4<f32> {
    if (!X_FP8) {
        return x[codes + j];
    }
    let word = bitcast<u32>(x[codes + j / 4u][j % 4u]);
    // Tile j / 32 (32 vec4s = 128 elements); its scale is word j / 32 of the scales.
    let scale = x[scales + j / 128u][(j / 32u) % 4u];
    return e4m3_word(word) * (256.0 * scale);
}

// --- Unpacking. Minifloats go through f16 rather than f32: an E4M3 or E2M1 code's exponent and
// mantissa bits, moved into an f16's, make an f16 whose value is the code's value times a power of
// two (2^-8 for E4M3, 2^-14 for E2M1, folded into the block scale), subnormal codes included, since
// f16's own subnormals are exact. `unpack2x16float` then converts two at a time. A handful of bit
// operations per element; decoding field by field in f32 cost ~13 and made the 4-bit GEMV
// ALU-bound.

// E2M1 codes in nibbles 0 and 4 of `t` as an f16 pair: s.ee.m → s.000ee.m000000000.
fn e2m1_pair(t: u32) -> vec2<f32> {
    return unpack2x16float(((t & 0x00070007u) << 9u) | ((t & 0x00080008u) << 12u));
}

// Σ of the 8 E2M1 elements of `word` (× 2^-14) times x_at(x4), x_at(x4 + 1).
fn fp4_word_dot(word: u32, x4: u32) -> f32 {
    let p0 = e2m1_pair(word & 0x000F000Fu);          // elements 0, 4
    let p1 = e2m1_pair((word >> 4u) & 0x000F000Fu);  // 1, 5
    let p2 = e2m1_pair((word >> 8u) & 0x000F000Fu);  // 2, 6
    let p3 = e2m1_pair((word >> 12u) & 0x000F000Fu); // 3, 7
    return dot(vec4(p0.x, p1.x, p2.x, p3.x), x_at(x4)) + dot(vec4(p0.y, p1.y, p2.y, p3.y), x_at(x4 + 1u));
}

// int8 lanes of a word: byte ^ 0x80 in the low mantissa bits of 2^23 is 2^23 + 128 + b exactly.
fn int8s_of(word: u32) -> vec4<f32> {
    let u = ((vec4(word) >> vec4(0u, 8u, 16u, 24u)) & vec4(0xFFu)) ^ vec4(0x4B000080u);
    return bitcast<vec4<f32>>(u) - vec4(8388736.0);
}

// One E4M3 scale byte → f32 (once per block: clarity over speed). Scales are never NaN.
fn e4m3_scale(b: u32) -> f32 {
    let e = (b >> 3u) & 15u;
    let m = b & 7u;
    let normal = bitcast<f32>(((e + 120u) << 23u) | (m << 20u));
    return select(f32(m) * (1.0 / 512.0), normal, e > 0u);
}

fn scale_word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

fn scale_byte(first_word: u32, i: u32) -> u32 {
    return (scale_word(first_word + i / 4u) >> (8u * (i % 4u))) & 0xFFu;
}

// Row `row`, chunk `c` of the [m, k] matrix that starts at chunk `base`, dotted with the x
// vec4s x_at(x4), x_at(x4 + 1), ...
fn weight_chunk_dot(base: u32, m: u32, k: u32, row: u32, c: u32, x4: u32) -> f32 {
    let row_chunks = k / (4u * CHUNK_X4);
    let q = w[base + row * row_chunks + c];
    let scales = 4u * (base + m * row_chunks);
    switch FORMAT {
        case 1u: {
            return dot(vec4(unpack2x16float(q.x), unpack2x16float(q.y)), x_at(x4))
                + dot(vec4(unpack2x16float(q.z), unpack2x16float(q.w)), x_at(x4 + 1u));
        }
        case 2u: {
            // bf16 is the high half of an f32: element 2j is the low half of word j.
            let even = bitcast<vec4<f32>>(q << vec4(16u));
            let odd = bitcast<vec4<f32>>(q & vec4(0xFFFF0000u));
            return dot(vec4(even.x, odd.x, even.y, odd.y), x_at(x4))
                + dot(vec4(even.z, odd.z, even.w, odd.w), x_at(x4 + 1u));
        }
        case 3u: {
            let s = dot(int8s_of(q.x), x_at(x4)) + dot(int8s_of(q.y), x_at(x4 + 1u))
                + dot(int8s_of(q.z), x_at(x4 + 2u)) + dot(int8s_of(q.w), x_at(x4 + 3u));
            // 16 elements: half of one 1×32 block.
            return s * bitcast<f32>(scale_word(scales + row * ((k + 31u) / 32u) + c / 2u));
        }
        case 4u: {
            var s = dot(e4m3_word(q.x), x_at(x4)) + dot(e4m3_word(q.y), x_at(x4 + 1u))
                + dot(e4m3_word(q.z), x_at(x4 + 2u)) + dot(e4m3_word(q.w), x_at(x4 + 3u));
            // A NaN weight makes the row NaN, as dequantizing it would. (The NaN is built from
            // data so that it is not a constant expression, which WGSL forbids.)
            let nan = e4m3_nan_bytes(q.x) | e4m3_nan_bytes(q.y) | e4m3_nan_bytes(q.z) | e4m3_nan_bytes(q.w);
            s = select(s, bitcast<f32>(0x7FC00000u | (nan & 0u)), nan != 0u);
            // 16 elements inside one 128×128 block; 2^8 undoes the f16 placement.
            let block = (row / 128u) * ((k + 127u) / 128u) + c / 8u;
            return s * (bitcast<f32>(scale_word(scales + block)) * 256.0);
        }
        case 5u: {
            // Two 1×16 blocks: words x, y and words z, w; their two E4M3 scales share one word;
            // 2^14 undoes the f16 placement.
            let s0 = fp4_word_dot(q.x, x4) + fp4_word_dot(q.y, x4 + 2u);
            let s1 = fp4_word_dot(q.z, x4 + 4u) + fp4_word_dot(q.w, x4 + 6u);
            let block = row * (k / 16u) + 2u * c;
            let pair = scale_word(scales + 1u + block / 4u) >> (8u * (block % 4u));
            let tensor = bitcast<f32>(scale_word(scales));
            return s0 * ((e4m3_scale(pair & 0xFFu) * tensor) * 16384.0)
                + s1 * ((e4m3_scale((pair >> 8u) & 0xFFu) * tensor) * 16384.0);
        }
        case 6u: {
            let s = fp4_word_dot(q.x, x4) + fp4_word_dot(q.y, x4 + 2u)
                + fp4_word_dot(q.z, x4 + 4u) + fp4_word_dot(q.w, x4 + 6u);
            // One 1×32 block; E8M0 code e is 2^(e − 127), the f32 with exponent field e; and
            // 2^14 undoes the f16 placement.
            return s * (bitcast<f32>(scale_byte(scales, row * (k / 32u) + c) << 23u) * 16384.0);
        }
        default: {
            return dot(bitcast<vec4<f32>>(q), x_at(x4));
        }
    }
}
