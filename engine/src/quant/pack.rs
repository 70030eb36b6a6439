//! Codes packed into u32 words, the way the quantized GEMVs will read them: `32 / bits` codes per
//! word, element i of a row in bits `[bits·(i mod n), bits·(i mod n) + bits)` of the row's word
//! `i / n` (little-endian within the word), every row starting on a new word (a row's tail is
//! zero-padded). 4-bit codes: 8 per word; 8-bit: 4; 16-bit: 2.

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

/// Packs row-major `codes` (`rows × cols`, each below `2^bits`).
pub fn pack(codes: &[u32], cols: usize, bits: u32) -> Vec<u32> {
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

/// The inverse of `pack`.
pub fn unpack(words: &[u32], rows: usize, cols: usize, bits: u32) -> Vec<u32> {
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
    fn nibbles_go_low_first_and_rows_start_on_a_word() {
        // Two rows of 9 four-bit codes: 2 words each, the second word holding one code.
        let codes: Vec<u32> = (0..18).map(|i| i % 16).collect();
        let words = pack(&codes, 9, 4);
        assert_eq!(words, [0x7654_3210, 0x8, 0x0FED_CBA9, 0x1]);
        assert_eq!(unpack(&words, 2, 9, 4), codes);
        assert_eq!(pack(&[0xAB, 0xCD], 2, 8), [0xCDAB]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn pack_then_unpack_is_the_identity(
            bits in prop_oneof![Just(4u32), Just(8), Just(16), Just(32)],
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
    }
}
