//! gemv: `y[z] = W[e(z)] · x[z]` for T rows z of x, the memory-bound heart of every decode step,
//! with W in any weight format (`quant::matrix` layout, unpacked in registers by
//! shaders/include/weights.wgsl) and f32 accumulation. One workgroup of 256 computes `256 / lanes` rows of
//! one token with `lanes` invocations per row, each loading 16-byte chunks; x is staged in
//! workgroup memory. `GemvLayout` places W, x and y inside larger buffers (offsets, strides, an
//! interleaved output) and, for MoE, picks each token's expert matrix from its dispatch record.
//! Constraints: K a multiple of the format's chunk (4 elements for f32, 32 for FP4), `M ≥ 1`,
//! `lanes` ∈ {32, 64, 128, 256}. Reference: `model::reference::gemv` on the dequantized weights.
//! Long FP4 rows take a second kernel with the same params and results, `gemv_wide` (x in
//! registers, the workgroup walking its rows; `is_wide` says when).

use crate::check::Tolerance;
use crate::gpu::{GpuContext, ShaderSource};
use crate::quant::{matrix, Format};

use super::{check_len, grid_2d, launch_grid, KernelError};

pub const SHADER: ShaderSource = gemv_shaped_source!("gemv");

/// The FP4 gemv for long rows, x in registers (shaders/gemv_wide.wgsl): same params, bindings
/// and results; `dispatch_layout` picks it where `is_wide` says.
pub const WIDE: ShaderSource = gemv_shaped_source!("gemv_wide");

/// Rows each gemv_wide workgroup walks (a multiple of 4): as many as the tile kernel's
/// workgroups take at 32 lanes and 4 rows per lane group, where both were timed.
const WIDE_ROWS: u32 = 32;
/// The K that `is_wide` asks for a multiple of: one gemv_wide pass, 256 chunks of 32 elements.
pub const WIDE_K: u32 = 8192;

/// Invocations per workgroup, as in the shader.
const WORKGROUP: u32 = 256;
/// The shader's default `LANES`: invocations that share one row.
pub const DEFAULT_LANES: u32 = 32;
/// The `LANES` values the shader supports (powers of two, at most one workgroup).
pub const LANE_CHOICES: [u32; 4] = [32, 64, 128, 256];

/// Mirrors `struct GemvParams` in gemv.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GemvParams {
    pub m: u32,
    pub k: u32,
    pub tokens: u32,
    pub experts: u32,
    pub w_offset: u32,
    pub expert_stride: u32,
    pub meta_stride: u32,
    pub x_stride: u32,
    pub x_offset: u32,
    pub y_stride: u32,
    pub y_offset: u32,
    pub seg: u32,
    pub seg_stride: u32,
    /// gate_up_swiglu: chunks from an expert's gate matrix to its up matrix.
    pub up_offset: u32,
    /// FP8 x (X_FP8): where token 0's tile scales start, in vec4s; token z's are x_stride
    /// further on, like its codes.
    pub x_scales: u32,
    pub _pad: u32,
}

/// The problem and the variant: `y[M] = W[M, K] · x[K]` with W in `format` and `lanes`
/// invocations per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvShape {
    pub m: u32,
    pub k: u32,
    pub lanes: u32,
    pub format: Format,
}

impl GemvShape {
    /// `[m, k]` in f32 with the default lanes per row.
    pub fn new(m: u32, k: u32) -> Self {
        Self {
            m,
            k,
            lanes: DEFAULT_LANES,
            format: Format::F32,
        }
    }

    pub fn with_format(self, format: Format) -> Self {
        Self { format, ..self }
    }

    /// Chunks (16 bytes) one `[m, k]` matrix of this format takes, scales included.
    pub fn matrix_chunks(self) -> u32 {
        matrix::matrix_chunks(self.format, self.m as usize, self.k as usize) as u32
    }
}

