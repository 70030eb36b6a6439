//! Scenario files (TOML or JSON): what to evaluate. Parsing rejects unknown fields and values
//! with a message that names the field and what it accepts; `Scenario::resolve` then checks that
//! the deployment is possible at all.

use serde::{Deserialize, Serialize};

use super::hardware::{HardwareOverrides, System};
use super::models::ModelSpec;
use super::precision::Precision;
use super::RackError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Decode,
    Prefill,
    Serve,
    Train,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimization {
    FusedAlltoallLl128,
    FusedCopyConcat,
    Pdl,
    CudaGraphs,
    FusedGateUpSwiglu,
    FusedQkvRopeScale,
    FusedAllreduceRmsnorm,
    SplitKAttention,
    AttentionDp,
    TwoBatchOverlap,
    /// Every optimization above.
    All,
}

impl Optimization {
    pub const EVERY: [Optimization; 10] = [
        Optimization::CudaGraphs,
        Optimization::AttentionDp,
        Optimization::FusedGateUpSwiglu,
        Optimization::FusedQkvRopeScale,
        Optimization::FusedAllreduceRmsnorm,
        Optimization::SplitKAttention,
        Optimization::TwoBatchOverlap,
        Optimization::FusedAlltoallLl128,
        Optimization::FusedCopyConcat,
        Optimization::Pdl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Optimization::FusedAlltoallLl128 => "fused_alltoall_ll128",
            Optimization::FusedCopyConcat => "fused_copy_concat",
            Optimization::Pdl => "pdl",
            Optimization::CudaGraphs => "cuda_graphs",
            Optimization::FusedGateUpSwiglu => "fused_gate_up_swiglu",
            Optimization::FusedQkvRopeScale => "fused_qkv_rope_scale",
            Optimization::FusedAllreduceRmsnorm => "fused_allreduce_rmsnorm",
            Optimization::SplitKAttention => "split_k_attention",
            Optimization::AttentionDp => "attention_dp",
            Optimization::TwoBatchOverlap => "two_batch_overlap",
            Optimization::All => "all",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of optimizations (a bitmask: cheap to copy in a sweep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Optimizations(u16);

impl Optimizations {
    pub fn none() -> Self {
        Optimizations(0)
    }

    pub fn with(self, o: Optimization) -> Self {
        if o == Optimization::All {
            return Optimization::EVERY.iter().fold(self, |s, &o| s.with(o));
        }
        Optimizations(self.0 | o.bit())
    }

    pub fn has(self, o: Optimization) -> bool {
        self.0 & o.bit() != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpecMethod {
    Mtp,
    Eagle3,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Speculative {
    pub method: SpecMethod,
    pub draft_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_length: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    /// Recompute every layer's forward in the backward pass (4 forward-equivalents of work).
    Full,
    /// Keep activations, recompute only the cheap ones (3 forward-equivalents).
    Selective,
}

/// The file as written. Every field is optional; `resolve` applies the defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub system: String,
    pub model: String,
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Precision>,
    /// Attention projection weights; by default FP8, or `weights` when that is wider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_weights: Option<Precision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations: Option<Precision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<Precision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_per_gpu: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_tokens_per_s_per_user: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optimizations: Vec<Optimization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_gpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_tp: Option<u32>,
    /// Prefill workers (instances); by default `prefill_gpus` over one worker's GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_workers: Option<u32>,
    /// A prefill worker's expert-parallel width; by default all its GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_ep: Option<u32>,
    /// A prefill worker's attention data-parallel groups, each of `prefill_tp` GPUs: a worker
    /// has `prefill_tp x prefill_dp` GPUs. By default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_dp: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_gpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_batch_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_sms: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompute: Option<Recompute>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_pipeline: Option<u32>,
    /// What-if changes to the system's datasheet (`[hardware]`), echoed by `rack eval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<HardwareOverrides>,
}

impl ScenarioFile {
    /// Parses TOML or JSON, chosen by the file name's extension.
    pub fn parse(path: &str, text: &str) -> Result<ScenarioFile, RackError> {
        if path.ends_with(".json") {
            serde_json::from_str(text).map_err(|e| RackError::Parse(e.to_string()))
        } else if path.ends_with(".toml") {
            toml::from_str(text).map_err(|e| RackError::Parse(e.to_string()))
        } else {
            Err(RackError::Invalid {
                field: "file",
                message: format!("{path}: a scenario is a .toml or .json file"),
            })
        }
    }
}

/// How much load the deployment carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    BatchPerGpu(f64),
    Concurrency(f64),
    TargetTokensPerSPerUser(f64),
}

/// Disaggregated serving: separate prefill and decode pools. The prefill pool is
/// `prefill_workers` workers of `prefill_tp x prefill_dp` GPUs each (attention TP inside a
/// group, `prefill_dp` groups, experts over `prefill_ep` of the worker's GPUs); the decode pool
/// is `decode_gpus` in instances laid out as the scenario's `gpus`/`tp`/`ep`/`dp`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pools {
    pub prefill_workers: u32,
    pub prefill_tp: u32,
    pub prefill_ep: u32,
    pub prefill_dp: u32,
    pub decode_gpus: u32,
}

impl Pools {
    /// GPUs of one prefill worker.
    pub fn prefill_worker_gpus(&self) -> u32 {
        self.prefill_tp * self.prefill_dp
    }

    pub fn prefill_gpus(&self) -> u32 {
        self.prefill_workers * self.prefill_worker_gpus()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Training {
    pub global_batch_tokens: f64,
    pub seq_len: u32,
    pub recompute: Recompute,
    pub virtual_pipeline: u32,
}

/// A checked scenario with every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub file: ScenarioFile,
    pub system: System,
    pub model: ModelSpec,
    pub phase: Phase,
    pub weights: Precision,
    pub attention_weights: Precision,
    pub activations: Precision,
    pub kv_cache: Precision,
    /// GPUs of one model instance (the decode pool's instance when disaggregated).
    pub gpus: u32,
    pub tp: u32,
    pub ep: u32,
    pub dp: u32,
    pub pp: u32,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub load: Load,
    pub optimizations: Optimizations,
    pub speculative: Option<Speculative>,
    pub pools: Option<Pools>,
    pub training: Training,
    pub comm_sms: u32,
}

fn invalid(field: &'static str, message: impl Into<String>) -> RackError {
    RackError::Invalid {
        field,
        message: message.into(),
    }
}

/// The parallel layout of one model instance: GPUs, tensor, expert, data and pipeline ways.
#[derive(Clone, Copy)]
struct Parallelism {
    gpus: u32,
    tp: u32,
    ep: u32,
    dp: u32,
    pp: u32,
}

/// The prefill and decode pools of disaggregated serving, if the file gives them.
fn resolve_pools(f: &ScenarioFile, model: &ModelSpec) -> Result<Option<Pools>, RackError> {
    let prefill_given = f.prefill_gpus.is_some() || f.prefill_workers.is_some();
    let d = match (prefill_given, f.decode_gpus) {
        (false, None) => {
            for (field, v) in [
                ("prefill_tp", f.prefill_tp),
                ("prefill_ep", f.prefill_ep),
                ("prefill_dp", f.prefill_dp),
            ] {
                if v.is_some() {
                    return Err(invalid(field, "applies to a prefill pool: give prefill_gpus or prefill_workers and decode_gpus"));
                }
            }
            return Ok(None);
        }
        (true, Some(d)) => positive("decode_gpus", d)?,
        (true, None) => {
            return Err(invalid(
                "decode_gpus",
                "disaggregated serving needs both pools",
            ))
        }
        (false, Some(_)) => {
            return Err(invalid(
                "prefill_gpus",
                "disaggregated serving needs both pools",
            ))
        }
    };
    if f.phase != Phase::Serve {
        return Err(invalid(
            "prefill_gpus",
            "prefill and decode pools are for phase = \"serve\"",
        ));
    }
    let dp = positive("prefill_dp", f.prefill_dp.unwrap_or(1))?;
    let tp = positive(
        "prefill_tp",
        f.prefill_tp
            .unwrap_or_else(|| f.prefill_gpus.unwrap_or(8).min(8) / dp.min(8)),
    )?;
    let worker = product(&[tp, dp]);
    if worker > MAX_WAYS as u64 {
        return Err(invalid(
            "prefill_dp",
            format!("a prefill worker of prefill_tp x prefill_dp = {worker} GPUs is more than {MAX_WAYS}"),
        ));
    }
    let worker = worker as u32;
    let workers = match (f.prefill_workers, f.prefill_gpus) {
        (Some(w), None) => {
            let w = positive("prefill_workers", w)?;
            if product(&[w, worker]) > MAX_WAYS as u64 {
                return Err(invalid(
                    "prefill_workers",
                    format!("{w} workers of {worker} GPUs are more than {MAX_WAYS} GPUs"),
                ));
            }
            w
        }
        (w, Some(g)) => {
            let g = positive("prefill_gpus", g)?;
            if !g.is_multiple_of(worker) {
                return Err(invalid(
                    "prefill_tp",
                    format!("a prefill worker of prefill_tp x prefill_dp = {worker} GPUs must divide prefill_gpus = {g}"),
                ));
            }
            if let Some(w) = w {
                if product(&[positive("prefill_workers", w)?, worker]) != g as u64 {
                    return Err(invalid(
                        "prefill_workers",
                        format!("{w} workers of {worker} GPUs are not prefill_gpus = {g}"),
                    ));
                }
            }
            g / worker
        }
        (None, None) => unreachable!("prefill_given"),
    };
    if !model.heads().is_multiple_of(tp) {
        return Err(invalid(
            "prefill_tp",
            format!(
                "attention TP {tp} must divide the {} attention heads (split a worker into prefill_dp groups instead)",
                model.heads()
            ),
        ));
    }
    let moe = model.moe.is_some();
    let ep = positive(
        "prefill_ep",
        f.prefill_ep.unwrap_or(if moe { worker } else { 1 }),
    )?;
    if !moe && ep > 1 {
        return Err(invalid(
            "prefill_ep",
            format!("{} has no experts: prefill_ep must be 1", model.name),
        ));
    }
    if ep > worker || !worker.is_multiple_of(ep) {
        return Err(invalid(
            "prefill_ep",
            format!("prefill_ep = {ep} must divide a worker's {worker} GPUs"),
        ));
    }
    Ok(Some(Pools {
        prefill_workers: workers,
        prefill_tp: tp,
        prefill_ep: ep,
        prefill_dp: dp,
        decode_gpus: d,
    }))
}

/// GPUs per instance and the TP/EP/DP/PP split, defaults filled in, every constraint checked.
fn resolve_parallelism(
    f: &ScenarioFile,
    system: &System,
    model: &ModelSpec,
    pools: Option<Pools>,
) -> Result<Parallelism, RackError> {
    let moe = model.moe.is_some();
    // A disaggregated decode pool is made of instances of `ep` GPUs.
    let gpus = positive(
        "gpus",
        match (pools, f.gpus) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "gpus",
                    "give either gpus (aggregated) or prefill_gpus + decode_gpus",
                ))
            }
            (Some(p), None) => f.ep.unwrap_or(p.decode_gpus),
            (None, g) => g.unwrap_or(system.gpus),
        },
    )?;
    if let Some(p) = pools {
        if p.decode_gpus % gpus != 0 {
            return Err(invalid("ep", "must divide decode_gpus"));
        }
    }
    let pp = positive("pp", f.pp.unwrap_or(1))?;
    // TP stays within a box of 8 even on NVL72; attention_dp then replaces it for attention.
    let mut default_tp = (gpus / pp).min(system.nvlink_domain).clamp(1, 8);
    while default_tp > 1
        && (!model.heads().is_multiple_of(default_tp) || gpus % (default_tp * pp) != 0)
    {
        default_tp -= 1;
    }
    let tp = positive("tp", f.tp.unwrap_or(default_tp))?;
    let ep = positive("ep", f.ep.unwrap_or(if moe { gpus / pp } else { 1 }))?;
    check_split(gpus, (tp, ep, pp), model)?;
    let dp = positive(
        "dp",
        f.dp.unwrap_or((gpus as u64 / product(&[tp, pp])) as u32),
    )?;
    if product(&[dp, tp, pp]) != gpus as u64 {
        return Err(invalid(
            "dp",
            format!(
                "dp x tp x pp = {} must equal gpus = {gpus}",
                product(&[dp, tp, pp])
            ),
        ));
    }
    Ok(Parallelism {
        gpus,
        tp,
        ep,
        dp,
        pp,
    })
}

