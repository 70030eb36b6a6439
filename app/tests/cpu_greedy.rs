//! The tokens the CPU fallback must generate in the browser (tests/web.rs checks them there):
//! the native CPU reference's greedy run on the shipped checkpoint, kept in
//! tests/fixtures/cpu-greedy.json. This test regenerates them natively and requires the fixture
//! to match, so the browser test compares against the native reference, not a stale copy.
#![cfg(not(target_arch = "wasm32"))]

use moescope_engine::model::generate::{Engine, GenerateOptions, Generator, Sampling};
use moescope_engine::model::{tokenizer, MoeConfig, Weights};

#[derive(serde::Deserialize)]
struct Fixture {
    prompt: String,
    tokens: Vec<u32>,
}

#[test]
fn the_fixture_is_the_native_references_greedy_run() {
    let fixture: Fixture =
        serde_json::from_str(include_str!("fixtures/cpu-greedy.json")).expect("the fixture parses");
    let bytes = include_bytes!("../../public/deepseek-mini-int8.safetensors");
    let weights = Weights::from_safetensors(bytes, &MoeConfig::deepseek_mini()).expect("loads");
    let mut engine = Engine::cpu(weights);
    let opts = GenerateOptions {
        max_new_tokens: fixture.tokens.len(),
        sampling: Sampling::Greedy,
        seed: 0,
    };
    let prompt = tokenizer::encode(&fixture.prompt);
    let mut g = pollster::block_on(Generator::start(&mut engine, &prompt, opts)).expect("starts");
    let mut tokens = Vec::new();
    while let Some(step) = pollster::block_on(g.next(&mut engine)).expect("a step") {
        tokens.push(step.token);
    }
    assert_eq!(
        tokens,
        fixture.tokens,
        "{:?}",
        String::from_utf8_lossy(&tokens.iter().map(|&t| t as u8).collect::<Vec<_>>())
    );
}
