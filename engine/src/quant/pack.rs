//! Codes packed into u32 words, the way the quantized GEMVs will read them: `32 / bits` codes per
//! word, element i of a row in bits `[bits·(i mod n), bits·(i mod n) + bits)` of the row's word
//! `i / n` (little-endian within the word), every row starting on a new word (a row's tail is
//! zero-padded). 8-bit codes: 4 per word; 16-bit: 2.
//!
//! FP4 (E2M1) codes are the exception, and `pack` refuses them: `pack_e2m1` keeps 8 to a word
//! and rows on whole words, but splits each code's sign from its magnitude, so that a GPU turns
//! a word into four f16 pairs with 9 integer operations instead of 15
//! (shaders/include/weights.wgsl, `fp4_word_fma`). Element
//! `i` of a word sits in its half `h = i / 4` (bits `16h` to `16h + 15`) at slot `k = i % 4`:
//!
//! | slot k | magnitude (code bits 0-2, `ee.m`) | sign (code bit 3) |
//! |---|---|---|
//! | 0 | bits 9-11 | bit 15 |
//! | 1 | bits 6-8 | bit 12 |
//! | 2 | bits 0-2 | bit 14 |
//! | 3 | bits 3-5 | bit 13 |
//!
//! Slot 0 is where an f16 keeps its lowest two exponent bits, its top mantissa bit and its sign,
//! so `word & 0x8E008E00` is elements 0 and 4 as f16s (× 2^-14); slot 1 is slot 0 moved down by
//! three bits, in sign and magnitude alike. Slots 2 and 3 fill the bits left over (no third copy
//! of slot 0's shape fits in 16 bits), their signs apart from their magnitudes, and placed so that
//! one multiplication moves both: slot 2 masked out of the word, times 2^9 + 2^1, has its
//! magnitude 9 bits up and its sign 1 bit up, where slot 0's are, and no two of its bits meet
//! (none are 8 apart), so no carry corrupts them; slot 3, times 2^6 + 2^2, likewise (none 4
//! apart).

/// Words one row of `cols` codes of `bits` bits takes.
pub fn words_per_row(cols: usize, bits: u32) -> usize {
    cols.div_ceil(per_word(bits))
}

fn per_word(bits: u32) -> usize {
    assert!(
        matches!(bits, 4 | 8 | 16 | 32),
        "pack: {bits}-bit codes are not supported"
    );
    (32 / bits) as usize
}

/// Packs row-major `codes` (`rows × cols`, each below `2^bits`; 8, 16 or 32 bits).
pub fn pack(codes: &[u32], cols: usize, bits: u32) -> Vec<u32> {
    assert!(bits != 4, "pack: E2M1 codes are packed by pack_e2m1");
    let n = per_word(bits);
    let wpr = words_per_row(cols, bits);
    let rows = codes.len().checked_div(cols).unwrap_or(0);
    let mask = if bits == 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    };
    let mut words = vec![0u32; rows * wpr];
    for (i, &code) in codes.iter().enumerate() {
        let (r, c) = (i / cols, i % cols);
        debug_assert!(code & !mask == 0, "code {code:#x} wider than {bits} bits");
        words[r * wpr + c / n] |= (code & mask) << (bits as usize * (c % n));
    }
    words
}

/// Where slot k's magnitude and sign start within a 16-bit half (the table above).
const E2M1_MAGNITUDE_BIT: [u32; 4] = [9, 6, 0, 3];
const E2M1_SIGN_BIT: [u32; 4] = [15, 12, 14, 13];

/// E2M1 `code` (4 bits) as element `i` (0-7) of a word.
fn place_e2m1(code: u32, i: usize) -> u32 {
    let (half, k) = (16 * (i / 4) as u32, i % 4);
    ((code & 7) << (half + E2M1_MAGNITUDE_BIT[k])) | ((code >> 3 & 1) << (half + E2M1_SIGN_BIT[k]))
}

/// Element `i` (0-7) of a word packed by `pack_e2m1`.
fn take_e2m1(word: u32, i: usize) -> u32 {
    let (half, k) = (16 * (i / 4) as u32, i % 4);
    (word >> (half + E2M1_MAGNITUDE_BIT[k]) & 7) | (word >> (half + E2M1_SIGN_BIT[k]) & 1) << 3
}

/// Packs row-major E2M1 `codes` (`rows × cols`) 8 to a word, in the sign-split slots above.
pub fn pack_e2m1(codes: &[u32], cols: usize) -> Vec<u32> {
    let wpr = words_per_row(cols, 4);
    let rows = codes.len().checked_div(cols).unwrap_or(0);
    let mut words = vec![0u32; rows * wpr];
    for (i, &code) in codes.iter().enumerate() {
        let (r, c) = (i / cols, i % cols);
        debug_assert!(code < 16, "code {code:#x} wider than 4 bits");
        words[r * wpr + c / 8] |= place_e2m1(code, c % 8);
    }
    words
}

