// moe_route: router logits, gating function and top-k for one token in one kernel (the eager
// path runs gemv, sigmoid/softmax and moe_topk, writing logits and scores to memory in between).
// One workgroup of 64 per token: invocation e computes expert e's logit (a dot product of the
// token's hidden row with router row e, as vec4s) and its gate score; invocation 0 then picks the
// k largest score + bias (ties to the lower index, as the reference) and writes the gates: the
// chosen scores normalized over the chosen, times routed_scaling (DeepSeek-V3).
// Constraints: experts ≤ 64 (MoeConfig::validate), hidden % 4 == 0. gate: 0 sigmoid, 1 softmax.

const MAX_EXPERTS: u32 = 64u;

struct MoeRouteParams {
    tokens: u32,
    experts: u32,
    k: u32,
    hidden: u32,
    routed_scaling: f32,
    gate: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: MoeRouteParams;
@group(0) @binding(1) var<storage, read> router: array<vec4<f32>>;   // [E, D/4]
@group(0) @binding(2) var<storage, read> h: array<vec4<f32>>;        // [T, D/4]
@group(0) @binding(3) var<storage, read> bias: array<f32>;           // [E]
@group(0) @binding(4) var<storage, read_write> scores: array<f32>;   // [T, E]
@group(0) @binding(5) var<storage, read_write> ids: array<u32>;      // [T, K]
@group(0) @binding(6) var<storage, read_write> gates: array<f32>;    // [T, K]

var<workgroup> score: array<f32, MAX_EXPERTS>;

@compute @workgroup_size(64)
fn moe_route(@builtin(local_invocation_index) e: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let t = wg.x;
    if (t >= params.tokens) {
        return;
    }
    let d4 = params.hidden / 4u;
    if (e < params.experts) {
        var acc = 0.0;
        for (var i = 0u; i < d4; i++) {
            acc += dot(router[e * d4 + i], h[t * d4 + i]);
        }
        score[e] = acc;
    }
    workgroupBarrier();
    if (e != 0u) {
        return;
    }
    let n = params.experts;
    if (params.gate == 0u) {
        for (var j = 0u; j < n; j++) {
            score[j] = 1.0 / (1.0 + exp(-score[j]));
        }
    } else {
        var m = -3.0e38;
        for (var j = 0u; j < n; j++) {
            m = max(m, score[j]);
        }
        var sum = 0.0;
        for (var j = 0u; j < n; j++) {
            score[j] = exp(score[j] - m);
            sum += score[j];
        }
        for (var j = 0u; j < n; j++) {
            score[j] = score[j] / sum;
        }
    }
    for (var j = 0u; j < n; j++) {
        scores[t * n + j] = score[j];
    }
    // Bit j of `taken` marks expert j as chosen.
    var taken = vec2<u32>(0u, 0u);
    var total = 0.0;
    for (var c = 0u; c < params.k; c++) {
        var best = 0u;
        var best_score = -3.0e38;
        var found = false;
        for (var j = 0u; j < n; j++) {
            let is_taken = (taken[j / 32u] >> (j % 32u)) & 1u;
            let s = score[j] + bias[j];
            if (is_taken == 0u && (!found || s > best_score)) {
                best = j;
                best_score = s;
                found = true;
            }
        }
        taken[best / 32u] |= 1u << (best % 32u);
        ids[t * params.k + c] = best;
        total += score[best];
    }
    for (var c = 0u; c < params.k; c++) {
        gates[t * params.k + c] = score[ids[t * params.k + c]] / total * params.routed_scaling;
    }
}
