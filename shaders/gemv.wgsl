// gemv: y[z] = W[e(z)] · x[z] for each of T rows z of x, weights in any format of weights.wgsl
// (prepended to this file), f32 accumulation.
// T = 1 is a decode GEMV; T > 1 is prefill (each workgroup still streams its rows of W once per
// token, which is cheap at the sandbox's size and keeps one kernel for every projection).
//
// One workgroup of 256 invocations computes PASS·ROWS_PER_LANE rows (PASS = 256 / LANES) of one token
// (grid z = token); LANES lanes share a row and read it as vec4s, so each row is streamed in
// coalesced runs of LANES·16 bytes (one 16-byte chunk per lane: 4 f32 weights, or 32 FP4 ones).
// x is staged in workgroup memory one tile of TILE_K4 vec4s at a time (weights.wgsl's layout),
// double-buffered; a lane reads the x of each chunk part by part (weights.wgsl's PARTS), once for
// all its rows, while its next chunks (codes and block scales) and the next tile of x are in
// flight. Each lane keeps one partial sum per row; the rows' partials are reduced together in
// workgroup memory at the end, then scaled by the matrix's factor.
//
// Layout (GemvParams and the bindings are in gemv_layout.wgsl, prepended): W starts at chunk
// w_offset. Grouped experts (expert_stride > 0): W holds `experts` matrices expert_stride chunks
// apart, and token z uses the one named by route_meta[z·meta_stride] (a dispatch record's
// expert id). x row z starts at x_offset + z·x_stride (vec4s). Output row m of token z goes to
// y[y_offset + z·y_stride + (m / seg)·seg_stride + m % seg]: seg = M is a plain row; a smaller
// seg scatters the row into an interleaved layout (MLA writes each head's part straight into its
// slot of the concatenated query).
//
// LANES (override; a power of two from 32 to 256, default 32) trades x reuse (more rows per
// workgroup) against the address range that resident workgroups stream at once (fewer rows).
//
// Constraints: K a multiple of a chunk's elements (4 for f32, 32 for FP4), M ≥ 1. The grid is 2D
// over rows (see kernels::grid_2d): the workgroup index is wg.x + wg.y · num_workgroups.x, and
// rows past M are skipped.

override LANES: u32 = 32u;
// Rows each lane group computes (1 to 4). Narrow weights cover so many x values per 16-byte
// chunk that a tile gives a lane only one or two chunks of a row; several rows give it that many
// independent loads in flight, and reuse each x read from the tile. With FP4 decoded part by
// part, 8 rows are no faster than 4 on the H200 and take twice the registers.
//
// The rows are weights.wgsl's RowChunks, written out rather than arrays (see there, and
// docs/BENCHMARKS.md, Decisions).
override ROWS_PER_LANE: u32 = 1u;
const WORKGROUP: u32 = 256u;
// Lane groups in a workgroup: rows per pass over the lane groups.
override PASS: u32 = WORKGROUP / LANES;
// 1024 floats of x per tile; equal to WORKGROUP, so that each invocation stages one vec4 of it.
const TILE_K4: u32 = 256u;

// Two x tiles: tile t is read from buffer t % 2 while tile t + 1 is staged into the other.
var<workgroup> x_tile: array<vec4<f32>, 2 * TILE_K4>;

// Row r of lane group `first`, clamped to the last real row: rows past M load and compute a copy
// of it, never stored, so that every load is unconditional.
fn row_of(first: u32, r: u32) -> u32 {
    return min(first + r * PASS, params.m - 1u);
}

fn load_rows(matrix: u32, k: u32, first: u32, c: u32) -> RowChunks {
    var q: RowChunks;
    q.q0 = weight_chunk(matrix, params.m, k, row_of(first, 0u), c);
    if (ROWS_PER_LANE > 1u) { q.q1 = weight_chunk(matrix, params.m, k, row_of(first, 1u), c); }
    if (ROWS_PER_LANE > 2u) { q.q2 = weight_chunk(matrix, params.m, k, row_of(first, 2u), c); }
    if (ROWS_PER_LANE > 3u) { q.q3 = weight_chunk(matrix, params.m, k, row_of(first, 3u), c); }
    return q;
}

// Writes row `row` of token z (rows past M are dropped).
fn store_row(row: u32, z: u32, value: f32) {
    if (row < params.m) {
        y[params.y_offset + z * params.y_stride + (row / params.seg) * params.seg_stride
            + row % params.seg] = value;
    }
}

