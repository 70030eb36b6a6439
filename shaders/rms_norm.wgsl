// rms_norm: y = x / sqrt(mean(x²) + eps) ⊙ weight, one workgroup per row. Rows are read at
// `in_offset + row·in_stride` and written at `out_offset + row·out_stride`, so the norm can take a
// slice of a wider row (MLA normalizes the first kv_lora_rank values of each [c_kv | k_rope] row).
// The `tail` values after the normalized ones are copied unchanged: with the fused MLA copy/concat,
// one launch turns a projected [c_kv | k_rope] row into its latent-cache row.

struct RmsNormParams {
    rows: u32,
    width: u32,
    in_stride: u32,
    in_offset: u32,
    out_stride: u32,
    out_offset: u32,
    eps: f32,
    tail: u32,
}

const WORKGROUP: u32 = 256u;

@group(0) @binding(0) var<uniform> params: RmsNormParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;      // [width]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, WORKGROUP>;

@compute @workgroup_size(256)
fn rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let row = wg.x;
    if (row >= params.rows) {
        return;
    }
    let base_in = params.in_offset + row * params.in_stride;
    var sum_sq = 0.0;
    for (var i = lid; i < params.width; i += WORKGROUP) {
        let v = x[base_in + i];
        sum_sq += v * v;
    }
    partial[lid] = sum_sq;
    workgroupBarrier();
    for (var stride = WORKGROUP / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    let inv_rms = inverseSqrt(partial[0] / f32(params.width) + params.eps);
    let base_out = params.out_offset + row * params.out_stride;
    for (var i = lid; i < params.width; i += WORKGROUP) {
        y[base_out + i] = x[base_in + i] * inv_rms * weight[i];
    }
    for (var i = params.width + lid; i < params.width + params.tail; i += WORKGROUP) {
        y[base_out + i] = x[base_in + i];
    }
}
