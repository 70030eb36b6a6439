// weights: reading one weight matrix in any of the sandbox's formats, dequantized in registers.
// Prepended to every kernel that streams weights (gemv, gate_up_swiglu, qkv_rope_scale); those
// declare `w: array<vec4<u32>>`, `x_tile: array<vec4<f32>, N>` (N = TILE_K4, or twice that for
// double-buffered tiles) and TILE_K4, which the functions here use.
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

// The x tile holds TILE_K4 / CHUNK_X4 chunks of x, one per weight chunk of a row, stored
// transposed: vec4 j of chunk i at slot j · (TILE_K4 / CHUNK_X4) + i. Lanes read their chunks'
// vec4 j together, so a quarter-warp reads 8 consecutive vec4s (no bank conflicts), and the
// slot of vec4 j is a constant offset from chunk i's. (A row-major tile put lanes CHUNK_X4·16
// bytes apart, into the same banks; the XOR swizzle that fixed it cost integer work per read.)
fn x_slot(i: u32) -> u32 {
    return (i % CHUNK_X4) * (TILE_K4 / CHUNK_X4) + i / CHUNK_X4;
}

// The x vec4s of chunk i of the tile that starts at slot `tile` of x_tile (0, or TILE_K4 for a
// kernel that double-buffers its tiles), read once and then used for every row a lane computes.
// Entries from CHUNK_X4 on repeat the last one and are never used.
fn x_chunk(tile: u32, i: u32) -> array<vec4<f32>, 8> {
    let n = TILE_K4 / CHUNK_X4;
    let last = CHUNK_X4 - 1u;
    let b = tile + i;
    return array<vec4<f32>, 8>(
        x_tile[b], x_tile[b + min(1u, last) * n], x_tile[b + min(2u, last) * n],
        x_tile[b + min(3u, last) * n], x_tile[b + min(4u, last) * n],
        x_tile[b + min(5u, last) * n], x_tile[b + min(6u, last) * n],
        x_tile[b + min(7u, last) * n]);
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

// --- Unpacking. Every decoder moves a code's bits into an f16 (or builds the f16 of an integer)
// and converts two at a time with `unpack2x16float`: a handful of integer operations per element,
// which is what these kernels are bound by once their loads are in flight. Minifloats: an E4M3 or
// E2M1 code's exponent and mantissa bits, moved into an f16's, make an f16 whose value is the
// code's value times a power of two (2^-8 for E4M3, 2^-14 for E2M1, folded into the block
// scale), subnormal codes included, since f16's own subnormals are exact.

// acc + Σ of the 8 E2M1 elements of `word` (× 2^-14) times xa (elements 0-3) and xb (4-7), as one
// chain of FMAs that a chunk's words continue: FP4's gemv is bound by its arithmetic, and two
// dot()s and an add per word made MXFP4's 4% slower on the H200. Element e is
// nibble e (s.ee.m). The even nibbles (elements 0, 2, 4, 6) go to the low halves of the bytes of
// `lo`, the odd ones to those of `hi`; there each sign moves from bit 3 to bit 6 (n + 7·(n & 8)
// = n + 56·s, a multiply-add, which NVIDIA runs on its float pipe). A byte 0s000eem then
// becomes an f16 s.000ee.m000000000 with one shift and one mask: bytes 0 and 2 shifted by 9,
// bytes 1 and 3 by 1, so each pair is elements (e, e + 4). About three integer operations per
// pair where moving sign and magnitude separately took four; on the H200 integer operations
// issue at half the rate of float ones, and the byte split made the decode 4% faster
// (docs/BENCHMARKS.md, "The pipelined gemv").
fn fp4_word_fma(word: u32, xa: vec4<f32>, xb: vec4<f32>, acc: f32) -> f32 {
    let lo = word & 0x0F0F0F0Fu;
    let hi = (word >> 4u) & 0x0F0F0F0Fu;
    let l = lo + 7u * (lo & 0x08080808u);
    let h = hi + 7u * (hi & 0x08080808u);
    let p04 = unpack2x16float((l << 9u) & 0x8E008E00u);
    let p26 = unpack2x16float((l << 1u) & 0x8E008E00u);
    let p15 = unpack2x16float((h << 9u) & 0x8E008E00u);
    let p37 = unpack2x16float((h << 1u) & 0x8E008E00u);
    var s = fma(p04.x, xa.x, acc);
    s = fma(p15.x, xa.y, s);
    s = fma(p26.x, xa.z, s);
    s = fma(p37.x, xa.w, s);
    s = fma(p04.y, xb.x, s);
    s = fma(p15.y, xb.y, s);
    s = fma(p26.y, xb.z, s);
    return fma(p37.y, xb.w, s);
}

// The four int8s of `word` (element order) dotted with xa. Byte b ^ 0x80 = b + 128 in the
// mantissa of f16 1024 (0x6400, whose ulp is 1) is exactly 1024 + 128 + b; bytes 0 and 2, then
// 1 and 3, make one f16 pair each.
fn int8_word_dot(word: u32, xa: vec4<f32>) -> f32 {
    let u = word ^ 0x80808080u;
    let even = unpack2x16float((u & 0x00FF00FFu) | 0x64006400u) - vec2(1152.0);
    let odd = unpack2x16float(((u >> 8u) & 0x00FF00FFu) | 0x64006400u) - vec2(1152.0);
    return dot(vec4(even.x, odd.x, even.y, odd.y), xa);
}

// Two E4M3 scale bytes (bytes 0 and 1 of `pair`; positive, never NaN) → f32 × 2^-8, through one
// f16 pair as e4m3_word does.
fn e4m3_scale_pair(pair: u32) -> vec2<f32> {
    return unpack2x16float(((pair & 0x7Fu) | ((pair & 0x7F00u) << 8u)) << 7u);
}

fn scale_word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

fn scale_byte(first_word: u32, i: u32) -> u32 {
    return (scale_word(first_word + i / 4u) >> (8u * (i % 4u))) & 0xFFu;
}

// Row `row`, chunk `c` of the [m, k] matrix that starts at chunk `base`: K / (4·CHUNK_X4) chunks
// per row, row-major.
fn weight_chunk(base: u32, k: u32, row: u32, c: u32) -> vec4<u32> {
    return w[base + row * (k / (4u * CHUNK_X4)) + c];
}

// Chunk q = weight_chunk(base, k, row, c) dotted with the x vec4s xs of its tile chunk (x_chunk).
// The caller loads q, so that a lane's loads for all its rows are issued before any of them is
// decoded.
fn weight_chunk_dot(q: vec4<u32>, xs: array<vec4<f32>, 8>, base: u32, m: u32, k: u32, row: u32, c: u32) -> f32 {
    let row_chunks = k / (4u * CHUNK_X4);
    let scales = 4u * (base + m * row_chunks);
    switch FORMAT {
        case 1u: {
            return dot(vec4(unpack2x16float(q.x), unpack2x16float(q.y)), xs[0])
                + dot(vec4(unpack2x16float(q.z), unpack2x16float(q.w)), xs[1]);
        }
        case 2u: {
            // bf16 is the high half of an f32: element 2j is the low half of word j.
            let even = bitcast<vec4<f32>>(q << vec4(16u));
            let odd = bitcast<vec4<f32>>(q & vec4(0xFFFF0000u));
            return dot(vec4(even.x, odd.x, even.y, odd.y), xs[0])
                + dot(vec4(even.z, odd.z, even.w, odd.w), xs[1]);
        }
        case 3u: {
            let s = int8_word_dot(q.x, xs[0]) + int8_word_dot(q.y, xs[1])
                + int8_word_dot(q.z, xs[2]) + int8_word_dot(q.w, xs[3]);
            // 16 elements: half of one 1×32 block.
            return s * bitcast<f32>(scale_word(scales + row * ((k + 31u) / 32u) + c / 2u));
        }
        case 4u: {
            var s = dot(e4m3_word(q.x), xs[0]) + dot(e4m3_word(q.y), xs[1])
                + dot(e4m3_word(q.z), xs[2]) + dot(e4m3_word(q.w), xs[3]);
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
            // 2^8 · 2^14 undoes the two f16 placements.
            let s0 = fp4_word_fma(q.y, xs[2], xs[3], fp4_word_fma(q.x, xs[0], xs[1], 0.0));
            let s1 = fp4_word_fma(q.w, xs[6], xs[7], fp4_word_fma(q.z, xs[4], xs[5], 0.0));
            let block = row * (k / 16u) + 2u * c;
            let pair = scale_word(scales + 1u + block / 4u) >> (8u * (block % 4u));
            let scale = e4m3_scale_pair(pair) * (bitcast<f32>(scale_word(scales)) * 4194304.0);
            return s0 * scale.x + s1 * scale.y;
        }
        case 6u: {
            let s = fp4_word_fma(q.w, xs[6], xs[7], fp4_word_fma(q.z, xs[4], xs[5],
                fp4_word_fma(q.y, xs[2], xs[3], fp4_word_fma(q.x, xs[0], xs[1], 0.0))));
            // One 1×32 block; E8M0 code e is 2^(e − 127), the f32 with exponent field e; and
            // 2^14 undoes the f16 placement.
            return s * (bitcast<f32>(scale_byte(scales, row * (k / 32u) + c) << 23u) * 16384.0);
        }
        default: {
            return dot(bitcast<vec4<f32>>(q), xs[0]);
        }
    }
}