/// The override constants of shaders/include/weights.wgsl for `format`.
pub(crate) fn format_constants(format: Format) -> [(&'static str, f64); 2] {
    let chunk_x4 = matrix::elements_per_chunk(format) / 4;
    [
        ("FORMAT", f64::from(matrix::format_code(format))),
        ("CHUNK_X4", chunk_x4 as f64),
    ]
}

/// Checks that K fills whole chunks of `format`.
pub(crate) fn check_format_k(
    what: &'static str,
    format: Format,
    k: u32,
) -> Result<(), KernelError> {
    let by = matrix::elements_per_chunk(format) as u32;
    if k == 0 || !k.is_multiple_of(by) {
        return Err(KernelError::NotDivisible {
            dim: what,
            value: k.into(),
            by: by.into(),
        });
    }
    Ok(())
}

/// Where W, x and y live. Offsets and strides of W count 16-byte chunks (`GemvShape::
/// matrix_chunks` per matrix; a vec4 of f32), those of x vec4s, those of y floats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvLayout {
    /// Rows of x (the grid's z).
    pub tokens: u32,
    pub w_offset: u32,
    /// Grouped experts: `Some((experts, stride in vec4s, meta stride in u32s))`; token z uses
    /// matrix `meta[z · meta_stride]`.
    pub grouped: Option<(u32, u32, u32)>,
    pub x_stride: u32,
    pub x_offset: u32,
    pub y_stride: u32,
    pub y_offset: u32,
    /// Output row m goes to `(m / seg) · seg_stride + m % seg` within the token's y row.
    pub seg: u32,
    pub seg_stride: u32,
    /// x as FP8 dispatch records (`quant::activation`): `Some(offset)` of token 0's tile scales
    /// in vec4s; x_offset then points at its E4M3 codes (K/16 vec4s). None: x is f32.
    pub x_fp8_scales: Option<u32>,
}

impl GemvLayout {
    /// `tokens` contiguous rows of x (K wide) and y (M wide), one matrix at the buffer's start.
    pub fn rows(shape: GemvShape, tokens: u32) -> Self {
        Self {
            tokens,
            w_offset: 0,
            grouped: None,
            x_stride: shape.k / 4,
            x_offset: 0,
            y_stride: shape.m,
            y_offset: 0,
            seg: shape.m,
            seg_stride: shape.m,
            x_fp8_scales: None,
        }
    }
}

/// Records `y = W · x` for one token into `pass`. `w` holds one matrix of `shape.format`, `x`
/// holds `K` f32, `y` at least `M`. Returns the bytes it moves (`bytes_moved`).
pub fn dispatch(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    w: &wgpu::Buffer,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    shape: GemvShape,
) -> Result<u64, KernelError> {
    dispatch_layout(ctx, pass, [w, x, y, x], shape, GemvLayout::rows(shape, 1))
}

/// Records `y[z] = W[e(z)] · x[z]` for every token of `layout`. `buffers` is `[w, x, y, meta]`
/// (pass any read-only buffer as meta when not grouped). Returns the bytes it must move.
pub fn dispatch_layout(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    buffers: [&wgpu::Buffer; 4],
    shape: GemvShape,
    layout: GemvLayout,
) -> Result<u64, KernelError> {
    if is_wide(shape) {
        return dispatch_wide(ctx, pass, buffers, shape, layout);
    }
    dispatch_tile(ctx, pass, buffers, shape, layout)
}

/// Records the tile kernel (gemv.wgsl) whatever the shape.
fn dispatch_tile(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    buffers: [&wgpu::Buffer; 4],
    shape: GemvShape,
    layout: GemvLayout,
) -> Result<u64, KernelError> {
    let kernel = GemvKernel {
        source: SHADER,
        matrices: 1,
        rows: Rows::LaneGroups(Some(rows_per_lane(shape))),
    };
    record(ctx, pass, kernel, buffers, shape, layout)
}

/// Whether `dispatch_layout` records gemv_wide: FP4 weights, K a multiple of `WIDE_K` (at K =
/// 7168 and 16384 it is no faster than the tile kernel on an H100), and enough rows for
/// `MIN_WORKGROUPS` workgroups. (H200, 256 MiB of weights, K = 8192: NVFP4 2.59 TB/s against
/// the tile kernel's 2.37, MXFP4 2.50 against 2.34; docs/BENCHMARKS.md, Decisions.)
pub fn is_wide(shape: GemvShape) -> bool {
    reads_wide(shape.format)
        && shape.k.is_multiple_of(WIDE_K)
        && u64::from(shape.m).div_ceil(u64::from(WIDE_ROWS)) >= MIN_WORKGROUPS
}

