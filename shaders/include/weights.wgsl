// weights: reading one weight matrix in any of the sandbox's formats, dequantized in registers.
// Prepended to every kernel that streams weights (gemv, gate_up_swiglu, qkv_rope_scale); those
// declare `w: array<vec4<u32>>`, `x_tile: array<vec4<f32>, N>` (N = TILE_K4, or twice that for
// double-buffered tiles), TILE_K4 and ROWS_PER_LANE, which the functions here use.
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
// applied once per block, and the powers of two that place codes in f16s (and NVFP4's tensor
// scale) once per row (`matrix_factor`): the same sum up to f32 rounding as dequantizing each
// weight.

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

// A chunk is decoded in PARTS parts, each dotted with at most two vec4s of x: a word each for
// the 8- and 4-bit formats, the whole chunk for the 16- and 32-bit ones. gemv decodes part p of
// all of a lane's rows after one read of its x, so that a lane holds two vec4s of x instead of
// a chunk's eight: for FP4 on the H200 that register saving was worth more than any change to
// the decode (docs/BENCHMARKS.md, Decisions).
override PARTS: u32 = select(1u, 4u, FORMAT >= 3u);

// The x of one part: FP4 word p takes vec4s 2p and 2p + 1 of its chunk's x, an int8 or E4M3
// word vec4 p (in a), f16 and bf16 vec4s 0 and 1, f32 vec4 0 (in a).
struct XPart {
    a: vec4<f32>,
    b: vec4<f32>,
}

