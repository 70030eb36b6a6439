#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The `moescope rack` interface is a contract other tools call: its subcommands, the JSON they
//! print and the errors they give. These run the real binary on the committed scenarios.

use std::process::Command;

fn moescope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_moescope"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("the moescope binary runs")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = moescope(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn write(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("moescope-rack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn fails_naming(text: &str, name: &str, needles: &[&str]) {
    let path = write(name, text);
    let out = moescope(&["rack", "eval", &path]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{text} should be refused as invalid"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    for n in needles {
        assert!(err.contains(n), "error {err:?} should mention {n:?}");
    }
}

#[test]
fn eval_prints_every_contract_field() {
    let v = json(&[
        "rack",
        "eval",
        "scenarios/seed-nvl72-deepseek-r1-decode.toml",
    ]);
    for field in [
        "tokens_per_s_per_user",
        "output_tokens_per_s_per_gpu",
        "total_tokens_per_s_per_gpu",
        "users_per_rack",
        "mfu",
        "mbu",
        "step_time_us",
        "batch_per_gpu",
    ] {
        let x = v[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} missing"));
        assert!(x.is_finite() && x > 0.0, "{field} = {x}");
    }
    let b = v["breakdown_us"]
        .as_object()
        .expect("breakdown_us is an object");
    assert!(b.contains_key("compute_us") && b.contains_key("launch_us"));
    // Users per rack = tokens/s per GPU x 72 / tokens/s per user.
    let users = v["output_tokens_per_s_per_gpu"].as_f64().unwrap() * 72.0
        / v["tokens_per_s_per_user"].as_f64().unwrap();
    assert!((users / v["users_per_rack"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    // The target was 83 tokens/s per user and the model found the load that meets it.
    assert!((v["tokens_per_s_per_user"].as_f64().unwrap() / 83.0 - 1.0).abs() < 1e-3);
}

/// `rack eval` adds the TTFT quantiles and the out-of-sample error band of the prediction's
/// regime; a hardware what-if is echoed.
#[test]
fn eval_adds_ttft_quantiles_the_error_band_and_the_hardware_echo() {
    let v = json(&[
        "rack",
        "eval",
        "scenarios/inferencex-gb200-deepseek-r1-disagg.toml",
    ]);
    let (p50, p99, mean) = (
        v["ttft_ms_p50"].as_f64().unwrap(),
        v["ttft_ms_p99"].as_f64().unwrap(),
        v["ttft_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99, "{p50} {p99}");
    assert!(
        p50 <= mean * 1.5 && mean <= p99,
        "mean {mean} between the quantiles"
    );
    let band = v["error_band"].as_f64().unwrap();
    assert!(band > 0.0 && band < 10.0, "{band}");
    assert!(v["error_band_max"].as_f64().unwrap() >= band);
    assert_eq!(v["error_band_regime"], "high_concurrency");
    assert!(v.get("hardware_overrides").is_none());

    let what_if = include_str!("../../scenarios/seed-nvl72-deepseek-r1-decode.toml").to_string()
        + "\n[hardware]\nhbm_tb_s = 16\nnvlink_domain = 144\n";
    let path = write("what-if.toml", &what_if);
    let faster = json(&["rack", "eval", &path]);
    assert_eq!(faster["hardware_overrides"]["hbm_tb_s"], 16.0);
    assert_eq!(faster["hardware_overrides"]["nvlink_domain"], 144.0);
    let base = json(&[
        "rack",
        "eval",
        "scenarios/seed-nvl72-deepseek-r1-decode.toml",
    ]);
    assert!(
        faster["users_per_rack"].as_f64().unwrap() > base["users_per_rack"].as_f64().unwrap(),
        "twice the HBM bandwidth serves more users at the same speed"
    );
}

#[test]
fn training_prints_mfu_tokens_and_step_time() {
    let v = json(&["rack", "eval", "scenarios/seed-gpt3-175b-training.toml"]);
    for field in ["mfu", "tokens_per_s_per_gpu", "step_time_us"] {
        assert!(v[field].as_f64().unwrap() > 0.0, "{field}");
    }
    assert!(v["mfu"].as_f64().unwrap() < 1.0);
}

#[test]
fn json_scenarios_work_like_toml() {
    let path = write(
        "s.json",
        r#"{"system": "hgx-h200", "model": "llama4-maverick", "phase": "decode",
            "gpus": 8, "tp": 8, "ep": 1, "batch_per_gpu": 4, "optimizations": ["all"]}"#,
    );
    let v = json(&["rack", "eval", &path]);
    assert_eq!(v["system"], "hgx-h200");
    assert_eq!(v["batch_per_gpu"].as_f64().unwrap(), 4.0);
}

#[test]
fn sweep_is_a_pareto_curve_over_concurrency() {
    let v = json(&[
        "rack",
        "sweep",
        "scenarios/seed-nvl72-deepseek-r1-decode.toml",
        "--points",
        "16",
    ]);
    let pts = v.as_array().unwrap();
    assert_eq!(pts.len(), 16);
    for w in pts.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(b["concurrency"].as_f64() > a["concurrency"].as_f64());
        assert!(b["tokens_per_s_per_user"].as_f64() <= a["tokens_per_s_per_user"].as_f64());
        assert!(
            b["output_tokens_per_s_per_gpu"].as_f64() >= a["output_tokens_per_s_per_gpu"].as_f64()
        );
    }
}

#[test]
fn waterfall_has_one_entry_per_optimization_in_order() {
    let v = json(&[
        "rack",
        "waterfall",
        "scenarios/seed-nvl72-deepseek-r1-decode.toml",
    ]);
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["optimization"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "cuda_graphs",
            "attention_dp",
            "fused_gate_up_swiglu",
            "fused_qkv_rope_scale",
            "fused_allreduce_rmsnorm",
            "split_k_attention",
            "fused_alltoall_ll128",
            "fused_copy_concat",
            "pdl"
        ]
    );
    for e in v.as_array().unwrap() {
        assert!(e["users_per_rack_change"].is_number() && e["mfu_change"].is_number());
    }
}

#[test]
fn calibrate_check_reports_every_point_within_bounds() {
    let v = json(&["rack", "calibrate", "--check", "--json"]);
    assert_eq!(v["all_within"], true);
    let r = v["residuals"].as_array().unwrap();
    assert!(r.len() >= 9);
    for p in r {
        let bound = p["bound"].as_f64().unwrap();
        assert!(p["residual"].as_f64().unwrap().abs() <= bound, "{p}");
    }
    // The contract: validation rows and a summary beside the residuals.
    let rows = v["validation"].as_array().unwrap();
    assert!(rows.len() >= 20);
    for row in rows {
        for key in ["name", "source", "metric"] {
            assert!(row[key].is_string(), "{key}: {row}");
        }
        let (measured, predicted) = (
            row["measured"].as_f64().unwrap(),
            row["predicted"].as_f64().unwrap(),
        );
        let rel = row["rel_error"].as_f64().unwrap();
        assert!((predicted / measured - 1.0 - rel).abs() < 1e-9, "{row}");
    }
    let summary = &v["summary"];
    for key in [
        "calibration_median",
        "calibration_max",
        "validation_median",
        "validation_max",
    ] {
        assert!(summary[key].as_f64().unwrap() >= 0.0, "{key}");
    }
    assert_eq!(
        summary["n_validation"].as_u64().unwrap() as usize,
        rows.len()
    );
    let table = moescope(&["rack", "calibrate", "--check"]);
    assert!(table.status.success());
    assert!(String::from_utf8_lossy(&table.stdout).contains("residual"));
}

#[test]
fn bad_scenarios_name_the_field_and_the_allowed_values() {
    let base = "model = \"deepseek-r1\"\nphase = \"decode\"\nbatch_per_gpu = 1\n";
    fails_naming(
        &format!("system = \"tpu-v5\"\n{base}"),
        "a.toml",
        &["system", "tpu-v5", "gb200-nvl72"],
    );
    fails_naming(
        &format!("system = \"gb200-nvl72\"\n{base}colour = 3\n"),
        "b.toml",
        &["colour", "system"],
    );
    fails_naming(
        &format!("system = \"gb200-nvl72\"\n{base}optimizations = [\"warp_drive\"]\n"),
        "c.toml",
        &["warp_drive", "pdl"],
    );
    fails_naming(
        &format!("system = \"gb200-nvl72\"\n{base}weights = \"fp2\"\n"),
        "d.toml",
        &["fp2", "bf16"],
    );
    // Impossible: the model does not fit, or ep is larger than gpus.
    fails_naming(
        &format!("system = \"hgx-h100\"\n{base}gpus = 8\nweights = \"bf16\"\n"),
        "e.toml",
        &["does not fit", "HBM"],
    );
    fails_naming(
        &format!("system = \"gb200-nvl72\"\n{base}gpus = 8\nep = 16\n"),
        "f.toml",
        &["ep", "larger than gpus"],
    );
    fails_naming(
        &format!("system = \"gb200-nvl72\"\n{base}"),
        "g.yaml",
        &[".toml or .json"],
    );
    fails_naming("not toml at all [", "h.toml", &["scenario"]);
    let out = moescope(&["rack", "eval", "/no/such/file.toml"]);
    assert!(!out.status.success());
}

/// Every refusal of the scenario checks (issue 30, section 6), each with exit 2 and a message
/// naming the field and its limit or the numbers that do not fit.
#[test]
fn every_impossible_deployment_is_refused_with_its_numbers() {
    let r1 = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nweights = \"fp4\"\n";
    let serve = format!("{r1}phase = \"serve\"\ndecode_gpus = 32\nep = 32\nconcurrency = 64\n");
    let cases: Vec<(String, Vec<&str>)> = vec![
        // More expert-parallel ranks than two per routed expert.
        (
            format!("{r1}phase = \"decode\"\ngpus = 72\nep = 72\nbatch_per_gpu = 1\n\
                     [hardware]\ngpus = 1024\nnvlink_domain = 1024\n")
                .replace("gpus = 72\nep = 72", "gpus = 1024\nep = 1024"),
            vec!["ep = 1024", "256 routed experts"],
        ),
        // Attention TP that does not divide the heads, in the instance and in a prefill worker.
        (
            format!("{r1}phase = \"decode\"\ngpus = 72\ntp = 3\nbatch_per_gpu = 1\n"),
            vec!["tp", "128 attention heads"],
        ),
        (
            format!("{serve}prefill_gpus = 12\nprefill_tp = 12\n"),
            vec!["prefill_tp", "128 attention heads"],
        ),
        // A prefill worker whose GPUs do not divide the pool.
        (
            format!("{serve}prefill_gpus = 10\nprefill_tp = 4\n"),
            vec!["prefill_tp", "must divide prefill_gpus = 10"],
        ),
        // The KV cache of the batch does not fit.
        (
            format!("{r1}phase = \"decode\"\nbatch_per_gpu = 5000\n"),
            vec!["batch_per_gpu", "KV cache", "do)"],
        ),
        (
            format!("{r1}phase = \"decode\"\nconcurrency = 1000000\n"),
            vec!["concurrency", "KV cache"],
        ),
        // Weights that do not fit: the instance, a prefill worker, a training step.
        (
            "system = \"hgx-h100\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\nweights = \"bf16\"\nbatch_per_gpu = 1\n"
                .to_string(),
            vec!["does not fit", "GB of weights per GPU"],
        ),
        (
            format!("{serve}prefill_gpus = 2\nprefill_tp = 1\nprefill_dp = 2\n"),
            vec!["prefill_gpus", "prefill worker of 2 GPUs", "GB of HBM"],
        ),
        (
            "system = \"hgx-h100\"\nmodel = \"gpt3-175b\"\nphase = \"train\"\nweights = \"bf16\"\n\
             gpus = 16\ntp = 8\npp = 2\nseq_len = 2048\n"
                .to_string(),
            vec!["training does not fit", "optimizer state", "activations"],
        ),
        // More pipeline stages than layers.
        (
            format!("{r1}phase = \"decode\"\ngpus = 64\ntp = 1\npp = 64\nep = 1\nbatch_per_gpu = 1\n"),
            vec!["pp = 64", "61 layers"],
        ),
        // Hardware what-ifs out of range.
        (
            format!("{r1}phase = \"decode\"\nbatch_per_gpu = 1\n[hardware]\nhbm_tb_s = 0\n"),
            vec!["hardware.hbm_tb_s", "at most 100"],
        ),
        (
            format!("{r1}phase = \"decode\"\nbatch_per_gpu = 1\n[hardware]\nbandwidth = 9\n"),
            vec!["bandwidth"],
        ),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        fails_naming(text, &format!("refusal-{i}.toml"), needles);
    }
}

/// Numbers past what the model represents are refused with exit 2 and the field's limit, never
/// printed as `null` (JSON's NaN) with exit 0.
#[test]
fn out_of_range_numbers_exit_2_with_the_limit() {
    let training = include_str!("../../scenarios/seed-gpt3-175b-training.toml").replace(
        "global_batch_tokens = 524288",
        "global_batch_tokens = 1e300",
    );
    let decode = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n";
    for (text, name, needles) in [
        (training, "t.toml", ["global_batch_tokens", "at most 1e10"]),
        (
            format!("{decode}concurrency = 1e300\n"),
            "c.toml",
            ["concurrency", "at most 1e9"],
        ),
        (
            format!("{decode}batch_per_gpu = 1e7\n"),
            "b.toml",
            ["batch_per_gpu", "at most 1e6"],
        ),
        // Two token counts whose sum overflowed u32 (a panic, exit 101).
        (
            format!("{decode}input_tokens = 4000000000\noutput_tokens = 4000000000\nbatch_per_gpu = 1\n"),
            "tokens.toml",
            ["input_tokens", "between 1 and 10000000 tokens"],
        ),
        // More requests than the KV cache holds were silently cut to what fits.
        (
            format!("{decode}concurrency = 5000000\n"),
            "full.toml",
            ["concurrency", "more KV cache than fits"],
        ),
        (
            format!("{decode}gpus = 576\nep = 576\n"),
            "ep.toml",
            ["ep = 576", "256 routed experts"],
        ),
    ] {
        let path = write(name, &text);
        let out = moescope(&["rack", "eval", &path]);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        for n in needles {
            assert!(err.contains(n), "error {err:?} should mention {n:?}");
        }
    }
}

/// docs/RACK_MODEL.md shows exactly the tables the code computes.
#[test]
fn the_docs_residual_tables_are_the_codes() {
    let out = moescope(&["rack", "calibrate", "--check", "--markdown"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let docs = include_str!("../../docs/RACK_MODEL.md");
    // Parameters, calibration residuals, validation rows, the validation summary, the bands.
    let tables: Vec<&str> = text.trim_end().split("\n\n").collect();
    assert_eq!(tables.len(), 5, "{text}");
    for table in tables {
        assert!(
            docs.contains(table),
            "docs/RACK_MODEL.md lacks this table (regenerate it with `moescope rack calibrate --check --markdown`):\n{table}"
        );
    }
}
