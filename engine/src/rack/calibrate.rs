//! Calibration: the public figures the model must reproduce (shared/calibration/
//! public-figures.toml), and a least-squares fit of the efficiency parameters to them.
//!
//! Each point is a committed scenario file, optionally edited (an optimization removed, a draft
//! length changed), one output of `eval`, and the measured value on that output's own
//! definition. Seed figures must come within 5%, the others within 15%.

use serde::Serialize;

use super::evaluation::Evaluation;
use super::params::{Params, BOUNDS};
use super::scenario::{Load, Optimization, Optimizations, Recompute, Scenario, Speculative};
use super::serve::eval;
use super::RackError;

/// A change to a committed scenario (an optimization removed, another load).
type Edit = Box<dyn Fn(&mut Scenario)>;

pub struct Point {
    pub id: &'static str,
    pub source: &'static str,
    pub seed: bool,
    scenario: (&'static str, &'static str),
    edit: Edit,
    pub metric: &'static str,
    read: fn(&Evaluation) -> f64,
    /// When set, the point is a gain: read(edit) / read(this edit) - 1.
    gain_over: Option<Edit>,
    pub measured: f64,
}

impl Point {
    pub fn bound(&self) -> f64 {
        if self.seed {
            0.05
        } else {
            0.15
        }
    }

    pub fn scenario(&self) -> Result<Scenario, RackError> {
        let (path, text) = self.scenario;
        let mut s = Scenario::from_text(path, text)?;
        (self.edit)(&mut s);
        Ok(s)
    }

    pub fn predict(&self, p: &Params) -> Result<f64, RackError> {
        let value = (self.read)(&eval(&self.scenario()?, p)?);
        match &self.gain_over {
            None => Ok(value),
            Some(edit) => {
                let (path, text) = self.scenario;
                let mut base = Scenario::from_text(path, text)?;
                edit(&mut base);
                Ok(value / (self.read)(&eval(&base, p)?) - 1.0)
            }
        }
    }
}

macro_rules! scenario {
    ($file:literal) => {
        ($file, include_str!(concat!("../../../scenarios/", $file)))
    };
}

fn keep(_: &mut Scenario) {}

fn without(s: &mut Scenario, drop: &[Optimization]) {
    s.optimizations = Optimization::EVERY
        .iter()
        .filter(|o| s.optimizations.has(**o) && !drop.contains(o))
        .fold(Optimizations::none(), |set, &o| set.with(o));
}

const SEED_NVL72_ADDED: [Optimization; 3] = [
    Optimization::FusedAlltoallLl128,
    Optimization::FusedCopyConcat,
    Optimization::Pdl,
];

/// The seed's two operating points each give both coordinates; the batch per GPU is their
/// ratio (951 / 77 = 12.35 sequences, 1105 / 83 = 13.31). We set the batch and predict the
/// speed: users per rack (= batch x 72) then follows and is not a test of its own.
fn nvl72_before(s: &mut Scenario) {
    without(s, &SEED_NVL72_ADDED);
    s.load = Load::BatchPerGpu(951.0 / 77.0);
}

fn nvl72_after(s: &mut Scenario) {
    s.load = Load::BatchPerGpu(1105.0 / 83.0);
}

fn copy_before(s: &mut Scenario) {
    without(s, &[Optimization::FusedCopyConcat]);
}

fn gpt3_jan_2024(s: &mut Scenario) {
    s.optimizations = Optimizations::none();
    s.training.recompute = Recompute::Full;
}

/// The "best Blackwell baseline" the record is 4x of: the same deployment without what the
/// seed lists as the record's additions (EAGLE-3, the three fusions, PDL).
fn llama4_baseline(s: &mut Scenario) {
    s.speculative = None;
    without(
        s,
        &[
            Optimization::FusedGateUpSwiglu,
            Optimization::FusedQkvRopeScale,
            Optimization::FusedAllreduceRmsnorm,
            Optimization::Pdl,
        ],
    );
}

fn mtp(s: &mut Scenario, draft: u32) {
    s.speculative = s.speculative.map(|sp| Speculative {
        draft_tokens: draft,
        acceptance_length: None,
        ..sp
    });
}

fn no_pdl(s: &mut Scenario) {
    without(s, &[Optimization::Pdl]);
}

fn no_mtp(s: &mut Scenario) {
    s.speculative = None;
}

