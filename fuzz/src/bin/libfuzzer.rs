//! The libFuzzer driver: `MOESCOPE_FUZZ_TARGET` names the target (`moescope_fuzz::TARGETS`).
//! Built and run by `cargo xtask fuzz`, which instruments it for coverage on stable Rust; with
//! `MOESCOPE_FUZZ_SEEDS` set to a folder, the target's seeds are written there first.
#![no_main]

use std::sync::OnceLock;

use moescope_fuzz::Target;

fn target() -> &'static Target {
    static TARGET: OnceLock<&'static Target> = OnceLock::new();
    TARGET.get_or_init(|| {
        let name = std::env::var("MOESCOPE_FUZZ_TARGET").unwrap_or_default();
        let Some(t) = moescope_fuzz::target(&name) else {
            let names: Vec<&str> = moescope_fuzz::TARGETS.iter().map(|t| t.name).collect();
            eprintln!("MOESCOPE_FUZZ_TARGET must be one of {}", names.join(", "));
            std::process::exit(2);
        };
        t
    })
}

libfuzzer_sys::fuzz_target!(
    init: {
        let t = target();
        if let Some(dir) = std::env::var_os("MOESCOPE_FUZZ_SEEDS") {
            for (i, seed) in (t.seeds)().iter().enumerate() {
                let path = std::path::Path::new(&dir).join(format!("seed-{i:02}"));
                std::fs::write(&path, seed).expect("writing a seed");
            }
        }
    },
    |data: &[u8]| (target().run)(data)
);
