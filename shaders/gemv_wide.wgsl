// gemv_wide: the gemv of FP4 weights (FORMAT 5 nvfp4 or 6 mxfp4) on long rows, with x in
// registers. Same params, bindings and results as gemv.wgsl (gemv_layout.wgsl, weights.wgsl
// prepended); engine::kernels::gemv picks it for FP4 matrices whose K is a multiple of 8192.
//
// Why a second kernel: gemv.wgsl stages x in workgroup memory and gives each lane group a few
// rows, decoding a chunk of all of them part by part, and its next chunks are loaded once per
// step, so a lane's loads are in flight only part of the time. FP4 decodes 32 elements per
// 16-byte chunk, so that kernel is bound by its arithmetic and cannot hide it. Here each of the
// 256 invocations owns one chunk position (32 elements) of every row, holds that chunk's x in
// registers for a whole pass (8 vec4s, loaded once), and the workgroup walks its ROWS rows one
// at a time; a lane keeps a ring of the next four rows' chunks in flight, reloading a slot as
// soon as it has decoded it. No x is read per row and no barrier waits per tile. (H200, 256 MiB
// of weights, K = 8192: NVFP4 2.59 TB/s against gemv's 2.37, MXFP4 2.50 against 2.34;
// docs/BENCHMARKS.md, Decisions.)
//
// A pass covers 256 chunks (8192 elements) of every row; K is walked in ceil(K / 8192) passes,
// each reloading x, and in a last partial pass the lanes past the row hold x = 0 (their loads
// are clamped into the row, so every load stays unconditional). Pass 0 stores each row sum, later
// passes add to it (the same invocation stores a row in every pass).
//
// Each row's 256 partial sums are reduced in workgroup memory, 16 rows at a time: every
// invocation writes 4 vec4s (rows 4g..4g+3 in vec4 g), then four 4-to-1 steps.
//
// Constraints (engine::kernels::gemv::dispatch_wide checks them): FORMAT 5 or 6, K a multiple
// of 128 (so that a lane's scale byte sits at the same place in every row's scale words), ROWS a
// multiple of 4. The grid is gemv.wgsl's: workgroup wg.x + wg.y · num_workgroups.x walks rows
// ROWS times that, token wg.z.

override ROWS: u32 = 32u;
const WORKGROUP: u32 = 256u;
// weights.wgsl's rows path and x_part refer to these; this kernel uses neither, and uses x_tile
// as its reduction buffer (16 rows × 256 invocations = 1024 vec4s, the 16 KiB WebGPU allows).
const ROWS_PER_LANE: u32 = 1u;
const TILE_K4: u32 = WORKGROUP;
var<workgroup> x_tile: array<vec4<f32>, 1024>;

// The x of one chunk: elements 0-31 in vec4s a..h.
struct XChunk {
    a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>,
    e: vec4<f32>, f: vec4<f32>, g: vec4<f32>, h: vec4<f32>,
}

fn x_chunk(base: u32, scales: u32, chunk: u32) -> XChunk {
    let j = chunk * 8u;
    return XChunk(
        load_x(base, scales, j), load_x(base, scales, j + 1u),
        load_x(base, scales, j + 2u), load_x(base, scales, j + 3u),
        load_x(base, scales, j + 4u), load_x(base, scales, j + 5u),
        load_x(base, scales, j + 6u), load_x(base, scales, j + 7u),
    );
}

// Where a lane's chunk of row 0 and its scale bits are; row r's are r strides further. With K a
// multiple of 128 a row's scales fill whole words, so the byte's shift is the same in every row.
struct LaneChunks {
    codes: u32,
    row_chunks: u32,
    scale_word: u32,
    scale_row_words: u32,
    shift: u32,
}

fn lane_chunks(matrix: u32, m: u32, k: u32, chunk: u32) -> LaneChunks {
    let row_chunks = k / 32u;
    let scales = 4u * (matrix + m * row_chunks);
    if (FORMAT == 5u) {
        // Chunk c is 1×16 blocks 2c and 2c + 1: bytes 2c % 4 and the next, after the tensor scale.
        return LaneChunks(matrix + chunk, row_chunks, scales + 1u + chunk / 2u, k / 64u, 16u * (chunk % 2u));
    }
    // Chunk c is 1×32 block c.
    return LaneChunks(matrix + chunk, row_chunks, scales + chunk / 4u, k / 128u, 8u * (chunk % 4u));
}

fn load_chunk(at: LaneChunks, row: u32) -> WeightChunk {
    var q: WeightChunk;
    q.codes = w[at.codes + row * at.row_chunks];
    q.scale = scale_word(at.scale_word + row * at.scale_row_words) >> at.shift;
    return q;
}

// A chunk's 32 codes dotted with its x, block scales applied (matrix_factor not).
fn chunk_dot(q: WeightChunk, xc: XChunk) -> f32 {
    var t = part_fma(q.codes, 0u, XPart(xc.a, xc.b), 0.0);
    t = part_fma(q.codes, 1u, XPart(xc.c, xc.d), t);
    let s = chunk_scales(q);
    var u = part_fma(q.codes, 2u, XPart(xc.e, xc.f), 0.0);
    u = part_fma(q.codes, 3u, XPart(xc.g, xc.h), u);
    return t * s.x + u * s.y;
}