/// EP, TP and PP fit the instance's GPUs and the model's experts, heads and layers.
fn check_split(
    gpus: u32,
    (tp, ep, pp): (u32, u32, u32),
    model: &ModelSpec,
) -> Result<(), RackError> {
    let moe = model.moe.is_some();
    if ep > gpus {
        return Err(invalid(
            "ep",
            format!("ep = {ep} is larger than gpus = {gpus}"),
        ));
    }
    if !gpus.is_multiple_of(ep) {
        return Err(invalid(
            "ep",
            format!("ep = {ep} must divide gpus = {gpus}"),
        ));
    }
    // More GPUs than routed experts is how DeepSeek decodes (EP320 for 256: redundant copies of
    // hot experts and the shared expert on GPUs of their own); past two GPUs per expert a GPU
    // would hold a copy no token needs.
    if let Some(m) = &model.moe {
        if ep > 2 * m.routed {
            return Err(invalid(
                "ep",
                format!(
                    "ep = {ep} is more than two GPUs for each of the {} routed experts of {}",
                    m.routed, model.name
                ),
            ));
        }
    }
    if !moe && ep > 1 {
        return Err(invalid(
            "ep",
            format!("{} has no experts: ep must be 1", model.name),
        ));
    }
    let tp_pp = product(&[tp, pp]);
    if tp_pp > gpus as u64 || !(gpus as u64).is_multiple_of(tp_pp) {
        return Err(invalid(
            "tp",
            format!("tp x pp = {tp_pp} must divide gpus = {gpus}"),
        ));
    }
    if !model.heads().is_multiple_of(tp) {
        return Err(invalid(
            "tp",
            format!(
                "tp = {tp} must divide the {} attention heads",
                model.heads()
            ),
        ));
    }
    // Uneven stages are allowed (DeepSeek-V3 trains 61 layers on 16 stages): the largest stage
    // sets the pace, see `Scenario::stage_layers`.
    if pp > model.layers {
        return Err(invalid(
            "pp",
            format!(
                "pp = {pp} is more stages than the {} layers of {}",
                model.layers, model.name
            ),
        ));
    }
    Ok(())
}

