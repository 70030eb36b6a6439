// mla_split_k: flash-decoding attention of absorbed MLA over the latent cache. The context is cut
// into chunks of CHUNK positions; one workgroup per (chunk, token·head) computes its scores,
// keeps their running max m and sum l of exp(score − m), and the unnormalized latent output
// acc = Σ exp(score − m)·cache[s, :latent]. mla_split_k_reduce then merges the chunks of each
// (token, head): o = Σ_j e^(m_j − M)·acc_j / Σ_j e^(m_j − M)·l_j with M = max_j m_j. Scores,
// probabilities and the softmax never touch memory, and a short context still spreads over
// ⌈ctx / CHUNK⌉ workgroups per head instead of one.
//
// Scores: scale · q[t, h, :] · cache[s, :] over rows [latent | rope] of width `row`; causal, token t
// (position pos0 + t) sees s ≤ pos0 + t. A chunk with no visible position stores m = −3e38, l = 0.
// Partials: [T·H, splits, latent + 2] as (acc[0..latent], m, l). Workgroup storage bounds:
// latent ≤ 256 (checked at dispatch).

const CHUNK: u32 = 64u;

struct MlaSplitKParams {
    tokens: u32,
    heads: u32,
    row: u32,
    latent: u32,
    pos0: u32,
    splits: u32,
    scale: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: MlaSplitKParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;               // [T, H, row]
@group(0) @binding(2) var<storage, read> cache: array<f32>;           // [max_seq, row]
@group(0) @binding(3) var<storage, read_write> partials: array<f32>;  // [T·H, splits, latent + 2]

var<workgroup> p: array<f32, CHUNK>;
var<workgroup> red: array<f32, CHUNK>;

@compute @workgroup_size(64)
fn mla_split_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let split = wg.x;
    let th = wg.y;
    let t = th / params.heads;
    let visible = params.pos0 + t + 1u;
    let s = split * CHUNK + lid;

    var score = -3.0e38;
    if (s < visible) {
        var acc = 0.0;
        for (var c = 0u; c < params.row; c++) {
            acc += q[th * params.row + c] * cache[s * params.row + c];
        }
        score = acc * params.scale;
    }
    red[lid] = score;
    workgroupBarrier();
    for (var stride = CHUNK / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            red[lid] = max(red[lid], red[lid + stride]);
        }
        workgroupBarrier();
    }
    let m = red[0];
    workgroupBarrier();
    var e = 0.0;
    if (s < visible) {
        e = exp(score - m);
    }
    p[lid] = e;
    red[lid] = e;
    workgroupBarrier();
    for (var stride = CHUNK / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            red[lid] += red[lid + stride];
        }
        workgroupBarrier();
    }
    let l = red[0];

    let out = (th * params.splits + split) * (params.latent + 2u);
    let first = split * CHUNK;
    let n = min(CHUNK, select(0u, visible - first, visible > first));
    for (var c = lid; c < params.latent; c += CHUNK) {
        var acc = 0.0;
        for (var i = 0u; i < n; i++) {
            acc += p[i] * cache[(first + i) * params.row + c];
        }
        partials[out + c] = acc;
    }
    if (lid == 0u) {
        partials[out + params.latent] = m;
        partials[out + params.latent + 1u] = l;
    }
}
