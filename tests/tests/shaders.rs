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