/// Exactly one load (batch per GPU, concurrency or a target speed), positive and finite.
fn resolve_load(f: &ScenarioFile) -> Result<Load, RackError> {
    let loads = [
        f.batch_per_gpu.map(Load::BatchPerGpu),
        f.concurrency.map(Load::Concurrency),
        f.target_tokens_per_s_per_user
            .map(Load::TargetTokensPerSPerUser),
    ];
    let given: Vec<Load> = loads.into_iter().flatten().collect();
    let load = match (f.phase, given.as_slice()) {
        (_, [l]) => *l,
        (Phase::Train | Phase::Prefill, []) => Load::BatchPerGpu(1.0),
        (_, []) => {
            return Err(invalid(
                "batch_per_gpu",
                "give exactly one of batch_per_gpu, concurrency, target_tokens_per_s_per_user",
            ))
        }
        _ => {
            return Err(invalid(
                "batch_per_gpu",
                "give only one of batch_per_gpu, concurrency, target_tokens_per_s_per_user",
            ))
        }
    };
    // The limits are far past any deployment (a million sequences per GPU, a billion users, a
    // million tokens/s each) and keep every product the model forms finite.
    let (value, field, max) = match load {
        Load::BatchPerGpu(v) => (v, "batch_per_gpu", 1e6),
        Load::Concurrency(v) => (v, "concurrency", 1e9),
        Load::TargetTokensPerSPerUser(v) => (v, "target_tokens_per_s_per_user", 1e6),
    };
    if !(value.is_finite() && value > 0.0 && value <= max) {
        return Err(invalid(
            field,
            format!("must be a positive number at most {max:e}, got {value:e}"),
        ));
    }

    Ok(load)
}

