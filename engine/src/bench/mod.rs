//! Checks and measurements that the CLI, `cargo xtask bench` and the app share: a kernel run on
//! seeded data, compared with the reference, and timed with the profiler. Timings are reported,
//! never asserted.

pub mod decode;
pub mod formats;

use serde::Serialize;
use web_time::Instant;

use crate::check::{compare_scaled, Comparison, Tolerance};
use crate::gpu::{read_back, storage_buffer, storage_zeroed, GpuContext, Profiler, TimingSource};
use crate::kernels::gemv::GemvVariant;
use crate::kernels::{copy_vec4, gemv, KernelError};
use crate::model::reference;
use crate::quant::{self, Format};
use crate::rng::uniform_f32;

/// How long one kernel took, and how that was measured.
#[derive(Clone, Debug, Serialize)]
pub struct KernelTime {
    pub source: TimingSource,
    pub iterations: u32,
    /// Median over the timed dispatches (timestamps), or the mean of one submission (wall clock).
    pub per_dispatch_us: f64,
    /// The timer's tick as seen in the raw stamps; `None` for wall clock.
    pub observed_resolution_ns: Option<f64>,
    pub bytes_moved: u64,
    pub gb_per_s: f64,
}

/// The gemv kernel checked against the reference and timed.
#[derive(Clone, Debug, Serialize)]
pub struct GemvCheck {
    pub m: u32,
    pub k: u32,
    /// The kernel `gemv::dispatch` recorded ("gemv", or "gemv_wide" for long FP4 rows).
    pub kernel: &'static str,
    /// Invocations per row (the tile kernel's `LANES`; gemv_wide does not use it).
    pub lanes: u32,
    /// The weight format; the reference multiplies by the same weights dequantized.
    pub format: Format,
    pub tolerance: Tolerance,
    pub comparison: Comparison,
    pub passed: bool,
    pub time: KernelTime,
}

/// The bandwidth benchmark: gemv in every weight format against a plain vec4 copy, in one run.
#[derive(Clone, Debug, Serialize)]
pub struct BandwidthReport {
    pub adapter: crate::gpu::AdapterReport,
    pub buffer_mib: u64,
    /// The kernel the quantized formats ran through (`--variant`).
    pub kernel: GemvVariant,
    /// The ceiling every ratio divides by: the fastest of `copies`.
    pub copy_vec4: KernelTime,
    /// The copy at each size it was timed at (`buffer_mib`, then `COPY_EIGHTHS`).
    pub copies: Vec<CopyTime>,
    /// The f32 gemv, one entry per `LANES` variant, all on the same matrix.
    pub gemv: Vec<GemvCheck>,
    /// The fastest f32 variant's GB/s over copy GB/s.
    pub best_gemv_over_copy: f64,
    /// Every weight format at its fastest `LANES`, each matrix about `buffer_mib` of packed
    /// weights (scales included); GB/s counts the bytes the format really streams.
    pub formats: Vec<FormatBandwidth>,
}

/// The vec4 copy over two buffers of `mib` MiB each.
#[derive(Clone, Debug, Serialize)]
pub struct CopyTime {
    pub mib: f64,
    pub time: KernelTime,
}

/// The copy's other buffer sizes, in eighths of the benchmark's (which it is timed at first),
/// those that fit one storage binding. The ceiling is the fastest: one size is not enough, since
/// a copy can be slow at one size and not at another (H100: 2.45 TB/s over 256 MiB buffers,
/// 2.93 over 240 MiB ones; H200: 3.2 TB/s over 256 MiB, 4.0 over 1 GiB), and a slow ceiling
/// flatters every ratio (docs/BENCHMARKS.md, Decisions). Three eighths puts 192 MiB,
/// the fastest size on both GPUs at `--mib 256`, into the sweep at `--mib 512` too; at `--mib
/// 256` it is 96 MiB buffers, still four times a 50 MB L2 in all. 1.5, 3 and 6 times reach the
/// large buffers that are faster still on an H100 (896 MiB to 1.5 GiB).
const COPY_EIGHTHS: [u64; 8] = [3, 4, 6, 12, 16, 24, 32, 48];

