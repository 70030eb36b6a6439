// gather_rows: dst[j, :] = src[index[base + j], :], the tokens routed to one expert packed into a
// dense batch (the single-GPU form of MoE dispatch).

struct GatherParams {
    rows: u32,
    width: u32,
    base: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: GatherParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> index: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn gather_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.rows * params.width) {
        return;
    }
    let j = i / params.width;
    let c = i % params.width;
    dst[i] = src[index[params.base + j] * params.width + c];
}
