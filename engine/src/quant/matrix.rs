//! The GPU layout of one weight matrix in any format: what `shaders/include/weights.wgsl` reads.
//!
//! A `[rows, cols]` matrix is one run of 16-byte chunks (`vec4<u32>` in WGSL):
//!
//! 1. **Codes**, row-major, `cols / elements_per_chunk` chunks per row, packed as `quant::pack`
//!    says (little-endian in each u32 word; E2M1 codes in `pack_e2m1`'s sign-split slots): a chunk
//!    holds 4 f32, 8 f16/bf16, 16 int8/E4M3 or 32 E2M1 codes. So `cols` must be a multiple of the chunk's element count (32 for FP4).
//! 2. **Scales**, right after the codes, as u32 words, zero-padded to a whole chunk:
//!    - int8, fp8-e4m3: one f32 per block (1×32, 128×128), row-major over blocks;
//!    - nvfp4: word 0 is the f32 per-tensor scale, then one E4M3 byte per 1×16 block, row-major,
//!      four to a word, lowest byte first;
//!    - mxfp4: one E8M0 byte per 1×32 block, row-major, four to a word;
//!    - f32, f16, bf16: none.
//!
//! Stacked matrices (all experts of a layer, or an FFN's gate then up) follow one another, so an
//! offset counts chunks and a matrix's scales are found from its own start, its rows and cols.

use super::block::{block_shape, quantize};
use super::minifloat::E4M3;
use super::pack::{pack, pack_e2m1};
use super::Format;

/// Bytes of one chunk: what one invocation loads at a time.
pub const CHUNK_BYTES: usize = 16;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LayoutError {
    #[error("a {format} matrix needs a column count divisible by {by} (got {cols})")]
    Columns {
        format: &'static str,
        cols: usize,
        by: usize,
    },
    #[error(
        "a repeated {format} tile must fill whole scale words and blocks (tile of {rows} rows)"
    )]
    Tile { format: &'static str, rows: usize },
}

/// Bits of one element code.
pub fn code_bits(format: Format) -> u32 {
    match format {
        Format::F32 => 32,
        Format::F16 | Format::Bf16 => 16,
        Format::Int8 | Format::Fp8E4m3 => 8,
        Format::Nvfp4 | Format::Mxfp4 => 4,
    }
}

/// Elements in one 16-byte chunk.
pub fn elements_per_chunk(format: Format) -> usize {
    CHUNK_BYTES * 8 / code_bits(format) as usize
}

/// The number the WGSL's `FORMAT` override takes (shaders/include/weights.wgsl).
pub fn format_code(format: Format) -> u32 {
    match format {
        Format::F32 => 0,
        Format::F16 => 1,
        Format::Bf16 => 2,
        Format::Int8 => 3,
        Format::Fp8E4m3 => 4,
        Format::Nvfp4 => 5,
        Format::Mxfp4 => 6,
    }
}

/// u32 words of the scale region (before padding to a chunk).
fn scale_words(format: Format, rows: usize, cols: usize) -> usize {
    let (br, bc) = block_shape(format);
    let blocks = rows.div_ceil(br) * cols.div_ceil(bc);
    match format {
        Format::F32 | Format::F16 | Format::Bf16 => 0,
        Format::Int8 | Format::Fp8E4m3 => blocks,
        Format::Nvfp4 => 1 + blocks.div_ceil(4),
        Format::Mxfp4 => blocks.div_ceil(4),
    }
}

/// Chunks one `[rows, cols]` matrix takes, scales included.
pub fn matrix_chunks(format: Format, rows: usize, cols: usize) -> usize {
    rows * cols / elements_per_chunk(format) + scale_words(format, rows, cols).div_ceil(4)
}

/// Bytes one `[rows, cols]` matrix takes on the GPU, scales and padding included.
pub fn matrix_bytes(format: Format, rows: usize, cols: usize) -> u64 {
    (matrix_chunks(format, rows, cols) * CHUNK_BYTES) as u64
}