/// Speculative decoding's settings, for a model and phase that can run them.
fn check_speculative(f: &ScenarioFile, model: &ModelSpec) -> Result<(), RackError> {
    if let Some(s) = f.speculative {
        if !(1..=8).contains(&s.draft_tokens) {
            return Err(invalid("speculative.draft_tokens", "must be 1 to 8"));
        }
        if s.method == SpecMethod::Mtp && model.mtp_modules == 0 {
            return Err(invalid(
                "speculative.method",
                format!("{} has no MTP module; use \"eagle3\"", model.name),
            ));
        }
        if let Some(a) = s.acceptance_length {
            if !(a >= 1.0 && a <= s.draft_tokens as f64 + 1.0) {
                return Err(invalid(
                    "speculative.acceptance_length",
                    "must lie between 1 and draft_tokens + 1",
                ));
            }
        }
        if f.phase == Phase::Train || f.phase == Phase::Prefill {
            return Err(invalid("speculative", "applies to decode and serve only"));
        }
    }

    Ok(())
}

/// SMs reserved for communication: fewer than the GPU has.
fn resolve_comm_sms(f: &ScenarioFile, system: &System) -> Result<u32, RackError> {
    let comm_sms = f.comm_sms.unwrap_or(0);
    if comm_sms >= system.gpu.sms {
        return Err(invalid(
            "comm_sms",
            format!(
                "must be below the {} SMs of a {}",
                system.gpu.sms, system.gpu.name
            ),
        ));
    }
    Ok(comm_sms)
}

