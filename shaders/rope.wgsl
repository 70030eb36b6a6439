// rope: rotary position embedding in place, half-split (GPT-NeoX) layout: element i of a
// d-wide vector pairs with element i + d/2. Token t sits at position pos0 + t. cos/sin come from
// a table computed on the host in f64 (`[max_seq, d/2]` of vec2(cos, sin)), as inference engines
// keep a rotary cache: GPU sin/cos of large angles are far less accurate than the rest.
//
// Row t holds `count` vectors, vector j at `offset + j·vec_stride` within the row of `row_stride`.

struct RopeParams {
    tokens: u32,
    count: u32,
    dim: u32,
    row_stride: u32,
    offset: u32,
    vec_stride: u32,
    pos0: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: RopeParams;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> cos_sin: array<vec2<f32>>;   // [max_seq, dim/2]

@compute @workgroup_size(256)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let half = params.dim / 2u;
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.tokens * params.count * half) {
        return;
    }
    let pair = i % half;
    let j = (i / half) % params.count;
    let t = i / (half * params.count);
    let base = t * params.row_stride + params.offset + j * params.vec_stride;
    let cs = cos_sin[(params.pos0 + t) * half + pair];
    let a = x[base + pair];
    let b = x[base + pair + half];
    x[base + pair] = a * cs.x - b * cs.y;
    x[base + pair + half] = a * cs.y + b * cs.x;
}
