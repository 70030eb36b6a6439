//! The generation loop the sandbox runs, on the page and in the CPU worker alike: greedy tokens
//! one at a time, each handed to the caller, the event loop let in between (so that Stop and a
//! repaint get through) until the tokens are done or Stop is pressed.

use std::cell::RefCell;

use moescope_engine::model::generate::{
    Backend, Engine, GenerateOptions, Generator, Sampling, StepStats,
};
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;

/// Generates up to `max_new_tokens` greedy tokens after `prompt`, calling `on_step` with each
/// step and the backend that ran it, until done or `stop` is set.
pub async fn stream(
    engine: &mut Engine,
    prompt: &[u32],
    max_new_tokens: usize,
    stop: &RefCell<bool>,
    mut on_step: impl FnMut(&StepStats, Backend),
) -> Result<(), String> {
    let opts = GenerateOptions {
        max_new_tokens,
        sampling: Sampling::Greedy,
        seed: 0,
    };
    let backend = engine.backend();
    let mut generator = Generator::start(engine, prompt, opts)
        .await
        .map_err(|e| e.to_string())?;
    while !*stop.borrow() {
        let Some(step) = generator.next(engine).await.map_err(|e| e.to_string())? else {
            break;
        };
        on_step(step, backend);
        yield_now().await;
    }
    Ok(())
}

/// Lets the event loop run (so a Stop message or a repaint gets in): a zero-delay timer, in a
/// window or in a worker.
pub async fn yield_now() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let global = js_sys::global();
        let set_timeout = js_sys::Reflect::get(&global, &"setTimeout".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        match set_timeout {
            Some(f) => {
                let _ = f.call2(&global, &resolve, &0.into());
            }
            None => {
                let _ = resolve.call0(&JsValue::NULL);
            }
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}
