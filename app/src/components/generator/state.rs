//! The generator's state: the visitor's settings and what the last run showed, as one set of
//! signals every part of the panel reads and writes, and the engines behind them.

use std::cell::RefCell;
use std::rc::Rc;

use leptos::prelude::*;
use moescope_engine::model::accuracy::Accuracy;
use moescope_engine::model::generate::{Backend, ReferenceCheck};
use moescope_engine::model::gpu::KernelLaunch;
use moescope_engine::model::Weights;
use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;

use super::engines::Engines;
use crate::checkpoint::Source;
use crate::sandbox_state::SandboxState;

/// Which engine the visitor asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Choice {
    Auto,
    Gpu,
    Cpu,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Status {
    Idle,
    Preparing,
    Running,
    Done,
    Error(String),
}

impl Status {
    pub(super) fn attr(&self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Preparing | Status::Running => "running",
            Status::Done => "done",
            Status::Error(_) => "error",
        }
    }
}

/// One row of the routing table.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TokenRow {
    pub token: u32,
    pub text: String,
    pub experts: Vec<Vec<usize>>,
}

/// The running averages shown under the output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct StepSummary {
    pub tokens_per_s: f64,
    pub ms: f64,
    pub kernels: usize,
    pub submissions: usize,
    pub mb: f64,
}

/// Every signal of the panel: the settings (prompt, tokens, engine, switches, format), the run's
/// status and output, and the results of the side measurements (comparison, accuracy, check).
#[derive(Clone, Copy)]
pub(super) struct GenState {
    pub prompt: RwSignal<String>,
    pub tokens: RwSignal<String>,
    pub choice: RwSignal<Choice>,
    pub status: RwSignal<Status>,
    /// Finished runs (done or error): lets a test wait for the run it started.
    pub runs: RwSignal<u32>,
    pub output: RwSignal<String>,
    pub rows: RwSignal<Vec<TokenRow>>,
    pub backend_label: RwSignal<String>,
    pub fallback_note: RwSignal<Option<String>>,
    pub stats: RwSignal<Option<StepSummary>>,
    pub optimizations: RwSignal<Optimizations>,
    pub format: RwSignal<Format>,
    pub dispatch_fp8: RwSignal<bool>,
    pub share: RwSignal<Option<(String, String)>>,
    pub compare: RwSignal<Option<Result<String, String>>>,
    pub comparing: RwSignal<bool>,
    pub accuracy: RwSignal<Option<Result<Accuracy, String>>>,
    pub measuring: RwSignal<bool>,
    pub last_trace: RwSignal<Vec<KernelLaunch>>,
    /// The prompt and the generated tokens of the last run, and which engine ran them.
    pub last_tokens: RwSignal<Option<(Vec<u32>, Backend)>>,
    pub check: RwSignal<Option<Result<ReferenceCheck, String>>>,
    pub checking: RwSignal<bool>,
    pub weights_source: RwSignal<Option<Source>>,
}

impl GenState {
    pub fn new(initial: &SandboxState) -> Self {
        Self {
            prompt: RwSignal::new(initial.prompt.clone()),
            tokens: RwSignal::new(initial.tokens.to_string()),
            choice: RwSignal::new(Choice::Auto),
            status: RwSignal::new(Status::Idle),
            runs: RwSignal::new(0),
            output: RwSignal::new(String::new()),
            rows: RwSignal::new(Vec::new()),
            backend_label: RwSignal::new(String::new()),
            fallback_note: RwSignal::new(None),
            stats: RwSignal::new(None),
            optimizations: RwSignal::new(initial.optimizations),
            format: RwSignal::new(initial.format),
            dispatch_fp8: RwSignal::new(initial.dispatch_fp8),
            share: RwSignal::new(None),
            compare: RwSignal::new(None),
            comparing: RwSignal::new(false),
            accuracy: RwSignal::new(None),
            measuring: RwSignal::new(false),
            last_trace: RwSignal::new(Vec::new()),
            last_tokens: RwSignal::new(None),
            check: RwSignal::new(None),
            checking: RwSignal::new(false),
            weights_source: RwSignal::new(None),
        }
    }

    /// A generation is being prepared or is running.
    pub fn busy(self) -> bool {
        matches!(self.status.get(), Status::Preparing | Status::Running)
    }

    /// The settings as a shareable sandbox state.
    pub fn settings(self) -> SandboxState {
        SandboxState {
            prompt: self.prompt.get_untracked(),
            tokens: self
                .tokens
                .get_untracked()
                .trim()
                .parse()
                .unwrap_or(32)
                .clamp(1, 256),
            optimizations: self.optimizations.get_untracked(),
            format: self.format.get_untracked(),
            dispatch_fp8: self.dispatch_fp8.get_untracked(),
        }
    }
}

/// What outlives one click: the engines, the weights once fetched, the Stop flag.
#[derive(Clone, Default)]
pub(super) struct Runtime {
    pub stop: Rc<RefCell<bool>>,
    pub engines: Rc<RefCell<Engines>>,
    pub weights: Rc<RefCell<Option<Rc<Weights>>>>,
}
