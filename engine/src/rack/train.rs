//! One training step: every micro-batch through every pipeline stage, forward and backward,
//! plus the pipeline bubble and the data-parallel gradient exchange.

use super::evaluation::Evaluation;
use super::hardware::Protocol;
use super::mechanisms;
use super::params::Params;
use super::precision::Precision;
use super::scenario::{Optimization, Recompute, Scenario};
use super::step::{self, Breakdown, Shape};

pub fn train(s: &Scenario, p: &Params) -> Evaluation {
    let t = s.training;
    let seq = t.seq_len as f64;
    let pp = s.pp as f64;
    let StageForward {
        breakdown: fwd,
        flops: fwd_flops,
        bytes: fwd_bytes,
        kernels,
    } = stage_forward(s, p);
    // Backward costs two forwards; full recomputation replays the forward once more.
    let passes = match t.recompute {
        Recompute::Full => 4.0,
        Recompute::Selective => 3.0,
    };
    let mut mb = Breakdown {
        compute_us: fwd.compute_us * passes,
        memory_us: fwd.memory_us * passes,
        communication_us: fwd.communication_us * (passes - 1.0) + stage_handoffs_us(s, p),
        launch_us: fwd.launch_us * passes,
        overlap_us: 0.0,
    };
    let overlap = s.optimizations.has(Optimization::TwoBatchOverlap);
    if overlap {
        // TP communication of one chunk runs under the GEMMs of the next.
        mb.overlap_us = -mb.communication_us.min(mb.compute_us + mb.memory_us);
    }

    let micro_batches = (t.global_batch_tokens / seq / s.dp as f64).max(1.0);
    let slots = micro_batches + (pp - 1.0) / t.virtual_pipeline as f64;
    let step = with_gradient_exchange(s, p, mb.scaled(slots), overlap);
    let time_us = step.total_us();
    let model_flops = 3.0 * fwd_flops * micro_batches;
    let peak = s
        .system
        .gpu
        .flops(Precision::gemm(s.weights, s.activations));
    let secs = time_us * 1e-6;
    let tokens = t.global_batch_tokens / s.gpus as f64 / secs;
    let mbu = fwd_bytes * passes * slots / (secs * s.system.gpu.hbm_bytes_s());
    Evaluation {
        system: s.system.id,
        model: s.model.id,
        phase: s.phase,
        tokens_per_s_per_user: 0.0,
        output_tokens_per_s_per_gpu: 0.0,
        output_tokens_per_s_per_decode_gpu: 0.0,
        total_tokens_per_s_per_gpu: tokens,
        tokens_per_s_per_gpu: tokens,
        users_per_rack: 0.0,
        mfu: model_flops / (secs * peak),
        mbu,
        step_time_us: time_us,
        batch_per_gpu: micro_batches,
        concurrency: 0.0,
        gpus: s.gpus,
        breakdown_us: step,
        kernels_per_step: kernels * passes * slots,
        accepted_tokens_per_step: 0.0,
        ttft_ms: 0.0,
        ttft_ms_p50: 0.0,
        ttft_ms_p99: 0.0,
        copy_concat_us_per_layer: 0.0,
        estimated: true,
        hardware_overrides: s.file.hardware.map(|h| h.echo()).unwrap_or_default(),
    }
}

/// One micro-batch's forward through one pipeline stage (its share of the dense and MoE layers).
struct StageForward {
    breakdown: Breakdown,
    flops: f64,
    bytes: f64,
    kernels: f64,
}

fn stage_forward(s: &Scenario, p: &Params) -> StageForward {
    let seq = s.training.seq_len as f64;
    let pp = s.pp as f64;
    let tp = s.attention_tp() as f64;
    // One sequence per micro-batch, split across the TP group.
    let shape = Shape {
        batch: 1.0 / tp,
        tokens: seq,
        context: seq / 2.0,
    };
    // The pipeline runs at the pace of its largest stage; the model's FLOPs are those of the
    // average stage (uneven stages do no extra work, they only wait).
    let (dense_layers, moe_layers) = s.stage_layers();
    let (dense_layers, moe_layers) = (dense_layers as f64, moe_layers as f64);
    let dense = step::layer_forward(s, p, shape, false);
    let moe = if s.model.moe_layers() > 0 {
        step::layer_forward(s, p, shape, true)
    } else {
        dense
    };
    let fwd = dense
        .breakdown
        .scaled(dense_layers)
        .plus(moe.breakdown.scaled(moe_layers));
    let model_flops = (dense.flops * s.model.dense_layers() as f64
        + moe.flops * s.model.moe_layers() as f64)
        / pp;
    let fwd_bytes = dense.hbm_bytes * dense_layers + moe.hbm_bytes * moe_layers;
    StageForward {
        breakdown: fwd,
        flops: model_flops,
        bytes: fwd_bytes,
        kernels: dense.kernels * dense_layers + moe.kernels * moe_layers,
    }
}

/// One micro-batch's pipeline traffic on a stage, µs: its activations sent forward and their
/// gradients sent back (BF16, each TP rank its share), over NVLink when the instance sits in
/// one NVLink domain, else over the network. Megatron places pipeline stages outermost, so a
/// pipeline that spans boxes crosses the network at every stage boundary.
fn stage_handoffs_us(s: &Scenario, p: &Params) -> f64 {
    if s.pp <= 1 {
        return 0.0;
    }
    let bytes = s.training.seq_len as f64 * s.model.hidden as f64 * 2.0 / s.tp as f64;
    let (gb_s, latency) = if s.gpus <= s.system.nvlink_domain {
        (s.system.nvlink_gb_s, Protocol::Simple.nvlink_latency_us())
    } else {
        (
            s.system.scale_out_gb_s,
            Protocol::Simple.network_latency_us(),
        )
    };
    2.0 * mechanisms::p2p_us(
        bytes,
        gb_s * 1e9 * p.link_eff,
        latency,
        p.collective_base_us,
    )
}

/// The data-parallel exchange added to a step (and hidden under its compute when overlapped).
fn with_gradient_exchange(
    s: &Scenario,
    p: &Params,
    mut step: Breakdown,
    overlap: bool,
) -> Breakdown {
    // Distributed optimizer: reduce-scatter the gradients, all-gather the new weights, each
    // moving (dp-1)/dp of this GPU's weights (BF16) once.
    let dp = s.dp;
    if dp > 1 {
        let bytes = s.weight_bytes_per_gpu() / s.dense_weights().weight_bytes() * 2.0;
        let inside = s.tp * s.pp * dp <= s.system.nvlink_domain;
        let gb_s = if inside {
            s.system.nvlink_gb_s
        } else {
            s.system.scale_out_gb_s
        };
        let ring = 2.0 * (dp as f64 - 1.0) / dp as f64 * bytes / (gb_s * 1e9 * p.link_eff);
        let dp_us = 1e6 * ring + 2.0 * p.collective_base_us;
        step.communication_us += dp_us;
        if overlap {
            // Bucketed: gradients leave while the backward of earlier layers still runs.
            step.overlap_us -= dp_us.min(step.compute_us + step.memory_us + step.overlap_us);
        }
    }
    step
}
