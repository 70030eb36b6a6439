// gate_up_swiglu: y[z, m] = silu(Wg[e(z)][m] · x[z]) · (Wu[e(z)][m] · x[z]) — SwiGLU's gate and
// up projections and its activation in one kernel (TensorRT-LLM's "FC13 + SwiGLU"): x is staged
// once and both rows are streamed together, and neither projection is written to memory.
//
// Expert e has two [M, K] matrices in the layout of weights.wgsl (prepended to this file): the
// gate matrix at its start, the up matrix up_offset chunks further on.
// Grid, tiling, lanes and the layout (gemv_layout.wgsl, prepended) are those of gemv.wgsl (see
// there): one workgroup computes 256 / LANES output rows of one token z; grouped experts read
// their id from route_meta.
// Constraints: K a multiple of a chunk's elements, M ≥ 1.

override LANES: u32 = 32u;
// A lane's two rows (weights.wgsl's RowChunks): row m of the gate matrix and row m of the up
// matrix, decoded part by part after one read of their x.
const ROWS_PER_LANE: u32 = 2u;
const WORKGROUP: u32 = 256u;
const TILE_K4: u32 = 256u;

var<workgroup> x_tile: array<vec4<f32>, TILE_K4>;
var<workgroup> partial_gate: array<f32, WORKGROUP>;
var<workgroup> partial_up: array<f32, WORKGROUP>;

@compute @workgroup_size(256)
fn gate_up_swiglu(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let lane = lid % LANES;
    let row = (wg.x + wg.y * nwg.x) * (WORKGROUP / LANES) + lid / LANES;
    let z = wg.z;
    let k4 = params.k / 4u;
    var expert = 0u;
    if (params.expert_stride > 0u) {
        expert = route_meta[z * params.meta_stride];
    }
    let live = row < params.m && expert < params.experts;
    let gate = params.w_offset + expert * params.expert_stride;
    let up = gate + params.up_offset;
    let x_base = params.x_offset + z * params.x_stride;

    // Gate in x, up in y.
    var acc = vec4(0.0);
    for (var t0 = 0u; t0 < k4; t0 += TILE_K4) {
        let tile_len = min(TILE_K4, k4 - t0);
        for (var i = lid; i < tile_len; i += WORKGROUP) {
            x_tile[x_slot(i)] = load_x(x_base, params.x_scales + z * params.x_stride, t0 + i);
        }
        workgroupBarrier();
        if (live) {
            for (var i = lane; i < tile_len / CHUNK_X4; i += LANES) {
                let c = t0 / CHUNK_X4 + i;
                let q = RowChunks(
                    weight_chunk(gate, params.m, params.k, row, c),
                    weight_chunk(up, params.m, params.k, row, c),
                    WeightChunk(), WeightChunk(),
                );
                acc = rows_dot(q, 0u, i, acc);
            }
        }
        workgroupBarrier();
    }

    if (live) {
        acc.x *= matrix_factor(gate, params.m, params.k);
        acc.y *= matrix_factor(up, params.m, params.k);
    }
    partial_gate[lid] = acc.x;
    partial_up[lid] = acc.y;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            partial_gate[lid] += partial_gate[lid + stride];
            partial_up[lid] += partial_up[lid + stride];
        }
        workgroupBarrier();
    }
    if (lane == 0u && row < params.m) {
        let g = partial_gate[lid];
        y[params.y_offset + z * params.y_stride + row] = g / (1.0 + exp(-g)) * partial_up[lid];
    }
}
