// gemv_layout: the params and bindings of the gemv-shaped kernels (gemv, gate_up_swiglu),
// prepended to both. GemvParams mirrors engine::kernels::gemv::GemvParams field for field, and
// the bindings are those gemv::record checks and binds; gemv.wgsl says what each field means.

struct GemvParams {
    m: u32,
    k: u32,
    tokens: u32,
    experts: u32,
    w_offset: u32,
    expert_stride: u32,
    meta_stride: u32,
    x_stride: u32,
    x_offset: u32,
    y_stride: u32,
    y_offset: u32,
    seg: u32,
    seg_stride: u32,
    up_offset: u32,
    x_scales: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: GemvParams;
// [experts] matrices, or gate_up_swiglu's gate and up matrices per expert (weights.wgsl).
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;         // [T] rows of K/4
@group(0) @binding(3) var<storage, read_write> y: array<f32>;         // [T] rows of M
@group(0) @binding(4) var<storage, read> route_meta: array<u32>;     // [T] records (grouped)
