//! What the generator's buttons start: a generation, Stop, the before/after comparison, the
//! accuracy measurement and the check against the CPU reference. Each runs in a spawned task
//! and reports through the panel's signals.

use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use moescope_engine::bench::decode::{run_variants, DecodeBenchOptions};
use moescope_engine::model::accuracy;
use moescope_engine::model::generate::{check_against_reference, Backend, Engine};
use moescope_engine::model::tokenizer;
use moescope_engine::plan::Optimizations;

use super::engines::{generate, gpu_context, load_weights};
use super::state::{GenState, Runtime, Status};
use crate::checkpoint;

/// Fetches the checkpoint as soon as the sandbox shows, so the first Generate does not wait.
pub(super) fn prefetch_weights(st: GenState, rt: &Runtime) {
    let weights = Rc::clone(&rt.weights);
    spawn_local(async move {
        load_weights(&weights, st.weights_source).await;
    });
}

/// Generate: checks the settings, then streams tokens from the chosen engine.
pub(super) fn run(st: GenState, rt: &Runtime) {
    if matches!(
        st.status.get_untracked(),
        Status::Preparing | Status::Running
    ) {
        return;
    }
    let refuse = |why: &str| {
        st.status.set(Status::Error(why.into()));
        st.runs.update(|r| *r += 1);
    };
    let n = match st.tokens.get_untracked().trim().parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => n,
        _ => return refuse("Tokens must be a whole number from 1 to 256."),
    };
    let prompt_ids = tokenizer::encode(&st.prompt.get_untracked());
    if prompt_ids.is_empty() {
        return refuse("Type a prompt first.");
    }
    *rt.stop.borrow_mut() = false;
    st.output.set(String::new());
    st.rows.set(Vec::new());
    st.stats.set(None);
    // A check of the previous run's tokens says nothing about this one.
    st.check.set(None);
    st.status.set(Status::Preparing);
    let rt = rt.clone();
    spawn_local(async move {
        let settings = (
            st.choice.get_untracked(),
            st.optimizations.get_untracked(),
            st.format.get_untracked(),
            st.dispatch_fp8.get_untracked(),
        );
        let result = generate(&rt, settings, &prompt_ids, n, st).await;
        match result {
            Ok(()) => st.status.set(Status::Done),
            Err(e) => st.status.set(Status::Error(e)),
        }
        st.runs.update(|r| *r += 1);
    });
}

/// Stop: the page's loop and the worker's both stop after their current token.
pub(super) fn stop(rt: &Runtime) {
    *rt.stop.borrow_mut() = true;
    if let Some(w) = rt.engines.borrow().worker.as_ref() {
        w.stop();
    }
}

/// Before/after in one click: the same decode steps with every switch off and with the current
/// set, measured in one run.
pub(super) fn compare(st: GenState, rt: &Runtime) {
    if st.comparing.get_untracked() || st.busy() {
        return;
    }
    st.comparing.set(true);
    st.compare.set(None);
    let engines = Rc::clone(&rt.engines);
    let current = st.optimizations.get_untracked();
    spawn_local(async move {
        let result = async {
            let ctx = gpu_context(&engines)
                .await
                .map_err(|e| format!("needs WebGPU: {e}"))?;
            let options = DecodeBenchOptions {
                prompt_tokens: 8,
                steps: 3,
                rounds: 1,
                seed: checkpoint::SYNTHETIC_SEED,
            };
            let list = vec![
                ("none".to_string(), Optimizations::none()),
                (current.label(), current),
            ];
            let b = run_variants(&ctx, options, list)
                .await
                .map_err(|e| e.to_string())?;
            let (before, after) = match (b.variants.first(), b.variants.last()) {
                (Some(x), Some(y)) => (x, y),
                _ => return Err("the benchmark returned nothing".to_string()),
            };
            Ok(format!(
                "Eager: {:.1} ms per decode step, {} kernels in {} submissions. Current switches ({}): {:.1} ms, {} kernels in {} submissions: {:.2}× (measured on this GPU, 3 steps after 8 tokens; logits differ by at most {:.1e}).",
                before.ms_per_step, before.kernels_per_step, before.submissions_per_step,
                current.label(), after.ms_per_step, after.kernels_per_step, after.submissions_per_step,
                before.ms_per_step / after.ms_per_step, after.max_logit_diff_vs_baseline
            ))
        }
        .await;
        st.compare.set(Some(result));
        st.comparing.set(false);
    });
}

/// The last run's tokens through the CPU reference, on the engine that generated them.
pub(super) fn check(st: GenState, rt: &Runtime) {
    let Some((tokens, backend)) = st.last_tokens.get_untracked() else {
        return;
    };
    if st.checking.get_untracked() || st.busy() {
        return;
    }
    st.checking.set(true);
    st.check.set(None);
    let rt = rt.clone();
    spawn_local(async move {
        let w = load_weights(&rt.weights, st.weights_source).await;
        let taken = match backend {
            Backend::Gpu => rt.engines.borrow_mut().gpu.take(),
            // The text may have come from the worker: check it with a page-side engine.
            Backend::Cpu => Some(
                rt.engines
                    .borrow_mut()
                    .cpu
                    .take()
                    .unwrap_or_else(|| Engine::cpu((*w).clone())),
            ),
        };
        let result = match taken {
            Some(mut engine) => {
                let r = check_against_reference(&mut engine, &w, &tokens)
                    .await
                    .map_err(|e| e.to_string());
                let mut cell = rt.engines.borrow_mut();
                match engine.backend() {
                    Backend::Gpu => cell.gpu = Some(engine),
                    Backend::Cpu => cell.cpu = Some(engine),
                }
                r
            }
            None => Err("generate first: there is no engine to check".into()),
        };
        st.check.set(Some(result));
        st.checking.set(false);
    });
}

/// The chosen format's accuracy against f32 on the fixed prompts, on this GPU.
pub(super) fn measure(st: GenState, rt: &Runtime) {
    if st.measuring.get_untracked() {
        return;
    }
    st.measuring.set(true);
    st.accuracy.set(None);
    let rt = rt.clone();
    let (f, fp8) = (st.format.get_untracked(), st.dispatch_fp8.get_untracked());
    spawn_local(async move {
        let result = async {
            let w = load_weights(&rt.weights, st.weights_source).await;
            let ctx = gpu_context(&rt.engines).await?;
            accuracy::measure(&ctx, &w, f, fp8)
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        st.accuracy.set(Some(result));
        st.measuring.set(false);
    });
}