/// The formats gemv_wide reads: FP4, whose decode bounds the tile kernel. (int8 and FP8 through
/// a gemv_wide of 16-element chunks were 0.5-8% slower than the tile kernel on an H100:
/// docs/BENCHMARKS.md, Decisions.)
pub fn reads_wide(format: Format) -> bool {
    matches!(format, Format::Nvfp4 | Format::Mxfp4)
}

/// Which kernel streams a gemv: the one the model runs (`Auto`: gemv_wide where `is_wide`, the
/// tile kernel elsewhere), or one of the two forced, so that the bandwidth benchmark can time
/// both on one shape (`moescope bench kernels --variant`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GemvVariant {
    #[default]
    Auto,
    /// gemv.wgsl, x staged in workgroup memory tile by tile: every format.
    Tile,
    /// gemv_wide.wgsl, x in registers: the formats of `reads_wide`, K a multiple of 128.
    Wide,
}

impl GemvVariant {
    pub const ALL: [GemvVariant; 3] = [GemvVariant::Auto, GemvVariant::Tile, GemvVariant::Wide];

    pub fn name(self) -> &'static str {
        match self {
            GemvVariant::Auto => "auto",
            GemvVariant::Tile => "tile",
            GemvVariant::Wide => "wide",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == s)
    }

    /// Whether this variant records gemv_wide for `shape`.
    pub fn is_wide(self, shape: GemvShape) -> bool {
        match self {
            GemvVariant::Auto => is_wide(shape),
            GemvVariant::Tile => false,
            GemvVariant::Wide => true,
        }
    }

    /// Records `y = W · x` for one token with this variant's kernel (as `dispatch`).
    pub fn dispatch(
        self,
        ctx: &GpuContext,
        pass: &mut wgpu::ComputePass<'_>,
        [w, x, y]: [&wgpu::Buffer; 3],
        shape: GemvShape,
    ) -> Result<u64, KernelError> {
        let layout = GemvLayout::rows(shape, 1);
        if self.is_wide(shape) {
            dispatch_wide(ctx, pass, [w, x, y, x], shape, layout)
        } else {
            dispatch_tile(ctx, pass, [w, x, y, x], shape, layout)
        }
    }

    /// The kernel this variant records for `shape`: "gemv" or "gemv_wide".
    pub fn kernel_name(self, shape: GemvShape) -> &'static str {
        if self.is_wide(shape) {
            WIDE.name
        } else {
            SHADER.name
        }
    }

    /// The tolerance of this variant's kernel for `shape` (`tolerance`).
    pub fn tolerance(self, shape: GemvShape) -> Tolerance {
        let k = shape.k as usize;
        if self.is_wide(shape) {
            tolerance_wide(shape.format, k)
        } else {
            tolerance_tile(shape.format, k, shape.lanes)
        }
    }
}

/// The kernel `dispatch_layout` records for `shape`: "gemv" or "gemv_wide".
pub fn kernel_name(shape: GemvShape) -> &'static str {
    GemvVariant::Auto.kernel_name(shape)
}

/// The tolerance of what `dispatch_layout` records for `shape`, against the reference on the
/// dequantized weights (each kernel sums in its own order).
pub fn tolerance(shape: GemvShape) -> Tolerance {
    GemvVariant::Auto.tolerance(shape)
}

/// The tile kernel in f32, compared with `scale = Σ|w·x|` per row: γ_n (`check::gamma`) for the
/// kernel's order, 1 product and 3 adds inside the vec4 `dot`, ⌈K/(4·lanes)⌉ adds into the
/// lane's accumulator and log2(lanes) levels of the tree. (FMA contraction only removes
/// roundings.)
pub fn tolerance_f32(k: usize, lanes: u32) -> Tolerance {
    let lanes = lanes.max(1);
    let n = 1 + 3 + k.div_ceil(4 * lanes as usize) + lanes.ilog2() as usize;
    Tolerance::gamma(
        n,
        "forward error bound γ_n·Σ|w·x| of the kernel's summation order",
    )
}

