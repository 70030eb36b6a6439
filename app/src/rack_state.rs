//! The rack explorer's state in the URL: `v=1&system=…&model=…&…`, everything a visitor set, so
//! that a shared link or an embedded widget shows the same numbers. Pure (no web-sys): tested
//! natively, and anything typed into the address bar goes through `parse`, which never panics.
//! Unknown keys and malformed values are reported and replaced by the preset's values.

use moescope_engine::rack::precision::Precision;
use moescope_engine::rack::scenario::{Optimization, Phase, SpecMethod, Speculative};
use moescope_engine::rack::ScenarioFile;

/// The URL format's version; `parse` reads only this one.
pub const VERSION: &str = "1";

/// Every setting `parse` reads (docs/EMBED.md has a row for each).
pub const KEYS: [&str; 21] = [
    "v",
    "preset",
    "system",
    "model",
    "phase",
    "weights",
    "act",
    "kv",
    "gpus",
    "tp",
    "ep",
    "prefill_gpus",
    "prefill_tp",
    "decode_gpus",
    "in",
    "out",
    "load",
    "at",
    "opt",
    "spec",
    "drafts",
];

/// Committed scenarios the explorer starts from (the first is the default).
pub const PRESETS: [(&str, &str, &str); 4] = [
    (
        "nvl72-decode",
        "GB200 NVL72, DeepSeek-R1 FP4 decode (the seeds' rack)",
        include_str!("../../scenarios/seed-nvl72-deepseek-r1-decode.toml"),
    ),
    (
        "nvl72-serve",
        "GB200 NVL72, DeepSeek-R1 disaggregated serving (InferenceX)",
        include_str!("../../scenarios/inferencex-gb200-deepseek-r1-disagg.toml"),
    ),
    (
        "b200-maverick",
        "DGX B200, Llama 4 Maverick, one user, EAGLE-3",
        include_str!("../../scenarios/seed-llama4-maverick-min-latency.toml"),
    ),
    (
        "b200-r1-latency",
        "DGX B200, DeepSeek-R1, minimum latency",
        include_str!("../../scenarios/trtllm-b200-deepseek-r1-min-latency.toml"),
    ),
];

pub const SYSTEMS: [&str; 5] = [
    "gb200-nvl72",
    "dgx-b200",
    "hgx-h800",
    "hgx-h200",
    "hgx-h100",
];
pub const MODELS: [&str; 4] = [
    "deepseek-r1",
    "deepseek-v3",
    "llama4-maverick",
    "deepseek-mini",
];
pub const PRECISIONS: [Precision; 3] = [Precision::Bf16, Precision::Fp8, Precision::Fp4];

/// How the load is given: one of the scenario's three exclusive fields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadKind {
    Target,
    Concurrency,
    Batch,
}

impl LoadKind {
    pub const ALL: [LoadKind; 3] = [LoadKind::Target, LoadKind::Concurrency, LoadKind::Batch];

    pub fn slug(self) -> &'static str {
        match self {
            LoadKind::Target => "target",
            LoadKind::Concurrency => "concurrency",
            LoadKind::Batch => "batch",
        }
    }

    /// The slider's range, log-spaced.
    pub fn range(self) -> (f64, f64) {
        match self {
            LoadKind::Target => (5.0, 2000.0),
            LoadKind::Concurrency => (1.0, 100_000.0),
            LoadKind::Batch => (0.05, 1024.0),
        }
    }
}

/// The preset scenario `id`, parsed. The presets are committed files that the rack tests
/// evaluate, so parsing cannot fail; a broken one would show as the default's error message.
pub fn preset(id: &str) -> Option<ScenarioFile> {
    PRESETS
        .iter()
        .find(|(p, _, _)| *p == id)
        .and_then(|(p, _, text)| ScenarioFile::parse(&format!("{p}.toml"), text).ok())
}

