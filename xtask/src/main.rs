//! `cargo xtask serve | test | site | bench | fuzz`: MoEscope's whole set-up and automation. Each
//! command installs what it needs on a fresh Debian machine and skips what is already there.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod fuzz;
mod serve;
mod setup;

const USAGE: &str = "usage: cargo xtask <command>
  serve [--port N]   build the site (release) and serve dist/ on http://127.0.0.1:8080
  test               fmt, clippy, native tests on lavapipe, wasm tests in Chromium, wasm build,
                     browser end-to-end tests
  site               build the site into dist/ only
  bench [SUITE]      a native benchmark on this machine's GPU, JSON to stdout: decode (default:
                     every optimization switch off, alone and all on), kernels (gemv vs copy
                     bandwidth) or rack (the rack model's speed)
  fuzz [--long] [--runs N] [TARGET ...]
                     libFuzzer on every fuzz target (or those named): 200,000 inputs each, or
                     10 million with --long";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => {
            let port = match args.iter().position(|a| a == "--port") {
                Some(i) => match args.get(i + 1).and_then(|p| p.parse().ok()) {
                    Some(p) => p,
                    None => return fail("--port needs a number"),
                },
                None => 8080,
            };
            serve_site(port)
        }
        Some("test") => test(),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("site") => setup::site_tools().and_then(|()| build_site()),
        Some("bench") => match args.get(1).map(String::as_str).unwrap_or("decode") {
            suite @ ("decode" | "kernels" | "rack") => bench(suite),
            other => {
                return fail(&format!(
                    "unknown bench suite {other:?}: decode, kernels or rack"
                ))
            }
        },
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("xtask: {message}");
    ExitCode::FAILURE
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs a command in the repository root, failing with its name if it fails.
pub fn run(program: &str, args: &[&str]) -> Result<(), String> {
    run_env(program, args, &[])
}

pub fn run_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let shown = format!("{program} {}", args.join(" "));
    eprintln!("xtask: $ {shown}");
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})"))
    }
}

fn serve_site(port: u16) -> Result<(), String> {
    setup::site_tools()?;
    build_site()?;
    serve::serve(&root().join("dist"), port)
}

/// The site: the app compiled to wasm32 in the small `wasm-release` profile, bound with
/// wasm-bindgen, plus index.html and public/. Every URL inside is relative, so dist/ works from
/// any sub-path of any static host.
fn build_site() -> Result<(), String> {
    run(
        "cargo",
        &[
            "build",
            "-p",
            "moescope-app",
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "wasm-release",
        ],
    )?;
    let root = root();
    let dist = root.join("dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist).map_err(|e| format!("clearing dist/: {e}"))?;
    }
    let wasm = root.join("target/wasm32-unknown-unknown/wasm-release/moescope-app.wasm");
    let pkg = dist.join("pkg");
    run(
        "wasm-bindgen",
        &[
            "--target",
            "web",
            "--no-typescript",
            // Function names are for debuggers, not visitors: a third of the module's bytes.
            "--remove-name-section",
            "--remove-producers-section",
            "--out-dir",
            path_str(&pkg)?,
            path_str(&wasm)?,
        ],
    )?;
    copy_dir(&root.join("public"), &dist)?;
    std::fs::copy(root.join("index.html"), dist.join("index.html"))
        .map_err(|e| format!("copying index.html: {e}"))?;
    eprintln!("xtask: site built in {}", dist.display());
    Ok(())
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("path is not UTF-8: {}", p.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("creating {}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("reading {}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| format!("copying {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn test() -> Result<(), String> {
    setup::site_tools()?;
    setup::test_tools()?;
    run("cargo", &["fmt", "--all", "--", "--check"])?;
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    run(
        "cargo",
        &[
            "clippy",
            "-p",
            "moescope-app",
            "--target",
            "wasm32-unknown-unknown",
            "--lib",
            "--test",
            "web",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // GPU tests must not skip here: lavapipe is installed, so a missing adapter is a failure.
    let xdg = std::env::temp_dir().join("moescope-xdg");
    std::fs::create_dir_all(&xdg).map_err(|e| e.to_string())?;
    run_env(
        "cargo",
        &["test", "--workspace"],
        &[
            ("MOESCOPE_REQUIRE_GPU", "1"),
            ("XDG_RUNTIME_DIR", path_str(&xdg)?),
        ],
    )?;
    // The engine's wasm paths in headless Chromium (app/webdriver.json holds its flags).
    run_env(
        "cargo",
        &[
            "test",
            "-p",
            "moescope-app",
            "--target",
            "wasm32-unknown-unknown",
            "--test",
            "web",
        ],
        &[
            (
                "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER",
                "wasm-bindgen-test-runner",
            ),
            ("CHROMEDRIVER", "/usr/bin/chromedriver"),
        ],
    )?;
    build_site()?;
    run("node", &["--test", "--test-concurrency=1", "tests/e2e/"])
}

fn bench(suite: &str) -> Result<(), String> {
    let xdg = std::env::temp_dir().join("moescope-xdg");
    std::fs::create_dir_all(&xdg).map_err(|e| e.to_string())?;
    run_env(
        "cargo",
        &[
            "run",
            "--release",
            "-p",
            "moescope-engine",
            "--bin",
            "moescope",
            "--",
            "bench",
            suite,
            "--json",
        ],
        &[("XDG_RUNTIME_DIR", path_str(&xdg)?)],
    )
}
