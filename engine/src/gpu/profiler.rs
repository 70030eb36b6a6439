//! Kernel timing: a pair of timestamp queries around each compute pass where the adapter has
//! `timestamp-query`, wall-clock time around a whole submission otherwise. Browsers may round
//! timestamps (Chrome: to about 100 µs unless Dawn's quantization is off), so the profiler also
//! reports the resolution it actually saw in the raw values.

use serde::Serialize;

use super::{GpuContext, GpuError};

/// Where a time came from, as the UI labels it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingSource {
    /// GPU timestamps written at the start and end of each pass.
    TimestampQuery,
    /// Host time around submit-and-wait: includes submission and read-back overhead.
    WallClock,
}

/// Timing of one compute pass.
#[derive(Clone, Debug, Serialize)]
pub struct PassTiming {
    pub label: String,
    pub gpu_ns: f64,
}

/// What one read of the profiler returns.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileReport {
    pub passes: Vec<PassTiming>,
    /// The largest tick that divides every raw timestamp, in ns: ~1 ns means unquantized, 100000
    /// means the browser rounds to 100 µs and single kernels cannot be timed.
    pub observed_resolution_ns: f64,
}

pub struct Profiler {
    query_set: Option<wgpu::QuerySet>,
    resolve: Option<wgpu::Buffer>,
    capacity_passes: u32,
    labels: Vec<String>,
    period_ns: f64,
}

impl Profiler {
    /// A profiler for up to `capacity_passes` timed passes per read.
    pub fn new(ctx: &GpuContext, capacity_passes: u32) -> Self {
        let capacity_passes = capacity_passes.clamp(1, 2048);
        let (query_set, resolve) = if ctx.has_timestamps() {
            let count = capacity_passes * 2;
            let qs = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("profiler"),
                ty: wgpu::QueryType::Timestamp,
                count,
            });
            let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("profiler resolve"),
                size: u64::from(count) * 8,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            (Some(qs), Some(buf))
        } else {
            (None, None)
        };
        Self {
            query_set,
            resolve,
            capacity_passes,
            labels: Vec::new(),
            period_ns: f64::from(ctx.adapter.timestamp_period_ns),
        }
    }

    pub fn source(&self) -> TimingSource {
        if self.query_set.is_some() {
            TimingSource::TimestampQuery
        } else {
            TimingSource::WallClock
        }
    }

    /// Timestamp writes for the next pass, or `None` (no timestamps, or the capacity is used up:
    /// that pass then simply goes untimed).
    pub fn timestamp_writes(
        &mut self,
        label: &str,
    ) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        let index = self.labels.len() as u32;
        if index >= self.capacity_passes {
            return None;
        }
        let query_set = self.query_set.as_ref()?;
        self.labels.push(label.to_owned());
        Some(wgpu::ComputePassTimestampWrites {
            query_set,
            beginning_of_pass_write_index: Some(index * 2),
            end_of_pass_write_index: Some(index * 2 + 1),
        })
    }

    /// Records the copy of this frame's timestamps; call once, after the last timed pass.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        if let (Some(qs), Some(buf)) = (&self.query_set, &self.resolve) {
            let used = self.labels.len() as u32 * 2;
            if used > 0 {
                encoder.resolve_query_set(qs, 0..used, buf, 0);
            }
        }
    }

    /// Reads the timings of the passes recorded since the last read (after the submission that
    /// contains `resolve`), and starts a new frame.
    pub async fn read(&mut self, ctx: &GpuContext) -> Result<ProfileReport, GpuError> {
        let labels = std::mem::take(&mut self.labels);
        let Some(buf) = &self.resolve else {
            return Ok(ProfileReport {
                passes: Vec::new(),
                observed_resolution_ns: f64::NAN,
            });
        };
        if labels.is_empty() {
            return Ok(ProfileReport {
                passes: Vec::new(),
                observed_resolution_ns: f64::NAN,
            });
        }
        let raw: Vec<u64> = super::read_back(ctx, buf).await?;
        let raw = &raw[..labels.len() * 2];
        let passes = labels
            .into_iter()
            .zip(raw.chunks_exact(2))
            .map(|(label, pair)| PassTiming {
                label,
                gpu_ns: pair[1].saturating_sub(pair[0]) as f64 * self.period_ns,
            })
            .collect();
        Ok(ProfileReport {
            passes,
            observed_resolution_ns: gcd_resolution_ns(raw, self.period_ns),
        })
    }
}

/// The greatest common divisor of the non-zero raw timestamps, in ns: the coarsest tick that
/// could have produced all of them. NaN when there is no non-zero stamp.
pub fn gcd_resolution_ns(raw: &[u64], period_ns: f64) -> f64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = raw.iter().filter(|&&t| t != 0).fold(0, |g, &t| gcd(g, t));
    if g == 0 {
        f64::NAN
    } else {
        g as f64 * period_ns
    }
}

#[cfg(test)]
mod tests {
    use super::gcd_resolution_ns;

    #[test]
    fn resolution_of_quantized_stamps_is_the_quantum() {
        let raw = [5_453_800_000, 5_453_900_000, 5_454_200_000];
        assert_eq!(gcd_resolution_ns(&raw, 1.0), 100_000.0);
    }

    #[test]
    fn resolution_of_fine_stamps_is_small() {
        let raw = [5_453_895_811_862, 5_453_895_813_001];
        assert!(gcd_resolution_ns(&raw, 1.0) < 10.0);
    }

    #[test]
    fn resolution_scales_with_the_tick_period() {
        assert_eq!(gcd_resolution_ns(&[64, 128], 0.5), 32.0);
        assert!(gcd_resolution_ns(&[0, 0], 1.0).is_nan());
    }
}