#[derive(Clone, Debug, Serialize)]
pub struct FormatBandwidth {
    pub format: Format,
    /// The fastest variant, checked and timed.
    pub best: GemvCheck,
    /// Its GB/s over the copy's.
    pub over_copy: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Untimed passes per warm-up submission.
const WARM_UP_PASSES: u32 = 64;
/// How long the warm-up keeps the GPU busy before the timed passes. An idle GPU runs at low
/// clocks and takes a few hundred ms of load to raise them (H200: 345-780 MHz while
/// the host prepared the next matrix, 1980 MHz under load, ~0.5 s to get there); a burst of a few
/// ms right after would be timed at idle clocks, which slows the decode-bound kernels 2-4x and
/// the copy hardly at all, and made the same kernel's time vary from one run to the next.
const WARM_UP: std::time::Duration = std::time::Duration::from_millis(600);

/// Runs `record` `iterations` times, each in its own timed compute pass of one command buffer,
/// after an untimed warm-up of at least `WARM_UP`.
async fn time_passes(
    ctx: &GpuContext,
    label: &str,
    iterations: u32,
    bytes_moved: u64,
    record: &dyn Fn(&mut wgpu::ComputePass<'_>) -> Result<(), KernelError>,
) -> Result<KernelTime, KernelError> {
    // Warm-up, untimed, in submissions that are each waited for, until WARM_UP has passed.
    let warm_start = Instant::now();
    loop {
        let mut warm = ctx.device.create_command_encoder(&Default::default());
        for _ in 0..iterations.max(WARM_UP_PASSES) {
            let mut pass = warm.begin_compute_pass(&Default::default());
            record(&mut pass)?;
        }
        ctx.queue.submit([warm.finish()]);
        let probe = storage_zeroed(ctx, "warm-up probe", 4)?;
        read_back::<u32>(ctx, &probe).await?;
        if warm_start.elapsed() >= WARM_UP {
            break;
        }
    }

    let mut profiler = Profiler::new(ctx, iterations);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    for _ in 0..iterations {
        let timestamp_writes = profiler.timestamp_writes(label);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes,
        });
        record(&mut pass)?;
    }
    profiler.resolve(&mut encoder);
    let start = Instant::now();
    ctx.queue.submit([encoder.finish()]);
    let report = profiler.read(ctx).await?;
    let (per_dispatch_us, observed_resolution_ns) = match profiler.source() {
        TimingSource::TimestampQuery => (
            median(report.passes.iter().map(|p| p.gpu_ns / 1e3).collect()),
            Some(report.observed_resolution_ns),
        ),
        TimingSource::WallClock => {
            // Wait for the work itself: read back one small buffer after it.
            let probe = storage_zeroed(ctx, "wall clock probe", 4)?;
            read_back::<u32>(ctx, &probe).await?;
            (
                start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations.max(1)),
                None,
            )
        }
    };
    Ok(KernelTime {
        source: profiler.source(),
        iterations,
        per_dispatch_us,
        observed_resolution_ns,
        bytes_moved,
        gb_per_s: bytes_moved as f64 / (per_dispatch_us * 1e3),
    })
}

/// gemv on seeded f32 data of shape `[m, k]` with the default lanes: checked once against the
/// reference, then timed.
pub async fn gemv_check(
    ctx: &GpuContext,
    m: u32,
    k: u32,
    iterations: u32,
) -> Result<GemvCheck, KernelError> {
    let shape = gemv::GemvShape::new(m, k);
    Ok(
        gemv_variants(ctx, shape, GemvVariant::Auto, &[shape.lanes], iterations)
            .await?
            .remove(0),
    )
}

/// Rows of seeded weights a benchmark matrix repeats (whole FP8 blocks, whole scale words): the
/// reference and the quantizer only see this tile, however large the matrix.
const TILE_ROWS: u32 = 256;