/// The tile kernel with weights in `format`, against the reference on the dequantized weights.
/// As `tolerance_f32`: the roundings of one term inside its chunk (`chunk_roundings`), then
/// ⌈K/(E·lanes)⌉ adds into the lane's accumulator (E elements per chunk) and log2(lanes) in the
/// tree.
pub fn tolerance_tile(format: Format, k: usize, lanes: u32) -> Tolerance {
    if format == Format::F32 {
        return tolerance_f32(k, lanes);
    }
    let lanes = lanes.max(1);
    let e = matrix::elements_per_chunk(format);
    let n = chunk_roundings(format) + k.div_ceil(e * lanes as usize) + lanes.ilog2() as usize;
    Tolerance::gamma(
        n,
        "forward error bound γ_n·Σ|w·x| of the quantized kernel's summation order",
    )
}

/// gemv_wide (FP4, x in registers), against the reference on the dequantized weights: a term
/// goes through its half chunk's chain of 16 FMAs, the block scale (with the reference's
/// rounding, `scale_roundings`), the add of the chunk's two halves, four 4-to-1 steps of the
/// workgroup's reduction (3 adds each), and one add per later pass over K (`WIDE_K` elements a
/// pass).
pub fn tolerance_wide(format: Format, k: usize) -> Tolerance {
    let passes = k.div_ceil(WIDE_K as usize);
    let n = 16 + scale_roundings(format) + 1 + 4 * 3 + (passes - 1);
    Tolerance::gamma(
        n,
        "forward error bound γ_n·Σ|w·x| of gemv_wide's summation order",
    )
}

/// The roundings one term of a chunk goes through before the chunk's sum reaches the lane's
/// accumulator, in weights.wgsl's order. FP4 chains its products as FMAs through a whole scale
/// block (32 elements for MXFP4, 16 for NVFP4); the other formats take 1 product and 3 adds
/// inside a vec4 `dot`, then E/4 − 1 adds between dots. Scaled formats add the multiply by the
/// block scale and the reference's own rounding of code × scale, NVFP4 two more (its tensor
/// scale, applied to each row sum, and in the reference to each weight).
fn chunk_roundings(format: Format) -> usize {
    let e = matrix::elements_per_chunk(format);
    let chain = match format {
        Format::Mxfp4 => 32,
        Format::Nvfp4 => 16,
        _ => 1 + 3 + (e / 4 - 1),
    };
    chain + scale_roundings(format)
}

fn scale_roundings(format: Format) -> usize {
    match format {
        Format::F32 | Format::F16 | Format::Bf16 => 0,
        Format::Nvfp4 => 4,
        _ => 2,
    }
}

/// Records gemv_wide whatever the shape's size (what `dispatch_layout` does for `is_wide`
/// shapes; public so that tests run it on small matrices). FP4 weights and K a multiple of 128
/// only; `shape.lanes` is not used.
pub fn dispatch_wide(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    buffers: [&wgpu::Buffer; 4],
    shape: GemvShape,
    layout: GemvLayout,
) -> Result<u64, KernelError> {
    if !reads_wide(shape.format) {
        return Err(KernelError::Format {
            what: "gemv_wide (FP4 only)",
            format: shape.format.name(),
        });
    }
    if !shape.k.is_multiple_of(128) {
        return Err(KernelError::NotDivisible {
            dim: "gemv_wide K",
            value: shape.k.into(),
            by: 128,
        });
    }
    let kernel = GemvKernel {
        source: WIDE,
        matrices: 1,
        rows: Rows::Walk(WIDE_ROWS),
    };
    record(ctx, pass, kernel, buffers, shape, layout)
}

/// A gemv-shaped kernel: its source, how many matrices (one, or gate and up) each output row
/// reads, and how its workgroups split the rows.
pub(crate) struct GemvKernel {
    pub source: ShaderSource,
    pub matrices: u32,
    pub rows: Rows,
}

/// How a gemv-shaped kernel's workgroups split the rows.
pub(crate) enum Rows {
    /// `256 / lanes` lane groups of `LANES` invocations, each computing `ROWS_PER_LANE` rows
    /// (None: the kernel has no such constant; one row).
    LaneGroups(Option<u32>),
    /// The whole workgroup walks this many rows (gemv_wide's `ROWS`).
    Walk(u32),
}

