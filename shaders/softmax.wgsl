// softmax: in place over each row's first `valid` entries, one workgroup per row; entries past
// `valid` become 0. valid(row) = valid_base + row / rows_per_step: for causal attention
// (rows = tokens·heads) token t sees pos0 + t + 1 positions; for router softmax all rows see all
// experts (rows_per_step larger than the rows).

struct SoftmaxParams {
    rows: u32,
    stride: u32,
    valid_base: u32,
    rows_per_step: u32,
}

const WORKGROUP: u32 = 256u;

@group(0) @binding(0) var<uniform> params: SoftmaxParams;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;

var<workgroup> partial: array<f32, WORKGROUP>;

@compute @workgroup_size(256)
fn softmax(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let row = wg.x;
    if (row >= params.rows) {
        return;
    }
    let base = row * params.stride;
    let valid = min(params.valid_base + row / params.rows_per_step, params.stride);

    var m = -3.0e38;
    for (var i = lid; i < valid; i += WORKGROUP) {
        m = max(m, x[base + i]);
    }
    partial[lid] = m;
    workgroupBarrier();
    for (var s = WORKGROUP / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            partial[lid] = max(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    let row_max = partial[0];
    workgroupBarrier();

    var sum = 0.0;
    for (var i = lid; i < valid; i += WORKGROUP) {
        let e = exp(x[base + i] - row_max);
        x[base + i] = e;
        sum += e;
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var s = WORKGROUP / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / partial[0];
    for (var i = lid; i < params.stride; i += WORKGROUP) {
        if (i < valid) {
            x[base + i] *= inv;
        } else {
            x[base + i] = 0.0;
        }
    }
}
