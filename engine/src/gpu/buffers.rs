//! Buffer helpers: storage and uniform buffers from typed slices, sizes checked against the
//! adapter's binding limit, and an async read-back that works on native and in the browser.

use wgpu::util::DeviceExt;

use super::{GpuContext, GpuError};

fn check_binding(ctx: &GpuContext, bytes: u64) -> Result<(), GpuError> {
    let max = ctx.adapter.limits.max_storage_buffer_binding_size;
    if bytes > max {
        return Err(GpuError::BufferTooLarge {
            what: "one storage binding",
            got: bytes,
            max,
        });
    }
    Ok(())
}

/// A storage buffer holding `data`, usable as a kernel input or output and as a copy source.
pub fn storage_buffer<T: bytemuck::Pod>(
    ctx: &GpuContext,
    label: &str,
    data: &[T],
) -> Result<wgpu::Buffer, GpuError> {
    let bytes = bytemuck::cast_slice::<T, u8>(data);
    check_binding(ctx, bytes.len() as u64)?;
    Ok(ctx
        .device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
        }))
}

/// A zero-filled storage buffer of `bytes` bytes.
pub fn storage_zeroed(ctx: &GpuContext, label: &str, bytes: u64) -> Result<wgpu::Buffer, GpuError> {
    check_binding(ctx, bytes)?;
    Ok(ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.max(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }))
}

/// Copies `src` into a mappable buffer and reads it as `T`s. On native the poll blocks until the
/// GPU is done; in the browser the poll is a no-op and the await yields to the event loop.
pub async fn read_back<T: bytemuck::Pod>(
    ctx: &GpuContext,
    src: &wgpu::Buffer,
) -> Result<Vec<T>, GpuError> {
    let mut all = read_back_many(ctx, &[(src, src.size())]).await?;
    Ok(bytemuck::pod_collect_to_vec(&all.pop().unwrap_or_default()))
}

/// Reads the first `bytes` of each buffer (a multiple of 4) through one staging buffer, one
/// submission and one map: a host round trip costs the same for one buffer or ten.
pub async fn read_back_many(
    ctx: &GpuContext,
    srcs: &[(&wgpu::Buffer, u64)],
) -> Result<Vec<Vec<u8>>, GpuError> {
    let mut offsets = Vec::with_capacity(srcs.len());
    let mut total = 0u64;
    for (src, bytes) in srcs {
        if *bytes > src.size() || bytes % wgpu::COPY_BUFFER_ALIGNMENT != 0 {
            return Err(GpuError::Readback(format!(
                "cannot read {bytes} bytes of a {}-byte buffer",
                src.size()
            )));
        }
        offsets.push(total);
        total += bytes;
    }
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("read_back staging"),
        size: total.max(4),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    for ((src, bytes), offset) in srcs.iter().zip(&offsets) {
        if *bytes > 0 {
            encoder.copy_buffer_to_buffer(src, 0, &staging, *offset, *bytes);
        }
    }
    ctx.queue.submit([encoder.finish()]);

    let (tx, rx) = futures_channel::oneshot::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |result| {
        // The receiver only disappears if the caller was dropped; nothing to report then.
        let _ = tx.send(result);
    });
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    rx.await
        .map_err(|_| GpuError::Readback("the map callback never ran (device lost?)".into()))?
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    if let Some(e) = ctx.take_uncaptured_error() {
        return Err(GpuError::Validation(e));
    }
    let values = {
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        srcs.iter()
            .zip(&offsets)
            .map(|((_, bytes), offset)| view[*offset as usize..(offset + bytes) as usize].to_vec())
            .collect()
    };
    staging.unmap();
    Ok(values)
}
