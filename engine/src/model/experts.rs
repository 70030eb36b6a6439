//! Expert specialization: which kinds of byte each routed expert takes. A byte-level model's
//! experts cannot specialize by word, but they can by character class (letters, spaces,
//! punctuation, digits, line breaks, the continuation bytes of UTF-8). For each MoE layer and
//! expert this counts the tokens routed to it by class and compares the odds of each class among
//! the expert's tokens with its odds in the whole text. The odds ratio treats both ends fairly:
//! an expert that takes 98% spaces where the text has 16%, and one that takes 99% lowercase
//! where the text has 78%, both score about 30, while 2% digits against 0.8% scores 2.5.

use serde::Serialize;

/// The kind of byte a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ByteClass {
    Lowercase,
    Uppercase,
    Digit,
    Space,
    LineBreak,
    Punctuation,
    /// Bytes of multi-byte UTF-8 characters and control bytes.
    Other,
}

impl ByteClass {
    pub const ALL: [ByteClass; 7] = [
        ByteClass::Lowercase,
        ByteClass::Uppercase,
        ByteClass::Digit,
        ByteClass::Space,
        ByteClass::LineBreak,
        ByteClass::Punctuation,
        ByteClass::Other,
    ];

    pub fn of(token: u32) -> ByteClass {
        match u8::try_from(token) {
            Ok(b) if b.is_ascii_lowercase() => ByteClass::Lowercase,
            Ok(b) if b.is_ascii_uppercase() => ByteClass::Uppercase,
            Ok(b) if b.is_ascii_digit() => ByteClass::Digit,
            Ok(b' ') => ByteClass::Space,
            Ok(b'\n' | b'\r') => ByteClass::LineBreak,
            Ok(b) if b.is_ascii_punctuation() => ByteClass::Punctuation,
            _ => ByteClass::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ByteClass::Lowercase => "lowercase",
            ByteClass::Uppercase => "uppercase",
            ByteClass::Digit => "digits",
            ByteClass::Space => "spaces",
            ByteClass::LineBreak => "line breaks",
            ByteClass::Punctuation => "punctuation",
            ByteClass::Other => "other bytes",
        }
    }
}

/// One expert of one layer.
#[derive(Clone, Debug, Serialize)]
pub struct ExpertProfile {
    pub layer: usize,
    pub expert: usize,
    /// Tokens routed to it (each token goes to `experts_per_token` experts).
    pub tokens: usize,
    /// Tokens per class, in `ByteClass::ALL` order.
    pub by_class: Vec<usize>,
    /// The class most over-represented among its tokens (highest odds ratio), its share of
    /// them, and the odds ratio; None when no class reaches `MIN_ODDS_RATIO`.
    pub favourite: Option<(ByteClass, f64, f64)>,
}

/// Every expert's profile over some routed text.
#[derive(Clone, Debug, Serialize)]
pub struct Specialization {
    /// Tokens per class over the whole text, in `ByteClass::ALL` order.
    pub overall: Vec<usize>,
    pub tokens: usize,
    pub experts: Vec<ExpertProfile>,
}

/// Below this odds ratio an expert takes a class about as often as the text has it.
pub const MIN_ODDS_RATIO: f64 = 3.0;

/// Odds of `k` in `n` with half a count added to each side (finite at 0% and 100%).
fn odds(k: usize, n: usize) -> f64 {
    (k as f64 + 0.5) / ((n - k) as f64 + 0.5)
}

/// `routing[t][l]` is the experts token `t` was sent to in MoE layer `l`. Classes with fewer
/// than `min_count` tokens routed to an expert are not named its favourite (a single digit is
/// not a specialization).
pub fn specialization(
    tokens: &[u32],
    routing: &[Vec<Vec<usize>>],
    experts: usize,
    min_count: usize,
) -> Specialization {
    let classes = ByteClass::ALL.len();
    let index = |t: u32| {
        ByteClass::ALL
            .iter()
            .position(|c| *c == ByteClass::of(t))
            .unwrap_or(classes - 1)
    };
    let mut overall = vec![0usize; classes];
    for &t in tokens {
        overall[index(t)] += 1;
    }
    let layers = routing.iter().map(Vec::len).max().unwrap_or(0);
    let mut counts = vec![vec![vec![0usize; classes]; experts]; layers];
    for (&t, per_layer) in tokens.iter().zip(routing) {
        for (l, ids) in per_layer.iter().enumerate() {
            for &e in ids.iter().filter(|&&e| e < experts) {
                counts[l][e][index(t)] += 1;
            }
        }
    }
    let total = tokens.len();
    let mut profiles = Vec::with_capacity(layers * experts);
    for (l, layer) in counts.into_iter().enumerate() {
        for (e, by_class) in layer.into_iter().enumerate() {
            let n: usize = by_class.iter().sum();
            let favourite = (0..classes)
                .filter(|&c| by_class[c] >= min_count)
                .map(|c| {
                    let share = by_class[c] as f64 / n as f64;
                    let ratio = odds(by_class[c], n) / odds(overall[c], total);
                    (ByteClass::ALL[c], share, ratio)
                })
                .filter(|f| f.2 >= MIN_ODDS_RATIO)
                .max_by(|a, b| a.2.total_cmp(&b.2));
            profiles.push(ExpertProfile {
                layer: l,
                expert: e,
                tokens: n,
                by_class,
                favourite,
            });
        }
    }
    Specialization {
        overall,
        tokens: tokens.len(),
        experts: profiles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_bytes() {
        let classes: Vec<ByteClass> = "aZ7 \n,".bytes().map(|b| ByteClass::of(b.into())).collect();
        assert_eq!(
            classes,
            [
                ByteClass::Lowercase,
                ByteClass::Uppercase,
                ByteClass::Digit,
                ByteClass::Space,
                ByteClass::LineBreak,
                ByteClass::Punctuation
            ]
        );
        assert_eq!(ByteClass::of(0xC3), ByteClass::Other);
    }

    #[test]
    fn an_expert_that_takes_every_space_is_a_space_expert() {
        // "ab ab ab ": expert 0 takes the spaces, expert 1 the letters (one layer, top-1).
        let tokens: Vec<u32> = "ab ab ab ".bytes().map(u32::from).collect();
        let routing: Vec<Vec<Vec<usize>>> = tokens
            .iter()
            .map(|&t| vec![vec![usize::from(t != u32::from(b' '))]])
            .collect();
        let s = specialization(&tokens, &routing, 2, 1);
        let space = &s.experts[0];
        assert_eq!(space.tokens, 3);
        let (class, share, ratio) = space.favourite.unwrap();
        assert_eq!(class, ByteClass::Space);
        assert_eq!(share, 1.0);
        // Odds 3.5/0.5 among its tokens against 3.5/6.5 in the text.
        assert!((ratio - 13.0).abs() < 1e-12, "odds ratio {ratio}");
        assert_eq!(s.experts[1].favourite.unwrap().0, ByteClass::Lowercase);
        // An expert that takes the text's mix has no favourite.
        let mixed: Vec<Vec<Vec<usize>>> = tokens.iter().map(|_| vec![vec![0]]).collect();
        assert_eq!(
            specialization(&tokens, &mixed, 1, 1).experts[0].favourite,
            None
        );
    }
}