/// gemv on one seeded `[m, k]` matrix of `shape.format` through `kernel`, for each `lanes`
/// variant, each checked against the reference on the dequantized weights and timed. A matrix of more than
/// `TILE_ROWS` rows (a multiple of it) repeats its first `TILE_ROWS` rows.
pub async fn gemv_variants(
    ctx: &GpuContext,
    shape: gemv::GemvShape,
    kernel: GemvVariant,
    lanes: &[u32],
    iterations: u32,
) -> Result<Vec<GemvCheck>, KernelError> {
    let (m, k, format) = (shape.m, shape.k, shape.format);
    let tile = if m > TILE_ROWS && m.is_multiple_of(TILE_ROWS) {
        TILE_ROWS
    } else {
        m
    };
    let (tu, ku) = (tile as usize, k as usize);
    gemv::check_format_k("gemv K (whole chunks of the weight format)", format, k)?;
    let w = uniform_f32(1, tu * ku, 1.0);
    let x = uniform_f32(2, ku, 1.0);
    let packed = quant::matrix::encode_repeated(format, &w, tu, ku, (m / tile) as usize)?;
    let w_buf = storage_buffer(ctx, "gemv w", &packed)?;
    drop(packed);
    let x_buf = storage_buffer(ctx, "gemv x", &x)?;
    let y_buf = storage_zeroed(ctx, "gemv y", u64::from(m) * 4)?;
    let deq = quant::dequantize(&quant::quantize(format, &w, tu, ku));
    let want_tile = reference::gemv(&deq, &x, tu, ku);
    let scale_tile = reference::gemv_magnitude(&deq, &x, tu, ku);
    let want: Vec<f32> = want_tile.iter().copied().cycle().take(m as usize).collect();
    let scale: Vec<f64> = scale_tile
        .iter()
        .copied()
        .cycle()
        .take(m as usize)
        .collect();
    // gemv_wide has no lanes to choose: one variant.
    let lanes = if kernel.is_wide(shape) {
        &lanes[..1]
    } else {
        lanes
    };
    let mut out = Vec::with_capacity(lanes.len());
    for &lanes in lanes {
        out.push(
            gemv_variant(
                ctx,
                [&w_buf, &x_buf, &y_buf],
                gemv::GemvShape { lanes, ..shape },
                kernel,
                &want,
                &scale,
                iterations,
            )
            .await?,
        );
    }
    Ok(out)
}

async fn gemv_variant(
    ctx: &GpuContext,
    [w_buf, x_buf, y_buf]: [&wgpu::Buffer; 3],
    shape: gemv::GemvShape,
    kernel: GemvVariant,
    want: &[f32],
    scale: &[f64],
    iterations: u32,
) -> Result<GemvCheck, KernelError> {
    let gemv::GemvShape {
        m,
        k,
        lanes,
        format,
    } = shape;
    let mu = m as usize;
    let clear = vec![f32::NAN; mu];
    ctx.queue
        .write_buffer(y_buf, 0, bytemuck::cast_slice(&clear));

    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        kernel.dispatch(ctx, &mut pass, [w_buf, x_buf, y_buf], shape)?;
    }
    ctx.queue.submit([encoder.finish()]);
    let got: Vec<f32> = read_back(ctx, y_buf).await?;
    let tolerance = kernel.tolerance(shape);
    let comparison = compare_scaled(&got[..mu], want, scale, tolerance);

    let bytes = gemv::bytes_moved(shape);
    let time = time_passes(ctx, "gemv", iterations, bytes, &|pass| {
        kernel
            .dispatch(ctx, pass, [w_buf, x_buf, y_buf], shape)
            .map(|_| ())
    })
    .await?;
    Ok(GemvCheck {
        m,
        k,
        kernel: kernel.kernel_name(shape),
        lanes,
        format,
        tolerance,
        passed: comparison.passed(),
        comparison,
        time,
    })
}

/// The vec4 copy over two buffers of about `bytes` each.
async fn time_copy(ctx: &GpuContext, bytes: u64, iterations: u32) -> Result<CopyTime, KernelError> {
    let bytes = bytes.max(16) / 16 * 16;
    let n_vec4 = u32::try_from(bytes / 16).map_err(|_| KernelError::LimitExceeded {
        what: "copy_vec4 vec4 count",
        got: bytes / 16,
        max: u32::MAX.into(),
    })?;
    let src = storage_buffer(ctx, "copy src", &uniform_f32(3, n_vec4 as usize * 4, 1.0))?;
    let dst = storage_zeroed(ctx, "copy dst", bytes)?;
    let time = time_passes(ctx, "copy_vec4", iterations, 2 * bytes, &|pass| {
        copy_vec4::dispatch(ctx, pass, &src, &dst, n_vec4)
    })
    .await?;
    Ok(CopyTime {
        mib: bytes as f64 / (1024.0 * 1024.0),
        time,
    })
}

