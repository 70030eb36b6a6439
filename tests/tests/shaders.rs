//! Every kernel's WGSL parses and validates with naga, the compiler wgpu itself uses, exactly as
//! the engine compiles it (`kernels::SHADERS`: its includes prepended), so a shader error fails
//! here with its line and message rather than as a device error at run time. Every file in
//! shaders/ is some kernel's, and every kernel's entry point is named after its file.

use std::collections::BTreeSet;
use std::path::Path;

use moescope_engine::kernels::SHADERS;

#[test]
fn every_kernel_parses_and_validates() {
    for shader in SHADERS {
        let source = shader.wgsl;
        let module = naga::front::wgsl::parse_str(source)
            .unwrap_or_else(|e| panic!("{}: {}", shader.name, e.emit_to_string(source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            // unpack2x16float (the f16 weights) is core WGSL; naga files it under this
            // capability, which wgpu grants wherever the downlevel flag SHADER_F16_IN_F32 holds
            // (every WebGPU and Vulkan adapter).
            naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}: {}", shader.name, e.emit_to_string(source)));
        assert!(
            module
                .entry_points
                .iter()
                .any(|ep| ep.name == shader.entry_point),
            "{}: no entry point named {}",
            shader.name,
            shader.entry_point
        );
        // One name in three places: the kernel, its file and its entry point.
        assert_eq!(shader.name, shader.entry_point);
    }
}

#[test]
fn every_shader_file_is_a_kernel() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shaders");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("shaders/ exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().and_then(|e| e.to_str()) == Some("wgsl"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let kernels: BTreeSet<String> = SHADERS.iter().map(|s| s.name.to_string()).collect();
    assert_eq!(files, kernels, "shaders/*.wgsl against kernels::SHADERS");
}

/// A kernel's uniform params as WGSL declares them: the struct's name, its member names in order
/// and its size in bytes, read from naga's reflection of the composed source.
fn wgsl_params(source: &str) -> (String, Vec<String>, u32) {
    let module = naga::front::wgsl::parse_str(source).expect("parses");
    let (_, global) = module
        .global_variables
        .iter()
        .find(|(_, g)| g.space == naga::AddressSpace::Uniform)
        .expect("a uniform params binding");
    let ty = &module.types[global.ty];
    let naga::TypeInner::Struct { members, span } = &ty.inner else {
        panic!("params is not a struct");
    };
    let names = members.iter().filter_map(|m| m.name.clone()).collect();
    (ty.name.clone().unwrap_or_default(), names, *span)
}

/// The Rust mirror of each kernel's params: its size and its name. Sizes are never typed by
/// hand: one side is `size_of`, the other naga's layout of the WGSL struct.
macro_rules! mirror {
    ($ty:ty) => {
        (
            std::mem::size_of::<$ty>() as u32,
            std::any::type_name::<$ty>()
                .rsplit("::")
                .next()
                .unwrap_or(""),
        )
    };
}

fn rust_params(kernel: &str) -> (u32, &'static str) {
    use moescope_engine::kernels::*;
    match kernel {
        "add" => mirror!(add::AddParams),
        "add_rms_norm" => mirror!(add_rms_norm::AddRmsNormParams),
        "copy_rows" => mirror!(copy_rows::CopyRowsParams),
        "copy_vec4" => mirror!(copy_vec4::CopyParams),
        "embed" => mirror!(embed::EmbedParams),
        "fp8_round_trip" => mirror!(fp8_round_trip::Fp8RoundTripParams),
        "gate_up_swiglu" | "gemv" | "gemv_wide" => mirror!(gemv::GemvParams),
        "gather_rows" => mirror!(gather_rows::GatherParams),
        "mla_scores" => mirror!(mla_scores::MlaScoresParams),
        "mla_split_k" | "mla_split_k_reduce" => mirror!(mla_split_k::MlaSplitKParams),
        "mla_values" => mirror!(mla_values::MlaValuesParams),
        "moe_combine" | "moe_dispatch" => mirror!(moe_dispatch::MoeDispatchParams),
        "moe_route" => mirror!(moe_route::MoeRouteParams),
        "moe_topk" => mirror!(moe_topk::MoeTopkParams),
        "qkv_rope_scale" => mirror!(qkv_rope_scale::QkvRopeScaleParams),
        "rms_norm" => mirror!(rms_norm::RmsNormParams),
        "rope" => mirror!(rope::RopeParams),
        "scatter_add" => mirror!(scatter_add::ScatterParams),
        "sigmoid" => mirror!(sigmoid::SigmoidParams),
        "silu_mul" => mirror!(silu_mul::SiluMulParams),
        "softmax" => mirror!(softmax::SoftmaxParams),
        other => panic!("{other}: no params mirror listed here"),
    }
}

#[test]
fn every_params_struct_matches_its_wgsl_mirror() {
    for shader in SHADERS {
        let (wgsl_name, members, wgsl_size) = wgsl_params(shader.wgsl);
        let (rust_size, rust_name) = rust_params(shader.name);
        assert_eq!(
            (rust_name, rust_size),
            (wgsl_name.as_str(), wgsl_size),
            "{}: the params struct (name, bytes) in Rust against WGSL",
            shader.name
        );
        // A uniform's size is a multiple of 16 bytes, and every member is 4 bytes wide.
        assert_eq!(wgsl_size % 16, 0, "{}", shader.name);
        assert_eq!(
            members.len() as u32 * 4,
            wgsl_size,
            "{}: {members:?}",
            shader.name
        );
    }
}
