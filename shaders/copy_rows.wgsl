// copy_rows: dst[dst_base + r·dst_stride + i] = src[src_base + r·src_stride + i] for i < width.
// The eager MLA path's copies and concatenations: query parts into [q_latent | q_rope] per head,
// and each token's [c_kv | k_rope] into the latent cache. (The fused path writes in place.)

struct CopyRowsParams {
    rows: u32,
    width: u32,
    src_base: u32,
    src_stride: u32,
    dst_base: u32,
    dst_stride: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: CopyRowsParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn copy_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.rows * params.width) {
        return;
    }
    let r = i / params.width;
    let c = i % params.width;
    dst[params.dst_base + r * params.dst_stride + c] = src[params.src_base + r * params.src_stride + c];
}
