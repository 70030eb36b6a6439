//! Installing what the build and the tests need, skipping what is there: the wasm32 target,
//! wasm-bindgen-cli at exactly the version in Cargo.lock, Debian's Chromium, ChromeDriver and
//! lavapipe, the browser-test Node packages from the committed lock file, and a C++ compiler
//! for the fuzzer.

use std::process::Command;

use crate::{root, run};

/// What building the site needs.
pub fn site_tools() -> Result<(), String> {
    let targets = output("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if !targets
        .lines()
        .any(|t| t.trim() == "wasm32-unknown-unknown")
    {
        run("rustup", &["target", "add", "wasm32-unknown-unknown"])?;
    }
    let want = locked_version("wasm-bindgen")?;
    let have = output("wasm-bindgen", &["--version"]).unwrap_or_default();
    if have.split_whitespace().nth(1) != Some(want.as_str()) {
        // Without --locked: one of its locked dependencies is newer than the registry here.
        run(
            "cargo",
            &["install", "wasm-bindgen-cli", "--version", &want],
        )?;
    }
    Ok(())
}

/// What the tests need beyond the site: Debian packages and the Node test driver.
pub fn test_tools() -> Result<(), String> {
    let packages = [
        "chromium",
        "chromium-driver",
        "mesa-vulkan-drivers",
        "libvulkan1",
    ];
    apt_install(&packages)?;
    if !root()
        .join("tests/e2e/node_modules/playwright-core/package.json")
        .exists()
    {
        run(
            "npm",
            &["ci", "--prefix", "tests/e2e", "--no-audit", "--no-fund"],
        )?;
    }
    Ok(())
}

/// What `cargo xtask fuzz` needs: a C++ compiler for libFuzzer, which libfuzzer-sys builds.
pub fn fuzz_tools() -> Result<(), String> {
    if output("c++", &["--version"]).is_none() {
        apt_install(&["g++"])?;
    }
    Ok(())
}

/// Installs the Debian packages of `packages` that are missing (as root, or through sudo).
fn apt_install(packages: &[&str]) -> Result<(), String> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let sudo = !is_root();
    let apt = |args: &[&str]| {
        if sudo {
            let mut all = vec!["apt-get"];
            all.extend_from_slice(args);
            run("sudo", &all)
        } else {
            run("apt-get", args)
        }
    };
    apt(&["update"])?;
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend(missing.iter().copied());
    apt(&args)
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn dpkg_installed(package: &str) -> bool {
    output("dpkg-query", &["-W", "-f=${Status}", package])
        .is_some_and(|s| s.contains("install ok installed"))
}

fn is_root() -> bool {
    output("id", &["-u"]).is_some_and(|s| s.trim() == "0")
}

/// The version of `crate_name` that Cargo.lock pins.
fn locked_version(crate_name: &str) -> Result<String, String> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock"))
        .map_err(|e| format!("reading Cargo.lock: {e}"))?;
    let needle = format!("name = \"{crate_name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == needle {
            if let Some(v) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
            {
                return Ok(v.trim_matches('"').to_owned());
            }
        }
    }
    Err(format!("{crate_name} is not in Cargo.lock"))
}
