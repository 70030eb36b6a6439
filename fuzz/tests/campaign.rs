//! The fuzz targets on stable Rust, in CI: each target replays its seeds and every file under
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`, then runs a fixed budget of inputs
//! that proptest makes by editing those (byte flips, cuts, insertions, splices between inputs,
//! tokens that parsers treat specially). A failure is shrunk to a small input and printed.
//!
//! Budget: `MOESCOPE_FUZZ_CASES` inputs per target (default 50,000; a few seconds in all on two
//! cores). The coverage-guided campaigns are `cargo xtask fuzz` (docs/RELIABILITY.md).

use std::path::Path;

use moescope_fuzz::{target, Target};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Tokens that parsers branch on: separators, escapes, numbers at the edges of their types.
const TOKENS: [&str; 24] = [
    "=",
    "&",
    "?",
    "#/",
    "%",
    "%FF",
    "\"",
    "\\u0000",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "\n",
    "-1",
    "0",
    "1e308",
    "-1e308",
    "NaN",
    "inf",
    "4294967296",
    "18446744073709551616",
    "null",
];

#[derive(Clone, Debug)]
enum Edit {
    Flip(Index, u8),
    Set(Index, u8),
    Remove(Index, usize),
    Insert(Index, Vec<u8>),
    Token(Index, Index),
    /// A slice of another input (which, where, how long) at a position.
    Splice(Index, Index, usize, Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<Index>(), 1usize..64).prop_map(|(i, n)| Edit::Remove(i, n)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Edit::Insert(i, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, t)| Edit::Token(i, t)),
        (any::<Index>(), any::<Index>(), 1usize..256, any::<Index>())
            .prop_map(|(o, f, n, at)| Edit::Splice(o, f, n, at)),
    ]
}

fn apply(mut input: Vec<u8>, edits: &[Edit], inputs: &[Vec<u8>]) -> Vec<u8> {
    let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len + 1) };
    for e in edits {
        match e {
            Edit::Flip(i, bit) if !input.is_empty() => {
                let i = i.index(input.len());
                input[i] ^= 1 << bit;
            }
            Edit::Set(i, b) if !input.is_empty() => {
                let i = i.index(input.len());
                input[i] = *b;
            }
            Edit::Remove(i, n) if !input.is_empty() => {
                let i = i.index(input.len());
                let end = (i + n).min(input.len());
                input.drain(i..end);
            }
            Edit::Insert(i, bytes) => {
                let i = at(i, input.len());
                input.splice(i..i, bytes.iter().copied());
            }
            Edit::Token(i, t) => {
                let i = at(i, input.len());
                let token = TOKENS[t.index(TOKENS.len())].bytes();
                input.splice(i..i, token);
            }
            Edit::Splice(other, from, n, i) => {
                let other = &inputs[other.index(inputs.len())];
                if !other.is_empty() {
                    let from = from.index(other.len());
                    let piece = other[from..(from + n).min(other.len())].to_vec();
                    let i = at(i, input.len());
                    input.splice(i..i, piece);
                }
            }
            _ => {}
        }
    }
    input
}

/// The seeds, then the committed corpus and regressions of `t`.
fn starting_inputs(t: &Target) -> Vec<Vec<u8>> {
    let mut inputs = (t.seeds)();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for folder in ["corpus", "regressions"] {
        let dir = root.join(folder).join(t.name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            inputs.push(std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
        }
    }
    inputs
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs the target, catching its panic without printing it: shrinking a failure panics hundreds
/// of times, and only the smallest input is worth showing.
fn quietly(run: fn(&[u8]), input: &[u8]) -> Result<(), String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                default(info)
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let result = std::panic::catch_unwind(|| run(input));
    QUIET.with(|q| q.set(false));
    result.map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

fn campaign(name: &str) {
    let t = target(name).expect("a target");
    let inputs = starting_inputs(t);
    for (i, input) in inputs.iter().enumerate() {
        if let Err(why) = quietly(t.run, input) {
            panic!(
                "{name}: starting input {i} fails: {why}\ninput: {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
    let cases = std::env::var("MOESCOPE_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(50_000);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    // A fixed seed: CI runs the same inputs every time, so a failure reproduces.
    let mut runner = TestRunner::new_with_rng(
        config,
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let strategy = (any::<Index>(), prop::collection::vec(edit(), 1..6));
    let result = runner.run(&strategy, |(which, edits)| {
        let input = apply(inputs[which.index(inputs.len())].clone(), &edits, &inputs);
        quietly(t.run, &input).map_err(|why| {
            TestCaseError::fail(format!(
                "{why}\ninput: {:?}",
                String::from_utf8_lossy(&input)
            ))
        })
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

#[test]
fn address() {
    campaign("address");
}

#[test]
fn share_link() {
    campaign("share_link");
}

#[test]
fn scenario() {
    campaign("scenario");
}

#[test]
fn lab_file() {
    campaign("lab_file");
}

#[test]
fn progress_file() {
    campaign("progress_file");
}

#[test]
fn checkpoint() {
    campaign("checkpoint");
}

#[test]
fn worker_message() {
    campaign("worker_message");
}

#[test]
fn every_target_has_a_campaign() {
    let source = include_str!("campaign.rs");
    for t in moescope_fuzz::TARGETS {
        assert!(
            source.contains(&format!("campaign(\"{}\")", t.name)),
            "{} has no #[test] here",
            t.name
        );
    }
}
