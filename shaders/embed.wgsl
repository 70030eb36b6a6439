// embed: x[t, :] = table[tokens[t], :]. One invocation per output element; token ids were
// range-checked on the host (model::reference::check_input), the min() only keeps a bad id from
// reading past the table.

struct EmbedParams {
    tokens: u32,
    hidden: u32,
    vocab: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: EmbedParams;
@group(0) @binding(1) var<storage, read> table: array<f32>;        // [vocab, hidden]
@group(0) @binding(2) var<storage, read> token_ids: array<u32>;    // [tokens]
@group(0) @binding(3) var<storage, read_write> x: array<f32>;      // [tokens, hidden]

@compute @workgroup_size(256)
fn embed(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.tokens * params.hidden) {
        return;
    }
    let t = i / params.hidden;
    let d = i % params.hidden;
    let id = min(token_ids[t], params.vocab - 1u);
    x[i] = table[id * params.hidden + d];
}