/// The copy and the gemv over buffers of about `buffer_mib` MiB each, timed in one run: the f32
/// gemv at every `LANES`, then each of `formats` at every `LANES` (its best kept) through
/// `kernel` (the f32 gemv always through the tile kernel, its only one).
pub async fn bandwidth(
    ctx: &GpuContext,
    buffer_mib: u64,
    iterations: u32,
    formats: &[Format],
    kernel: GemvVariant,
) -> Result<BandwidthReport, KernelError> {
    let bytes = buffer_mib * 1024 * 1024;
    let mut copies = vec![time_copy(ctx, bytes, iterations).await?];
    let mut copy = copies[0].time.clone();
    let limits = &ctx.adapter.limits;
    let max_binding = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    for eighths in COPY_EIGHTHS {
        let copy_bytes = bytes * eighths / 8;
        if copy_bytes > max_binding {
            continue;
        }
        let c = time_copy(ctx, copy_bytes, iterations).await?;
        if c.time.gb_per_s > copy.gb_per_s {
            copy = c.time.clone();
        }
        copies.push(c);
    }

    // Rows of 8192 weights: long enough that every lane streams many chunks, even in FP4.
    let k: u32 = 8192;
    let rows_for = |format: Format| {
        let row_bytes = quant::matrix::matrix_bytes(format, TILE_ROWS as usize, k as usize)
            / u64::from(TILE_ROWS);
        let m = (bytes / row_bytes.max(1)) as u32;
        (m / TILE_ROWS).max(1) * TILE_ROWS
    };
    let f32_shape = gemv::GemvShape::new(rows_for(Format::F32), k);
    let gemv = gemv_variants(
        ctx,
        f32_shape,
        GemvVariant::Tile,
        &gemv::LANE_CHOICES,
        iterations,
    )
    .await?;
    let best = gemv.iter().map(|g| g.time.gb_per_s).fold(0.0, f64::max);
    let wanted = formats;
    let mut formats = Vec::with_capacity(wanted.len());
    for &format in wanted {
        let shape = gemv::GemvShape::new(rows_for(format), k).with_format(format);
        if kernel == GemvVariant::Wide && !gemv::reads_wide(format) {
            return Err(KernelError::Format {
                what: "gemv_wide (--variant wide)",
                format: format.name(),
            });
        }
        let variants = gemv_variants(ctx, shape, kernel, &gemv::LANE_CHOICES, iterations).await?;
        let Some(best) = variants
            .into_iter()
            .max_by(|a, b| a.time.gb_per_s.total_cmp(&b.time.gb_per_s))
        else {
            continue;
        };
        formats.push(FormatBandwidth {
            format,
            over_copy: best.time.gb_per_s / copy.gb_per_s,
            best,
        });
    }
    Ok(BandwidthReport {
        adapter: ctx.adapter.clone(),
        buffer_mib,
        kernel,
        best_gemv_over_copy: best / copy.gb_per_s,
        copy_vec4: copy,
        copies,
        gemv,
        formats,
    })
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}

/// How long the rack model takes: the app redraws on every slider move, so one evaluation must
/// stay well under 1 ms and a 64-point sweep under 16 ms (one frame at 60 Hz).
#[derive(Debug, Clone, Serialize)]
pub struct RackTiming {
    pub scenario: String,
    /// Median over the iterations, µs.
    pub eval_us: f64,
    pub sweep64_us: f64,
}

/// Times `rack::eval` and a 64-point `rack::sweep` of each named scenario (median of
/// `iterations` runs each). Scenarios whose phase has no sweep report 0 for it.
pub fn rack(
    scenarios: &[(String, crate::rack::Scenario)],
    iterations: u32,
) -> Result<Vec<RackTiming>, crate::rack::RackError> {
    let p = crate::rack::Params::fitted();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let n = iterations.max(1);
    scenarios
        .iter()
        .map(|(name, s)| {
            let mut evals = Vec::new();
            let mut sweeps = Vec::new();
            let sweepable = matches!(
                s.phase,
                crate::rack::scenario::Phase::Decode | crate::rack::scenario::Phase::Serve
            );
            for _ in 0..n {
                let t = Instant::now();
                std::hint::black_box(crate::rack::eval(s, &p)?);
                evals.push(t.elapsed().as_secs_f64() * 1e6);
                if sweepable {
                    let t = Instant::now();
                    std::hint::black_box(crate::rack::sweep(s, &p, 64)?);
                    sweeps.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
            Ok(RackTiming {
                scenario: name.clone(),
                eval_us: median(evals),
                sweep64_us: if sweepable { median(sweeps) } else { 0.0 },
            })
        })
        .collect()
}
