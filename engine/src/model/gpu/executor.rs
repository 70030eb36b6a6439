//! How a forward's kernels reach the GPU. Eager: each kernel in its own command buffer and queue
//! submission, the way eager PyTorch launches one CUDA kernel per op. Recorded: every kernel of
//! the step appended to one command buffer, submitted once (or once per host round trip) — the
//! closest WebGPU analogue of a CUDA graph. WebGPU has no programmatic dependent launch: passes in
//! one command buffer still run one after another, so the launch gap shrinks but the tail of one
//! kernel cannot overlap the prologue of the next.

use web_time::Instant;

use crate::gpu::{GpuContext, Profiler, MAX_LAUNCHES_PER_SUBMIT};
use crate::kernels::KernelError;

use super::super::ModelError;
use super::KernelLaunch;

pub(super) struct Executor<'a> {
    ctx: &'a GpuContext,
    recorded: bool,
    /// The one open pass of a recorded, unprofiled command buffer: ended before `encoder` is
    /// finished, and declared first so that it is also dropped first.
    pass: Option<wgpu::ComputePass<'static>>,
    encoder: Option<wgpu::CommandEncoder>,
    profiler: Option<&'a mut Profiler>,
    pub layer: Option<usize>,
    pub trace: Vec<KernelLaunch>,
    /// Queue submissions so far (the eager path: one per kernel).
    pub submissions: usize,
    /// Kernels in the command buffer being recorded.
    pending: usize,
    /// Host time spent recording kernels (validation, bind groups, encoding), µs.
    pub record_us: f64,
    /// Host time spent in `queue.submit`, µs.
    pub submit_us: f64,
}

impl<'a> Executor<'a> {
    pub fn new(ctx: &'a GpuContext, recorded: bool, profiler: Option<&'a mut Profiler>) -> Self {
        Self {
            ctx,
            recorded,
            encoder: None,
            pass: None,
            profiler,
            layer: None,
            trace: Vec::new(),
            submissions: 0,
            pending: 0,
            record_us: 0.0,
            submit_us: 0.0,
        }
    }

    /// Records one kernel in its own compute pass (timed when profiling), and submits it at once
    /// when eager.
    pub fn run(
        &mut self,
        kernel: &'static str,
        op: &str,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>) -> Result<u64, KernelError>,
    ) -> Result<(), ModelError> {
        let start = Instant::now();
        let bytes = if self.recorded && self.profiler.is_none() {
            let pass = match &mut self.pass {
                Some(pass) => pass,
                None => {
                    let encoder = self.encoder.get_or_insert_with(|| {
                        self.ctx
                            .device
                            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                                label: Some("decode step"),
                            })
                    });
                    let pass = encoder
                        .begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: Some("decode step"),
                            timestamp_writes: None,
                        })
                        .forget_lifetime();
                    self.pass.insert(pass)
                }
            };
            record(pass)?
        } else {
            let mut encoder = match self.encoder.take() {
                Some(encoder) => encoder,
                None => self
                    .ctx
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some(kernel),
                    }),
            };
            let bytes = {
                let timestamp_writes = self
                    .profiler
                    .as_deref_mut()
                    .and_then(|p| p.timestamp_writes(op));
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(kernel),
                    timestamp_writes,
                });
                record(&mut pass)
            };
            self.encoder = Some(encoder);
            bytes?
        };
        self.pending += 1;
        self.record_us += start.elapsed().as_secs_f64() * 1e6;
        // Params slots are reused after MAX_LAUNCHES_PER_SUBMIT launches (gpu::UniformRing).
        if !self.recorded || self.pending >= MAX_LAUNCHES_PER_SUBMIT {
            self.flush();
        }
        self.trace.push(KernelLaunch {
            kernel,
            op: op.to_owned(),
            layer: self.layer,
            bytes,
            gpu_us: None,
        });
        Ok(())
    }

    /// Submits what has been recorded (before the host reads anything back).
    pub fn flush(&mut self) {
        // The pass borrows the encoder in wgpu's bookkeeping: end it first.
        self.pass = None;
        if let Some(encoder) = self.encoder.take() {
            let start = Instant::now();
            self.ctx.queue.submit([encoder.finish()]);
            self.submit_us += start.elapsed().as_secs_f64() * 1e6;
            self.submissions += 1;
            self.pending = 0;
        }
    }

    /// Submits the rest and, when profiling, reads each kernel's GPU time into the trace.
    pub async fn finish(mut self) -> Result<super::StepTrace, ModelError> {
        if let Some(profiler) = self.profiler.as_deref() {
            self.pass = None;
            match &mut self.encoder {
                // Recorded: the resolve rides in the step's last command buffer.
                Some(encoder) => profiler.resolve(encoder),
                // Eager: everything is submitted; the resolve is not a kernel submission.
                None => {
                    let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
                    profiler.resolve(&mut encoder);
                    self.ctx.queue.submit([encoder.finish()]);
                }
            }
        }
        self.flush();
        if let Some(profiler) = self.profiler.take() {
            let report = profiler.read(self.ctx).await?;
            for (launch, pass) in self.trace.iter_mut().zip(&report.passes) {
                launch.gpu_us = Some(pass.gpu_ns / 1e3);
            }
        }
        Ok(super::StepTrace {
            kernels: self.trace,
            submissions: self.submissions,
            record_us: self.record_us,
            submit_us: self.submit_us,
        })
    }
}
