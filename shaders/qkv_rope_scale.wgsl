// qkv_rope_scale: y[z] = scale · rope(W · x[z]) — an attention projection with RoPE and the
// 1/sqrt(d) softmax scale applied in its epilogue (TensorRT-LLM's "FC_QKV + attention scaling"):
// the rotated, scaled query leaves the kernel ready for the scores, with no separate rope pass
// and no scale inside the attention kernel.
//
// One workgroup of 256 = 16 rows × 16 lanes computes 16 consecutive output rows of token z
// (grid z = token), reading x through a workgroup tile as gemv.wgsl does. RoPE rotates pairs of
// rows (half-split layout, as rope.wgsl): the rotated rows are the last `rope_dim` rows of each
// `rope_period` rows from `rope_from` on. The MLA query uses its absorbed weight with rows
// arranged per head as [latent (kv_lora_rank) | rope (qk_rope)], so rope_period = cache row and
// the output is already the concatenated layout attention reads; the latent KV projection
// rotates only its trailing k_rope rows (one period).
//
// Constraints (checked at dispatch): K a multiple of a chunk's elements (weights.wgsl), rope_from and rope_period multiples of 16, and
// rope_dim even and dividing 16, so that every rotated pair lies inside one workgroup's rows.
// cos/sin come from the host's f64 table, as in rope.wgsl.

const ROWS: u32 = 16u;
const LANES: u32 = 16u;
// One row per lane (weights.wgsl's RowChunks, in q0; its sum in x).
const ROWS_PER_LANE: u32 = 1u;
const WORKGROUP: u32 = 256u;
const TILE_K4: u32 = 256u;

struct QkvRopeScaleParams {
    m: u32,
    k: u32,
    tokens: u32,
    pos0: u32,
    x_stride: u32,
    y_stride: u32,
    rope_from: u32,
    rope_period: u32,
    rope_dim: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: QkvRopeScaleParams;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;          // [M, K] (weights.wgsl)
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;          // [T] rows of x_stride vec4s
@group(0) @binding(3) var<storage, read_write> y: array<f32>;          // [T] rows of y_stride
@group(0) @binding(4) var<storage, read> cos_sin: array<vec2<f32>>;    // [max_seq, rope_dim/2]

var<workgroup> x_tile: array<vec4<f32>, TILE_K4>;
var<workgroup> partial: array<f32, WORKGROUP>;
var<workgroup> rows_out: array<f32, ROWS>;

@compute @workgroup_size(256)
fn qkv_rope_scale(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
) {
    let lane = lid % LANES;
    let r = lid / LANES;
    let row = wg.x * ROWS + r;
    let z = wg.z;
    let k4 = params.k / 4u;
    let x_base = z * params.x_stride;

    var acc = vec4(0.0);
    for (var t0 = 0u; t0 < k4; t0 += TILE_K4) {
        let tile_len = min(TILE_K4, k4 - t0);
        for (var i = lid; i < tile_len; i += WORKGROUP) {
            x_tile[x_slot(i)] = x[x_base + t0 + i];
        }
        workgroupBarrier();
        if (row < params.m) {
            for (var i = lane; i < tile_len / CHUNK_X4; i += LANES) {
                let c = t0 / CHUNK_X4 + i;
                let q = RowChunks(
                    weight_chunk(0u, params.m, params.k, row, c),
                    WeightChunk(), WeightChunk(), WeightChunk(),
                );
                acc = rows_dot(q, 0u, i, acc);
            }
        }
        workgroupBarrier();
    }
    partial[lid] = acc.x * matrix_factor(0u, params.m, params.k);
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        rows_out[r] = partial[lid];
    }
    workgroupBarrier();

    if (lane == 0u && row < params.m) {
        var v = rows_out[r];
        let first_rope = params.rope_period - params.rope_dim;
        if (row >= params.rope_from && (row - params.rope_from) % params.rope_period >= first_rope) {
            let half = params.rope_dim / 2u;
            let i = (row - params.rope_from) % params.rope_period - first_rope;
            let cs = cos_sin[(params.pos0 + z) * half + i % half];
            if (i < half) {
                // (a, b) → (a·cos − b·sin, a·sin + b·cos); this row is a, its pair b.
                v = v * cs.x - rows_out[r + half] * cs.y;
            } else {
                v = rows_out[r - half] * cs.y + v * cs.x;
            }
        }
        y[z * params.y_stride + row] = v * params.scale;
    }
}