/// The training run's batch, sequence length, recomputation and virtual pipeline.
fn resolve_training(f: &ScenarioFile) -> Result<Training, RackError> {
    let seq_len = tokens("seq_len", f.seq_len.unwrap_or(2048))?;
    let training = Training {
        global_batch_tokens: f.global_batch_tokens.unwrap_or(seq_len as f64 * 1024.0),
        seq_len,
        recompute: f.recompute.unwrap_or(Recompute::Selective),
        virtual_pipeline: positive("virtual_pipeline", f.virtual_pipeline.unwrap_or(1))?,
    };
    // Ten billion tokens a step: a thousand times the largest published batches (~16 M).
    const MAX_BATCH_TOKENS: f64 = 1e10;
    let tokens = training.global_batch_tokens;
    if !(tokens.is_finite() && tokens > 0.0 && tokens <= MAX_BATCH_TOKENS) {
        return Err(invalid(
            "global_batch_tokens",
            format!("must be a positive number at most {MAX_BATCH_TOKENS:e}, got {tokens:e}"),
        ));
    }

    Ok(training)
}

/// What one GPU must hold fits its HBM: the weights everywhere; for a prefill worker, also
/// the KV of one packed forward; for training, weights, gradients, the distributed optimizer's
/// share and the activations in flight (`Scenario::training_bytes_per_gpu`).
fn check_fits(s: &Scenario) -> Result<(), RackError> {
    let have = s.system.gpu.hbm_gb * 1e9;
    let gb = |x: f64| x / 1e9;
    let need = s.weight_bytes_per_gpu();
    if need > have {
        return Err(invalid(
            "gpus",
            format!(
                "{} does not fit: {:.0} GB of weights per GPU, {} has {:.0} GB of HBM",
                s.model.name,
                gb(need),
                s.system.gpu.name,
                s.system.gpu.hbm_gb
            ),
        ));
    }
    if let Some(worker) = s.prefill_worker() {
        let weights = worker.weight_bytes_per_gpu();
        let kv = worker.kv_bytes_per_sequence(PACKED_PREFILL_TOKENS as f64);
        if weights + kv > have {
            return Err(invalid(
                "prefill_gpus",
                format!(
                    "a prefill worker of {} GPUs cannot hold {}: {:.0} GB of weights and {:.1} GB of KV for one packed forward per GPU, {} has {:.0} GB of HBM",
                    worker.gpus,
                    s.model.name,
                    gb(weights),
                    gb(kv),
                    s.system.gpu.name,
                    s.system.gpu.hbm_gb
                ),
            ));
        }
    }
    if s.phase == Phase::Train {
        let (state, activations) = s.training_bytes_per_gpu();
        if state + activations > have {
            return Err(invalid(
                "gpus",
                format!(
                    "training does not fit: {:.0} GB of weights, gradients and optimizer state and {:.0} GB of activations per GPU, {} has {:.0} GB of HBM",
                    gb(state),
                    gb(activations),
                    s.system.gpu.name,
                    s.system.gpu.hbm_gb
                ),
            ));
        }
    }
    Ok(())
}

/// Tokens one prefill forward packs (TensorRT-LLM's default `max_num_tokens`).
pub const PACKED_PREFILL_TOKENS: u32 = 8192;

/// Ten million tokens per sequence: ten times the longest published context windows.
const MAX_TOKENS: u32 = 10_000_000;

/// A token count: at least 1, at most `MAX_TOKENS`.
fn tokens(field: &'static str, v: u32) -> Result<u32, RackError> {
    if v == 0 || v > MAX_TOKENS {
        Err(invalid(
            field,
            format!("must be between 1 and {MAX_TOKENS} tokens, got {v}"),
        ))
    } else {
        Ok(v)
    }
}

/// A million GPUs: far past any deployment, and small enough that products of the counts are
/// exact in u64.
const MAX_WAYS: u32 = 1_000_000;

/// A GPU count or a parallel degree: at least 1, at most `MAX_WAYS`.
fn positive(field: &'static str, v: u32) -> Result<u32, RackError> {
    if v == 0 {
        Err(invalid(field, "must be at least 1"))
    } else if v > MAX_WAYS {
        Err(invalid(
            field,
            format!("must be at most {MAX_WAYS}, got {v}"),
        ))
    } else {
        Ok(v)
    }
}

/// The product of parallel degrees, exact (each is at most `MAX_WAYS`).
fn product(ways: &[u32]) -> u64 {
    ways.iter().map(|&w| w as u64).product()
}

impl Scenario {
    pub fn from_text(path: &str, text: &str) -> Result<Scenario, RackError> {
        Scenario::resolve(ScenarioFile::parse(path, text)?)
    }

