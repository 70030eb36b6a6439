//! From one step to a deployment: how many sequences each GPU carries, what each user sees, and
//! what the rack earns. Decode and prefill evaluate one model instance; serve adds the queueing
//! between a prefill pool and a decode pool (or their sharing of one pool).

use serde::Serialize;

use super::evaluation::{finite, Evaluation};
use super::hardware::Protocol;
use super::mechanisms;
use super::params::Params;
use super::scenario::{Load, Optimization, Phase, Scenario, PACKED_PREFILL_TOKENS};
use super::step::{self, Shape, Step};
use super::train;
use super::RackError;

/// Decode state at `batch` sequences per GPU: the step and tokens per step per sequence.
fn decode_at(s: &Scenario, p: &Params, batch: f64) -> (Step, f64) {
    let context = s.input_tokens as f64 + s.output_tokens as f64 / 2.0;
    step::decode_step(s, p, batch, context)
}

fn user_rate(step: &Step, accepted: f64) -> f64 {
    accepted * 1e6 / step.time_us
}

/// Tensor-core peak the utilization is measured against: the routed experts' GEMM precision.
fn peak_flops_s(s: &Scenario) -> f64 {
    s.system
        .gpu
        .flops(super::precision::Precision::gemm(s.weights, s.activations))
}

fn utilization(s: &Scenario, step: &Step) -> (f64, f64) {
    let secs = step.time_us * 1e-6;
    let mfu = step.flops / (secs * peak_flops_s(s));
    let mbu = step.hbm_bytes / (secs * s.system.gpu.hbm_bytes_s());
    (mfu, mbu)
}