/// The inverse of `pack_e2m1`.
pub fn unpack_e2m1(words: &[u32], rows: usize, cols: usize) -> Vec<u32> {
    let wpr = words_per_row(cols, 4);
    (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            take_e2m1(words[r * wpr + c / 8], c % 8)
        })
        .collect()
}

/// The inverse of `pack`.
#[cfg(test)]
fn unpack(words: &[u32], rows: usize, cols: usize, bits: u32) -> Vec<u32> {
    let n = per_word(bits);
    let wpr = words_per_row(cols, bits);
    let mask = if bits == 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    };
    (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            (words[r * wpr + c / n] >> (bits as usize * (c % n))) & mask
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bytes_go_low_first_and_rows_start_on_a_word() {
        // Two rows of 5 bytes: 2 words each, the second word holding one byte.
        let codes: Vec<u32> = (0x10..0x1A).collect();
        let words = pack(&codes, 5, 8);
        assert_eq!(words, [0x1312_1110, 0x14, 0x1817_1615, 0x19]);
        assert_eq!(unpack(&words, 2, 5, 8), codes);
        assert_eq!(pack(&[0xABCD, 0x1234], 2, 16), [0x1234_ABCD]);
    }

    #[test]
    #[should_panic(expected = "pack_e2m1")]
    fn four_bit_codes_are_refused() {
        pack(&[1, 2], 2, 4);
    }

    #[test]
    fn e2m1_slots_fill_a_word_and_slot_0_is_an_f16s_bits() {
        // Every bit of a word belongs to exactly one element's code.
        let mut seen = 0u32;
        for i in 0..8 {
            let bits = place_e2m1(0xF, i);
            assert_eq!(bits.count_ones(), 4);
            assert_eq!(seen & bits, 0, "element {i} overlaps");
            seen |= bits;
        }
        assert_eq!(seen, u32::MAX);
        // Elements 0 and 4 of 0x9 (−0.5) and 0x7 (6): f16 −0.5·2^-14 and 6·2^-14 under 0x8E008E00.
        let word = place_e2m1(0x9, 0) | place_e2m1(0x7, 4);
        let (lo, hi) = (word & 0x8E00_8E00 & 0xFFFF, (word & 0x8E00_8E00) >> 16);
        assert_eq!(
            half::f16::from_bits(lo as u16).to_f32(),
            -0.5 * 2f32.powi(-14)
        );
        assert_eq!(
            half::f16::from_bits(hi as u16).to_f32(),
            6.0 * 2f32.powi(-14)
        );
        assert_eq!(pack_e2m1(&[0x9, 0, 0, 0, 0x7, 0, 0, 0], 8), [word]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn pack_then_unpack_is_the_identity(
            bits in prop_oneof![Just(8u32), Just(16), Just(32)],
            rows in 1usize..6,
            cols in 1usize..40,
            seed in any::<u64>(),
        ) {
            let mask = if bits == 32 { u32::MAX } else { (1u32 << bits) - 1 };
            let codes: Vec<u32> = (0..rows * cols)
                .map(|i| (seed.wrapping_mul(6364136223846793005).wrapping_add((i as u64).wrapping_mul(1442695040888963407)) >> 17) as u32 & mask)
                .collect();
            let words = pack(&codes, cols, bits);
            prop_assert_eq!(words.len(), rows * words_per_row(cols, bits));
            prop_assert_eq!(unpack(&words, rows, cols, bits), codes);
        }

        /// The bit operations of weights.wgsl's `fp4_word_fma`, on any 8 codes: four f16 pairs
        /// (elements k and k + 4 in pair k) whose values are the codes' × 2^-14, so that the
        /// other slots' bits (carries included) never reach a pair.
        #[test]
        fn the_gpu_decode_of_a_word_gives_every_code(codes in proptest::array::uniform8(0u32..16)) {
            let word = pack_e2m1(&codes, 8)[0];
            let m = 0x8E00_8E00u32;
            let pairs = [
                word & m,
                (word << 3) & m,
                ((word & 0x4007_4007).wrapping_mul(514)) & m,
                ((word & 0x2038_2038).wrapping_mul(68)) & m,
            ];
            for (i, &code) in codes.iter().enumerate() {
                let (k, half) = (i % 4, i / 4);
                let bits = (pairs[k] >> (16 * half)) as u16;
                let got = half::f16::from_bits(bits).to_f32();
                let want = super::super::minifloat::E2M1.decode(code as u8) * 2f32.powi(-14);
                prop_assert_eq!(got.to_bits(), want.to_bits(), "element {} code {:#x}", i, code);
            }
        }

        #[test]
        fn pack_e2m1_then_unpack_is_the_identity(
            rows in 1usize..6,
            cols in 1usize..40,
            codes in proptest::collection::vec(0u32..16, 240),
        ) {
            let codes = &codes[..rows * cols];
            let words = pack_e2m1(codes, cols);
            prop_assert_eq!(words.len(), rows * words_per_row(cols, 4));
            prop_assert_eq!(unpack_e2m1(&words, rows, cols), codes);
        }
    }
}
