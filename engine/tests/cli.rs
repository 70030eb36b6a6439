#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The `moescope generate` interface is a contract other tools call: its flags and its JSON
//! fields. These run the real binary on the CPU backend (no GPU needed).

use std::process::Command;

fn moescope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_moescope"))
        .args(args)
        .output()
        .expect("the moescope binary runs")
}

#[test]
fn generate_json_has_every_contract_field() {
    let out = moescope(&[
        "generate",
        "--prompt",
        "Hello",
        "--tokens",
        "5",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    for field in [
        "text",
        "tokens",
        "ms_per_step",
        "kernels_per_step",
        "bytes_per_step",
        "backend",
        "adapter",
        "experts",
        "near_ties",
    ] {
        assert!(v.get(field).is_some(), "missing {field}");
    }
    assert_eq!(v["backend"], "cpu");
    assert_eq!(v["tokens"].as_array().map(Vec::len), Some(5));
    let experts = v["experts"].as_array().expect("experts array");
    assert_eq!(experts.len(), 5, "one entry per generated token");
    // deepseek-mini: 3 MoE layers, top-2.
    for per_token in experts {
        let layers = per_token.as_array().expect("per layer");
        assert_eq!(layers.len(), 3);
        assert!(layers
            .iter()
            .all(|ids| ids.as_array().map(Vec::len) == Some(2)));
    }
}

#[test]
fn greedy_is_repeatable_and_temperature_depends_on_the_seed() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "generate",
            "--prompt",
            "MoE",
            "--tokens",
            "8",
            "--backend",
            "cpu",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = moescope(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        v["tokens"].clone()
    };
    assert_eq!(run(&[]), run(&[]));
    let hot = |seed: &str| run(&["--temperature", "1.5", "--seed", seed]);
    assert_eq!(hot("4"), hot("4"));
    assert_ne!(hot("4"), hot("5"));
}

#[test]
fn bad_arguments_fail_with_a_message_not_a_panic() {
    let out = moescope(&[
        "generate",
        "--prompt",
        "x",
        "--tokens",
        "2",
        "--backend",
        "cpu",
        "--weights",
        "/nonexistent/w.safetensors",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/w.safetensors"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let out = moescope(&[
        "generate",
        "--prompt",
        "x",
        "--tokens",
        "5000",
        "--backend",
        "cpu",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("context is full"));

    let out = moescope(&[
        "generate",
        "--prompt",
        "x",
        "--tokens",
        "2",
        "--backend",
        "cpu",
        "--temperature",
        "-1",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("temperature"));
}