@compute @workgroup_size(256)
fn gemv(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let lane = lid % LANES;
    // Lane group g of the workgroup computes rows first, first + PASS, ... (ROWS_PER_LANE rows).
    let first = (wg.x + wg.y * nwg.x) * PASS * ROWS_PER_LANE + lid / LANES;
    let z = wg.z;
    let k4 = params.k / 4u;
    var expert = 0u;
    if (params.expert_stride > 0u) {
        expert = route_meta[z * params.meta_stride];
    }
    // An expert id out of range (never written by our router) computes nothing rather than
    // reading another buffer's bytes.
    let live = expert < params.experts;
    let matrix = params.w_offset + expert * params.expert_stride;
    let x_base = params.x_offset + z * params.x_stride;
    let k = params.k;

    // The work is a pipeline of steps: J per tile, step j decoding chunk i = lane + j·LANES of
    // every row while the next step's chunks are in flight, and the next tile's x in flight
    // during the whole tile. A lane so always has loads outstanding while it decodes. An FP4 lane
    // has one chunk per row per tile (J = 1): without the pipeline every tile paid the x latency,
    // then the weight latency, then the decode, in series.
    let row_chunks = k / (4u * CHUNK_X4);
    let tile_chunks = TILE_K4 / CHUNK_X4;
    // A K shorter than a tile takes fewer steps: a step is a load latency, and the model's
    // small projections are made of little else.
    let J = (min(tile_chunks, row_chunks) + LANES - 1u) / LANES;
    let tiles = (k4 + TILE_K4 - 1u) / TILE_K4;
    let x_scales = params.x_scales + z * params.x_stride;

    // Tile 0's x (TILE_K4 = WORKGROUP: one vec4 per invocation) and step 0's weights.
    if (lid < min(TILE_K4, k4)) {
        x_tile[x_slot(lid)] = load_x(x_base, x_scales, lid);
    }
    var q: RowChunks;
    if (live) {
        q = load_rows(matrix, k, first, min(lane, row_chunks - 1u));
    }
    workgroupBarrier();

    var acc = vec4(0.0);
    for (var t = 0u; t < tiles; t++) {
        // The next tile's x, in flight during this tile's steps and stored after them.
        let next_len = min(TILE_K4, k4 - min(k4, (t + 1u) * TILE_K4));
        var xr = vec4(0.0);
        if (lid < next_len) {
            xr = load_x(x_base, x_scales, (t + 1u) * TILE_K4 + lid);
        }
        let tile_len = min(TILE_K4, k4 - t * TILE_K4);
        for (var j = 0u; j < J; j++) {
            let i = lane + j * LANES;
            // The next step's weights: chunk i + LANES of this tile, or after its last step the
            // next tile's first (clamped into the row past the end and in a tail tile; those
            // chunks are loaded and never used, so that every load is unconditional).
            let last_step = j + 1u == J;
            let next_c = select(t * tile_chunks + i + LANES, (t + 1u) * tile_chunks + lane, last_step);
            let cn = min(next_c, row_chunks - 1u);
            var next: RowChunks;
            if (live && !(last_step && t + 1u == tiles)) {
                next = load_rows(matrix, k, first, cn);
            }
            // This step: chunk i of tile t, if the tile has it.
            if (live && i < tile_len / CHUNK_X4) {
                acc = rows_dot(q, (t % 2u) * TILE_K4, i, acc);
            }
            q = next;
        }
        // Buffer (t + 1) % 2 was last read in tile t − 1, before the previous barrier.
        if (lid < next_len) {
            x_tile[((t + 1u) % 2u) * TILE_K4 + x_slot(lid)] = xr;
        }
        workgroupBarrier();
    }

    // The rows' partial sums, reduced at once as one vec4 per lane in the x tile (the last
    // step's barrier has passed, so nobody reads x any more): one tree of log2(LANES) barriers
    // for all rows; a tree per row cost about a tenth of an FP4 workgroup's time.
    x_tile[lid] = acc;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            x_tile[lid] += x_tile[lid + stride];
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        // (An expert id out of range has no matrix to read its factor from, and zero sums.)
        var factor = 1.0;
        if (live) {
            factor = matrix_factor(matrix, params.m, k);
        }
        let sums = x_tile[lid] * factor;
        store_row(first, z, sums.x);
        if (ROWS_PER_LANE > 1u) { store_row(first + PASS, z, sums.y); }
        if (ROWS_PER_LANE > 2u) { store_row(first + 2u * PASS, z, sums.z); }
        if (ROWS_PER_LANE > 3u) { store_row(first + 3u * PASS, z, sums.w); }
    }
}
