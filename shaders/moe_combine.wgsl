// moe_combine: out[t, d] += Σ_j gate(t, j) · expert_out[t·K + j, d] — the gate-weighted sum of a
// token's routed experts added to the shared expert's output in the pass that writes the block
// output (the eager path scatter-adds once per expert). Gates come from the dispatch records.
// One invocation per (t, d).

struct MoeDispatchParams {  // moe_dispatch's params: the same record layout
    tokens: u32,
    k: u32,
    hidden: u32,
    record: u32,
}

@group(0) @binding(0) var<uniform> params: MoeDispatchParams;
@group(0) @binding(1) var<storage, read> records: array<f32>;         // [T·K, record]
@group(0) @binding(2) var<storage, read> expert_out: array<f32>;      // [T·K, D]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;       // [T, D] shared output

@compute @workgroup_size(256)
fn moe_combine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.tokens * params.hidden) {
        return;
    }
    let t = i / params.hidden;
    let d = i % params.hidden;
    var acc = out[i];
    for (var j = 0u; j < params.k; j++) {
        let slot = t * params.k + j;
        acc += records[slot * params.record + 1u] * expert_out[slot * params.hidden + d];
    }
    out[i] = acc;
}
