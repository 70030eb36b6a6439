// matmul: y[T, M] = x[T, K] · W[M, K]ᵀ, the prefill form of gemv (T tokens at once). A 16×16
// workgroup computes a 16-token × 16-row output tile; x and W are staged through workgroup memory
// 16 columns of K at a time, so each weight value is read from memory once per 16 tokens.
// Any T, M, K ≥ 1: tiles past the edges are zero-filled and not written.

struct MatmulParams {
    t: u32,
    m: u32,
    k: u32,
    _pad: u32,
}

const TILE: u32 = 16u;

@group(0) @binding(0) var<uniform> params: MatmulParams;
@group(0) @binding(1) var<storage, read> w: array<f32>;           // [M, K]
@group(0) @binding(2) var<storage, read> x: array<f32>;           // [T, K]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;     // [T, M]

var<workgroup> x_tile: array<array<f32, TILE>, TILE>;   // [token][k]
var<workgroup> w_tile: array<array<f32, TILE>, TILE>;   // [row][k]

@compute @workgroup_size(16, 16)
fn matmul(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    let row = wg.x * TILE + lid.x;     // output column: a row of W
    let token = wg.y * TILE + lid.y;
    let load_row = wg.x * TILE + lid.y;
    var acc = 0.0;
    for (var k0 = 0u; k0 < params.k; k0 += TILE) {
        let k = k0 + lid.x;
        var xv = 0.0;
        if (token < params.t && k < params.k) {
            xv = x[token * params.k + k];
        }
        x_tile[lid.y][lid.x] = xv;
        var wv = 0.0;
        if (load_row < params.m && k < params.k) {
            wv = w[load_row * params.k + k];
        }
        w_tile[lid.y][lid.x] = wv;
        workgroupBarrier();
        for (var kk = 0u; kk < TILE; kk++) {
            acc += x_tile[lid.y][kk] * w_tile[lid.x][kk];
        }
        workgroupBarrier();
    }
    if (row < params.m && token < params.t) {
        y[token * params.m + row] = acc;
    }
}