fn check_cols(format: Format, cols: usize) -> Result<(), LayoutError> {
    let by = elements_per_chunk(format);
    if cols == 0 || !cols.is_multiple_of(by) {
        return Err(LayoutError::Columns {
            format: format.name(),
            cols,
            by,
        });
    }
    Ok(())
}

/// Quantizes `data` (`rows × cols`, row-major) and lays it out as above.
pub fn encode(
    format: Format,
    data: &[f32],
    rows: usize,
    cols: usize,
) -> Result<Vec<u32>, LayoutError> {
    encode_repeated(format, data, rows, cols, 1)
}

/// Encodes `tile` (`tile_rows × cols`) and repeats it `copies` times down the rows: the same
/// matrix `encode` would give for the repeated data, without quantizing (or holding in f32) more
/// than one tile. Benchmarks use it for matrices several times the L2 cache. The tile must hold
/// whole blocks and whole scale words.
pub fn encode_repeated(
    format: Format,
    tile: &[f32],
    tile_rows: usize,
    cols: usize,
    copies: usize,
) -> Result<Vec<u32>, LayoutError> {
    check_cols(format, cols)?;
    let (br, _) = block_shape(format);
    let whole_words = match format {
        Format::Nvfp4 => (tile_rows * cols / 16).is_multiple_of(4),
        Format::Mxfp4 => (tile_rows * cols / 32).is_multiple_of(4),
        _ => true,
    };
    if copies > 1 && (!tile_rows.is_multiple_of(br) || !whole_words) {
        return Err(LayoutError::Tile {
            format: format.name(),
            rows: tile_rows,
        });
    }
    let q = quantize(format, tile, tile_rows, cols);
    let codes = match format {
        Format::Nvfp4 | Format::Mxfp4 => pack_e2m1(&q.codes, cols),
        _ => pack(&q.codes, cols, code_bits(format)),
    };
    let scales: Vec<u32> = match format {
        Format::F32 | Format::F16 | Format::Bf16 => Vec::new(),
        Format::Int8 | Format::Fp8E4m3 => q.scales.iter().map(|s| s.to_bits()).collect(),
        // The scales are exact E4M3 and E8M0 values, so these encodings are exact.
        Format::Nvfp4 => {
            let bytes: Vec<u32> = q
                .scales
                .iter()
                .map(|&s| u32::from(E4M3.encode(s)))
                .collect();
            pack(&bytes, bytes.len().max(1), 8)
        }
        Format::Mxfp4 => {
            let bytes: Vec<u32> = q
                .scales
                .iter()
                .map(|&s| u32::from(e8m0_encode(s)))
                .collect();
            pack(&bytes, bytes.len().max(1), 8)
        }
    };
    let rows = tile_rows * copies;
    let mut out = Vec::with_capacity(matrix_chunks(format, rows, cols) * 4);
    for _ in 0..copies {
        out.extend_from_slice(&codes);
    }
    if format == Format::Nvfp4 {
        out.push(q.tensor_scale.to_bits());
    }
    for _ in 0..copies {
        out.extend_from_slice(&scales);
    }
    out.resize(matrix_chunks(format, rows, cols) * 4, 0);
    Ok(out)
}

/// The E8M0 code of a power of two in `[2^-127, 2^127]`.
fn e8m0_encode(scale: f32) -> u8 {
    let e = scale.log2().round() as i32;
    (e + 127).clamp(0, 254) as u8
}

#[cfg(test)]
mod tests {
    use super::super::{dequantize, minifloat::e8m0_decode};
    use super::*;
    use half::{bf16, f16};

