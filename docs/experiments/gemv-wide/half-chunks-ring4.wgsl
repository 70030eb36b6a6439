// EXPERIMENT, not timed yet (session 13 had no device left): gemv_wide's idea with half chunks.
// Invocation l owns half l % 2 (16 elements, two words) of chunk l / 2 of a 4096-element slice,
// so x takes 16 registers instead of 32; two passes cover K = 8192 (K must be 8192), the second
// adding to the first's stores. Ring of 4 rows, each slot two words loaded as scalars. Replaces
// the gemv kernel (entry point `gemv`); run with MOESCOPE_ROWS_PER_LANE=4.

override LANES: u32 = 32u;
override ROWS_PER_LANE: u32 = 1u;
const WORKGROUP: u32 = 256u;
override PASS: u32 = WORKGROUP / LANES;
const TILE_K4: u32 = 256u;
// The reduction buffer (named x_tile because weights.wgsl refers to it): 4 vec4 per lane.
var<workgroup> x_tile: array<vec4<f32>, 1024>;
var<private> lid_g: u32;

struct XHalf { a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>, }

fn chunk_dot(q: WeightChunk, xc: XHalf) -> f32 {
    var t = fp4_word_fma(q.codes.x, xc.a, xc.b, 0.0);
    t = fp4_word_fma(q.codes.y, xc.c, xc.d, t);
    var sc: f32;
    if (FORMAT == 5u) {
        sc = e4m3_scale_pair(q.scale).x;
    } else {
        sc = bitcast<f32>((q.scale & 0xFFu) << 23u);
    }
    return t * sc;
}

fn store_row(row: u32, z: u32, value: f32, add: bool) {
    if (row < params.m) {
        let i = params.y_offset + z * params.y_stride + (row / params.seg) * params.seg_stride
            + row % params.seg;
        y[i] = select(value, y[i] + value, add);
    }
}


// Chunk `lid` of row `row` with the lane's scale position precomputed (K a multiple of 128).
fn lane_chunk(codes0: u32, row_chunks: u32, scales0: u32, scale_row_words: u32, shift: u32, row: u32) -> WeightChunk {
    var q: WeightChunk;
    let i = codes0 + row * row_chunks;
    let h = 2u * (lid_g % 2u);
    q.codes = vec4(w[i][h], w[i][h + 1u], 0u, 0u);
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
    lid_g = lid;
    let x_row = params.x_offset + z * params.x_stride;
  for (var kpass = 0u; kpass < 2u; kpass++) {
    let chunk = kpass * 128u + lid / 2u;
    let xb = x_row + chunk * 8u + 4u * (lid % 2u);
    let xc = XHalf(x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u]);
    let last = min(first + R, m) - 1u;
    let row_chunks = k / 32u;
    let codes0 = matrix + chunk;
    let scales_base = 4u * (matrix + m * row_chunks);
    var scales0 = scales_base + chunk / 4u;
    var srw = k / 128u;
    var shift = 8u * (chunk % 4u);
    if (FORMAT == 5u) {
        // block 2·chunk + half
        let blk = 2u * chunk + lid % 2u;
        scales0 = scales_base + 1u + blk / 4u;
        srw = k / 64u;
        shift = 8u * (blk % 4u);
    }
    var qa = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(first, last));
    var qb = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(first + 1u, last));
    var qc = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(first + 2u, last));
    var qd = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(first + 3u, last));
    let factor = matrix_factor(matrix, m, k);
    for (var r = 0u; r < R; r += 4u) {
        let row = first + r;
        var p: vec4<f32>;
        p.x = chunk_dot(qa, xc);
        qa = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 4u, last));
        p.y = chunk_dot(qb, xc);
        qb = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 5u, last));
        p.z = chunk_dot(qc, xc);
        qc = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 6u, last));
        p.w = chunk_dot(qd, xc);
        qd = lane_chunk(codes0, row_chunks, scales0, srw, shift, min(row + 7u, last));
        let g = (r / 4u) % 4u;
        x_tile[g * 256u + lid] = p;
        if (g == 3u || r + 4u == R) {
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
                let r0 = first + r - 4u * g + 4u * lid;
                store_row(r0, z, sums.x, kpass > 0u);
                store_row(r0 + 1u, z, sums.y, kpass > 0u);
                store_row(r0 + 2u, z, sums.z, kpass > 0u);
                store_row(r0 + 3u, z, sums.w, kpass > 0u);
            }
            workgroupBarrier();
        }
    }
  }
}