/// The default state: the first preset.
pub fn default_state() -> ScenarioFile {
    preset(PRESETS[0].0).unwrap_or_else(|| ScenarioFile {
        name: None,
        system: SYSTEMS[0].into(),
        model: MODELS[0].into(),
        phase: Phase::Decode,
        weights: None,
        attention_weights: None,
        activations: None,
        kv_cache: None,
        gpus: Some(72),
        tp: None,
        ep: Some(72),
        dp: None,
        pp: None,
        input_tokens: None,
        output_tokens: None,
        batch_per_gpu: None,
        concurrency: None,
        target_tokens_per_s_per_user: Some(50.0),
        optimizations: Vec::new(),
        speculative: None,
        prefill_gpus: None,
        prefill_tp: None,
        prefill_workers: None,
        prefill_ep: None,
        prefill_dp: None,
        decode_gpus: None,
        global_batch_tokens: None,
        seq_len: None,
        comm_sms: None,
        recompute: None,
        virtual_pipeline: None,
        hardware: None,
    })
}

pub fn load_kind(f: &ScenarioFile) -> (LoadKind, f64) {
    if let Some(t) = f.target_tokens_per_s_per_user {
        (LoadKind::Target, t)
    } else if let Some(c) = f.concurrency {
        (LoadKind::Concurrency, c)
    } else {
        (LoadKind::Batch, f.batch_per_gpu.unwrap_or(1.0))
    }
}

pub fn set_load(f: &mut ScenarioFile, kind: LoadKind, value: f64) {
    f.target_tokens_per_s_per_user = (kind == LoadKind::Target).then_some(value);
    f.concurrency = (kind == LoadKind::Concurrency).then_some(value);
    f.batch_per_gpu = (kind == LoadKind::Batch).then_some(value);
}

fn precision(name: &str) -> Option<Precision> {
    PRECISIONS.into_iter().find(|p| p.name() == name)
}

fn optimization(name: &str) -> Option<Optimization> {
    Optimization::EVERY.into_iter().find(|o| o.name() == name)
}

/// A value as a message quotes it.
fn shorten(s: &str) -> String {
    crate::state::shorten_to(s, 40)
}

fn number<T: std::str::FromStr + PartialOrd>(v: &str, lo: T, hi: T) -> Option<T> {
    v.parse::<T>().ok().filter(|x| *x >= lo && *x <= hi)
}

/// Reads a query string (without `?`). Returns the state and one message per key it could not
/// use; those keys keep the preset's value (the `preset` key, or the default).
pub fn parse(query: &str) -> (ScenarioFile, Vec<String>) {
    let mut warnings = Vec::new();
    let pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    let mut f = start_from(&pairs, &mut warnings);
    let mut load = None;
    let mut load_value = None;
    for &(key, value) in &pairs {
        let ok = match key {
            "preset" => true,
            "v" => value == VERSION,
            "system" => {
                SYSTEMS.contains(&value) && {
                    f.system = value.into();
                    true
                }
            }
            "model" => {
                MODELS.contains(&value) && {
                    f.model = value.into();
                    true
                }
            }
            "phase" => set_phase(&mut f, value),
            "weights" | "act" | "kv" => set_precision(&mut f, key, value),
            "gpus" | "tp" | "ep" | "prefill_gpus" | "prefill_tp" | "decode_gpus" => {
                set_count(&mut f, key, value)
            }
            "in" | "out" => set_tokens(&mut f, key, value),
            "load" => match LoadKind::ALL.into_iter().find(|k| k.slug() == value) {
                Some(k) => {
                    load = Some(k);
                    true
                }
                None => false,
            },
            "at" => match number::<f64>(value, 1e-3, 1e7) {
                // An address keeps four significant digits (`encode`), so what it reads is what
                // it would write.
                Some(x) => {
                    load_value = Some(round_sig(x));
                    true
                }
                None => false,
            },
            "opt" => set_optimizations(&mut f, value),
            "spec" => set_speculative(&mut f, value),
            "drafts" => set_drafts(&mut f, value),
            _ => {
                warnings.push(format!(
                    "unknown setting \u{201c}{}\u{201d} ignored",
                    shorten(key)
                ));
                continue;
            }
        };
        if !ok {
            warnings.push(format!(
                "{} = \u{201c}{}\u{201d} is not valid; kept {}",
                key,
                shorten(value),
                current(&f, key)
            ));
        }
    }
    if load.is_some() || load_value.is_some() {
        let (kind, value) = load_kind(&f);
        let kind = load.unwrap_or(kind);
        let value = load_value.unwrap_or(value);
        set_load(&mut f, kind, value);
    }
    (f, warnings)
}