// The x of part p of chunk i of the tile that starts at slot `tile` of x_tile (0, or TILE_K4
// for a kernel that double-buffers its tiles).
fn x_part(tile: u32, i: u32, p: u32) -> XPart {
    let n = TILE_K4 / CHUNK_X4;
    let b = tile + i;
    switch FORMAT {
        case 5u, 6u: {
            return XPart(x_tile[b + 2u * p * n], x_tile[b + (2u * p + 1u) * n]);
        }
        case 3u, 4u: {
            let v = x_tile[b + p * n];
            return XPart(v, v);
        }
        case 1u, 2u: {
            return XPart(x_tile[b], x_tile[b + n]);
        }
        default: {
            let v = x_tile[b];
            return XPart(v, v);
        }
    }
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
// code's value times a power of two (2^-8 for E4M3, 2^-14 for E2M1, undone by matrix_factor),
// subnormal codes included, since f16's own subnormals are exact.

// acc + Σ of the 8 E2M1 elements of `word` (× 2^-14) times xa (elements 0-3) and xb (4-7), as one
// chain of FMAs (two dot()s and an add per word made MXFP4's gemv 4% slower on the H200). The
// codes sit in engine::quant::pack's sign-split slots, documented there: slot 0 of each 16-bit
// half is already an f16's sign, low exponent bits and top mantissa bit, slot 1 is slot 0 three
// bits down, and slots 2 and 3 reach slot 0's places with one carry-free multiplication each
// (a mask, a multiplication, a mask). Nine integer operations per word where contiguous nibbles
// took fifteen: FP4's gemv is bound by its instruction count (docs/BENCHMARKS.md, Decisions).
fn fp4_word_fma(word: u32, xa: vec4<f32>, xb: vec4<f32>, acc: f32) -> f32 {
    let p0 = unpack2x16float(word & 0x8E008E00u);
    let p1 = unpack2x16float((word << 3u) & 0x8E008E00u);
    let p2 = unpack2x16float(((word & 0x40074007u) * 514u) & 0x8E008E00u);
    let p3 = unpack2x16float(((word & 0x20382038u) * 68u) & 0x8E008E00u);
    var s = fma(p0.x, xa.x, acc);
    s = fma(p1.x, xa.y, s);
    s = fma(p2.x, xa.z, s);
    s = fma(p3.x, xa.w, s);
    s = fma(p0.y, xb.x, s);
    s = fma(p1.y, xb.y, s);
    s = fma(p2.y, xb.z, s);
    return fma(p3.y, xb.w, s);
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

// One 16-byte chunk of a row's codes and the scale bits of its block: the f32 scale of int8 and
// FP8, NVFP4's two E4M3 bytes (bits 0-15), MXFP4's E8M0 byte (bits 0-7, higher bits not
// cleared). Both are loaded together, one step ahead of their decode in gemv: a scale loaded
// where it is used stalled the decode for a memory latency.
struct WeightChunk {
    codes: vec4<u32>,
    scale: u32,
}

// Row `row`, chunk `c` of the [m, k] matrix that starts at chunk `base`: K / (4·CHUNK_X4) chunks
// per row, row-major, then the scales.
fn weight_chunk(base: u32, m: u32, k: u32, row: u32, c: u32) -> WeightChunk {
    let row_chunks = k / (4u * CHUNK_X4);
    let scales = 4u * (base + m * row_chunks);
    var q: WeightChunk;
    q.codes = w[base + row * row_chunks + c];
    switch FORMAT {
        case 3u: {
            // 16 elements: half of one 1×32 block.
            q.scale = scale_word(scales + row * ((k + 31u) / 32u) + c / 2u);
        }
        case 4u: {
            // 16 elements inside one 128×128 block.
            q.scale = scale_word(scales + (row / 128u) * ((k + 127u) / 128u) + c / 8u);
        }
        case 5u: {
            // Two 1×16 blocks, whose E4M3 bytes share one word after the tensor scale's.
            let block = row * (k / 16u) + 2u * c;
            q.scale = scale_word(scales + 1u + block / 4u) >> (8u * (block % 4u));
        }
        case 6u: {
            // One 1×32 block.
            let block = row * (k / 32u) + c;
            q.scale = scale_word(scales + block / 4u) >> (8u * (block % 4u));
        }
        default: {}
    }
    return q;
}

// acc + part p of chunk codes `c` dotted with its x (block scales not applied).
fn part_fma(c: vec4<u32>, p: u32, x: XPart, acc: f32) -> f32 {
    switch FORMAT {
        case 1u: {
            return acc + dot(vec4(unpack2x16float(c.x), unpack2x16float(c.y)), x.a)
                + dot(vec4(unpack2x16float(c.z), unpack2x16float(c.w)), x.b);
        }
        case 2u: {
            // bf16 is the high half of an f32: element 2j is the low half of word j.
            let even = bitcast<vec4<f32>>(c << vec4(16u));
            let odd = bitcast<vec4<f32>>(c & vec4(0xFFFF0000u));
            return acc + dot(vec4(even.x, odd.x, even.y, odd.y), x.a)
                + dot(vec4(even.z, odd.z, even.w, odd.w), x.b);
        }
        case 3u: {
            return acc + int8_word_dot(c[p], x.a);
        }
        case 4u: {
            return acc + dot(e4m3_word(c[p]), x.a);
        }
        case 5u, 6u: {
            return fp4_word_fma(c[p], x.a, x.b, acc);
        }
        default: {
            return acc + dot(bitcast<vec4<f32>>(c), x.a);
        }
    }
}

// The block scales of chunk q: (that of parts 0-1, that of parts 2-3). Only NVFP4's differ (its
// chunk is two 1×16 blocks); unscaled formats give 1.
fn chunk_scales(q: WeightChunk) -> vec2<f32> {
    switch FORMAT {
        case 3u: {
            return vec2(bitcast<f32>(q.scale));
        }
        case 4u: {
            // A NaN weight makes the row NaN, as dequantizing it would. (The NaN is built from
            // data so that it is not a constant expression, which WGSL forbids.)
            let c = q.codes;
            let nan = e4m3_nan_bytes(c.x) | e4m3_nan_bytes(c.y) | e4m3_nan_bytes(c.z) | e4m3_nan_bytes(c.w);
            let scale = bitcast<f32>(q.scale);
            return vec2(select(scale, bitcast<f32>(0x7FC00000u | (nan & 0u)), nan != 0u));
        }
        case 5u: {
            return e4m3_scale_pair(q.scale);
        }
        case 6u: {
            // E8M0 code e is 2^(e − 127), the f32 with exponent field e.
            return vec2(bitcast<f32>((q.scale & 0xFFu) << 23u));
        }
        default: {
            return vec2(1.0);
        }
    }
}

// What every row sum of the matrix at chunk `base` is multiplied by: the powers of two that undo
// the f16 placements (2^8 for E4M3 codes and NVFP4's E4M3 scales, 2^14 for E2M1 codes), and
// NVFP4's f32 tensor scale, the matrix's first scale word.
fn matrix_factor(base: u32, m: u32, k: u32) -> f32 {
    switch FORMAT {
        case 4u: {
            return 256.0;
        }
        case 5u: {
            // The scales start on a chunk: the tensor scale is its x. (Read as scale_word, with
            // a run-time component index, it makes lavapipe's NVFP4 decode step 2.4× slower.)
            let tensor = bitcast<f32>(w[base + m * (k / (4u * CHUNK_X4))].x);
            return tensor * 4194304.0;
        }
        case 6u: {
            return 16384.0;
        }
        default: {
            return 1.0;
        }
    }
}

// --- A lane's rows. A lane decodes the same chunk of up to 4 rows (gemv's rows of one matrix,
// gate_up_swiglu's gate and up rows) part by part: it reads part p's x once and decodes that
// part of every row, so x is read once for all of them. Each kernel declares ROWS_PER_LANE
// (1 to 4). The rows are written out (q0..q3, one vec4 lane each) rather than kept in arrays
// indexed in a loop: naga clamps every dynamic index into a function-scope array, and the
// clamped indices kept the arrays in local memory. Written out, the rows past ROWS_PER_LANE are
// branches on a constant that the driver removes.

// Chunk c of each of a lane's rows, codes and scale (those past ROWS_PER_LANE stay zero).
struct RowChunks {
    q0: WeightChunk, q1: WeightChunk, q2: WeightChunk, q3: WeightChunk,
}

// t + part p of each row's chunk dotted with x; row r's sum is lane r of the vec4.
fn rows_fma(q: RowChunks, p: u32, x: XPart, t: vec4<f32>) -> vec4<f32> {
    var o = t;
    o.x = part_fma(q.q0.codes, p, x, o.x);
    if (ROWS_PER_LANE > 1u) { o.y = part_fma(q.q1.codes, p, x, o.y); }
    if (ROWS_PER_LANE > 2u) { o.z = part_fma(q.q2.codes, p, x, o.z); }
    if (ROWS_PER_LANE > 3u) { o.w = part_fma(q.q3.codes, p, x, o.w); }
    return o;
}

// acc + t times each row's block scale: of parts 0-1 (block 0) or of parts 2-3 (block 1).
fn rows_scale(q: RowChunks, block: u32, t: vec4<f32>, acc: vec4<f32>) -> vec4<f32> {
    var o = acc;
    o.x = fma(t.x, chunk_scales(q.q0)[block], o.x);
    if (ROWS_PER_LANE > 1u) { o.y = fma(t.y, chunk_scales(q.q1)[block], o.y); }
    if (ROWS_PER_LANE > 2u) { o.z = fma(t.z, chunk_scales(q.q2)[block], o.z); }
    if (ROWS_PER_LANE > 3u) { o.w = fma(t.w, chunk_scales(q.q3)[block], o.w); }
    return o;
}

// acc + the rows' chunks dotted with x chunk i of the tile at slot `tile` (0, or TILE_K4 for a
// kernel that double-buffers its tiles), part by part, block scales applied; each row's sum
// still needs matrix_factor.
fn rows_dot(q: RowChunks, tile: u32, i: u32, acc: vec4<f32>) -> vec4<f32> {
    var sum = acc;
    var part = rows_fma(q, 0u, x_part(tile, i, 0u), vec4(0.0));
    if (PARTS > 1u) {
        part = rows_fma(q, 1u, x_part(tile, i, 1u), part);
        if (FORMAT == 5u) {
            // NVFP4: parts 0-1 and 2-3 are two blocks.
            sum = rows_scale(q, 0u, part, sum);
            part = vec4(0.0);
        }
        part = rows_fma(q, 2u, x_part(tile, i, 2u), part);
        part = rows_fma(q, 3u, x_part(tile, i, 3u), part);
    }
    return rows_scale(q, 1u, part, sum);
}
