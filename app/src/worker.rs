//! The CPU fallback off the main thread. Without WebGPU the sandbox runs the CPU reference, which
//! takes tens of milliseconds per token: on the main thread that freezes the page between tokens.
//! So the same wasm module is started a second time in a module Web Worker
//! (`public/cpu-worker.js`), where `main` finds no window and calls `serve` instead of mounting
//! the app. The worker loads the weights itself and streams one message per token.
//!
//! Where no worker can be started (a sandboxed iframe has an opaque origin, and a worker must be
//! same-origin), the page runs the CPU engine on the main thread as before and says so.

use std::cell::RefCell;
use std::rc::Rc;

use futures_channel::mpsc;
use moescope_engine::model::generate::{Engine, StepStats};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::checkpoint::{self, Source};
use crate::generation;

/// The worker script, relative to the page.
pub const SCRIPT: &str = "cpu-worker.js";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToWorker {
    Generate {
        prompt: Vec<u32>,
        tokens: usize,
        /// The routed experts read FP8 records (absent: f32).
        #[serde(default)]
        dispatch_fp8: bool,
    },
    Stop,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FromWorker {
    /// The worker listens: messages posted before this would be lost (a worker's messages are
    /// dropped until its handler is set, and the wasm takes a while to load).
    Listening,
    /// The worker's weights are loaded; they may differ from the page's (its fetch can fail).
    Ready {
        source: Source,
    },
    /// One generated token (no kernel trace: the CPU runs no kernels).
    Token {
        step: StepStats,
    },
    Done,
    Error {
        message: String,
    },
}

/// A message as the worker and the page post it: JSON text.
pub fn encode_text<T: Serialize>(message: &T) -> String {
    serde_json::to_string(message).unwrap_or_default()
}

/// Reads a posted message's JSON text; anything else is an error, never a panic.
pub fn decode_text<T: for<'a> Deserialize<'a>>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

fn encode<T: Serialize>(message: &T) -> JsValue {
    JsValue::from_str(&encode_text(message))
}

fn decode<T: for<'a> Deserialize<'a>>(data: &JsValue) -> Result<T, String> {
    let text = data
        .as_string()
        .ok_or_else(|| "a message that is not text".to_string())?;
    decode_text(&text)
}

// ---- In the worker ----

/// Runs in the worker: answers `ToWorker` messages until the page closes it.
pub fn serve() {
    let scope: web_sys::DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let stop = Rc::new(RefCell::new(false));
    let engine: Rc<RefCell<Option<Engine>>> = Rc::new(RefCell::new(None));
    let on_message = {
        let scope = scope.clone();
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            match decode::<ToWorker>(&ev.data()) {
                Ok(ToWorker::Stop) => *stop.borrow_mut() = true,
                Ok(ToWorker::Generate {
                    prompt,
                    tokens,
                    dispatch_fp8,
                }) => {
                    *stop.borrow_mut() = false;
                    let (scope, stop, engine) =
                        (scope.clone(), Rc::clone(&stop), Rc::clone(&engine));
                    wasm_bindgen_futures::spawn_local(async move {
                        let post = |m: &FromWorker| {
                            let _ = scope.post_message(&encode(m));
                        };
                        let result =
                            generate(&engine, (&prompt, tokens, dispatch_fp8), &stop, &post).await;
                        post(&match result {
                            Ok(()) => FromWorker::Done,
                            Err(message) => FromWorker::Error { message },
                        });
                    });
                }
                Err(e) => {
                    let _ = scope.post_message(&encode(&FromWorker::Error { message: e }));
                }
            }
        })
    };
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The handler lives as long as the worker.
    on_message.forget();
    let _ = scope.post_message(&encode(&FromWorker::Listening));
}

async fn generate(
    cell: &Rc<RefCell<Option<Engine>>>,
    (prompt, tokens, dispatch_fp8): (&[u32], usize, bool),
    stop: &Rc<RefCell<bool>>,
    post: &dyn Fn(&FromWorker),
) -> Result<(), String> {
    let cached = cell.borrow_mut().take();
    let mut engine = match cached {
        Some(e) => e,
        None => {
            let (weights, source) = checkpoint::load().await;
            post(&FromWorker::Ready { source });
            Engine::cpu(weights)
        }
    };
    let result = async {
        engine
            .set_dispatch_fp8(dispatch_fp8)
            .map_err(|e| e.to_string())?;
        generation::stream(&mut engine, prompt, tokens, stop, |step, _| {
            post(&FromWorker::Token { step: step.clone() })
        })
        .await
    }
    .await;
    *cell.borrow_mut() = Some(engine);
    result
}

