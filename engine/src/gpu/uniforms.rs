//! Kernel params live in one ring of uniform slots instead of a new buffer per launch. Creating
//! a uniform buffer with contents costs an allocation and, on a discrete GPU, a staging copy: at
//! the sandbox's size that was most of a decode step's host time. A slot is written with
//! `queue.write_buffer`, which the queue orders after every submitted command buffer and before
//! the next one, so reuse is safe as long as one command buffer holds fewer launches than the
//! ring has slots (`MAX_LAUNCHES_PER_SUBMIT`; the model's executor submits before that).

use std::sync::Mutex;

/// Slots in the ring.
pub const SLOTS: u64 = 4096;
/// Launches one command buffer may record before it must be submitted.
pub const MAX_LAUNCHES_PER_SUBMIT: usize = 1024;
/// Bytes of params one slot holds (every params struct is at most this).
pub const SLOT_PARAMS_BYTES: u64 = 64;

pub struct UniformRing {
    buffer: wgpu::Buffer,
    /// Bytes between slots: the device's uniform offset alignment (256 on most).
    stride: u64,
    next: Mutex<u64>,
}

impl UniformRing {
    pub fn new(device: &wgpu::Device, offset_alignment: u32) -> Self {
        let stride = u64::from(offset_alignment).max(SLOT_PARAMS_BYTES);
        Self {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kernel params ring"),
                size: SLOTS * stride,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            stride,
            next: Mutex::new(0),
        }
    }

    /// Writes `params` into the next slot and returns the binding of that slot.
    pub fn push<T: bytemuck::Pod>(
        &self,
        queue: &wgpu::Queue,
        params: &T,
    ) -> wgpu::BufferBinding<'_> {
        let bytes = bytemuck::bytes_of(params);
        debug_assert!(bytes.len() as u64 <= SLOT_PARAMS_BYTES);
        let slot = {
            let mut next = match self.next.lock() {
                Ok(next) => next,
                // A panic elsewhere while holding the lock leaves a valid counter.
                Err(poisoned) => poisoned.into_inner(),
            };
            let slot = *next;
            *next = (slot + 1) % SLOTS;
            slot
        };
        let offset = slot * self.stride;
        queue.write_buffer(&self.buffer, offset, bytes);
        wgpu::BufferBinding {
            buffer: &self.buffer,
            offset,
            size: wgpu::BufferSize::new(bytes.len() as u64),
        }
    }
}