fn mtp1(s: &mut Scenario) {
    mtp(s, 1);
}

fn user(e: &Evaluation) -> f64 {
    e.tokens_per_s_per_user
}

fn out_per_gpu(e: &Evaluation) -> f64 {
    e.output_tokens_per_s_per_gpu
}

fn copy_concat(e: &Evaluation) -> f64 {
    e.copy_concat_us_per_layer
}

fn mfu(e: &Evaluation) -> f64 {
    e.mfu
}

const BLOG14: &str = "seed; TensorRT-LLM tech blog 14 (Scaling Expert Parallelism part 3)";
const NVL72: (&str, &str) = scenario!("seed-nvl72-deepseek-r1-decode.toml");
const COPY: (&str, &str) = scenario!("seed-mla-copy-concat.toml");
const GPT3: (&str, &str) = scenario!("seed-gpt3-175b-training.toml");
const LLAMA4: (&str, &str) = scenario!("seed-llama4-maverick-min-latency.toml");
const B200_DSR1: (&str, &str) = scenario!("trtllm-b200-deepseek-r1-min-latency.toml");

/// The NVL72 seed's DeepSeek-R1 decode, (tokens/s per user, output tokens/s per GPU): before
/// (TensorRT-LLM, July 2025) and after fused AllToAll, copy/concat and PDL (August 2025).
const SEED_BEFORE: (f64, f64) = (77.0, 951.0);
const SEED_AFTER: (f64, f64) = (83.0, 1105.0);

/// A public measurement on the throughput-interactivity plane.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParetoPoint {
    pub label: &'static str,
    pub tokens_per_s_per_user: f64,
    /// On the measurement's own metric: output tokens per GPU for the seeds, input + output
    /// (prefill GPUs included) for InferenceX.
    pub tokens_per_s_per_gpu: f64,
}

