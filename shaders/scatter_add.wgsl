// scatter_add: out[index[base + j], :] += weight[base + j] · y[j, :], the gate-weighted combine
// of one expert's outputs back into token order. Within one dispatch each token appears at most
// once (a token picks an expert at most once), so no two invocations write the same element.

struct ScatterParams {
    rows: u32,
    width: u32,
    base: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: ScatterParams;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> index: array<u32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn scatter_add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.rows * params.width) {
        return;
    }
    let j = i / params.width;
    let c = i % params.width;
    let slot = params.base + j;
    out[index[slot] * params.width + c] += weight[slot] * y[i];
}
