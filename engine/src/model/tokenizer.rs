//! Byte-level tokenization: token id = byte value, so any text (any language, any emoji) encodes
//! without an unknown token and the vocabulary is 256. Decoding is lossy only where generated
//! bytes are not valid UTF-8, which a model of this size produces often: those become U+FFFD.

pub fn encode(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).collect()
}

/// Decodes ids to text; ids above 255 (never produced by a byte-level model) are skipped.
pub fn decode(tokens: &[u32]) -> String {
    let bytes: Vec<u8> = tokens
        .iter()
        .filter_map(|&t| u8::try_from(t).ok())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_any_utf8() {
        for s in ["", "hello", "Смесь экспертов", "Mischung ✓"] {
            assert_eq!(decode(&encode(s)), s);
        }
        assert_eq!(encode("Aé"), vec![65, 0xC3, 0xA9]);
        assert_eq!(decode(&[0xFF, 65]), "\u{FFFD}A");
    }
}