    pub fn resolve(f: ScenarioFile) -> Result<Scenario, RackError> {
        let mut system = System::by_id(&f.system)?;
        if let Some(h) = &f.hardware {
            h.apply(&mut system)?;
        }
        let model = ModelSpec::by_id(&f.model)?;
        let optimizations = f
            .optimizations
            .iter()
            .fold(Optimizations::none(), |s, &o| s.with(o));
        let pools = resolve_pools(&f, &model)?;
        let Parallelism {
            gpus,
            tp,
            ep,
            dp,
            pp,
        } = resolve_parallelism(&f, &system, &model, pools)?;
        let load = resolve_load(&f)?;
        check_speculative(&f, &model)?;
        let comm_sms = resolve_comm_sms(&f, &system)?;
        let training = resolve_training(&f)?;
        let weights = f.weights.unwrap_or(Precision::Fp8);
        let s = Scenario {
            system,
            model,
            phase: f.phase,
            weights,
            attention_weights: f.attention_weights.unwrap_or(weights.min(Precision::Fp8)),
            activations: f.activations.unwrap_or(weights.min(Precision::Fp8)),
            kv_cache: f.kv_cache.unwrap_or(Precision::Fp8),
            gpus,
            tp,
            ep,
            dp,
            pp,
            input_tokens: tokens("input_tokens", f.input_tokens.unwrap_or(1024))?,
            output_tokens: tokens("output_tokens", f.output_tokens.unwrap_or(1024))?,
            load,
            optimizations,
            speculative: f.speculative,
            pools,
            training,
            comm_sms,
            file: f,
        };
        check_fits(&s)?;
        Ok(s)
    }

    /// One prefill worker of a disaggregated deployment: `prefill_dp` attention groups of
    /// `prefill_tp` GPUs, the experts over `prefill_ep` of them, no pipeline, no speculation.
    pub fn prefill_worker(&self) -> Option<Scenario> {
        let pools = self.pools?;
        let mut p = self.clone();
        p.gpus = pools.prefill_worker_gpus();
        p.tp = pools.prefill_tp;
        p.ep = pools.prefill_ep;
        p.dp = pools.prefill_dp;
        p.pp = 1;
        p.optimizations = Optimization::EVERY
            .iter()
            .filter(|&&o| o != Optimization::AttentionDp && self.optimizations.has(o))
            .fold(Optimizations::none(), |set, &o| set.with(o));
        p.speculative = None;
        p.pools = None;
        Some(p)
    }

    /// Training memory of one GPU, bytes: (weights, gradients and optimizer state; activations).
    /// Mixed precision keeps BF16 weights and gradients (2 + 2 bytes per parameter) and FP32
    /// master weights and Adam moments (12 bytes) sharded over the data-parallel group (the
    /// distributed optimizer). Activations per layer and micro-batch: 34 x seq x hidden / tp
    /// bytes with selective recomputation, 2 x seq x hidden (the layer input) with full
    /// (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    /// Models"); the first pipeline stage holds `pp` micro-batches in flight (1F1B).
    pub fn training_bytes_per_gpu(&self) -> (f64, f64) {
        let params = self.weight_bytes_per_gpu() / self.weights.weight_bytes();
        let state = params * (2.0 + 2.0 + 12.0 / self.dp as f64);
        let (seq, hidden) = (self.training.seq_len as f64, self.model.hidden as f64);
        let per_layer = match self.training.recompute {
            Recompute::Selective => 34.0 * seq * hidden / self.tp as f64,
            Recompute::Full => 2.0 * seq * hidden,
        };
        let micro_batches = (self.training.global_batch_tokens / seq / self.dp as f64).max(1.0);
        let in_flight = (self.pp as f64).min(micro_batches);
        let layers = self.model.layers.div_ceil(self.pp) as f64;
        (state, per_layer * layers * in_flight)
    }

    /// Attention runs data-parallel (each GPU its own sequences, whole attention weights).
    pub fn attention_tp(&self) -> u32 {
        if self.optimizations.has(Optimization::AttentionDp) {
            1
        } else {
            self.tp
        }
    }

    /// Precision of everything but the routed experts: FP4 checkpoints keep attention and dense
    /// layers in FP8 (nvidia/DeepSeek-R1-FP4: the MoE layers hold 97% of the weights).
    pub fn dense_weights(&self) -> Precision {
        self.weights.min(Precision::Fp8)
    }

    /// The largest pipeline stage, (dense layers, MoE layers): `ceil(layers / pp)` layers, of
    /// which MoE in the model's proportion, rounded up (MoE layers are the costlier kind). With
    /// `pp = 1` it is the whole model.
    pub fn stage_layers(&self) -> (u32, u32) {
        let m = &self.model;
        let layers = m.layers.div_ceil(self.pp);
        let moe = (layers as u64 * m.moe_layers() as u64).div_ceil(m.layers as u64) as u32;
        let moe = moe.min(m.moe_layers()).min(layers);
        (layers - moe, moe)
    }

