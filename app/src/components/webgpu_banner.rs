//! The banner shown when this browser cannot give MoEscope a WebGPU adapter (no `navigator.gpu`,
//! or `requestAdapter()` resolving to null, as with a blocklisted GPU): the sandbox then runs on
//! the CPU engine.

use leptos::prelude::*;
use wasm_bindgen::{JsCast, JsValue};

#[derive(Clone, Copy, Debug, PartialEq)]
enum WebGpu {
    Available,
    Missing,
    NoAdapter,
}

async fn probe() -> WebGpu {
    let Some(window) = web_sys::window() else {
        return WebGpu::Missing;
    };
    let gpu =
        js_sys::Reflect::get(&window.navigator(), &"gpu".into()).unwrap_or(JsValue::UNDEFINED);
    if gpu.is_undefined() || gpu.is_null() {
        return WebGpu::Missing;
    }
    let request = js_sys::Reflect::get(&gpu, &"requestAdapter".into())
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
    let Some(request) = request else {
        return WebGpu::Missing;
    };
    let Ok(promise) = request
        .call0(&gpu)
        .and_then(|p| p.dyn_into::<js_sys::Promise>())
    else {
        return WebGpu::NoAdapter;
    };
    match wasm_bindgen_futures::JsFuture::from(promise).await {
        Ok(adapter) if !adapter.is_null() && !adapter.is_undefined() => WebGpu::Available,
        _ => WebGpu::NoAdapter,
    }
}

#[component]
pub fn WebGpuBanner() -> impl IntoView {
    let state = LocalResource::new(probe);
    move || {
        let why = match state.get()? {
            WebGpu::Available => return None,
            WebGpu::Missing => "WebGPU is not available in this browser.",
            WebGpu::NoAdapter => {
                "This browser has WebGPU but gave no GPU adapter (GPU disabled or blocklisted)."
            }
        };
        Some(view! {
            <div class="banner warn" role="status" data-testid="webgpu-banner">
                <strong>{why}</strong>
                " The sandbox falls back to the CPU engine (compiled to WebAssembly), which is slower; "
                "GPU timings are not shown. Chrome and Edge 113+ have WebGPU; elsewhere it may be behind a flag."
            </div>
        })
    }
}
