// moe_dispatch: one record per (token, choice) slot, as the fused AllToAll sends it: a 16-byte
// header (expert id, gate weight, activation scale, token) followed by the token's activation,
// so an expert kernel finds everything it needs in one contiguous read. The scale is 1 for f32
// activations; quantized activations put their block scale there.
//
// Record of slot s = t·K + j, `record` = 4 + D floats: [expert bits, gate, scale, token bits |
// x[t, 0..D]]. One workgroup of 64 per slot copies the row as vec4s. Constraints: D % 4 == 0.

struct MoeDispatchParams {
    tokens: u32,
    k: u32,
    hidden: u32,
    record: u32,
}

@group(0) @binding(0) var<uniform> params: MoeDispatchParams;
@group(0) @binding(1) var<storage, read> h: array<vec4<f32>>;              // [T, D/4]
@group(0) @binding(2) var<storage, read> ids: array<u32>;                  // [T, K]
@group(0) @binding(3) var<storage, read> gates: array<f32>;                // [T, K]
@group(0) @binding(4) var<storage, read_write> records: array<vec4<f32>>;  // [T·K, record/4]

@compute @workgroup_size(64)
fn moe_dispatch(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let slot = wg.x;
    if (slot >= params.tokens * params.k) {
        return;
    }
    let t = slot / params.k;
    let d4 = params.hidden / 4u;
    let base = slot * (params.record / 4u);
    if (lid == 0u) {
        records[base] = vec4<f32>(bitcast<f32>(ids[slot]), gates[slot], 1.0, bitcast<f32>(t));
    }
    for (var i = lid; i < d4; i += 64u) {
        records[base + 1u + i] = h[t * d4 + i];
    }
}
