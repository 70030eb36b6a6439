// EXPERIMENT (session 15): gemv_wide with work claiming. Persistent workgroups claim GROUP-row
// groups from an atomic counter one claim ahead, so the ring's loads run on into the next
// group, and load x once each. Compose with gemv_layout.wgsl's binding-4 line (route_meta)
// removed, as D/gemv_wide.wgsl, and run with MOESCOPE_GEMV_WIDE=1 MOESCOPE_WORK=1
// MOESCOPE_WGSL_DIR=D MOESCOPE_WIDE_ROWS=R (the grid: ceil(M / R) workgroups). FP4, K <= 8192,
// no grouped experts. H100: 2200-2244 GB/s at GROUP 16-32 against the landed kernel's 2352.

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


// EXPERIMENT (work claiming): binding 4 is a pair of counters per token (next group, finished
// workgroups), zero before the dispatch and reset to zero by the last workgroup to finish.
// Workgroups claim GROUP-row groups one at a time, one claim ahead so that the ring's loads
// run on into the next group; x is loaded once per workgroup. K <= 8192 (one pass).
@group(0) @binding(4) var<storage, read_write> work: array<atomic<u32>>;
override GROUP: u32 = 16u;
var<workgroup> claim: u32;

fn claim_next(lid: u32, z: u32) -> u32 {
    if (lid == 0u) {
        claim = atomicAdd(&work[2u * z], 1u);
    }
    return workgroupUniformLoad(&claim);
}

@compute @workgroup_size(256)
fn gemv_wide(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let z = wg.z;
    let m = params.m;
    let k = params.k;
    let groups = (m + GROUP - 1u) / GROUP;
    var cur = claim_next(lid, z);
    if (cur < groups) {
        let matrix = params.w_offset;
        let x_base = params.x_offset + z * params.x_stride;
        let x_scales = params.x_scales + z * params.x_stride;
        let row_chunks = k / 32u;
        let chunk = lid;
        var xc: XChunk;
        if (chunk < row_chunks) {
            xc = x_chunk(x_base, x_scales, chunk);
        }
        let factor = matrix_factor(matrix, m, k);
        let at = lane_chunks(matrix, m, k, min(chunk, row_chunks - 1u));
        let last = m - 1u;
        var nxt = claim_next(lid, z);
        var first = cur * GROUP;
        var qa = load_chunk(at, min(first, last));
        var qb = load_chunk(at, min(first + 1u, last));
        var qc = load_chunk(at, min(first + 2u, last));
        var qd = load_chunk(at, min(first + 3u, last));
        loop {
            for (var r = 0u; r < GROUP; r += 4u) {
                let row = first + r;
                // The ring's next four rows: this group's, or the next claimed group's first.
                var ahead = row + 4u;
                if (r + 4u == GROUP) {
                    ahead = nxt * GROUP;
                }
                var p: vec4<f32>;
                p.x = chunk_dot(qa, xc);
                qa = load_chunk(at, min(ahead, last));
                p.y = chunk_dot(qb, xc);
                qb = load_chunk(at, min(ahead + 1u, last));
                p.z = chunk_dot(qc, xc);
                qc = load_chunk(at, min(ahead + 2u, last));
                p.w = chunk_dot(qd, xc);
                qd = load_chunk(at, min(ahead + 3u, last));
                let g = (r / 4u) % 4u;
                x_tile[g * WORKGROUP + lid] = p;
                if (g == 3u || r + 4u == GROUP) {
                    let sums = batch_sums(lid, g + 1u) * factor;
                    if (lid <= g) {
                        let r0 = row - 4u * g + 4u * lid;
                        store_row(r0, z, sums.x, false);
                        store_row(r0 + 1u, z, sums.y, false);
                        store_row(r0 + 2u, z, sums.z, false);
                        store_row(r0 + 3u, z, sums.w, false);
                    }
                }
            }
            cur = nxt;
            if (cur >= groups) {
                break;
            }
            first = cur * GROUP;
            nxt = claim_next(lid, z);
        }
    }
    if (lid == 0u) {
        let done = atomicAdd(&work[2u * z + 1u], 1u);
        if (done + 1u == nwg.x * nwg.y) {
            atomicStore(&work[2u * z], 0u);
            atomicStore(&work[2u * z + 1u], 0u);
        }
    }
}
