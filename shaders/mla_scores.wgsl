// mla_scores: attention scores of absorbed MLA, which is multi-query attention over the latent
// cache: scores[t, h, s] = scale · q[t, h, :] · cache[s, :], both rows `[latent | rope]` of
// width `row` (the query's latent part already went through W_UK). Causal: token t (at position
// pos0 + t) sees s ≤ pos0 + t; later s are written as 0 and ignored by the softmax.
// One invocation per (t, h, s); scores rows have stride `ctx` = pos0 + tokens.

struct MlaScoresParams {
    tokens: u32,
    heads: u32,
    ctx: u32,
    row: u32,
    pos0: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: MlaScoresParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;          // [tokens, heads, row]
@group(0) @binding(2) var<storage, read> cache: array<f32>;      // [max_seq, row]
@group(0) @binding(3) var<storage, read_write> scores: array<f32>; // [tokens·heads, ctx]

@compute @workgroup_size(256)
fn mla_scores(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.tokens * params.heads * params.ctx) {
        return;
    }
    let s = i % params.ctx;
    let th = i / params.ctx;          // t·heads + h
    let t = th / params.heads;
    if (s > params.pos0 + t) {
        scores[i] = 0.0;
        return;
    }
    var acc = 0.0;
    for (var c = 0u; c < params.row; c++) {
        acc += q[th * params.row + c] * cache[s * params.row + c];
    }
    scores[i] = acc * params.scale;
}
