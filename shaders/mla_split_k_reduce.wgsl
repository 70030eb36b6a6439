// mla_split_k_reduce: merges the chunks that mla_split_k wrote for each (token, head):
// o[th, c] = Σ_j e^(m_j − M)·acc_j[c] / Σ_j e^(m_j − M)·l_j with M = max_j m_j (see
// mla_split_k.wgsl). Chunk 0 always holds position 0, so M is finite and the denominator ≥ 1.
// One invocation per (c, token·head): grid x over latent, y over T·H.

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
@group(0) @binding(1) var<storage, read> partials: array<f32>;   // [T·H, splits, latent + 2]
@group(0) @binding(2) var<storage, read_write> o: array<f32>;    // [T, H, latent]

@compute @workgroup_size(64)
fn mla_split_k_reduce(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let th = gid.y;
    if (c >= params.latent || th >= params.tokens * params.heads) {
        return;
    }
    let width = params.latent + 2u;
    let base = th * params.splits * width;
    var big_m = -3.0e38;
    for (var j = 0u; j < params.splits; j++) {
        big_m = max(big_m, partials[base + j * width + params.latent]);
    }
    var num = 0.0;
    var den = 0.0;
    for (var j = 0u; j < params.splits; j++) {
        let w = exp(partials[base + j * width + params.latent] - big_m);
        num += w * partials[base + j * width + c];
        den += w * partials[base + j * width + params.latent + 1u];
    }
    o[th * params.latent + c] = num / den;
}