/// Workgroups a launch keeps at least, when choosing rows per lane group: enough to fill a large
/// GPU several times over.
const MIN_WORKGROUPS: u64 = 512;

/// Rows each lane group computes: up to 4 (gemv.wgsl's most), but only while the launch keeps
/// `MIN_WORKGROUPS`: the model's small matrices need the workgroups more than the loads in
/// flight. gemv.wgsl loads each row's next chunk while it decodes the current one, so a lane has
/// two chunks of every row in flight. (H200, 256 MiB of f32 weights: 1 row per lane group
/// streams 0.96 of a copy's bandwidth, 4 rows 1.18; FP4 streams as fast at 4 rows as at 8.)
pub fn rows_per_lane(shape: GemvShape) -> u32 {
    let pass = u64::from(WORKGROUP / shape.lanes);
    let mut r = 4;
    while r > 1 && u64::from(shape.m).div_ceil(pass * u64::from(r)) < MIN_WORKGROUPS {
        r /= 2;
    }
    r
}

/// The body of every gemv-shaped kernel (gemv, gate_up_swiglu): checks the layout against the
/// buffers, then records the kernel.
pub(crate) fn record(
    ctx: &GpuContext,
    pass: &mut wgpu::ComputePass<'_>,
    GemvKernel {
        source,
        matrices,
        rows,
    }: GemvKernel,
    [w, x, y, meta]: [&wgpu::Buffer; 4],
    shape: GemvShape,
    layout: GemvLayout,
) -> Result<u64, KernelError> {
    let GemvShape {
        m,
        k,
        lanes,
        format,
    } = shape;
    check_shape(shape)?;
    let l = layout;
    if l.seg == 0 || l.tokens == 0 {
        return Err(KernelError::Shape {
            what: "gemv segment width and tokens",
            expected: 1,
            got: 0,
        });
    }
    let (m64, k4) = (u64::from(m), u64::from(k / 4));
    let last_token = u64::from(l.tokens - 1);
    let (experts, expert_stride, meta_stride) = l.grouped.unwrap_or((1, 0, 0));
    if experts == 0 {
        return Err(KernelError::Shape {
            what: "gemv grouped experts",
            expected: 1,
            got: 0,
        });
    }
    let chunks = u64::from(shape.matrix_chunks());
    let w_chunks = u64::from(l.w_offset)
        + u64::from(experts - 1) * u64::from(expert_stride)
        + u64::from(matrices) * chunks;
    check_len("gemv w words", w, 4 * w_chunks)?;
    // x: K/4 vec4s of f32, or K/16 vec4s of E4M3 codes and their tile scales.
    let last_x = u64::from(l.x_offset) + last_token * u64::from(l.x_stride);
    match l.x_fp8_scales {
        None => check_len("gemv x bytes", x, 4 * (last_x + k4))?,
        Some(scales) => {
            if !k.is_multiple_of(16) {
                return Err(KernelError::NotDivisible {
                    dim: "gemv FP8 x K",
                    value: k.into(),
                    by: 16,
                });
            }
            check_len("gemv FP8 x codes", x, 4 * (last_x + k4 / 4))?;
            let tiles = u64::from(k).div_ceil(crate::quant::activation::TILE as u64);
            let last_scales = u64::from(scales) + last_token * u64::from(l.x_stride);
            check_len("gemv FP8 x scales", x, 4 * last_scales + tiles)?;
        }
    }
    let last_row = m64 - 1;
    let y_last = u64::from(l.y_offset)
        + last_token * u64::from(l.y_stride)
        + last_row / u64::from(l.seg) * u64::from(l.seg_stride)
        + last_row % u64::from(l.seg);
    check_len("gemv y bytes", y, y_last + 1)?;
    if l.grouped.is_some() {
        check_len("gemv meta", meta, last_token * u64::from(meta_stride) + 1)?;
    }
    let params = GemvParams {
        m,
        k,
        tokens: l.tokens,
        experts,
        w_offset: l.w_offset,
        expert_stride,
        meta_stride,
        x_stride: l.x_stride,
        x_offset: l.x_offset,
        y_stride: l.y_stride,
        y_offset: l.y_offset,
        seg: l.seg,
        seg_stride: l.seg_stride,
        up_offset: shape.matrix_chunks(),
        x_scales: l.x_fp8_scales.unwrap_or(0),
        _pad: 0,
    };
    let [f, c] = format_constants(format);
    let mut constants = vec![f, c];
    if l.x_fp8_scales.is_some() {
        constants.push(("X_FP8", 1.0));
    }
    let rows_per_workgroup = match rows {
        Rows::LaneGroups(rows_per_lane) => {
            constants.push(("LANES", f64::from(lanes)));
            if let Some(r) = rows_per_lane {
                constants.push(("ROWS_PER_LANE", f64::from(r)));
            }
            (WORKGROUP / lanes) * rows_per_lane.unwrap_or(1)
        }
        Rows::Walk(r) => {
            constants.push(("ROWS", f64::from(r)));
            r
        }
    };
    launch_grid(
        ctx,
        pass,
        (source, &constants),
        &params,
        &[w, x, y, meta],
        grid(ctx, m, rows_per_workgroup, l.tokens)?,
    )?;
    // Each distinct matrix is read at least once: one for a plain projection; for grouped experts
    // at most one per token (exact at decode, where top-k experts are distinct).
    let read = if l.grouped.is_some() {
        u64::from(l.tokens.min(experts))
    } else {
        1
    };
    let x_bytes = match l.x_fp8_scales {
        None => 4 * u64::from(k),
        Some(_) => u64::from(k) + 4 * u64::from(k).div_ceil(crate::quant::activation::TILE as u64),
    };
    Ok(
        read * u64::from(matrices) * chunks * matrix::CHUNK_BYTES as u64
            + u64::from(l.tokens) * (x_bytes + 4 * m64),
    )
}

