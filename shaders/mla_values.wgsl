// mla_values: out[t, h, c] = Σ_s p[t, h, s] · cache[s, c] for c < latent: the attention output in
// the latent space (W_UV is absorbed into the output projection). One invocation per (t, h, c);
// p is zero past each token's causal limit, so the sum runs over the whole context row.

struct MlaValuesParams {
    tokens: u32,
    heads: u32,
    ctx: u32,
    row: u32,
    latent: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: MlaValuesParams;
@group(0) @binding(1) var<storage, read> p: array<f32>;          // [tokens·heads, ctx]
@group(0) @binding(2) var<storage, read> cache: array<f32>;      // [max_seq, row]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [tokens, heads, latent]

@compute @workgroup_size(256)
fn mla_values(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.tokens * params.heads * params.latent) {
        return;
    }
    let c = i % params.latent;
    let th = i / params.latent;
    var acc = 0.0;
    for (var s = 0u; s < params.ctx; s++) {
        acc += p[th * params.ctx + s] * cache[s * params.row + c];
    }
    out[i] = acc;
}