/// The preset the query names (every other setting applies on top of it), else the default.
fn start_from(pairs: &[(&str, &str)], warnings: &mut Vec<String>) -> ScenarioFile {
    let Some((_, id)) = pairs.iter().find(|(k, _)| *k == "preset") else {
        return default_state();
    };
    preset(id).unwrap_or_else(|| {
        warnings.push(format!(
            "unknown preset \u{201c}{}\u{201d}; using {}",
            shorten(id),
            PRESETS[0].0
        ));
        default_state()
    })
}

/// `phase`: `decode` or `serve`.
fn set_phase(f: &mut ScenarioFile, value: &str) -> bool {
    match value {
        "decode" => f.phase = Phase::Decode,
        "serve" => f.phase = Phase::Serve,
        _ => return false,
    }
    true
}

/// `weights`, `act`, `kv`: a precision or `auto`.
fn set_precision(f: &mut ScenarioFile, key: &str, value: &str) -> bool {
    let slot = match key {
        "weights" => &mut f.weights,
        "act" => &mut f.activations,
        _ => &mut f.kv_cache,
    };
    match (value, precision(value)) {
        (AUTO, _) => {
            *slot = None;
            true
        }
        (_, Some(p)) => {
            *slot = Some(p);
            true
        }
        _ => false,
    }
}

/// GPU counts and parallel ways: a number from 1 to 4096 or `auto`.
fn set_count(f: &mut ScenarioFile, key: &str, value: &str) -> bool {
    let slot = match key {
        "gpus" => &mut f.gpus,
        "tp" => &mut f.tp,
        "ep" => &mut f.ep,
        "prefill_gpus" => &mut f.prefill_gpus,
        "prefill_tp" => &mut f.prefill_tp,
        _ => &mut f.decode_gpus,
    };
    match (value, number::<u32>(value, 1, 4096)) {
        (AUTO, _) => {
            *slot = None;
            true
        }
        (_, Some(n)) => {
            *slot = Some(n);
            true
        }
        _ => false,
    }
}

/// `in`, `out`: tokens per request, 1 to 1,048,576.
fn set_tokens(f: &mut ScenarioFile, key: &str, value: &str) -> bool {
    match number::<u32>(value, 1, 1_048_576) {
        Some(n) => {
            if key == "in" {
                f.input_tokens = Some(n);
            } else {
                f.output_tokens = Some(n);
            }
            true
        }
        None => false,
    }
}

/// `opt`: comma-separated optimization names, or `none`.
fn set_optimizations(f: &mut ScenarioFile, value: &str) -> bool {
    let names: Vec<&str> = value
        .split(',')
        .filter(|s| !s.is_empty() && *s != "none")
        .collect();
    let parsed: Option<Vec<Optimization>> = names.iter().map(|n| optimization(n)).collect();
    match parsed {
        Some(list) => {
            f.optimizations = list;
            true
        }
        None => false,
    }
}

