// gemv: y[z] = W[e(z)] · x[z] for each of T rows z of x, weights in any format of weights.wgsl
// (prepended to this file), f32 accumulation.
// T = 1 is a decode GEMV; T > 1 is prefill (each workgroup still streams its rows of W once per
// token, which is cheap at the sandbox's size and keeps one kernel for every projection).
//
// One workgroup of 256 invocations computes PASS·ROWS_PER_LANE rows (PASS = 256 / LANES) of one token
// (grid z = token); LANES lanes share a row and read it as vec4s, so each row is streamed in
// coalesced runs of LANES·16 bytes (one 16-byte chunk per lane: 4 f32 weights, or 32 FP4 ones). x is staged in workgroup memory one tile of TILE_K4 vec4s at a
// time and read by all ROWS rows from there. Each lane keeps one partial sum; a row's partials
// are reduced in shared memory.
//
// Layout (GemvParams): W starts at chunk w_offset. Grouped experts (expert_stride > 0): W holds
// `experts` matrices expert_stride chunks apart, and token z uses the one named by
// route_meta[z·meta_stride] (a dispatch record's expert id). x row z starts at x_offset + z·x_stride
// (vec4s). Output row m of token z goes to y[y_offset + z·y_stride + (m / seg)·seg_stride + m % seg]:
// seg = M is a plain row; a smaller seg scatters the row into an interleaved layout (MLA writes
// each head's part straight into its slot of the concatenated query).
//
// LANES (override; a power of two from 32 to 256, default 32) trades x reuse (more rows per
// workgroup) against the address range that resident workgroups stream at once (fewer rows).
//
// Constraints: K a multiple of a chunk's elements (4 for f32, 32 for FP4), M ≥ 1. The grid is 2D over rows (see kernels::grid_2d):
// the workgroup index is wg.x + wg.y · num_workgroups.x, and rows past M are skipped.

override LANES: u32 = 32u;
// Rows each lane group computes (1 to MAX_ROWS_PER_LANE). Narrow weights cover so many x values
// per 16-byte chunk that a tile gives a lane only one or two chunks of a row; several rows give it
// that many independent loads in flight, and reuse each x read from the tile.
override ROWS_PER_LANE: u32 = 1u;
const MAX_ROWS_PER_LANE: u32 = 8u;
const WORKGROUP: u32 = 256u;
// Lane groups in a workgroup: rows per pass over the lane groups.
override PASS: u32 = WORKGROUP / LANES;
const TILE_K4: u32 = 256u;     // 1024 floats of x per tile

struct GemvParams {
    m: u32,
    k: u32,
    tokens: u32,
    experts: u32,
    w_offset: u32,
    expert_stride: u32,
    meta_stride: u32,
    x_stride: u32,
    x_offset: u32,
    y_stride: u32,
    y_offset: u32,
    seg: u32,
    seg_stride: u32,
    up_offset: u32,
    x_scales: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: GemvParams;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;        // [experts] matrices (weights.wgsl)
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;        // [T] rows of K/4
@group(0) @binding(3) var<storage, read_write> y: array<f32>;        // [T] rows of M
@group(0) @binding(4) var<storage, read> route_meta: array<u32>;           // [T] records (grouped)

var<workgroup> x_tile: array<vec4<f32>, TILE_K4>;
var<workgroup> partial: array<f32, WORKGROUP>;

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

    var acc = array<f32, MAX_ROWS_PER_LANE>();
    for (var t0 = 0u; t0 < k4; t0 += TILE_K4) {
        let tile_len = min(TILE_K4, k4 - t0);
        for (var i = lid; i < tile_len; i += WORKGROUP) {
            x_tile[x_slot(i)] = load_x(x_base, params.x_scales + z * params.x_stride, t0 + i);
        }
        workgroupBarrier();
        if (live) {
            for (var i = lane; i < tile_len / CHUNK_X4; i += LANES) {
                for (var r = 0u; r < ROWS_PER_LANE; r++) {
                    let row = first + r * PASS;
                    if (row < params.m) {
                        acc[r] += weight_chunk_dot(matrix, params.m, params.k, row, t0 / CHUNK_X4 + i, i * CHUNK_X4);
                    }
                }
            }
        }
        // Nobody overwrites the tile before every row has read it.
        workgroupBarrier();
    }

    for (var r = 0u; r < ROWS_PER_LANE; r++) {
        let row = first + r * PASS;
        partial[lid] = acc[r];
        workgroupBarrier();
        for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
            if (lane < stride) {
                partial[lid] += partial[lid + stride];
            }
            workgroupBarrier();
        }
        if (lane == 0u && row < params.m) {
            let out = params.y_offset + z * params.y_stride
                + (row / params.seg) * params.seg_stride + row % params.seg;
            y[out] = partial[lid];
        }
        // The next row's partials wait until this row's sum is written.
        workgroupBarrier();
    }
}
