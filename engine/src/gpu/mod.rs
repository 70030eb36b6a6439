//! The wgpu layer: one context (adapter, device, queue and what the adapter can do), buffer
//! helpers, a pipeline cache and a profiler. Kernels build on it; nothing here knows the model.

mod buffers;
mod context;
mod pipeline_cache;
mod profiler;
mod uniforms;

pub use buffers::{read_back, read_back_many, storage_buffer, storage_zeroed};
pub use context::{AdapterReport, GpuContext, LimitsReport};
pub use pipeline_cache::{bind_buffers, Pipeline, PipelineCache, ShaderSource};
pub use profiler::{gcd_resolution_ns, ProfileReport, Profiler, TimingSource};
pub use uniforms::{UniformRing, MAX_LAUNCHES_PER_SUBMIT};

/// What can go wrong below the kernels: each a message a user can read.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no GPU adapter: {0} (in a browser, WebGPU may be missing or disabled)")]
    NoAdapter(String),
    #[error("the adapter is below MoEscope's required limits: {0}")]
    Limits(String),
    #[error("could not create the GPU device: {0}")]
    Device(String),
    #[error("a buffer of {got} bytes is larger than this adapter's {max}-byte limit for {what}")]
    BufferTooLarge {
        what: &'static str,
        got: u64,
        max: u64,
    },
    #[error("reading results back from the GPU failed: {0}")]
    Readback(String),
    #[error("the GPU reported an error: {0}")]
    Validation(String),
}