/// `spec`: `none`, `mtp` or `eagle3` (the draft count kept or defaulted).
fn set_speculative(f: &mut ScenarioFile, value: &str) -> bool {
    match value {
        "none" => {
            f.speculative = None;
            true
        }
        "mtp" | "eagle3" => {
            let method = if value == "mtp" {
                SpecMethod::Mtp
            } else {
                SpecMethod::Eagle3
            };
            let drafts = f
                .speculative
                .map_or(if value == "mtp" { 1 } else { 3 }, |s| s.draft_tokens);
            f.speculative = Some(Speculative {
                method,
                draft_tokens: drafts,
                acceptance_length: None,
            });
            true
        }
        _ => false,
    }
}

/// `drafts`: 1 to 16 draft tokens (ignored without a method).
fn set_drafts(f: &mut ScenarioFile, value: &str) -> bool {
    match (number::<u32>(value, 1, 16), f.speculative.as_mut()) {
        (Some(n), Some(s)) => {
            s.draft_tokens = n;
            true
        }
        // Drafts without a method: nothing to set, and nothing wrong.
        (Some(_), None) => true,
        _ => false,
    }
}

/// The value a key has in `f`, for messages.
fn current(f: &ScenarioFile, key: &str) -> String {
    let opt = |v: Option<u32>| v.map_or("the default".to_string(), |n| n.to_string());
    let prec = |v: Option<Precision>| v.map_or("the default".to_string(), |p| p.name().to_string());
    match key {
        "v" => format!("version {VERSION}"),
        "system" => f.system.clone(),
        "model" => f.model.clone(),
        "phase" => format!("{:?}", f.phase).to_lowercase(),
        "weights" => prec(f.weights),
        "act" => prec(f.activations),
        "kv" => prec(f.kv_cache),
        "gpus" => opt(f.gpus),
        "tp" => opt(f.tp),
        "ep" => opt(f.ep),
        "prefill_gpus" => opt(f.prefill_gpus),
        "prefill_tp" => opt(f.prefill_tp),
        "decode_gpus" => opt(f.decode_gpus),
        "in" => opt(f.input_tokens),
        "out" => opt(f.output_tokens),
        "load" => load_kind(f).0.slug().to_string(),
        "at" => format!("{}", load_kind(f).1),
        _ => "the preset's value".to_string(),
    }
}

/// The value of a setting left to the model's default (gpus, tp, ep, pools, precisions).
pub const AUTO: &str = "auto";

/// The query string for `f` (without `?`), version first, every key `parse` reads.
pub fn encode(f: &ScenarioFile) -> String {
    let mut out = vec![
        format!("v={VERSION}"),
        format!("system={}", f.system),
        format!("model={}", f.model),
        format!(
            "phase={}",
            if f.phase == Phase::Serve {
                "serve"
            } else {
                "decode"
            }
        ),
    ];
    for (key, p) in [
        ("weights", f.weights),
        ("act", f.activations),
        ("kv", f.kv_cache),
    ] {
        out.push(format!("{key}={}", p.map_or(AUTO, |p| p.name())));
    }
    for (key, n) in [
        ("gpus", f.gpus),
        ("tp", f.tp),
        ("ep", f.ep),
        ("prefill_gpus", f.prefill_gpus),
        ("prefill_tp", f.prefill_tp),
        ("decode_gpus", f.decode_gpus),
    ] {
        out.push(format!(
            "{key}={}",
            n.map_or(AUTO.into(), |n| n.to_string())
        ));
    }
    for (key, n) in [("in", f.input_tokens), ("out", f.output_tokens)] {
        if let Some(n) = n {
            out.push(format!("{key}={n}"));
        }
    }
    let (kind, value) = load_kind(f);
    out.push(format!("load={}", kind.slug()));
    out.push(format!("at={}", round_sig(value)));
    let opts: Vec<&str> = f.optimizations.iter().map(|o| o.name()).collect();
    out.push(format!(
        "opt={}",
        if opts.is_empty() {
            "none".to_string()
        } else {
            opts.join(",")
        }
    ));
    match f.speculative {
        None => out.push("spec=none".into()),
        Some(s) => {
            out.push(format!(
                "spec={}",
                if s.method == SpecMethod::Mtp {
                    "mtp"
                } else {
                    "eagle3"
                }
            ));
            out.push(format!("drafts={}", s.draft_tokens));
        }
    }
    out.join("&")
}

