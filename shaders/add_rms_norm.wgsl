// add_rms_norm: x[row] += r[row]; h[row] = x[row] / sqrt(mean(x[row]²) + eps) ⊙ weight — the
// residual connection and the next layer's RMSNorm in one pass over the row (the single-GPU form
// of TensorRT-LLM's AllReduce + RMSNorm fusion): x is read once and written once, instead of
// add's read-read-write followed by rms_norm's read-write.
// One workgroup per row; rows are contiguous, `width` wide. Any width ≥ 1.

struct AddRmsNormParams {
    rows: u32,
    width: u32,
    eps: f32,
    _pad: u32,
}

const WORKGROUP: u32 = 256u;

@group(0) @binding(0) var<uniform> params: AddRmsNormParams;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;     // [rows, width] residual stream
@group(0) @binding(2) var<storage, read> r: array<f32>;           // [rows, width] block output
@group(0) @binding(3) var<storage, read> weight: array<f32>;      // [width]
@group(0) @binding(4) var<storage, read_write> h: array<f32>;     // [rows, width] normed

var<workgroup> partial: array<f32, WORKGROUP>;

@compute @workgroup_size(256)
fn add_rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let row = wg.x;
    if (row >= params.rows) {
        return;
    }
    let base = row * params.width;
    var sum_sq = 0.0;
    for (var i = lid; i < params.width; i += WORKGROUP) {
        let v = x[base + i] + r[base + i];
        x[base + i] = v;
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
    // Each invocation reads back only the values it wrote itself: no barrier needed for x.
    for (var i = lid; i < params.width; i += WORKGROUP) {
        h[base + i] = x[base + i] * inv_rms * weight[i];
    }
}
