// silu_mul: h[i] = silu(gate[i]) · up[i], the SwiGLU activation, as its own kernel (eager).

struct SiluMulParams {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: SiluMulParams;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> h: array<f32>;

@compute @workgroup_size(256)
fn silu_mul(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i < params.n) {
        let g = gate[i];
        h[i] = g / (1.0 + exp(-g)) * up[i];
    }
}
