// sigmoid: y[i] = 1 / (1 + exp(−x[i])), DeepSeek-V3's gate function on the router logits.

struct SigmoidParams {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: SigmoidParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn sigmoid(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i < params.n) {
        y[i] = 1.0 / (1.0 + exp(-x[i]));
    }
}