/// Four significant digits: slider positions make long fractions.
fn round_sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 4 - x.abs().log10().floor() as i32 - 1;
    let k = 10f64.powi(digits);
    (x * k).round() / k
}

#[cfg(test)]
mod tests {
    use super::*;
    use moescope_engine::rack::{self, Params, Scenario};

    #[test]
    fn every_preset_parses_and_evaluates() {
        for (id, _, _) in PRESETS {
            let f = preset(id).expect(id);
            let s = Scenario::resolve(f).expect(id);
            rack::eval(&s, &Params::fitted()).expect(id);
        }
    }

    #[test]
    fn encode_then_parse_is_the_same_state() {
        for (id, _, _) in PRESETS {
            let mut f = preset(id).expect(id);
            f.name = None;
            let (back, warnings) = parse(&encode(&f));
            assert!(warnings.is_empty(), "{id}: {warnings:?}");
            let mut back = back;
            back.name = None;
            // Fields the URL does not carry come from the default preset.
            assert_eq!(encode(&back), encode(&f), "{id}");
            let p = Params::fitted();
            let a = rack::eval(&Scenario::resolve(f).expect(id), &p).expect(id);
            let b = rack::eval(&Scenario::resolve(back).expect(id), &p).expect(id);
            assert_eq!(a.users_per_rack, b.users_per_rack, "{id}");
        }
    }

    #[test]
    fn bad_keys_and_values_are_reported_and_replaced() {
        let (f, w) = parse("v=9&system=tpu&gpus=-3&opt=pdl,warp_drive&zzz=1&load=batch&at=abc");
        assert_eq!(f.system, "gb200-nvl72");
        assert_eq!(f.gpus, Some(72));
        assert_eq!(w.len(), 6, "{w:#?}");
        assert!(w.iter().any(|m| m.contains("zzz")));
        assert!(w.iter().any(|m| m.contains("warp_drive")));
        // The valid load kind is kept with the preset's value.
        assert_eq!(load_kind(&f).0, LoadKind::Batch);
    }

    #[test]
    fn explicit_keys_override_the_preset() {
        let (f, w) = parse("preset=b200-maverick&gpus=8&load=target&at=500&spec=none");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(f.model, "llama4-maverick");
        assert_eq!(load_kind(&f), (LoadKind::Target, 500.0));
        assert!(f.speculative.is_none());
    }

    proptest::proptest! {
        #[test]
        fn any_query_parses_without_panicking(q in ".{0,300}") {
            let (f, _) = parse(&q);
            // Whatever came in, what goes out is a query we read back without complaint.
            let (_, w) = parse(&encode(&f));
            proptest::prop_assert!(w.is_empty(), "{:?}", w);
        }

        #[test]
        fn key_value_soup_parses(pairs in proptest::collection::vec(("[a-z_]{1,12}", "[a-z0-9.,_-]{0,12}"), 0..12)) {
            let q: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let (f, warnings) = parse(&q.join("&"));
            // A key that is not a setting is always reported by name.
            for (k, _) in &pairs {
                let known = ["preset", "v", "system", "model", "phase", "weights", "act", "kv",
                    "gpus", "tp", "ep", "prefill_gpus", "prefill_tp", "decode_gpus", "in", "out",
                    "load", "at", "opt", "spec", "drafts"];
                if !known.contains(&k.as_str()) {
                    proptest::prop_assert!(warnings.iter().any(|w| w.contains(k.as_str())), "{k}: {warnings:?}");
                }
            }
            // What it settled on writes a query that reads back to the same state, silently.
            let (back, w) = parse(&encode(&f));
            proptest::prop_assert!(w.is_empty(), "{:?}", w);
            proptest::prop_assert_eq!(encode(&back), encode(&f));
        }
    }
}
