// gemv: y[M] = W[M, K] · x[K], row-major f32 weights, f32 accumulation.
//
// One workgroup of 256 invocations computes ROWS = 256 / LANES consecutive rows; LANES lanes
// share a row and read it as vec4s, so each row is streamed in coalesced runs of LANES·16 bytes.
// x is staged in workgroup memory one tile of TILE_K4 vec4s at a time and read by all ROWS rows
// from there. Each lane keeps one partial sum; a row's partials are reduced in shared memory.
//
// LANES (override; a power of two from 32 to 256, default 32) trades x reuse (more rows per
// workgroup) against the address range that resident workgroups stream at once (fewer rows).
//
// Constraints: K % 4 == 0 (vec4 rows), M ≥ 1. The grid is 2D (see kernels::grid_2d): the
// workgroup index is wg.x + wg.y * num_workgroups.x, and rows past M are skipped.

override LANES: u32 = 32u;
const WORKGROUP: u32 = 256u;
const TILE_K4: u32 = 256u;     // 1024 floats of x per tile

struct GemvParams {
    m: u32,
    k: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: GemvParams;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;        // [M, K/4]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;        // [K/4]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;        // [M]

var<workgroup> x_tile: array<vec4<f32>, TILE_K4>;
var<workgroup> partial: array<f32, WORKGROUP>;

@compute @workgroup_size(256)
fn gemv(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let lane = lid % LANES;
    let row = (wg.x + wg.y * nwg.x) * (WORKGROUP / LANES) + lid / LANES;
    let k4 = params.k / 4u;
    let row_base = row * k4;

    var acc = 0.0;
    for (var t0 = 0u; t0 < k4; t0 += TILE_K4) {
        let tile_len = min(TILE_K4, k4 - t0);
        for (var i = lid; i < tile_len; i += WORKGROUP) {
            x_tile[i] = x[t0 + i];
        }
        workgroupBarrier();
        if (row < params.m) {
            for (var i = lane; i < tile_len; i += LANES) {
                acc += dot(w[row_base + t0 + i], x_tile[i]);
            }
        }
        // Nobody overwrites the tile before every row has read it.
        workgroupBarrier();
    }

    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if (lane == 0u && row < params.m) {
        y[row] = partial[lid];
    }
}