/// The largest `x` in (0, hi] for which `ok(x)` holds, for `ok` true below some threshold.
fn largest(hi: f64, ok: impl Fn(f64) -> bool) -> Option<f64> {
    let mut lo = hi * 1e-6;
    if !ok(lo) {
        return None;
    }
    if ok(hi) {
        return Some(hi);
    }
    let mut hi = hi;
    // 40 halvings of a 1e6 range in log space: 1e-11 relative, far below any figure's error.
    for _ in 0..40 {
        let mid = (lo * hi).sqrt();
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

fn prefill_shape(s: &Scenario) -> Shape {
    Shape {
        batch: 1.0 / s.attention_tp() as f64,
        tokens: s.input_tokens as f64,
        context: s.input_tokens as f64 / 2.0,
    }
}

/// Evaluates one scenario.
pub fn eval(s: &Scenario, p: &Params) -> Result<Evaluation, RackError> {
    finite(match s.phase {
        Phase::Decode => decode(s, p)?,
        Phase::Prefill => prefill(s, p),
        Phase::Serve => serve(s, p)?,
        Phase::Train => train::train(s, p),
    })
}

fn decode_batch(s: &Scenario, p: &Params) -> Result<f64, RackError> {
    let max = s.max_batch_per_gpu();
    if max <= 0.0 {
        return Err(RackError::Invalid {
            field: "gpus",
            message: "no HBM is left for the KV cache after the weights".into(),
        });
    }
    match s.load {
        Load::BatchPerGpu(b) if b > max => Err(RackError::Invalid {
            field: "batch_per_gpu",
            message: format!("{b} sequences per GPU need more KV cache than fits ({max:.1} do)"),
        }),
        Load::BatchPerGpu(b) => Ok(b),
        Load::Concurrency(c) if c / s.gpus as f64 > max => Err(RackError::Invalid {
            field: "concurrency",
            message: format!(
                "{c} requests are {:.1} sequences per GPU, more KV cache than fits ({max:.1} do)",
                c / s.gpus as f64
            ),
        }),
        Load::Concurrency(c) => Ok(c / s.gpus as f64),
        Load::TargetTokensPerSPerUser(target) => largest(max, |b| {
            let (step, acc) = decode_at(s, p, b);
            user_rate(&step, acc) >= target
        })
        .ok_or_else(|| out_of_reach(target, user_rate_at_min(s, p))),
    }
}

fn user_rate_at_min(s: &Scenario, p: &Params) -> f64 {
    let (step, acc) = decode_at(s, p, 1.0 / s.gpus as f64);
    user_rate(&step, acc)
}

fn out_of_reach(target: f64, best: f64) -> RackError {
    RackError::Invalid {
        field: "target_tokens_per_s_per_user",
        message: format!("{target} is out of reach: one user alone gets {best:.1} tokens/s"),
    }
}

fn decode(s: &Scenario, p: &Params) -> Result<Evaluation, RackError> {
    let b = decode_batch(s, p)?;
    let (step, acc) = decode_at(s, p, b);
    let user = user_rate(&step, acc);
    let out = b * user;
    let io = (s.input_tokens as f64 + s.output_tokens as f64) / s.output_tokens as f64;
    Ok(Evaluation {
        tokens_per_s_per_user: user,
        output_tokens_per_s_per_gpu: out,
        output_tokens_per_s_per_decode_gpu: out,
        total_tokens_per_s_per_gpu: out * io,
        tokens_per_s_per_gpu: out,
        users_per_rack: out * s.system.gpus as f64 / user,
        accepted_tokens_per_step: acc,
        ..base(s, &step, b)
    })
}

/// The fields every phase fills the same way; callers override the rest.
fn base(s: &Scenario, step: &Step, batch: f64) -> Evaluation {
    let (mfu, mbu) = utilization(s, step);
    Evaluation {
        system: s.system.id,
        model: s.model.id,
        phase: s.phase,
        tokens_per_s_per_user: 0.0,
        output_tokens_per_s_per_gpu: 0.0,
        output_tokens_per_s_per_decode_gpu: 0.0,
        total_tokens_per_s_per_gpu: 0.0,
        tokens_per_s_per_gpu: 0.0,
        users_per_rack: 0.0,
        mfu,
        mbu,
        step_time_us: step.time_us,
        batch_per_gpu: batch,
        concurrency: batch * s.gpus as f64,
        gpus: s.gpus,
        breakdown_us: step.breakdown,
        kernels_per_step: step.kernels,
        accepted_tokens_per_step: 0.0,
        ttft_ms: 0.0,
        ttft_ms_p50: 0.0,
        ttft_ms_p99: 0.0,
        copy_concat_us_per_layer: 0.0,
        estimated: true,
        hardware_overrides: s.file.hardware.map(|h| h.echo()).unwrap_or_default(),
    }
}

fn prefill(s: &Scenario, p: &Params) -> Evaluation {
    let b = match s.load {
        Load::BatchPerGpu(b) => b,
        Load::Concurrency(c) => c / s.gpus as f64,
        Load::TargetTokensPerSPerUser(_) => 1.0 / s.attention_tp() as f64,
    };
    let shape = Shape {
        batch: b,
        ..prefill_shape(s)
    };
    let step = step::forward_step(s, p, shape, true);
    let input = b * s.input_tokens as f64 * 1e6 / step.time_us;
    Evaluation {
        total_tokens_per_s_per_gpu: input,
        tokens_per_s_per_gpu: input,
        ttft_ms: step.time_us / 1e3,
        ttft_ms_p50: step.time_us / 1e3,
        ttft_ms_p99: step.time_us / 1e3,
        copy_concat_us_per_layer: step.copy_concat_us,
        ..base(s, &step, b)
    }
}

/// A serving deployment at `b` sequences per decode GPU.
struct ServePoint {
    b: f64,
    step: Step,
    accepted: f64,
    /// Requests finishing per second.
    rate: f64,
    ttft_us: f64,
    /// The prefill queue's utilization (0 when aggregated: no queue), for the TTFT quantiles,
    /// which only the chosen point computes (`Deployment::ttft_quantile_us`).
    rho: f64,
    concurrency: f64,
}

struct Deployment<'a> {
    s: &'a Scenario,
    p: &'a Params,
    decode_gpus: f64,
    prefill_gpus: f64,
    /// One request's prefill, µs, and how many requests the prefill side completes per second.
    prefill_us: f64,
    prefill_rate: f64,
    /// Aggregated serving: the deployment's time spent on prefill per request, µs.
    prefill_share_us: f64,
    /// Disaggregated: moving one request's KV cache from its prefill worker to the decode pool
    /// (`kv_transfer_us`), µs; 0 when aggregated.
    kv_transfer_us: f64,
}

/// One request's KV cache sent from the prefill worker that computed it to a decode instance:
/// every layer's cache of its `input_tokens`, leaving from the `prefill_tp` GPUs of its attention
/// group in parallel, over NVLink when both pools fit one NVLink domain, else over the network
/// (a point-to-point send per GPU, `mechanisms::p2p_us`). It adds to the time to first token.
fn kv_transfer_us(s: &Scenario, worker: &Scenario, p: &Params) -> f64 {
    let Some(pools) = s.pools else {
        return 0.0;
    };
    let group = worker.attention_tp() as f64;
    // The worker's KV per sequence is this GPU's share (MLA's latent is whole on every rank of
    // a TP group; each rank sends 1/tp of it).
    let bytes = worker.kv_bytes_per_sequence(s.input_tokens as f64) / group;
    let inside = pools.prefill_gpus() + pools.decode_gpus <= s.system.nvlink_domain;
    let (gb_s, latency) = if inside {
        (s.system.nvlink_gb_s, Protocol::Simple.nvlink_latency_us())
    } else {
        (
            s.system.scale_out_gb_s,
            Protocol::Simple.network_latency_us(),
        )
    };
    mechanisms::p2p_us(
        bytes,
        gb_s * 1e9 * p.link_eff,
        latency,
        p.collective_base_us,
    )
}

/// Requests one prefill forward packs (up to `PACKED_PREFILL_TOKENS`).
fn packed_requests(s: &Scenario) -> f64 {
    (PACKED_PREFILL_TOKENS / s.input_tokens.max(1)).max(1) as f64
}

impl<'a> Deployment<'a> {
    fn new(s: &'a Scenario, p: &'a Params) -> Self {
        match s.pools {
            Some(pools) => {
                let inst = s.prefill_worker().unwrap_or_else(|| s.clone());
                let one = step::forward_step(&inst, p, prefill_shape(&inst), true);
                let per_forward = packed_requests(s);
                // Each attention group of the worker packs its own forward.
                let packed = step::forward_step(
                    &inst,
                    p,
                    Shape {
                        batch: per_forward / inst.attention_tp() as f64,
                        ..prefill_shape(&inst)
                    },
                    true,
                );
                let groups = (pools.prefill_workers * pools.prefill_dp) as f64;
                Deployment {
                    s,
                    p,
                    decode_gpus: pools.decode_gpus as f64,
                    prefill_gpus: pools.prefill_gpus() as f64,
                    prefill_us: one.time_us,
                    prefill_rate: groups * per_forward * 1e6 / packed.time_us,
                    prefill_share_us: 0.0,
                    kv_transfer_us: kv_transfer_us(s, &inst, p),
                }
            }
            None => {
                let one = step::forward_step(s, p, prefill_shape(s), true);
                // Every attention group (each GPU under attention DP, else the TP group) prefills
                // its own requests, packed like the disaggregated pool's; one such forward over
                // the whole deployment completes per_forward requests in each group.
                let per_forward = packed_requests(s);
                let attention_tp = s.attention_tp() as f64;
                let packed = step::forward_step(
                    s,
                    p,
                    Shape {
                        batch: per_forward / attention_tp,
                        ..prefill_shape(s)
                    },
                    true,
                );
                let groups = s.gpus as f64 / attention_tp;
                Deployment {
                    s,
                    p,
                    decode_gpus: s.gpus as f64,
                    prefill_gpus: 0.0,
                    prefill_us: one.time_us,
                    prefill_rate: f64::INFINITY,
                    prefill_share_us: packed.time_us / (per_forward * groups),
                    kv_transfer_us: 0.0,
                }
            }
        }
    }

    fn at(&self, b: f64) -> ServePoint {
        let (step, accepted) = decode_at(self.s, self.p, b);
        let osl = self.s.output_tokens as f64;
        let in_decode = b * self.decode_gpus;
        let per_request_us = osl / accepted * step.time_us;
        let (rate, ttft_us, rho, tpot_stretch) = if self.s.pools.is_some() {
            let rate = in_decode / per_request_us * 1e6;
            // An M/D/1 queue in front of the prefill pool: service D = one request's prefill,
            // utilization rho; its mean wait is D rho / (2 (1 - rho)).
            // The KV cache's move to the decode pool follows the prefill.
            let rho = (rate / self.prefill_rate).min(0.999);
            let (d, moved) = (self.prefill_us, self.kv_transfer_us);
            let wait = d * rho / (2.0 * (1.0 - rho));
            (rate, d + moved + wait, rho, 1.0)
        } else {
            // Aggregated: prefills interrupt decoding; a fraction f of the GPU time goes to them.
            // A request's prefill starts at once (no queue is modeled, rho = 0), so every
            // quantile of the TTFT is the prefill itself.
            let x = in_decode / per_request_us * 1e6;
            let rate = x / (1.0 + x * self.prefill_share_us * 1e-6);
            let f = rate * self.prefill_share_us * 1e-6;
            (rate, self.prefill_us, 0.0, 1.0 / (1.0 - f))
        };
        let mut step = step;
        if tpot_stretch != 1.0 {
            step.breakdown.compute_us *= tpot_stretch;
            step.time_us *= tpot_stretch;
        }
        ServePoint {
            b,
            step,
            accepted,
            rate,
            ttft_us,
            rho,
            concurrency: in_decode + rate * ttft_us * 1e-6,
        }
    }

    /// The `q`-quantile of a point's time to first token, µs: the prefill, the KV transfer and
    /// the M/D/1 wait in front of the prefill pool.
    fn ttft_quantile_us(&self, pt: &ServePoint, q: f64) -> f64 {
        let d = self.prefill_us;
        d + self.kv_transfer_us + mechanisms::md1_wait_quantile_us(pt.rho, d, q)
    }

    /// The decode batch at which the prefill pool saturates (or the KV limit).
    fn max_batch(&self) -> f64 {
        let kv = self.s.max_batch_per_gpu();
        if self.prefill_rate.is_infinite() {
            return kv;
        }
        largest(kv, |b| self.at(b).rate < self.prefill_rate * 0.99).unwrap_or(kv * 1e-6)
    }

    fn evaluation(&self, pt: &ServePoint, queued: f64) -> Evaluation {
        let s = self.s;
        let gpus = self.decode_gpus + self.prefill_gpus;
        let user = user_rate(&pt.step, pt.accepted);
        let out = pt.rate * s.output_tokens as f64 / gpus;
        let total = pt.rate * (s.input_tokens as f64 + s.output_tokens as f64) / gpus;
        Evaluation {
            tokens_per_s_per_user: user,
            output_tokens_per_s_per_gpu: out,
            output_tokens_per_s_per_decode_gpu: pt.rate * s.output_tokens as f64 / self.decode_gpus,
            total_tokens_per_s_per_gpu: total,
            tokens_per_s_per_gpu: total,
            users_per_rack: out * s.system.gpus as f64 / user,
            concurrency: pt.concurrency + queued,
            gpus: gpus as u32,
            accepted_tokens_per_step: pt.accepted,
            ttft_ms: (pt.ttft_us + queued / pt.rate * 1e6) / 1e3,
            ttft_ms_p50: (self.ttft_quantile_us(pt, 0.5) + queued / pt.rate * 1e6) / 1e3,
            ttft_ms_p99: (self.ttft_quantile_us(pt, 0.99) + queued / pt.rate * 1e6) / 1e3,
            ..base(s, &pt.step, pt.b)
        }
    }
}

fn serve(s: &Scenario, p: &Params) -> Result<Evaluation, RackError> {
    let dep = Deployment::new(s, p);
    let max = dep.max_batch();
    let (b, queued) = match s.load {
        Load::BatchPerGpu(b) if b > max => {
            return Err(RackError::Invalid {
                field: "batch_per_gpu",
                message: format!(
                    "{b} sequences per decode GPU need more KV cache than fits ({max:.1} do)"
                ),
            })
        }
        Load::BatchPerGpu(b) => (b, 0.0),
        Load::Concurrency(c) => {
            let top = dep.at(max);
            if c >= top.concurrency {
                // Beyond saturation the extra requests wait in the prefill queue.
                (max, c - top.concurrency)
            } else {
                (
                    largest(max, |b| dep.at(b).concurrency <= c).unwrap_or(max * 1e-6),
                    0.0,
                )
            }
        }
        Load::TargetTokensPerSPerUser(target) => {
            let ok = |b: f64| {
                let pt = dep.at(b);
                user_rate(&pt.step, pt.accepted) >= target
            };
            let b = largest(max, ok).ok_or_else(|| {
                let pt = dep.at(max * 1e-6);
                out_of_reach(target, user_rate(&pt.step, pt.accepted))
            })?;
            (b, 0.0)
        }
    };
    Ok(dep.evaluation(&dep.at(b), queued))
}

/// The throughput-interactivity curve: `points` loads from one sequence to the memory limit
/// (decode) or to prefill saturation (serve), log-spaced.
pub fn sweep(s: &Scenario, p: &Params, points: usize) -> Result<Vec<Evaluation>, RackError> {
    let points = points.max(2);
    let (lo, hi, serve) = match s.phase {
        Phase::Decode => (1.0 / s.gpus as f64, s.max_batch_per_gpu(), None),
        Phase::Serve => {
            let dep = Deployment::new(s, p);
            let max = dep.max_batch();
            (1.0 / dep.decode_gpus, max, Some(dep))
        }
        _ => {
            return Err(RackError::Invalid {
                field: "phase",
                message: "a sweep over concurrency needs phase = \"decode\" or \"serve\"".into(),
            })
        }
    };
    if hi <= lo {
        return Err(RackError::Invalid {
            field: "gpus",
            message: "the KV cache has no room for even one sequence per instance".into(),
        });
    }
    (0..points)
        .map(|i| {
            let b = lo * (hi / lo).powf(i as f64 / (points - 1) as f64);
            match &serve {
                Some(dep) => Ok(dep.evaluation(&dep.at(b), 0.0)),
                None => {
                    let mut one = s.clone();
                    one.load = Load::BatchPerGpu(b);
                    decode(&one, p)
                }
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(finite)
}

/// One row of a waterfall: the scenario with optimizations added up to this one.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WaterfallStep {
    pub optimization: &'static str,
    pub mfu: f64,
    pub mfu_change: f64,
    pub users_per_rack: f64,
    pub users_per_rack_change: f64,
    pub tokens_per_s_per_user: f64,
    pub output_tokens_per_s_per_gpu: f64,
    pub step_time_us: f64,
    /// False where a target speed per user is out of reach at this step: no user is served at
    /// that speed, so users per rack is 0.
    pub target_met: bool,
}

/// `eval`, except that a target speed out of reach gives the one-user evaluation with no users
/// served instead of an error (a waterfall's early steps often cannot meet the target).
fn eval_reachable(s: &Scenario, p: &Params) -> Result<Evaluation, RackError> {
    match eval(s, p) {
        Err(RackError::Invalid {
            field: "target_tokens_per_s_per_user",
            ..
        }) => {
            let mut one = s.clone();
            one.load = Load::BatchPerGpu(1.0 / s.gpus as f64);
            let mut e = eval(&one, p)?;
            e.users_per_rack = 0.0;
            e.output_tokens_per_s_per_gpu = 0.0;
            e.output_tokens_per_s_per_decode_gpu = 0.0;
            e.total_tokens_per_s_per_gpu = 0.0;
            Ok(e)
        }
        other => other,
    }
}

/// Adds the scenario's optimizations one at a time, in its order, from none at all.
pub fn waterfall(s: &Scenario, p: &Params) -> Result<Vec<WaterfallStep>, RackError> {
    let order: Vec<Optimization> = s
        .file
        .optimizations
        .iter()
        .flat_map(|&o| {
            if o == Optimization::All {
                Optimization::EVERY.to_vec()
            } else {
                vec![o]
            }
        })
        .collect();
    if order.is_empty() {
        return Err(RackError::Invalid {
            field: "optimizations",
            message: "a waterfall needs at least one optimization to add".into(),
        });
    }
    let mut current = s.clone();
    current.optimizations = super::scenario::Optimizations::none();
    let mut before = eval_reachable(&current, p)?;
    let mut out = Vec::new();
    for o in order {
        if current.optimizations.has(o) {
            continue;
        }
        current.optimizations = current.optimizations.with(o);
        let after = eval_reachable(&current, p)?;
        out.push(WaterfallStep {
            optimization: o.name(),
            mfu: after.mfu,
            mfu_change: after.mfu - before.mfu,
            users_per_rack: after.users_per_rack,
            users_per_rack_change: after.users_per_rack - before.users_per_rack,
            tokens_per_s_per_user: after.tokens_per_s_per_user,
            output_tokens_per_s_per_gpu: after.output_tokens_per_s_per_gpu,
            step_time_us: after.step_time_us,
            target_met: after.users_per_rack > 0.0,
        });
        before = after;
    }
    finite(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(toml: &str) -> Scenario {
        Scenario::from_text("t.toml", toml).unwrap_or_else(|e| panic!("{e}"))
    }

    fn eval_ok(s: &Scenario) -> Evaluation {
        eval(s, &Params::fitted()).unwrap_or_else(|e| panic!("{e}"))
    }

    const DISAGG: &str = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"serve\"\n\
        weights = \"fp4\"\nprefill_gpus = 8\nprefill_tp = 4\ndecode_gpus = 32\nep = 32\n\
        optimizations = [\"all\"]\n";

    /// Little's law holds: requests in flight = rate x time in the system, and the metrics keep
    /// their definitions (total counts input and output tokens over all 40 GPUs).
    #[test]
    fn disaggregated_serving_accounts_for_both_pools() {
        let e = eval_ok(&scenario(&format!("{DISAGG}concurrency = 256\n")));
        assert_eq!(e.gpus, 40);
        assert!(
            (e.concurrency - 256.0).abs() / 256.0 < 1e-3,
            "{}",
            e.concurrency
        );
        let ratio = e.total_tokens_per_s_per_gpu / e.output_tokens_per_s_per_gpu;
        assert!((ratio - 2.0).abs() < 1e-9, "1K in + 1K out: {ratio}");
        assert!(e.ttft_ms > 0.0);
    }

    /// The KV cache of a 1K prompt (61 layers x 576 FP8 bytes per token, 36 MB) leaves a TP 4
    /// prefill worker over NVLink inside the NVL72 (a quarter per GPU): about 10 µs, part of the
    /// TTFT; on 8-GPU boxes the pools sit in different boxes and it crosses the network instead.
    #[test]
    fn the_kv_cache_moves_from_prefill_to_decode() {
        let p = Params::fitted();
        let s = scenario(&format!("{DISAGG}concurrency = 256\n"));
        let worker = s.prefill_worker().unwrap_or_else(|| panic!("a worker"));
        let bytes = 1024.0 * 61.0 * 576.0 / 4.0;
        let expect = p.collective_base_us + 3.4 + 1e6 * bytes / (900e9 * p.link_eff);
        assert!((kv_transfer_us(&s, &worker, &p) - expect).abs() < 1e-9);
        let b200 =
            scenario(&format!("{DISAGG}concurrency = 256\n").replace("gb200-nvl72", "dgx-b200"));
        let worker = b200.prefill_worker().unwrap_or_else(|| panic!("a worker"));
        let over_ib = kv_transfer_us(&b200, &worker, &p);
        assert!(over_ib > 10.0 * expect, "{over_ib} µs over the network");
        let dep = Deployment::new(&s, &p);
        assert!(dep.at(1.0).ttft_us >= dep.prefill_us + dep.kv_transfer_us);
    }

    #[test]
    fn more_load_trades_speed_per_user_for_throughput() {
        let lo = eval_ok(&scenario(&format!("{DISAGG}concurrency = 64\n")));
        let hi = eval_ok(&scenario(&format!("{DISAGG}concurrency = 1024\n")));
        assert!(hi.tokens_per_s_per_user < lo.tokens_per_s_per_user);
        assert!(hi.total_tokens_per_s_per_gpu > lo.total_tokens_per_s_per_gpu);
    }

    #[test]
    fn a_saturated_prefill_pool_queues_the_excess() {
        let a = eval_ok(&scenario(&format!("{DISAGG}concurrency = 200000\n")));
        let b = eval_ok(&scenario(&format!("{DISAGG}concurrency = 400000\n")));
        // Same throughput, longer wait for the first token.
        assert!((a.total_tokens_per_s_per_gpu / b.total_tokens_per_s_per_gpu - 1.0).abs() < 1e-9);
        assert!(b.ttft_ms > a.ttft_ms);
    }

    #[test]
    fn aggregated_serving_shares_the_gpus_between_prefill_and_decode() {
        let base = "system = \"dgx-b200\"\nmodel = \"llama4-maverick\"\nphase = \"serve\"\n\
                    gpus = 8\nconcurrency = 64\n";
        let serve = eval_ok(&scenario(base));
        let decode = eval_ok(&scenario(&base.replace("serve", "decode")));
        assert!(serve.tokens_per_s_per_user < decode.tokens_per_s_per_user);
    }

    /// Aggregated serving under attention DP: each GPU prefills its own requests, packed 8 to a
    /// forward at 1K input, so one request costs the deployment about its FLOPs over the whole
    /// pool's compute rate, 2 x 17 B active parameters x 1000 tokens / (8 x B200 FP8 x
    /// flops_eff) = 15 us; the memory-bound kernels, the AllToAll and the launches of a packed
    /// forward add less than half of that again (the model gives +29%).
    /// (Charging every request a whole forward of the deployment, as an earlier version did,
    /// costs 8x that.)
    #[test]
    fn aggregated_prefill_costs_each_request_its_flops() {
        let s = scenario(
            "system = \"dgx-b200\"\nmodel = \"llama4-maverick\"\nphase = \"serve\"\n\
             weights = \"fp8\"\ngpus = 8\nep = 8\ninput_tokens = 1000\noutput_tokens = 1000\n\
             concurrency = 64\noptimizations = [\"attention_dp\", \"cuda_graphs\"]\n",
        );
        let p = Params::fitted();
        let dep = Deployment::new(&s, &p);
        let peak = s.system.gpu.flops(super::super::precision::Precision::Fp8);
        let flops_us = 2.0 * s.model.active_params() * 1000.0 / (8.0 * peak * p.flops_eff) * 1e6;
        let ratio = dep.prefill_share_us / flops_us;
        assert!(
            (1.0..1.5).contains(&ratio),
            "prefill share {ratio:.3} x the FLOP time"
        );
    }

    /// The seed's decode unit: 320 H800s, EP 320 (one expert per GPU). Each expert then sees
    /// a few hundred tokens at most, far below the ~1000 FLOP/byte ridge of FP8 on H800: the
    /// step is memory- and communication-bound, as DeepSeek reports.
    #[test]
    fn deepseek_decode_unit_is_memory_bound() {
        let s = scenario(
            "system = \"hgx-h800\"\nmodel = \"deepseek-v3\"\nphase = \"decode\"\n\
             gpus = 320\nep = 320\nbatch_per_gpu = 32\noptimizations = [\"all\"]\n\
             [speculative]\nmethod = \"mtp\"\ndraft_tokens = 1\n",
        );
        let e = eval_ok(&s);
        let b = e.breakdown_us;
        assert!(b.memory_us + b.communication_us > b.compute_us, "{b:?}");
        assert!(e.mfu < 0.2, "{}", e.mfu);
    }

    #[test]
    fn a_target_speed_finds_the_largest_load_that_meets_it() {
        let base = "system = \"gb200-nvl72\"\nmodel = \"deepseek-r1\"\nphase = \"decode\"\n\
                    weights = \"fp4\"\noptimizations = [\"all\"]\n";
        for target in [20.0, 50.0, 100.0] {
            let s = scenario(&format!("{base}target_tokens_per_s_per_user = {target}\n"));
            let e = eval_ok(&s);
            assert!(e.tokens_per_s_per_user >= target * (1.0 - 1e-9));
            // Either exactly at the target, or the KV cache is full before the speed drops.
            let at_target = (e.tokens_per_s_per_user / target - 1.0).abs() < 1e-6;
            let kv_full = (e.batch_per_gpu / s.max_batch_per_gpu() - 1.0).abs() < 1e-9;
            assert!(at_target || kv_full, "{target}: {e:?}");
        }
        let far = scenario(&format!("{base}target_tokens_per_s_per_user = 100000\n"));
        let err = eval(&far, &Params::fitted()).map(|e| e.batch_per_gpu);
        assert!(
            matches!(
                err,
                Err(RackError::Invalid {
                    field: "target_tokens_per_s_per_user",
                    ..
                })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn waterfall_steps_add_up_to_the_full_scenario() {
        let s = scenario(
            "system = \"dgx-b200\"\nmodel = \"llama4-maverick\"\nphase = \"decode\"\n\
             gpus = 8\ntp = 8\nep = 1\nbatch_per_gpu = 1\n\
             optimizations = [\"cuda_graphs\", \"pdl\", \"fused_gate_up_swiglu\"]\n",
        );
        let p = Params::fitted();
        let steps = waterfall(&s, &p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(steps.len(), 3);
        let full = eval_ok(&s);
        let last = &steps[2];
        assert!((last.users_per_rack - full.users_per_rack).abs() < 1e-9);
        let mut none = s.clone();
        none.optimizations = crate::rack::scenario::Optimizations::none();
        let base = eval_ok(&none);
        let total: f64 = steps.iter().map(|w| w.mfu_change).sum();
        assert!((base.mfu + total - full.mfu).abs() < 1e-12);
    }
}
