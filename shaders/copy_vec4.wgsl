// copy_vec4: dst[i] = src[i] for N vec4s; the bandwidth ceiling the GEMV is measured against.
//
// One invocation copies one vec4; workgroup 256. The grid is 2D (see kernels::grid_2d), the
// flat invocation index is bounds-checked against N.

struct CopyParams {
    n_vec4: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: CopyParams;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;       // [N]
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>; // [N]

@compute @workgroup_size(256)
fn copy_vec4(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lid;
    if (i < params.n_vec4) {
        dst[i] = src[i];
    }
}
