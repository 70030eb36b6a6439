//! One module per kernel family, each paired with `shaders/<same name>.wgsl`: its params struct
//! (mirrored by a WGSL struct), its shader source and a `dispatch` that validates shapes.

pub mod copy_vec4;
pub mod gemv;

use crate::gpu::GpuError;

/// A kernel refused its inputs; every variant carries the numbers that were wrong.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("{what}: expected {expected}, got {got}")]
    Shape {
        what: &'static str,
        expected: u64,
        got: u64,
    },
    #[error("{dim} = {value} must be a multiple of {by}")]
    NotDivisible {
        dim: &'static str,
        value: u64,
        by: u64,
    },
    #[error("{what} = {got} exceeds the limit {max}")]
    LimitExceeded {
        what: &'static str,
        got: u64,
        max: u64,
    },
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// Checks that `buffer` holds at least `elems` 4-byte values.
pub(crate) fn check_len(
    what: &'static str,
    buffer: &wgpu::Buffer,
    elems: u64,
) -> Result<(), KernelError> {
    if buffer.size() < elems * 4 {
        return Err(KernelError::Shape {
            what,
            expected: elems * 4,
            got: buffer.size(),
        });
    }
    Ok(())
}

/// Spreads `groups` workgroups over a 2D grid (x ≤ the per-dimension limit); shaders recover the
/// flat index as `wg.x + wg.y * num_workgroups.x` and bounds-check it.
pub(crate) fn grid_2d(groups: u64, max_per_dim: u32) -> Result<(u32, u32), KernelError> {
    let max = u64::from(max_per_dim.max(1));
    let x = groups.clamp(1, max);
    let y = groups.div_ceil(x).max(1);
    if y > max {
        return Err(KernelError::LimitExceeded {
            what: "workgroups",
            got: groups,
            max: max * max,
        });
    }
    Ok((x as u32, y as u32))
}

#[cfg(test)]
mod tests {
    use super::grid_2d;

    #[test]
    fn grid_covers_every_group_within_limits() {
        assert_eq!(grid_2d(1, 65535).unwrap(), (1, 1));
        assert_eq!(grid_2d(65535, 65535).unwrap(), (65535, 1));
        assert_eq!(grid_2d(65536, 65535).unwrap(), (65535, 2));
        assert!(grid_2d(65535u64 * 65535 + 1, 65535).is_err());
    }
}