    /// Reads element (r, c) back from the layout the way the WGSL does: the CPU mirror of
    /// shaders/include/weights.wgsl, so that the two can only disagree if one of them is wrong.
    fn read(format: Format, words: &[u32], rows: usize, cols: usize, r: usize, c: usize) -> f32 {
        let bits = code_bits(format) as usize;
        let per_word = 32 / bits;
        let row_words = cols / per_word;
        let word = words[r * row_words + c / per_word];
        let code = match format {
            Format::Nvfp4 | Format::Mxfp4 => super::super::pack::unpack_e2m1(&[word], 1, 8)[c % 8],
            _ => (word >> (bits * (c % per_word))) & (((1u64 << bits) - 1) as u32),
        };
        let s = rows * row_words; // first scale word
        let scale_f32 = |i: usize| f32::from_bits(words[s + i]);
        let scale_byte = |base: usize, i: usize| (words[base + i / 4] >> (8 * (i % 4))) & 0xFF;
        match format {
            Format::F32 => f32::from_bits(code),
            Format::F16 => f16::from_bits(code as u16).to_f32(),
            Format::Bf16 => bf16::from_bits(code as u16).to_f32(),
            Format::Int8 => f32::from(code as u8 as i8) * scale_f32(r * cols.div_ceil(32) + c / 32),
            Format::Fp8E4m3 => {
                E4M3.decode(code as u8) * scale_f32(r / 128 * cols.div_ceil(128) + c / 128)
            }
            Format::Nvfp4 => {
                let e4m3 = scale_byte(s + 1, r * (cols / 16) + c / 16) as u8;
                super::super::minifloat::E2M1.decode(code as u8)
                    * (E4M3.decode(e4m3) * scale_f32(0))
            }
            Format::Mxfp4 => {
                let e8m0 = scale_byte(s, r * (cols / 32) + c / 32) as u8;
                super::super::minifloat::E2M1.decode(code as u8) * e8m0_decode(e8m0)
            }
        }
    }

    fn data(rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.003 * (1.0 + (i % 13) as f32))
            .collect()
    }

    #[test]
    fn the_layout_reads_back_as_dequantize() {
        let (rows, cols) = (130, 160);
        let w = data(rows, cols);
        for format in Format::ALL {
            let words = encode(format, &w, rows, cols).expect("160 columns fit every chunk");
            assert_eq!(
                words.len(),
                matrix_chunks(format, rows, cols) * 4,
                "{format:?}"
            );
            let want = dequantize(&quantize(format, &w, rows, cols));
            for r in 0..rows {
                for c in 0..cols {
                    let got = read(format, &words, rows, cols, r, c);
                    assert_eq!(
                        got.to_bits(),
                        want[r * cols + c].to_bits(),
                        "{format:?} ({r}, {c})"
                    );
                }
            }
        }
    }

    #[test]
    fn a_repeated_tile_is_the_encoding_of_the_repeated_data() {
        let (rows, cols) = (128, 64);
        let tile = data(rows, cols);
        let twice: Vec<f32> = tile.iter().chain(&tile).copied().collect();
        for format in Format::ALL {
            // NVFP4's tensor scale comes from the whole matrix, the same for both.
            assert_eq!(
                encode_repeated(format, &tile, rows, cols, 2),
                encode(format, &twice, 2 * rows, cols),
                "{format:?}"
            );
        }
        assert!(matches!(
            encode_repeated(Format::Fp8E4m3, &tile[..64 * cols], 64, cols, 2),
            Err(LayoutError::Tile { .. })
        ));
    }

    #[test]
    fn columns_must_fill_chunks_and_sizes_add_up() {
        assert!(matches!(
            encode(Format::Nvfp4, &[0.0; 16], 1, 16),
            Err(LayoutError::Columns { by: 32, .. })
        ));
        assert!(encode(Format::F32, &[0.0; 4], 1, 4).is_ok());
        // 256×256: codes, then scales rounded up to a chunk.
        assert_eq!(matrix_bytes(Format::F32, 256, 256), 262_144);
        assert_eq!(matrix_bytes(Format::Int8, 256, 256), 65_536 + 2048 * 4);
        assert_eq!(matrix_bytes(Format::Fp8E4m3, 256, 256), 65_536 + 16);
        assert_eq!(
            matrix_bytes(Format::Nvfp4, 256, 256),
            32_768 + 4 + 4096 + 12
        );
        assert_eq!(matrix_bytes(Format::Mxfp4, 256, 256), 32_768 + 2048);
    }
}