/// Rows spread over a 2D grid (`rows` per workgroup), tokens along z.
fn grid(ctx: &GpuContext, m: u32, rows: u32, tokens: u32) -> Result<(u32, u32, u32), KernelError> {
    let max = ctx.adapter.limits.max_compute_workgroups_per_dimension;
    let (gx, gy) = grid_2d(u64::from(m).div_ceil(u64::from(rows)), max)?;
    Ok((gx, gy, tokens))
}

fn check_shape(
    GemvShape {
        m,
        k,
        lanes,
        format,
    }: GemvShape,
) -> Result<(), KernelError> {
    if !LANE_CHOICES.contains(&lanes) {
        return Err(KernelError::NotDivisible {
            dim: "gemv lanes (32..=256, power of two)",
            value: lanes.into(),
            by: 32,
        });
    }
    if m == 0 {
        return Err(KernelError::Shape {
            what: "gemv M",
            expected: 1,
            got: 0,
        });
    }
    check_format_k("gemv K (whole chunks of the weight format)", format, k)
}

/// Bytes one single-token dispatch must move through memory at least: W (scales included) and x
/// read once, y written once.
pub fn bytes_moved(shape: GemvShape) -> u64 {
    u64::from(shape.matrix_chunks()) * matrix::CHUNK_BYTES as u64 + 4 * u64::from(shape.k + shape.m)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rows_are_grouped_only_on_large_matrices() {
        use super::{rows_per_lane, GemvShape};
        use crate::quant::Format;
        let big = GemvShape::new(58_112, 8192);
        assert_eq!(rows_per_lane(big.with_format(Format::Nvfp4)), 4);
        assert_eq!(rows_per_lane(big.with_format(Format::Int8)), 4);
        assert_eq!(rows_per_lane(big), 4);
        // deepseek-mini's largest projection keeps one row per lane group.
        assert_eq!(
            rows_per_lane(GemvShape::new(768, 256).with_format(Format::Nvfp4)),
            1
        );
        // 8192 rows in 8-row passes: 1024 workgroups at 1 row, 512 at 2, 256 at 4.
        assert_eq!(
            rows_per_lane(GemvShape::new(8192, 256).with_format(Format::Mxfp4)),
            2
        );
    }
}