// The sums over all 256 invocations of vec4 g of x_tile (g < groups ≤ 4): invocation g gets
// vec4 g's, the others zeros. Called by the whole workgroup once its partials are written.
fn batch_sums(lid: u32, groups: u32) -> vec4<f32> {
    workgroupBarrier();
    // 256 → 64 per group: invocation lid sums four partials of group lid / 64.
    let g = lid / 64u;
    let s = lid % 64u;
    var sum = vec4(0.0);
    if (g < groups) {
        let b = g * 256u + s;
        sum = x_tile[b] + x_tile[b + 64u] + x_tile[b + 128u] + x_tile[b + 192u];
    }
    workgroupBarrier();
    x_tile[lid] = sum;
    workgroupBarrier();
    // 64 → 16 → 4 → 1, each step into a region the step before did not read.
    if (lid < 64u) {
        let b = (lid / 16u) * 64u + lid % 16u;
        x_tile[256u + lid] = x_tile[b] + x_tile[b + 16u] + x_tile[b + 32u] + x_tile[b + 48u];
    }
    workgroupBarrier();
    if (lid < 16u) {
        let b = 256u + (lid / 4u) * 16u + lid % 4u;
        x_tile[320u + lid] = x_tile[b] + x_tile[b + 4u] + x_tile[b + 8u] + x_tile[b + 12u];
    }
    workgroupBarrier();
    var out = vec4(0.0);
    if (lid < groups) {
        let b = 320u + lid * 4u;
        out = x_tile[b] + x_tile[b + 1u] + x_tile[b + 2u] + x_tile[b + 3u];
    }
    // The next batch overwrites x_tile[0..1024] only after everyone has read it.
    workgroupBarrier();
    return out;
}

// Stores (pass 0) or adds to (later passes) row `row` of token z; rows past M are dropped.
fn store_row(row: u32, z: u32, value: f32, add: bool) {
    if (row < params.m) {
        let i = params.y_offset + z * params.y_stride + (row / params.seg) * params.seg_stride
            + row % params.seg;
        y[i] = select(value, y[i] + value, add);
    }
}

@compute @workgroup_size(256)
fn gemv_wide(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let first = (wg.x + wg.y * nwg.x) * ROWS;
    let z = wg.z;
    let m = params.m;
    let k = params.k;
    var expert = 0u;
    if (params.expert_stride > 0u) {
        expert = route_meta[z * params.meta_stride];
    }
    // An expert id out of range (never written by our router) stores zeros, as in gemv.wgsl
    // (here after reading expert 0's matrix, so that the loads stay unconditional).
    let live = expert < params.experts;
    let matrix = params.w_offset + select(0u, expert, live) * params.expert_stride;
    let x_base = params.x_offset + z * params.x_stride;
    let x_scales = params.x_scales + z * params.x_stride;
    // Rows past M load a copy of the workgroup's last real row, never stored.
    let last = min(first + ROWS, m) - 1u;
    let row_chunks = k / 32u;
    let passes = (row_chunks + WORKGROUP - 1u) / WORKGROUP;
    let factor = select(0.0, matrix_factor(matrix, m, k), live);

    for (var pass_k = 0u; pass_k < passes; pass_k++) {
        let chunk = pass_k * WORKGROUP + lid;
        var xc: XChunk;
        if (chunk < row_chunks) {
            xc = x_chunk(x_base, x_scales, chunk);
        }
        let at = lane_chunks(matrix, m, k, min(chunk, row_chunks - 1u));
        var qa = load_chunk(at, min(first, last));
        var qb = load_chunk(at, min(first + 1u, last));
        var qc = load_chunk(at, min(first + 2u, last));
        var qd = load_chunk(at, min(first + 3u, last));
        for (var r = 0u; r < ROWS; r += 4u) {
            let row = first + r;
            var p: vec4<f32>;
            p.x = chunk_dot(qa, xc);
            qa = load_chunk(at, min(row + 4u, last));
            p.y = chunk_dot(qb, xc);
            qb = load_chunk(at, min(row + 5u, last));
            p.z = chunk_dot(qc, xc);
            qc = load_chunk(at, min(row + 6u, last));
            p.w = chunk_dot(qd, xc);
            qd = load_chunk(at, min(row + 7u, last));
            let g = (r / 4u) % 4u;
            x_tile[g * WORKGROUP + lid] = p;
            if (g == 3u || r + 4u == ROWS) {
                let sums = batch_sums(lid, g + 1u) * factor;
                if (lid <= g) {
                    let r0 = row - 4u * g + 4u * lid;
                    store_row(r0, z, sums.x, pass_k > 0u);
                    store_row(r0 + 1u, z, sums.y, pass_k > 0u);
                    store_row(r0 + 2u, z, sums.z, pass_k > 0u);
                    store_row(r0 + 3u, z, sums.w, pass_k > 0u);
                }
            }
        }
    }
}