/// The measurements of `system` serving `model` in `phase` that the Pareto chart marks.
pub fn pareto_points(system: &str, model: &str, phase: super::scenario::Phase) -> Vec<ParetoPoint> {
    use super::scenario::Phase;
    if model != "deepseek-r1" {
        return Vec::new();
    }
    match (system, phase) {
        ("gb200-nvl72", Phase::Decode) => vec![
            ParetoPoint {
                label: "seed, before (TensorRT-LLM, July 2025)",
                tokens_per_s_per_user: SEED_BEFORE.0,
                tokens_per_s_per_gpu: SEED_BEFORE.1,
            },
            ParetoPoint {
                label: "seed, after fused AllToAll, copy/concat, PDL (Aug 2025)",
                tokens_per_s_per_user: SEED_AFTER.0,
                tokens_per_s_per_gpu: SEED_AFTER.1,
            },
        ],
        ("gb200-nvl72", Phase::Serve) => INFERENCEX_ROWS
            .iter()
            .filter(|r| r.system == system)
            .map(|r| ParetoPoint {
                label: "InferenceX GB200, Dynamo TRT-LLM + MTP (May 2026)",
                tokens_per_s_per_user: r.tok_s_user,
                tokens_per_s_per_gpu: r.tok_s_gpu,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The calibration set.
pub fn points() -> Vec<Point> {
    let mut v = seeds_and_pdl();
    v.extend(b200_min_latency());
    v
}

fn seeds_and_pdl() -> Vec<Point> {
    vec![
        Point {
            id: "nvl72-dsr1-before-tok-s-user",
            source: BLOG14,
            seed: true,
            scenario: NVL72,
            edit: Box::new(nvl72_before),
            metric: "tokens/s per user at 12.35 sequences per GPU, before",
            read: user,
            gain_over: None,
            measured: SEED_BEFORE.0,
        },
        Point {
            id: "nvl72-dsr1-before-tok-s-gpu",
            source: BLOG14,
            seed: true,
            scenario: NVL72,
            edit: Box::new(nvl72_before),
            metric: "output tokens/s per GPU, before",
            read: out_per_gpu,
            gain_over: None,
            measured: SEED_BEFORE.1,
        },
        Point {
            id: "nvl72-dsr1-after-tok-s-user",
            source: BLOG14,
            seed: true,
            scenario: NVL72,
            edit: Box::new(nvl72_after),
            metric: "tokens/s per user at 13.31 sequences per GPU, after",
            read: user,
            gain_over: None,
            measured: SEED_AFTER.0,
        },
        Point {
            id: "nvl72-dsr1-after-tok-s-gpu",
            source: BLOG14,
            seed: true,
            scenario: NVL72,
            edit: Box::new(nvl72_after),
            metric: "output tokens/s per GPU, after",
            read: out_per_gpu,
            gain_over: None,
            measured: SEED_AFTER.1,
        },
        Point {
            id: "mla-copy-concat-before",
            source: BLOG14,
            seed: true,
            scenario: COPY,
            edit: Box::new(copy_before),
            metric: "MLA copy/concat kernel, µs (3.8x SoL)",
            read: copy_concat,
            gain_over: None,
            measured: 306.0,
        },
        Point {
            id: "mla-copy-concat-after",
            source: BLOG14,
            seed: true,
            scenario: COPY,
            edit: Box::new(keep),
            metric: "MLA copy/concat kernel, µs (1.3x SoL)",
            read: copy_concat,
            gain_over: None,
            measured: 107.0,
        },
        Point {
            id: "gpt3-175b-mfu-jan-2024",
            source: "seed; SemiAnalysis H100 vs GB200 NVL72 training benchmarks (secondary)",
            seed: true,
            scenario: GPT3,
            edit: Box::new(gpt3_jan_2024),
            metric: "MFU, January 2024 software",
            read: mfu,
            gain_over: None,
            measured: 0.34,
        },
        Point {
            id: "gpt3-175b-mfu-dec-2024",
            source: "seed; SemiAnalysis H100 vs GB200 NVL72 training benchmarks (secondary)",
            seed: true,
            scenario: GPT3,
            edit: Box::new(keep),
            metric: "MFU, December 2024 software",
            read: mfu,
            gain_over: None,
            measured: 0.54,
        },
        Point {
            id: "llama4-dgx-b200-eagle3",
            source: "seed; NVIDIA blog 'Blackwell Breaks the 1,000 TPS/User Barrier' (AA: 1,038)",
            seed: true,
            scenario: LLAMA4,
            edit: Box::new(keep),
            metric: "tokens/s per user, EAGLE-3 + fusions + PDL",
            read: user,
            gain_over: None,
            measured: 1038.0,
        },
        Point {
            id: "llama4-dgx-b200-baseline",
            source: "seed; same blog: 4x the best Blackwell baseline",
            seed: true,
            scenario: LLAMA4,
            edit: Box::new(llama4_baseline),
            metric: "tokens/s per user, no speculation, no fusions, no PDL",
            read: user,
            gain_over: None,
            measured: 1038.0 / 4.0,
        },
        Point {
            id: "b200-dsr1-pdl-gain",
            source: "TensorRT-LLM tech blog 1 ('Enable PDL: 168 -> 173 TPS/user')",
            seed: false,
            scenario: B200_DSR1,
            edit: Box::new(keep),
            metric: "tokens/s per user gained by PDL (fraction)",
            read: user,
            gain_over: Some(Box::new(no_pdl)),
            measured: 173.0 / 168.0 - 1.0,
        },
    ]
}

const INFERENCEX: (&str, &str) = scenario!("inferencex-gb200-deepseek-r1-disagg.toml");

/// One of InferenceX's disaggregated DeepSeek-R1 FP4 runs, ISL/OSL 1K/1K. InferenceX lists the
/// 12-GPU prefill pools as "TP=12", which cannot split 128 heads; we read them as three TP 4
/// workers, like the 4-GPU pools.
struct InferenceXRow {
    system: &'static str,
    concurrency: f64,
    prefill_gpus: u32,
    prefill_tp: u32,
    decode_gpus: u32,
    ep: u32,
    /// Total (input + output) tokens/s per GPU, prefill GPUs included.
    tok_s_gpu: f64,
    tok_s_user: f64,
}

const fn row(
    system: &'static str,
    concurrency: f64,
    (prefill_gpus, prefill_tp): (u32, u32),
    (decode_gpus, ep): (u32, u32),
    tok_s_gpu: f64,
    tok_s_user: f64,
) -> InferenceXRow {
    InferenceXRow {
        system,
        concurrency,
        prefill_gpus,
        prefill_tp,
        decode_gpus,
        ep,
        tok_s_gpu,
        tok_s_user,
    }
}

const INFERENCEX_ROWS: [InferenceXRow; 9] = [
    row("gb200-nvl72", 4.0, (4, 4), (32, 8), 60.7, 286.40),
    row("gb200-nvl72", 24.0, (4, 4), (32, 8), 274.8, 222.28),
    row("gb200-nvl72", 180.0, (4, 4), (32, 32), 1149.1, 164.37),
    row("gb200-nvl72", 2253.0, (12, 4), (32, 32), 7698.0, 90.99),
    row("gb200-nvl72", 16130.0, (12, 4), (20, 4), 14659.4, 17.82),
    row("dgx-b200", 6.0, (4, 4), (40, 8), 49.3, 309.17),
    row("dgx-b200", 45.0, (4, 4), (40, 8), 369.9, 191.18),
    row("dgx-b200", 875.0, (4, 4), (40, 8), 2832.9, 101.79),
    row("dgx-b200", 10860.0, (12, 4), (20, 4), 12515.7, 21.34),
];

fn inferencex_points() -> Vec<Point> {
    let mut out = Vec::new();
    for (i, r) in INFERENCEX_ROWS.iter().enumerate() {
        let (system, conc, ep) = (r.system, r.concurrency, r.ep);
        let (pg, ptp, dg) = (r.prefill_gpus, r.prefill_tp, r.decode_gpus);
        let (gpu, usr) = (r.tok_s_gpu, r.tok_s_user);
        let edit = move |s: &mut Scenario| {
            if let Ok(sys) = super::hardware::System::by_id(system) {
                s.system = sys;
            }
            s.pools = Some(super::scenario::Pools {
                prefill_gpus: pg,
                prefill_tp: ptp,
                decode_gpus: dg,
            });
            s.gpus = ep;
            s.ep = ep;
            s.tp = ep.min(8);
            s.dp = ep / s.tp;
            s.load = Load::Concurrency(conc);
            // The runs' recipes are not published. One rule for all rows, the usual practice:
            // below 4 requests per decode GPU, latency mode (TP attention, 3 MTP drafts);
            // above, throughput mode (attention DP, 1 draft).
            let latency_mode = conc / (dg as f64) < 4.0;
            if latency_mode {
                without(s, &[Optimization::AttentionDp]);
            }
            s.speculative = s.speculative.map(|sp| Speculative {
                draft_tokens: if latency_mode { 3 } else { 1 },
                ..sp
            });
        };
        let id: &'static str = [
            "inferencex-gb200-c4",
            "inferencex-gb200-c24",
            "inferencex-gb200-c180",
            "inferencex-gb200-c2253",
            "inferencex-gb200-c16130",
            "inferencex-b200-c6",
            "inferencex-b200-c45",
            "inferencex-b200-c875",
            "inferencex-b200-c10860",
        ][i];
        let source = "InferenceX blog 'GB200 NVL72 vs B200 on DeepSeek R1' (2026-05-22)";
        out.push(Point {
            id,
            source,
            seed: false,
            scenario: INFERENCEX,
            edit: Box::new(edit),
            metric: "total tokens/s per GPU (prefill GPUs included)",
            read: |e| e.total_tokens_per_s_per_gpu,
            gain_over: None,
            measured: gpu,
        });
        out.push(Point {
            id,
            source,
            seed: false,
            scenario: INFERENCEX,
            edit: Box::new(edit),
            metric: "tokens/s per user (1000 / TPOT)",
            read: user,
            gain_over: None,
            measured: usr,
        });
    }
    out
}

/// Public figures the model is checked against but not fitted to, each for a stated reason
/// (RACK_MODEL.md): their residuals are reported, not bounded.
pub fn validation() -> Vec<Point> {
    let mut out = inferencex_points();
    out.extend(trtllm_max_throughput_points());
    out
}

const TRTLLM_MAVERICK: (&str, &str) = scenario!("trtllm-b200-llama4-maverick-max-throughput.toml");
const TRTLLM_DSR1: (&str, &str) = scenario!("trtllm-b200-deepseek-r1-max-throughput.toml");

/// TensorRT-LLM's performance overview: output tokens/s per GPU of trtllm-bench's offline
/// throughput run, on 4 B200 (NVFP4, "DEP4") or 8 H200 (FP8, "DEP8"): (id, on H200, ISL, OSL,
/// measured).
type TrtllmRow = (&'static str, bool, u32, u32, f64);

const TRTLLM_MAVERICK_ROWS: [TrtllmRow; 6] = [
    ("trtllm-maverick-b200-1k1k", false, 1000, 1000, 11337.0),
    ("trtllm-maverick-b200-1k8k", false, 1024, 8192, 5174.0),
    ("trtllm-maverick-b200-8k1k", false, 8192, 1024, 3279.0),
    ("trtllm-maverick-h200-1k1k", true, 1000, 1000, 4146.0),
    ("trtllm-maverick-h200-1k8k", true, 1024, 8192, 1157.0),
    ("trtllm-maverick-h200-8k1k", true, 8192, 1024, 1276.0),
];

const TRTLLM_DSR1_ROWS: [TrtllmRow; 5] = [
    ("trtllm-dsr1-b200-1k1k", false, 1000, 1000, 6463.0),
    ("trtllm-dsr1-b200-1k8k", false, 1024, 8192, 3862.0),
    ("trtllm-dsr1-b200-8k1k", false, 8192, 1024, 1168.0),
    ("trtllm-dsr1-h200-1k1k", true, 1000, 1000, 1627.0),
    ("trtllm-dsr1-h200-1k8k", true, 1024, 8192, 1218.0),
];

fn trtllm_max_throughput_points() -> Vec<Point> {
    let rows = TRTLLM_MAVERICK_ROWS
        .iter()
        .map(|r| (TRTLLM_MAVERICK, r))
        .chain(TRTLLM_DSR1_ROWS.iter().map(|r| (TRTLLM_DSR1, r)));
    rows.map(|(scenario, &(id, h200, isl, osl, measured))| {
        let edit = move |s: &mut Scenario| {
            s.input_tokens = isl;
            s.output_tokens = osl;
            if h200 {
                if let Ok(sys) = super::hardware::System::by_id("hgx-h200") {
                    s.system = sys;
                }
                s.weights = super::precision::Precision::Fp8;
                s.attention_weights = super::precision::Precision::Fp8;
                (s.gpus, s.tp, s.ep) = (8, 8, 8);
            }
        };
        Point {
            id,
            source: "TensorRT-LLM docs, developer-guide/perf-overview.md (commit 03e27c7)",
            seed: false,
            scenario,
            edit: Box::new(edit),
            metric: "output tokens/s per GPU, trtllm-bench offline max throughput",
            read: |e| e.output_tokens_per_s_per_gpu,
            gain_over: None,
            measured,
        }
    })
    .collect()
}

/// TensorRT-LLM tech blog 1 (February 2025 software) at concurrency 1.
fn b200_min_latency() -> Vec<Point> {
    vec![
        Point {
            id: "b200-dsr1-no-mtp",
            source: "TensorRT-LLM tech blog 1 (B200 min latency)",
            seed: false,
            scenario: B200_DSR1,
            edit: Box::new(no_mtp),
            metric: "tokens/s per user, no MTP",
            read: user,
            gain_over: None,
            measured: 111.0,
        },
        Point {
            id: "b200-dsr1-mtp1",
            source: "TensorRT-LLM tech blog 1 (B200 min latency)",
            seed: false,
            scenario: B200_DSR1,
            edit: Box::new(mtp1),
            metric: "tokens/s per user, MTP 1 (AR 1.92)",
            read: user,
            gain_over: None,
            measured: 198.0,
        },
        Point {
            id: "b200-dsr1-mtp3",
            source: "TensorRT-LLM tech blog 1 (B200 min latency)",
            seed: false,
            scenario: B200_DSR1,
            edit: Box::new(keep),
            metric: "tokens/s per user, MTP 3 (AR 2.82)",
            read: user,
            gain_over: None,
            measured: 253.0,
        },
    ]
}

#[derive(Debug, Clone, Serialize)]
pub struct Residual {
    pub id: &'static str,
    pub metric: &'static str,
    pub source: &'static str,
    pub seed: bool,
    pub measured: f64,
    pub predicted: f64,
    /// predicted / measured - 1.
    pub residual: f64,
    pub bound: f64,
    pub within: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fit {
    pub params: Params,
    pub residuals: Vec<Residual>,
    pub all_within: bool,
    /// Figures not fitted: predicted vs measured, no bound.
    pub validation: Vec<Residual>,
}

/// The fit's residual table and validation table as docs/RACK_MODEL.md shows them (a test there
/// requires the docs to hold exactly these, so they cannot drift from the code).
pub fn markdown(fit: &Fit) -> (String, String) {
    let mut calibration = String::from(
        "| point | metric | measured | predicted | residual | bound |\n|---|---|---:|---:|---:|---:|\n",
    );
    for r in &fit.residuals {
        calibration.push_str(&format!(
            "| `{}` | {} | {} | {} | {:+.1}% | {:.0}% |\n",
            r.id,
            r.metric,
            figure(r.measured),
            figure(r.predicted),
            100.0 * r.residual,
            100.0 * r.bound
        ));
    }
    let mut validation = String::from(
        "| point | metric | measured | predicted | residual |\n|---|---|---:|---:|---:|\n",
    );
    for r in &fit.validation {
        validation.push_str(&format!(
            "| `{}` | {} | {} | {} | {:+.0}% |\n",
            r.id,
            r.metric,
            figure(r.measured),
            figure(r.predicted),
            100.0 * r.residual
        ));
    }
    (calibration, validation)
}

/// Four significant figures, without exponents (a table of tokens/s reads 10,210, not 1.021e4).
fn figure(x: f64) -> String {
    let digits = if x == 0.0 {
        0
    } else {
        (3 - x.abs().log10().floor() as i32).max(0) as usize
    };
    let text = format!("{x:.digits$}");
    match text.split_once('.') {
        None if x.abs() >= 1e4 => {
            let (sign, int) = text.split_at(usize::from(text.starts_with('-')));
            let mut grouped = String::new();
            for (i, c) in int.chars().enumerate() {
                if i > 0 && (int.len() - i) % 3 == 0 {
                    grouped.push(',');
                }
                grouped.push(c);
            }
            format!("{sign}{grouped}")
        }
        _ => text,
    }
}

pub fn residuals(p: &Params) -> Result<Vec<Residual>, RackError> {
    table(&points(), p)
}

pub fn validation_residuals(p: &Params) -> Result<Vec<Residual>, RackError> {
    let mut r = table(&validation(), p)?;
    for row in &mut r {
        row.within = true;
        row.bound = 0.0;
    }
    Ok(r)
}

fn table(points: &[Point], p: &Params) -> Result<Vec<Residual>, RackError> {
    points
        .iter()
        .map(|pt| {
            let predicted = pt.predict(p)?;
            let residual = predicted / pt.measured - 1.0;
            Ok(Residual {
                id: pt.id,
                metric: pt.metric,
                source: pt.source,
                seed: pt.seed,
                measured: pt.measured,
                predicted,
                residual,
                bound: pt.bound(),
                within: residual.abs() <= pt.bound(),
            })
        })
        .collect()
}

/// Sum of squared log-ratios, each scaled by its point's bound so that a seed point at 5%
/// weighs as much as another at 15%.
fn cost(p: &Params, pts: &[Point]) -> f64 {
    if p.pdl_gap_us > p.kernel_gap_us {
        return f64::INFINITY;
    }
    pts.iter()
        .map(|pt| match pt.predict(p) {
            Ok(v) if v > 0.0 && v.is_finite() => ((v / pt.measured).ln() / pt.bound()).powi(2),
            _ => 1e6,
        })
        .sum()
}

/// Maps a parameter vector to the unbounded space the simplex walks in, and back. Fixed
/// parameters (equal bounds) map to 0 and back to their value.
fn to_free(v: &[f64; 9]) -> [f64; 9] {
    let mut x = [0.0; 9];
    for (i, (_, lo, hi)) in BOUNDS.iter().enumerate() {
        if hi > lo {
            let t = ((v[i] - lo) / (hi - lo)).clamp(1e-9, 1.0 - 1e-9);
            x[i] = (t / (1.0 - t)).ln();
        }
    }
    x
}

fn from_free(x: &[f64; 9]) -> [f64; 9] {
    let mut v = [0.0; 9];
    for (i, (_, lo, hi)) in BOUNDS.iter().enumerate() {
        v[i] = lo + (hi - lo) / (1.0 + (-x[i]).exp());
    }
    v
}

/// Least squares by Nelder-Mead in the bounded (logistic) parameterization, from the given
/// start and from the prior, with a few simplex sizes, each restarted until the cost stops
/// improving; the best result wins.
pub fn fit(start: &Params) -> Result<Fit, RackError> {
    let pts = points();
    let f = |x: &[f64; 9]| cost(&Params::from_vec(&from_free(x)), &pts);
    let mut best = to_free(&start.to_vec());
    let mut best_cost = f(&best);
    for origin in [*start, Params::PRIOR] {
        for step in [0.3, 1.0] {
            let mut x = to_free(&origin.to_vec());
            let mut c = f(&x);
            for _ in 0..6 {
                let (nx, nc) = nelder_mead(&f, x, step, 1500);
                if nc >= c - 1e-9 {
                    break;
                }
                x = nx;
                c = nc;
            }
            if c < best_cost {
                best = x;
                best_cost = c;
            }
        }
    }
    Fit::of(Params::from_vec(&from_free(&best)))
}

impl Fit {
    /// The residual tables of `params`.
    pub fn of(params: Params) -> Result<Fit, RackError> {
        let residuals = residuals(&params)?;
        let all_within = residuals.iter().all(|r| r.within);
        Ok(Fit {
            params,
            residuals,
            all_within,
            validation: validation_residuals(&params)?,
        })
    }
}

fn nelder_mead(
    f: &impl Fn(&[f64; 9]) -> f64,
    start: [f64; 9],
    step: f64,
    iterations: usize,
) -> ([f64; 9], f64) {
    const N: usize = 9;
    let mut simplex: Vec<([f64; N], f64)> = (0..=N)
        .map(|i| {
            let mut x = start;
            if i > 0 {
                x[i - 1] += step;
            }
            (x, f(&x))
        })
        .collect();
    let lerp = |a: &[f64; N], b: &[f64; N], t: f64| {
        let mut x = [0.0; N];
        for k in 0..N {
            x[k] = a[k] + t * (b[k] - a[k]);
        }
        x
    };
    for _ in 0..iterations {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut centroid = [0.0; N];
        for (x, _) in &simplex[..N] {
            for k in 0..N {
                centroid[k] += x[k] / N as f64;
            }
        }
        let worst = simplex[N];
        let reflected = lerp(&centroid, &worst.0, -1.0);
        let fr = f(&reflected);
        if fr < simplex[0].1 {
            let expanded = lerp(&centroid, &worst.0, -2.0);
            let fe = f(&expanded);
            simplex[N] = if fe < fr {
                (expanded, fe)
            } else {
                (reflected, fr)
            };
        } else if fr < simplex[N - 1].1 {
            simplex[N] = (reflected, fr);
        } else {
            let contracted = lerp(&centroid, &worst.0, 0.5);
            let fc = f(&contracted);
            if fc < worst.1 {
                simplex[N] = (contracted, fc);
            } else {
                let best = simplex[0].0;
                for s in simplex.iter_mut().skip(1) {
                    s.0 = lerp(&best, &s.0, 0.5);
                    s.1 = f(&s.0);
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pareto_points_are_the_calibration_and_validation_figures() {
        use crate::rack::scenario::Phase;
        let fitted: Vec<f64> = points()
            .iter()
            .filter(|p| p.seed)
            .map(|p| p.measured)
            .collect();
        let seed = pareto_points("gb200-nvl72", "deepseek-r1", Phase::Decode);
        assert_eq!(seed.len(), 2);
        for p in &seed {
            assert!(fitted.contains(&p.tokens_per_s_per_user), "{p:?}");
            assert!(fitted.contains(&p.tokens_per_s_per_gpu), "{p:?}");
        }
        let checked: Vec<f64> = validation().iter().map(|p| p.measured).collect();
        let serve = pareto_points("gb200-nvl72", "deepseek-r1", Phase::Serve);
        assert_eq!(serve.len(), 5);
        for p in &serve {
            assert!(checked.contains(&p.tokens_per_s_per_user), "{p:?}");
            assert!(checked.contains(&p.tokens_per_s_per_gpu), "{p:?}");
        }
        assert!(pareto_points("gb200-nvl72", "llama4-maverick", Phase::Decode).is_empty());
    }

    /// The committed fit reproduces every calibration point within its bound.
    #[test]
    fn every_calibration_point_is_within_its_bound() {
        let r = residuals(&Params::fitted()).unwrap_or_else(|e| panic!("{e}"));
        let bad: Vec<String> = r
            .iter()
            .filter(|r| !r.within)
            .map(|r| {
                format!(
                    "{}: predicted {:.4} vs measured {:.4} ({:+.1}%, bound {:.0}%)",
                    r.id,
                    r.predicted,
                    r.measured,
                    100.0 * r.residual,
                    100.0 * r.bound
                )
            })
            .collect();
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}
