//! The sandbox's state in the URL: `v=1&prompt=…&tokens=…&opt=…&format=…&dispatch=…` (dispatch
//! is optional: older links keep f32), for Share and for
//! the sandbox embeds. Pure (no web-sys), tested natively; `parse` never panics, reports what it
//! could not use and keeps the default for it.

use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;

pub const VERSION: &str = "1";
/// Longest prompt a URL may set, in characters.
pub const MAX_PROMPT: usize = 200;

/// Every setting `parse` reads (docs/EMBED.md has a row for each).
pub const KEYS: [&str; 6] = ["v", "prompt", "tokens", "opt", "format", "dispatch"];

#[derive(Clone, Debug, PartialEq)]
pub struct SandboxState {
    pub prompt: String,
    pub tokens: usize,
    pub optimizations: Optimizations,
    pub format: Format,
    /// The routed experts read FP8 records (`MoeConfig::dispatch_fp8`).
    pub dispatch_fp8: bool,
}

impl Default for SandboxState {
    fn default() -> Self {
        Self {
            prompt: "The experts".into(),
            tokens: 32,
            optimizations: Optimizations::all(),
            format: Format::F32,
            dispatch_fp8: false,
        }
    }
}

/// Percent-encodes everything but unreserved characters (RFC 3986), UTF-8 bytes.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes (and `+` as a space); `None` for a malformed escape or invalid UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A value as a message quotes it.
fn shorten(s: &str) -> String {
    crate::state::shorten_to(s, 40)
}

pub fn parse(query: &str) -> (SandboxState, Vec<String>) {
    let mut st = SandboxState::default();
    let mut warnings = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let ok = match key {
            "v" => raw == VERSION,
            "prompt" => match percent_decode(raw) {
                Some(p) if !p.is_empty() && p.chars().count() <= MAX_PROMPT => {
                    st.prompt = p;
                    true
                }
                _ => false,
            },
            "tokens" => match raw.parse::<usize>() {
                Ok(n) if (1..=256).contains(&n) => {
                    st.tokens = n;
                    true
                }
                _ => false,
            },
            "opt" => match Optimizations::parse(raw) {
                Ok(o) => {
                    st.optimizations = o;
                    true
                }
                Err(_) => false,
            },
            "format" => match Format::parse(raw) {
                Some(f) => {
                    st.format = f;
                    true
                }
                None => false,
            },
            "dispatch" => match raw {
                "f32" | "fp8" => {
                    st.dispatch_fp8 = raw == "fp8";
                    true
                }
                _ => false,
            },
            _ => {
                warnings.push(format!(
                    "unknown setting \u{201c}{}\u{201d} ignored",
                    shorten(key)
                ));
                continue;
            }
        };
        if !ok {
            warnings.push(format!(
                "{} = \u{201c}{}\u{201d} is not valid; kept the default",
                key,
                shorten(raw)
            ));
        }
    }
    (st, warnings)
}

pub fn encode(st: &SandboxState) -> String {
    format!(
        "v={VERSION}&prompt={}&tokens={}&opt={}&format={}&dispatch={}",
        percent_encode(&st.prompt),
        st.tokens,
        st.optimizations.label(),
        st.format.name(),
        if st.dispatch_fp8 { "fp8" } else { "f32" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let st = SandboxState {
            prompt: "Ünïcode & spaces = fine?".into(),
            tokens: 7,
            optimizations: Optimizations::parse("split_k_attention,fuse_moe_route").expect("names"),
            format: Format::Nvfp4,
            dispatch_fp8: true,
        };
        let (back, w) = parse(&encode(&st));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(back, st);
    }

    #[test]
    fn bad_values_are_reported_and_defaulted() {
        let (st, w) = parse("v=2&prompt=%ZZ&tokens=9999&opt=warp&format=fp3&dispatch=fp4&x=1");
        assert_eq!(st, SandboxState::default());
        assert_eq!(w.len(), 7, "{w:?}");
    }

    proptest::proptest! {
        #[test]
        fn any_query_parses(q in ".{0,300}") {
            let (st, _) = parse(&q);
            let (back, w) = parse(&encode(&st));
            proptest::prop_assert!(w.is_empty(), "{:?}", w);
            proptest::prop_assert_eq!(back, st);
        }
    }
}
