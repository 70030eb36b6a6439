//! The engine's wasm paths, in headless Chromium (`wasm-bindgen-test-runner`, run by
//! `cargo xtask test`): the CPU fallback generates what the native CPU reference generates, and
//! the address state round-trips in the browser's wasm as it does natively.
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;

use moescope_app::{generation, labs, rack_state, sandbox_state};
use moescope_engine::model::generate::Engine;
use moescope_engine::model::{tokenizer, MoeConfig, Weights};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[derive(serde::Deserialize)]
struct Fixture {
    prompt: String,
    tokens: Vec<u32>,
}

/// tests/cpu_greedy.rs checks natively that the fixture is the native reference's run.
#[wasm_bindgen_test]
async fn the_cpu_fallback_generates_the_native_references_tokens() {
    let fixture: Fixture =
        serde_json::from_str(include_str!("fixtures/cpu-greedy.json")).expect("the fixture parses");
    let bytes = include_bytes!("../../public/deepseek-mini-int8.safetensors");
    let weights = Weights::from_safetensors(bytes, &MoeConfig::deepseek_mini()).expect("loads");
    let mut engine = Engine::cpu(weights);
    let prompt = tokenizer::encode(&fixture.prompt);
    let stop = RefCell::new(false);
    let mut tokens = Vec::new();
    generation::stream(
        &mut engine,
        &prompt,
        fixture.tokens.len(),
        &stop,
        |step, _| tokens.push(step.token),
    )
    .await
    .expect("the CPU engine generates");
    assert_eq!(tokens, fixture.tokens);
}

#[wasm_bindgen_test]
fn address_state_round_trips_in_wasm() {
    for (id, _, _) in rack_state::PRESETS {
        let f = rack_state::preset(id).expect("a preset");
        let (back, warnings) = rack_state::parse(&rack_state::encode(&f));
        assert!(warnings.is_empty(), "{id}: {warnings:?}");
        assert_eq!(rack_state::encode(&back), rack_state::encode(&f), "{id}");
    }
    let st = sandbox_state::SandboxState {
        prompt: "Ünïcode & spaces = fine?".into(),
        tokens: 7,
        ..Default::default()
    };
    assert_eq!(
        sandbox_state::parse(&sandbox_state::encode(&st)),
        (st, vec![])
    );
    let shipped: Vec<labs::Lab> = labs::SHIPPED
        .iter()
        .map(|t| labs::parse(t).expect("parses"))
        .collect();
    for (i, lab) in shipped.iter().enumerate() {
        for view in labs::LabsView::ALL {
            assert_eq!(
                labs::parse_state(&labs::encode_state(lab, view), &shipped),
                (labs::LabsState { lab: i, view }, vec![])
            );
        }
    }
    // Bad input reports, never panics, in wasm too (panic = abort there).
    let (_, warnings) = sandbox_state::parse("v=9&tokens=1e99&prompt=%ZZ");
    assert_eq!(warnings.len(), 3, "{warnings:?}");
}
