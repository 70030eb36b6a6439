//! `cargo xtask fuzz [--long] [--runs N] [TARGET ...]`: coverage-guided fuzzing with libFuzzer
//! on stable Rust. The driver (`fuzz/src/bin/libfuzzer.rs`) is built with LLVM's
//! SanitizerCoverage passes, which stable rustc exposes through `-C passes` and `-C llvm-args`
//! (the part of cargo-fuzz that needs nightly is AddressSanitizer, which safe Rust does without).
//! `--target` keeps the instrumentation off build scripts and proc macros.
//!
//! Each target starts from its seeds and the committed `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/`; new inputs go to `target/fuzz/corpus/<target>/`, a crash or a
//! hang to `target/fuzz/artifacts/<target>/`, and the command fails naming it.

use std::path::Path;
use std::process::Command;

use crate::{path_str, root, run_env};

/// Inputs per target by default: a couple of minutes in all.
const SHORT_RUNS: u64 = 200_000;
/// `--long`: the campaign docs/RELIABILITY.md records.
const LONG_RUNS: u64 = 10_000_000;
/// Every target, as `moescope_fuzz::TARGETS` names them, with the longest input worth trying.
const TARGETS: [(&str, u32); 7] = [
    ("address", 1024),
    ("share_link", 1024),
    ("scenario", 4096),
    ("lab_file", 16384),
    ("progress_file", 4096),
    ("checkpoint", 65536),
    ("worker_message", 1024),
];
const HOST: &str = "x86_64-unknown-linux-gnu";

pub fn fuzz(args: &[String]) -> Result<(), String> {
    let mut runs = SHORT_RUNS;
    let mut chosen = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--long" => runs = LONG_RUNS,
            "--runs" => {
                runs = rest
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--runs needs a number")?
            }
            name => match TARGETS.iter().find(|(t, _)| *t == name) {
                Some(t) => chosen.push(*t),
                None => {
                    let names: Vec<&str> = TARGETS.iter().map(|(t, _)| *t).collect();
                    return Err(format!(
                        "unknown fuzz target {name:?}: {}",
                        names.join(", ")
                    ));
                }
            },
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    crate::setup::fuzz_tools()?;
    let binary = build()?;
    for (name, max_len) in chosen {
        campaign(&binary, name, max_len, runs)?;
    }
    Ok(())
}

fn build() -> Result<std::path::PathBuf, String> {
    let flags = [
        "-Cpasses=sancov-module",
        "-Cllvm-args=-sanitizer-coverage-level=4",
        "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
        "-Cllvm-args=-sanitizer-coverage-pc-table",
        "-Cllvm-args=-sanitizer-coverage-trace-compares",
        "--cfg=fuzzing",
        // A panic is what the fuzzer looks for: keep the checks release builds drop.
        "-Cdebug-assertions",
        "-Coverflow-checks",
    ]
    .join(" ");
    run_env(
        "cargo",
        &[
            "build",
            "--release",
            "-p",
            "moescope-fuzz",
            "--features",
            "libfuzzer",
            "--bin",
            "libfuzzer",
            "--target",
            HOST,
            "--target-dir",
            "target/fuzz",
        ],
        &[("RUSTFLAGS", &flags)],
    )?;
    Ok(root().join(format!("target/fuzz/{HOST}/release/libfuzzer")))
}

fn campaign(binary: &Path, name: &str, max_len: u32, runs: u64) -> Result<(), String> {
    let root = root();
    let work = root.join("target/fuzz/corpus").join(name);
    let artifacts = root.join("target/fuzz/artifacts").join(name);
    for dir in [&work, &artifacts] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut args = vec![
        format!("-runs={runs}"),
        format!("-max_len={max_len}"),
        // A hang: one input running for more than 10 s.
        "-timeout=10".into(),
        "-rss_limit_mb=4096".into(),
        "-print_final_stats=1".into(),
        format!("-artifact_prefix={}/", path_str(&artifacts)?),
        path_str(&work)?.to_owned(),
    ];
    for committed in ["corpus", "regressions"] {
        let dir = root.join("fuzz").join(committed).join(name);
        if dir.is_dir() {
            args.push(path_str(&dir)?.to_owned());
        }
    }
    eprintln!(
        "xtask: $ MOESCOPE_FUZZ_TARGET={name} {} {}",
        binary.display(),
        args.join(" ")
    );
    let out = Command::new(binary)
        .args(&args)
        .env("MOESCOPE_FUZZ_TARGET", name)
        .env("MOESCOPE_FUZZ_SEEDS", &work)
        .current_dir(&root)
        .output()
        .map_err(|e| format!("could not start {}: {e}", binary.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    let done = log
        .lines()
        .rev()
        .find(|l| l.starts_with("Done "))
        .unwrap_or("(no summary)");
    eprintln!("xtask: fuzz {name}: {done}");
    if !out.status.success() {
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "fuzz target {name} failed ({}); the input is in {} (copy it to fuzz/regressions/{name}/ with the fix):\n{}",
            out.status,
            artifacts.display(),
            tail.join("\n")
        ));
    }
    Ok(())
}
