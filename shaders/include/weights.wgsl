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

// E2M1 (s.ee.m) → f32, four at once: exponent field e − 1 + 127 and the mantissa bit on top of
// f32's mantissa; e = 0 is the subnormal 0.5·m, built directly rather than as an f32 subnormal
// (which a GPU may flush to zero).
fn e2m1(n: vec4<u32>) -> vec4<f32> {
    let e = (n >> vec4(1u)) & vec4(3u);
    let m = n & vec4(1u);
    let normal = ((e + vec4(126u)) << vec4(23u)) | (m << vec4(22u));
    let magnitude = select(m * 0x3F000000u, normal, e > vec4(0u));
    return bitcast<vec4<f32>>(magnitude | ((n & vec4(8u)) << vec4(28u)));
}

// E4M3 (s.eeee.mmm, bias 7, no infinities, S.1111.111 is NaN) → f32, four at once.
fn e4m3(b: vec4<u32>) -> vec4<f32> {
    let e = (b >> vec4(3u)) & vec4(15u);
    let m = b & vec4(7u);
    let normal = bitcast<vec4<f32>>(((e + vec4(120u)) << vec4(23u)) | (m << vec4(20u)));
    var v = select(vec4<f32>(m) * (1.0 / 512.0), normal, e > vec4(0u));
    // The NaN pattern is built from b so that it is not a constant expression (WGSL forbids NaN
    // constants).
    let nan = bitcast<vec4<f32>>(vec4(0x7FC00000u) | (b & vec4(0u)));
    v = select(v, nan, (b & vec4(0x7Fu)) == vec4(0x7Fu));
    return select(v, -v, (b & vec4(0x80u)) != vec4(0u));
}

fn bytes_of(word: u32) -> vec4<u32> {
    return (vec4(word) >> vec4(0u, 8u, 16u, 24u)) & vec4(0xFFu);
}

// int8 lanes of a word, sign-extended (arithmetic shift of i32).
fn int8s_of(word: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4(word) << vec4(24u, 16u, 8u, 0u)) >> vec4(24u));
}

// Σ of the 8 E2M1 elements of `word` times x_tile[x4], x_tile[x4 + 1].
fn fp4_word_dot(word: u32, x4: u32) -> f32 {
    let lo = e2m1((vec4(word) >> vec4(0u, 4u, 8u, 12u)) & vec4(15u));
    let hi = e2m1((vec4(word) >> vec4(16u, 20u, 24u, 28u)) & vec4(15u));
    return dot(lo, x_tile[x4]) + dot(hi, x_tile[x4 + 1u]);
}

fn scale_word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

fn scale_byte(first_word: u32, i: u32) -> u32 {
    return (scale_word(first_word + i / 4u) >> (8u * (i % 4u))) & 0xFFu;
}

// Row `row`, chunk `c` of the [m, k] matrix that starts at chunk `base`, dotted with the x_tile
// vec4s from `x4` on.
fn weight_chunk_dot(base: u32, m: u32, k: u32, row: u32, c: u32, x4: u32) -> f32 {
    let row_chunks = k / (4u * CHUNK_X4);
    let q = w[base + row * row_chunks + c];
    let scales = 4u * (base + m * row_chunks);
    switch FORMAT {
        case 1u: {
            return dot(vec4(unpack2x16float(q.x), unpack2x16float(q.y)), x_tile[x4])
                + dot(vec4(unpack2x16float(q.z), unpack2x16float(q.w)), x_tile[x4 + 1u]);
        }
        case 2u: {
            // bf16 is the high half of an f32: element 2j is the low half of word j.
            let even = bitcast<vec4<f32>>(q << vec4(16u));
            let odd = bitcast<vec4<f32>>(q & vec4(0xFFFF0000u));
            return dot(vec4(even.x, odd.x, even.y, odd.y), x_tile[x4])
                + dot(vec4(even.z, odd.z, even.w, odd.w), x_tile[x4 + 1u]);
        }
        case 3u: {
            let s = dot(int8s_of(q.x), x_tile[x4]) + dot(int8s_of(q.y), x_tile[x4 + 1u])
                + dot(int8s_of(q.z), x_tile[x4 + 2u]) + dot(int8s_of(q.w), x_tile[x4 + 3u]);
            // 16 elements: half of one 1×32 block.
            return s * bitcast<f32>(scale_word(scales + row * ((k + 31u) / 32u) + c / 2u));
        }
        case 4u: {
            let s = dot(e4m3(bytes_of(q.x)), x_tile[x4]) + dot(e4m3(bytes_of(q.y)), x_tile[x4 + 1u])
                + dot(e4m3(bytes_of(q.z)), x_tile[x4 + 2u]) + dot(e4m3(bytes_of(q.w)), x_tile[x4 + 3u]);
            // 16 elements inside one 128×128 block.
            let block = (row / 128u) * ((k + 127u) / 128u) + c / 8u;
            return s * bitcast<f32>(scale_word(scales + block));
        }
        case 5u: {
            // Two 1×16 blocks: words x, y and words z, w; their two E4M3 scales share one word.
            let s0 = fp4_word_dot(q.x, x4) + fp4_word_dot(q.y, x4 + 2u);
            let s1 = fp4_word_dot(q.z, x4 + 4u) + fp4_word_dot(q.w, x4 + 6u);
            let block = row * (k / 16u) + 2u * c;
            let pair = e4m3(bytes_of(scale_word(scales + 1u + block / 4u)));
            let tensor = bitcast<f32>(scale_word(scales));
            let first = (block % 4u) == 0u;
            return s0 * (select(pair.z, pair.x, first) * tensor)
                + s1 * (select(pair.w, pair.y, first) * tensor);
        }
        case 6u: {
            let s = fp4_word_dot(q.x, x4) + fp4_word_dot(q.y, x4 + 2u)
                + fp4_word_dot(q.z, x4 + 4u) + fp4_word_dot(q.w, x4 + 6u);
            // One 1×32 block; E8M0 code e is 2^(e − 127), i.e. the f32 with exponent field e.
            return s * bitcast<f32>(scale_byte(scales, row * (k / 32u) + c) << 23u);
        }
        default: {
            return dot(bitcast<vec4<f32>>(q), x_tile[x4]);
        }
    }
}
