// EXPERIMENT, not timed yet (session 13 had no device left): gemv_wide's timed variant with a
// ring of 3 rows in flight instead of 4, 12 rows per loop step. Each invocation owns chunk `lid`
// of every row (K must be 8192). Replaces the gemv kernel (entry point `gemv`); run with
// MOESCOPE_ROWS_PER_LANE=12 (rows per workgroup a multiple of 12).

override LANES: u32 = 32u;
override ROWS_PER_LANE: u32 = 1u;
const WORKGROUP: u32 = 256u;
override PASS: u32 = WORKGROUP / LANES;
const TILE_K4: u32 = 256u;
// The reduction buffer (named x_tile because weights.wgsl refers to it): 4 vec4 per lane.
var<workgroup> x_tile: array<vec4<f32>, 1024>;

struct XChunk { a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>,
                e: vec4<f32>, f: vec4<f32>, g: vec4<f32>, h: vec4<f32>, }

fn chunk_dot(q: WeightChunk, xc: XChunk) -> f32 {
    var t = part_fma(q.codes, 0u, XPart(xc.a, xc.b), 0.0);
    t = part_fma(q.codes, 1u, XPart(xc.c, xc.d), t);
    let s = chunk_scales(q);
    var u = part_fma(q.codes, 2u, XPart(xc.e, xc.f), 0.0);
    u = part_fma(q.codes, 3u, XPart(xc.g, xc.h), u);
    return t * s.x + u * s.y;
}

fn store_row(row: u32, z: u32, value: f32) {
    if (row < params.m) {
        y[params.y_offset + z * params.y_stride + (row / params.seg) * params.seg_stride
            + row % params.seg] = value;
    }
}


// Chunk `lid` of row `row` with the lane's scale position precomputed (K a multiple of 128).
fn lane_chunk(codes0: u32, row_chunks: u32, scales0: u32, scale_row_words: u32, shift: u32, row: u32) -> WeightChunk {
    var q: WeightChunk;
    q.codes = w[codes0 + row * row_chunks];
    q.scale = scale_word(scales0 + row * scale_row_words) >> shift;
    return q;
}

@compute @workgroup_size(256)
fn gemv(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let R = PASS * ROWS_PER_LANE;
    let first = (wg.x + wg.y * nwg.x) * R;
    let z = wg.z;
    let k = params.k;
    let m = params.m;
    var expert = 0u;
    if (params.expert_stride > 0u) {
        expert = route_meta[z * params.meta_stride];
    }
    let matrix = params.w_offset + expert * params.expert_stride;
    let xb = params.x_offset + z * params.x_stride + lid * 8u;
    let xc = XChunk(x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u],
                    x[xb + 4u], x[xb + 5u], x[xb + 6u], x[xb + 7u]);
    let last = min(first + R, m) - 1u;
    let row_chunks = k / 32u;
    let codes0 = matrix + lid;
    let scales_base = 4u * (matrix + m * row_chunks);
    var scales0 = scales_base + lid / 4u;
    var srw = k / 128u;
    var shift = 8u * (lid % 4u);
    if (FORMAT == 5u) {
        scales0 = scales_base + 1u + lid / 2u;
        srw = k / 64u;
        shift = 16u * (lid % 2u);
    }
    var q0 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(first + 0u, last));
    var q1 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(first + 1u, last));
    var q2 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(first + 2u, last));
    let factor = matrix_factor(matrix, m, k);
    for (var r = 0u; r < R; r += 12u) {
        let row = first + r;
        var p0: vec4<f32>;
        var p1: vec4<f32>;
        var p2: vec4<f32>;
        p0.x = chunk_dot(q0, xc);
        q0 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 3u, last));
        p0.y = chunk_dot(q1, xc);
        q1 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 4u, last));
        p0.z = chunk_dot(q2, xc);
        q2 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 5u, last));
        p0.w = chunk_dot(q0, xc);
        q0 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 6u, last));
        p1.x = chunk_dot(q1, xc);
        q1 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 7u, last));
        p1.y = chunk_dot(q2, xc);
        q2 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 8u, last));
        p1.z = chunk_dot(q0, xc);
        q0 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 9u, last));
        p1.w = chunk_dot(q1, xc);
        q1 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 10u, last));
        p2.x = chunk_dot(q2, xc);
        q2 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 11u, last));
        p2.y = chunk_dot(q0, xc);
        q0 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 12u, last));
        p2.z = chunk_dot(q1, xc);
        q1 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 13u, last));
        p2.w = chunk_dot(q2, xc);
        q2 = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 14u, last));
        x_tile[lid] = p0;
        x_tile[256u + lid] = p1;
        x_tile[512u + lid] = p2;
        let g = 2u;
        {
            // Reduce this batch's 4·(g+1) rows: 256 partials each, 4 at a time.
            let groups = g + 1u;
            workgroupBarrier();
            var s = vec4(0.0);
            let gg = lid / 64u;
            let seg = lid % 64u;
            if (gg < groups) {
                s = x_tile[gg * 256u + seg] + x_tile[gg * 256u + 64u + seg]
                    + x_tile[gg * 256u + 128u + seg] + x_tile[gg * 256u + 192u + seg];
            }
            workgroupBarrier();
            x_tile[lid] = s;   // group gg, segment seg at gg·64 + seg
            workgroupBarrier();
            if (lid < 64u) {
                let g2 = lid / 16u;
                let s2 = lid % 16u;
                x_tile[256u + lid] = x_tile[g2 * 64u + s2] + x_tile[g2 * 64u + 16u + s2]
                    + x_tile[g2 * 64u + 32u + s2] + x_tile[g2 * 64u + 48u + s2];
            }
            workgroupBarrier();
            if (lid < 16u) {
                let g3 = lid / 4u;
                let s3 = lid % 4u;
                x_tile[320u + lid] = x_tile[256u + g3 * 16u + s3] + x_tile[256u + g3 * 16u + 4u + s3]
                    + x_tile[256u + g3 * 16u + 8u + s3] + x_tile[256u + g3 * 16u + 12u + s3];
            }
            workgroupBarrier();
            if (lid < groups) {
                let b = 320u + lid * 4u;
                let sums = (x_tile[b] + x_tile[b + 1u] + x_tile[b + 2u] + x_tile[b + 3u]) * factor;
                let r0 = first + r + 4u * lid;
                store_row(r0, z, sums.x);
                store_row(r0 + 1u, z, sums.y);
                store_row(r0 + 2u, z, sums.z);
                store_row(r0 + 3u, z, sums.w);
            }
            workgroupBarrier();
        }
    }
}
