//! Creating the device: native Vulkan (lavapipe in CI, NVIDIA on the H200) or the browser's
//! WebGPU, with explicit limits checked up front, and a report of what the adapter offers.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::{GpuError, PipelineCache, UniformRing};

/// The adapter as the UI and the CLI show it.
#[derive(Clone, Debug, Serialize)]
pub struct AdapterReport {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    /// Optional features MoEscope uses, by their WebGPU names, that this device has enabled.
    pub features: Vec<String>,
    pub limits: LimitsReport,
    /// Nanoseconds per timestamp tick (0 when timestamps are unavailable).
    pub timestamp_period_ns: f32,
}

/// The limits that bound MoEscope's kernels and buffers.
#[derive(Clone, Debug, Serialize)]
pub struct LimitsReport {
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_workgroups_per_dimension: u32,
}

impl AdapterReport {
    pub fn has_feature(&self, name: &str) -> bool {
        self.features.iter().any(|f| f == name)
    }
}

/// Optional features: used when present, never required.
const OPTIONAL_FEATURES: [(wgpu::Features, &str); 3] = [
    (wgpu::Features::TIMESTAMP_QUERY, "timestamp-query"),
    (wgpu::Features::SHADER_F16, "shader-f16"),
    (wgpu::Features::SUBGROUP, "subgroups"),
];

pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterReport,
    pub pipelines: PipelineCache,
    /// Where every kernel's params struct is written.
    pub uniforms: UniformRing,
    /// Errors the device raised outside an error scope. wgpu's default handler panics on
    /// native; we keep the message so the caller can report it.
    uncaptured: Arc<Mutex<Option<String>>>,
    /// Why the device was lost (the browser reset the GPU, the driver crashed, `destroy`), once
    /// it has been.
    lost: Arc<Mutex<Option<String>>>,
}

/// Slots the device fills with its first uncaptured error and the reason it was lost.
#[allow(clippy::type_complexity)]
fn watch_errors(device: &wgpu::Device) -> (Arc<Mutex<Option<String>>>, Arc<Mutex<Option<String>>>) {
    let uncaptured = Arc::new(Mutex::new(None));
    let sink = Arc::clone(&uncaptured);
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        if let Ok(mut slot) = sink.lock() {
            slot.get_or_insert_with(|| e.to_string());
        }
    }));

    let lost = Arc::new(Mutex::new(None));
    let lost_sink = Arc::clone(&lost);
    device.set_device_lost_callback(move |reason, message| {
        if let Ok(mut slot) = lost_sink.lock() {
            slot.get_or_insert_with(|| format!("{reason:?}: {message}"));
        }
    });
    (uncaptured, lost)
}

/// What the adapter is and what was asked of it, for reports and the UI.
fn adapter_report(
    adapter: &wgpu::Adapter,
    queue: &wgpu::Queue,
    features: wgpu::Features,
    required: &wgpu::Limits,
) -> AdapterReport {
    let info = adapter.get_info();
    let timestamp_period_ns = if features.contains(wgpu::Features::TIMESTAMP_QUERY) {
        queue.get_timestamp_period()
    } else {
        0.0
    };
    AdapterReport {
        name: info.name,
        backend: info.backend.to_str().to_owned(),
        device_type: format!("{:?}", info.device_type),
        driver: [info.driver, info.driver_info]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        features: OPTIONAL_FEATURES
            .iter()
            .filter(|(f, _)| features.contains(*f))
            .map(|(_, n)| (*n).to_owned())
            .collect(),
        limits: LimitsReport {
            max_storage_buffer_binding_size: required.max_storage_buffer_binding_size,
            max_buffer_size: required.max_buffer_size,
            max_compute_invocations_per_workgroup: required.max_compute_invocations_per_workgroup,
            max_compute_workgroup_storage_size: required.max_compute_workgroup_storage_size,
            max_storage_buffers_per_shader_stage: required.max_storage_buffers_per_shader_stage,
            max_compute_workgroups_per_dimension: required.max_compute_workgroups_per_dimension,
        },
        timestamp_period_ns,
    }
}

impl GpuContext {
    /// Finds an adapter and opens a device on it.
    pub async fn new() -> Result<Self, GpuError> {
        let instance = wgpu::Instance::new(instance_descriptor());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                // The real limits, not privacy buckets: the benchmarks need max_buffer_size.
                apply_limit_buckets: false,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;

        let available = adapter.limits();
        let required = required_limits(&available);
        let mut below = Vec::new();
        required.check_limits_with_fail_fn(&available, false, |name, want, have| {
            below.push(format!("{name}: need {want}, adapter has {have}"));
        });
        if !below.is_empty() {
            return Err(GpuError::Limits(below.join("; ")));
        }

        let offered = adapter.features();
        let features = OPTIONAL_FEATURES
            .iter()
            .filter(|(f, _)| offered.contains(*f))
            .fold(wgpu::Features::empty(), |acc, (f, _)| acc | *f);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("moescope"),
                required_features: features,
                required_limits: required.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::Device(e.to_string()))?;

        let (uncaptured, lost) = watch_errors(&device);
        let report = adapter_report(&adapter, &queue, features, &required);
        let uniforms = UniformRing::new(&device, required.min_uniform_buffer_offset_alignment);
        Ok(Self {
            device,
            queue,
            adapter: report,
            pipelines: PipelineCache::default(),
            uniforms,
            uncaptured,
            lost,
        })
    }

    pub fn has_timestamps(&self) -> bool {
        self.adapter.timestamp_period_ns > 0.0
    }

    /// Why the device was lost, if it was: nothing more can run on it, and the caller should
    /// fall back (the app switches to the CPU engine and keeps its state).
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().ok().and_then(|slot| slot.clone())
    }

    /// The first error the device raised outside an error scope, if any, cleared on read.
    pub fn take_uncaptured_error(&self) -> Option<String> {
        self.uncaptured.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// WebGPU's defaults (what every browser adapter offers), with the buffer sizes raised to what
/// this adapter allows: the model stays far below them, the bandwidth benchmark does not.
fn required_limits(available: &wgpu::Limits) -> wgpu::Limits {
    wgpu::Limits {
        max_storage_buffer_binding_size: available.max_storage_buffer_binding_size,
        max_buffer_size: available.max_buffer_size,
        ..wgpu::Limits::default()
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn instance_descriptor() -> wgpu::InstanceDescriptor {
    // WGPU_BACKEND still overrides (e.g. `gl`); Vulkan covers lavapipe and the H200.
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    }
    desc
}

#[cfg(target_arch = "wasm32")]
fn instance_descriptor() -> wgpu::InstanceDescriptor {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::BROWSER_WEBGPU;
    desc
}
