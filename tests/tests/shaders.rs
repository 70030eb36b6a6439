//! Every WGSL file parses and validates with naga, the compiler wgpu itself uses, so a shader
//! error fails here with its line and message rather than as a device error at run time. A
//! kernel that streams weights or codes FP8 is validated as the engine compiles it: after
//! shaders/include/fp8.wgsl (and weights.wgsl).

use std::path::Path;

#[test]
fn every_shader_parses_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shaders");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("shaders/ exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("wgsl") {
            continue;
        }
        let mut source = std::fs::read_to_string(&path).expect("readable shader");
        let include = |name: &str| {
            std::fs::read_to_string(dir.join("include").join(name))
                .unwrap_or_else(|e| panic!("include/{name}: {e}"))
        };
        if source.contains("weight_chunk(") {
            source = include("fp8.wgsl") + &include("weights.wgsl") + &source;
        } else if source.contains("e4m3_encode") {
            source = include("fp8.wgsl") + &source;
        }
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.emit_to_string(&source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            // unpack2x16float (the f16 weights) is core WGSL; naga files it under this
            // capability, which wgpu grants wherever the downlevel flag SHADER_F16_IN_F32 holds
            // (every WebGPU and Vulkan adapter).
            naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.emit_to_string(&source)));
        // One name in two places: the file's stem is an entry point of the module.
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        assert!(
            module.entry_points.iter().any(|ep| ep.name == stem),
            "{}: no entry point named {stem}",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 2,
        "expected at least gemv.wgsl and copy_vec4.wgsl, found {checked}"
    );
}