    /// Weight bytes one GPU holds.
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        let m = &self.model;
        let layer_share = self.model.layers.div_ceil(self.pp) as f64 / m.layers as f64;
        let experts = m.moe.as_ref().map_or(0.0, |moe| {
            let per_rank = (moe.routed as f64 / self.ep as f64).ceil();
            let moe_tp = (self.gpus / self.pp / self.ep).max(1) as f64;
            moe.layers as f64 * per_rank * m.expert_params() / moe_tp
        });
        let attention_tp = self.attention_tp() as f64;
        let attention = m.layers as f64 * m.attention_params();
        (experts * self.weights.weight_bytes()
            + attention / attention_tp * self.attention_weights.weight_bytes()
            + (m.other_params() - attention) / attention_tp * self.dense_weights().weight_bytes())
            * layer_share
    }

    /// KV-cache bytes per sequence of `tokens` on one GPU (MLA's latent is not split by TP).
    pub fn kv_bytes_per_sequence(&self, tokens: f64) -> f64 {
        let m = &self.model;
        let split = match m.attention {
            super::models::Attention::Mla { .. } => 1.0,
            super::models::Attention::Gqa { kv_heads, .. } => {
                self.attention_tp().min(kv_heads) as f64
            }
        };
        tokens * m.layers.div_ceil(self.pp) as f64 * m.kv_elems_per_token_layer() / split
            * self.kv_cache.kv_bytes()
    }

    /// The most sequences one GPU can hold: HBM left after weights (and 10% for activations
    /// and workspace) over the KV of a full-length sequence.
    pub fn max_batch_per_gpu(&self) -> f64 {
        let free = self.system.gpu.hbm_gb * 1e9 * 0.9 - self.weight_bytes_per_gpu();
        let per_seq =
            self.kv_bytes_per_sequence(self.input_tokens as f64 + self.output_tokens as f64);
        // Under attention TP every rank of the group holds its share of the group's sequences.
        let group = match self.model.attention {
            super::models::Attention::Mla { .. } => self.attention_tp() as f64,
            super::models::Attention::Gqa { .. } => 1.0,
        };
        // A pipeline keeps `pp` micro-batches in flight, one per stage, and every stage holds
        // the KV of all of them for its layers.
        (free / per_seq / group / self.pp as f64).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(toml: &str) -> Result<Scenario, RackError> {
        Scenario::from_text("s.toml", toml)
    }

    const R1: &str = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                      weights = \"fp4\"\nbatch_per_gpu = 8\n";

    #[test]
    fn defaults_fill_a_whole_rack() {
        let s = resolve(R1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.gpus, s.tp, s.ep, s.dp, s.pp), (72, 8, 72, 9, 1));
        assert_eq!(s.activations, Precision::Fp8);
        assert_eq!(s.attention_weights, Precision::Fp8);
        assert_eq!((s.input_tokens, s.output_tokens), (1024, 1024));
        // A dense model gets no expert parallelism; tp falls to a divisor of the heads.
        let gpt = resolve(
            "system = \"hgx-h100\"\nmodel = \"gpt3-175b\"\nphase = \"train\"\ngpus = 64\npp = 8\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((gpt.ep, gpt.tp, gpt.dp), (1, 8, 1));
    }

    #[test]
    fn all_means_every_optimization() {
        let s =
            resolve(&format!("{R1}optimizations = [\"all\"]\n")).unwrap_or_else(|e| panic!("{e}"));
        for o in Optimization::EVERY {
            assert!(s.optimizations.has(o), "{}", o.name());
        }
        assert_eq!(s.attention_tp(), 1);
    }

    #[test]
    fn impossible_scenarios_name_their_field() {
        let field = |toml: &str| match resolve(toml) {
            Err(RackError::Invalid { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(field(&format!("{R1}concurrency = 5\n")), "batch_per_gpu");
        assert_eq!(field(&format!("{R1}tp = 3\n")), "tp");
        assert_eq!(field(&format!("{R1}gpus = 8\nep = 3\n")), "ep");
        assert_eq!(
            field(&R1.replace("batch_per_gpu = 8", "batch_per_gpu = -1")),
            "batch_per_gpu"
        );
        assert_eq!(field(&format!("{R1}comm_sms = 148\n")), "comm_sms");
        assert_eq!(field(&format!("{R1}prefill_gpus = 4\n")), "decode_gpus");
        assert_eq!(
            field(&format!(
                "{R1}[speculative]\nmethod = \"mtp\"\ndraft_tokens = 0\n"
            )),
            "speculative.draft_tokens"
        );
        let maverick = "system = \"dgx-b200\"\nmodel = \"llama4-maverick\"\nphase = \"decode\"\n\
                        batch_per_gpu = 1\n[speculative]\nmethod = \"mtp\"\ndraft_tokens = 2\n";
        assert_eq!(field(maverick), "speculative.method");
        // 671B in BF16 does not fit in 8 x 80 GB.
        assert_eq!(
            field(
                "system = \"hgx-h100\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                   weights = \"bf16\"\nbatch_per_gpu = 1\n"
            ),
            "gpus"
        );
    }

    /// Prefill pools as workers x TP x DP with their own EP: three TP 4 workers beside one
    /// decode group, or one 12-GPU worker of attention DP that no single TP could split.
    #[test]
    fn prefill_pools_are_workers_of_tp_dp_and_ep() {
        let serve = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"serve\"\n\
                     weights = \"fp4\"\ndecode_gpus = 32\nep = 32\nconcurrency = 512\n";
        let three = resolve(&format!("{serve}prefill_gpus = 12\nprefill_tp = 4\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let p = three.pools.unwrap_or_else(|| panic!("pools"));
        assert_eq!(
            (p.prefill_workers, p.prefill_tp, p.prefill_dp, p.prefill_ep),
            (3, 4, 1, 4)
        );
        let dep = resolve(&format!(
            "{serve}prefill_workers = 1\nprefill_tp = 1\nprefill_dp = 12\nprefill_ep = 12\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let p = dep.pools.unwrap_or_else(|| panic!("pools"));
        assert_eq!((p.prefill_gpus(), p.prefill_worker_gpus()), (12, 12));
        let worker = dep.prefill_worker().unwrap_or_else(|| panic!("worker"));
        assert_eq!(
            (worker.gpus, worker.tp, worker.ep, worker.dp),
            (12, 1, 12, 12)
        );
        assert_eq!(worker.attention_tp(), 1);
        let field = |toml: String| match resolve(&toml) {
            Err(RackError::Invalid { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(
            field(format!(
                "{serve}prefill_gpus = 12\nprefill_workers = 2\nprefill_tp = 4\n"
            )),
            "prefill_workers"
        );
        assert_eq!(
            field(format!(
                "{serve}prefill_gpus = 8\nprefill_tp = 4\nprefill_ep = 3\n"
            )),
            "prefill_ep"
        );
        assert_eq!(field(format!("{R1}prefill_tp = 4\n")), "prefill_tp");
    }

    /// `[hardware]` overrides any datasheet field and is checked like every other number.
    #[test]
    fn hardware_what_ifs_override_the_catalogue() {
        let s = resolve(&format!(
            "{R1}[hardware]\nhbm_gb = 288\nfp4_tflops = 15000\nnvlink_domain = 144\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.system.gpu.hbm_gb, 288.0);
        assert_eq!(s.system.gpu.fp4_tflops, Some(15000.0));
        assert_eq!(s.system.nvlink_domain, 144);
        assert_eq!(
            s.system.gpu.fp8_tflops, 5000.0,
            "fields left out keep the catalogue's"
        );
        let echo = s.file.hardware.map(|h| h.echo()).unwrap_or_default();
        assert_eq!(echo.len(), 3);
        assert_eq!(echo["hbm_gb"], 288.0);
        for bad in [
            "hbm_gb = -1",
            "sms = 0",
            "nvlink_gb_s = inf",
            "hbm_tb_s = 1e9",
        ] {
            let err = resolve(&format!("{R1}[hardware]\n{bad}\n"));
            assert!(
                matches!(err, Err(RackError::Invalid { field, .. }) if field.starts_with("hardware.")),
                "{bad}: {err:?}"
            );
        }
    }

    /// Uneven pipelines: 61 layers on 16 stages run at the pace of the 4-layer stage, and more
    /// stages than layers are refused.
    #[test]
    fn pipelines_may_be_uneven() {
        let train = "system = \"hgx-h800\"\nmodel = \"deepseek-v3\"\nphase = \"train\"\n\
                     weights = \"fp8\"\ntp = 1\nep = 64\n";
        let s =
            resolve(&format!("{train}gpus = 2048\npp = 16\n")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.stage_layers(), (0, 4));
        let whole = resolve(R1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(whole.stage_layers(), (3, 58));
        assert!(matches!(
            resolve(&format!("{train}gpus = 8192\npp = 128\n")),
            Err(RackError::Invalid { field: "pp", .. })
        ));
    }

    #[test]
    fn kv_cache_limits_the_batch() {
        let s = resolve(R1).unwrap_or_else(|e| panic!("{e}"));
        let per_seq = s.kv_bytes_per_sequence(2048.0);
        // 61 layers x 576 elements x 1 byte (FP8) per token.
        assert_eq!(per_seq, 2048.0 * 61.0 * 576.0);
        assert!(s.max_batch_per_gpu() > 0.0);
    }
}
