//! Compute pipelines, compiled once per (shader, entry point, override constants) and reused:
//! a decode step dispatches the same kernels hundreds of times.

use std::collections::HashMap;
use std::sync::Mutex;

/// A WGSL source and the entry point to run. One name in four places: `shaders/NAME.wgsl`,
/// `kernels/NAME.rs`, the entry point `NAME`, and `model::reference::NAME`.
#[derive(Clone, Copy, Debug)]
pub struct ShaderSource {
    pub name: &'static str,
    pub wgsl: &'static str,
    pub entry_point: &'static str,
}

type Key = (&'static str, &'static str, String);

/// A compiled pipeline with its group-0 layout, fetched once: asking the pipeline for its layout
/// on every launch costs a lookup inside wgpu each time.
#[derive(Clone)]
pub struct Pipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

#[derive(Default)]
pub struct PipelineCache {
    pipelines: Mutex<HashMap<Key, Pipeline>>,
}

impl PipelineCache {
    /// The pipeline for `source` with these override constants, compiled on first use.
    pub fn get(
        &self,
        device: &wgpu::Device,
        source: ShaderSource,
        constants: &[(&str, f64)],
    ) -> Pipeline {
        let key = (source.name, source.entry_point, format!("{constants:?}"));
        let mut map = match self.pipelines.lock() {
            Ok(map) => map,
            // A panic elsewhere while holding the lock leaves a valid map: keep using it.
            Err(poisoned) => poisoned.into_inner(),
        };
        map.entry(key)
            .or_insert_with(|| {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(source.name),
                    source: wgpu::ShaderSource::Wgsl(source.wgsl.into()),
                });
                let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(source.name),
                    layout: None,
                    module: &module,
                    entry_point: Some(source.entry_point),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants,
                        ..Default::default()
                    },
                    cache: None,
                });
                let layout = pipeline.get_bind_group_layout(0);
                Pipeline { pipeline, layout }
            })
            .clone()
    }

    pub fn len(&self) -> usize {
        self.pipelines.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A bind group for group 0 of `pipeline`: the params slot at binding 0, then `buffers`, binding
/// index = position.
pub fn bind_buffers(
    device: &wgpu::Device,
    pipeline: &Pipeline,
    label: &str,
    params: wgpu::BufferBinding<'_>,
    buffers: &[&wgpu::Buffer],
) -> wgpu::BindGroup {
    let mut entries = Vec::with_capacity(buffers.len() + 1);
    entries.push(wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(params),
    });
    entries.extend(
        buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.as_entire_binding(),
            }),
    );
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(label),
        layout: &pipeline.layout,
        entries: &entries,
    })
}
