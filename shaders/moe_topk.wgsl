// moe_topk: per token, the k experts with the largest score + bias (ties to the lower index, as
// the reference), and their gates: the unbiased scores normalized over the chosen, times
// routed_scaling (DeepSeek-V3). One invocation per token; experts ≤ 64 (MoeConfig::validate).

struct MoeTopkParams {
    tokens: u32,
    experts: u32,
    k: u32,
    routed_scaling: f32,
}

@group(0) @binding(0) var<uniform> params: MoeTopkParams;
@group(0) @binding(1) var<storage, read> scores: array<f32>;       // [tokens, experts]
@group(0) @binding(2) var<storage, read> bias: array<f32>;         // [experts]
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;    // [tokens, k]
@group(0) @binding(4) var<storage, read_write> gates: array<f32>;  // [tokens, k]

@compute @workgroup_size(64)
fn moe_topk(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if (t >= params.tokens) {
        return;
    }
    let base = t * params.experts;
    // Bit e of `taken` marks expert e as chosen.
    var taken = vec2<u32>(0u, 0u);
    var sum = 0.0;
    for (var j = 0u; j < params.k; j++) {
        var best = 0u;
        var best_score = -3.0e38;
        var found = false;
        for (var e = 0u; e < params.experts; e++) {
            let is_taken = (taken[e / 32u] >> (e % 32u)) & 1u;
            let s = scores[base + e] + bias[e];
            if (is_taken == 0u && (!found || s > best_score)) {
                best = e;
                best_score = s;
                found = true;
            }
        }
        taken[best / 32u] |= 1u << (best % 32u);
        ids[t * params.k + j] = best;
        gates[t * params.k + j] = scores[base + best];
        sum += scores[base + best];
    }
    for (var j = 0u; j < params.k; j++) {
        gates[t * params.k + j] = gates[t * params.k + j] / sum * params.routed_scaling;
    }
}