// ---- On the page ----

/// The page's handle on the worker.
pub struct CpuWorker {
    worker: web_sys::Worker,
    inbox: Rc<RefCell<Option<mpsc::UnboundedSender<FromWorker>>>>,
    /// Messages for the worker, held until it says it is listening (then None).
    pending: Rc<RefCell<Option<Vec<JsValue>>>>,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

impl CpuWorker {
    /// Whether the worker has said it listens: until then its script and wasm may still fail
    /// to load.
    pub fn started(&self) -> bool {
        self.pending.borrow().is_none()
    }

    /// Starts the worker, or says why it cannot be started here.
    pub fn start() -> Result<Self, String> {
        let options = web_sys::WorkerOptions::new();
        options.set_type(web_sys::WorkerType::Module);
        let worker = web_sys::Worker::new_with_options(SCRIPT, &options).map_err(|e| {
            e.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
                .unwrap_or_else(|| format!("{e:?}"))
        })?;
        let inbox: Rc<RefCell<Option<mpsc::UnboundedSender<FromWorker>>>> =
            Rc::new(RefCell::new(None));
        let pending: Rc<RefCell<Option<Vec<JsValue>>>> = Rc::new(RefCell::new(Some(Vec::new())));
        let on_message = {
            let (inbox, pending, target) = (Rc::clone(&inbox), Rc::clone(&pending), worker.clone());
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
                let message = decode::<FromWorker>(&ev.data())
                    .unwrap_or_else(|message| FromWorker::Error { message });
                if matches!(message, FromWorker::Listening) {
                    for m in pending.borrow_mut().take().unwrap_or_default() {
                        let _ = target.post_message(&m);
                    }
                    return;
                }
                if let Some(tx) = inbox.borrow().as_ref() {
                    let _ = tx.unbounded_send(message);
                }
            })
        };
        let on_error = {
            let inbox = Rc::clone(&inbox);
            // An error inside the worker is an ErrorEvent; a module script that fails to load
            // (a 404, a MIME type, a CSP) fires a plain Event with no message.
            Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
                let why = ev
                    .dyn_ref::<web_sys::ErrorEvent>()
                    .map(|e| e.message())
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| {
                        format!("its script {SCRIPT} or the WebAssembly it loads did not load")
                    });
                if let Some(tx) = inbox.borrow().as_ref() {
                    let _ = tx.unbounded_send(FromWorker::Error {
                        message: format!("the CPU worker failed: {why}"),
                    });
                }
            })
        };
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        Ok(Self {
            worker,
            inbox,
            pending,
            _on_message: on_message,
            _on_error: on_error,
        })
    }

    /// Starts generating; the worker's messages for this run arrive on the receiver, ending with
    /// `Done` or `Error`.
    pub fn generate(
        &self,
        prompt: &[u32],
        tokens: usize,
        dispatch_fp8: bool,
    ) -> mpsc::UnboundedReceiver<FromWorker> {
        let (tx, rx) = mpsc::unbounded();
        *self.inbox.borrow_mut() = Some(tx);
        self.send(&ToWorker::Generate {
            prompt: prompt.to_vec(),
            tokens,
            dispatch_fp8,
        });
        rx
    }

    pub fn stop(&self) {
        self.send(&ToWorker::Stop);
    }

    fn send(&self, message: &ToWorker) {
        match self.pending.borrow_mut().as_mut() {
            Some(queue) => queue.push(encode(message)),
            None => {
                let _ = self.worker.post_message(&encode(message));
            }
        }
    }
}

impl Drop for CpuWorker {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_as_json() {
        let m = FromWorker::Ready {
            source: Source::Synthetic {
                why: "HTTP 404".into(),
            },
        };
        let text = serde_json::to_string(&m).unwrap();
        assert!(matches!(
            serde_json::from_str::<FromWorker>(&text).unwrap(),
            FromWorker::Ready { source: Source::Synthetic { why } } if why == "HTTP 404"
        ));
        let g: ToWorker =
            serde_json::from_str(r#"{"kind":"generate","prompt":[1,2],"tokens":4}"#).unwrap();
        assert!(matches!(g, ToWorker::Generate { tokens: 4, .. }));
        assert!(serde_json::from_str::<ToWorker>(r#"{"kind":"explode"}"#).is_err());
    }
}
