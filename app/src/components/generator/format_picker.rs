//! The weight format and FP8 expert inputs, and the accuracy of the choice against f32.

use leptos::prelude::*;
use moescope_engine::quant::Format;

use super::actions;
use super::state::{GenState, Runtime, Status};

pub(super) fn format_picker(st: GenState, rt: Runtime) -> impl IntoView {
    let GenState {
        accuracy,
        dispatch_fp8,
        format,
        measuring,
        status,
        ..
    } = st;
    let busy = move || matches!(status.get(), Status::Preparing | Status::Running);
    view! {
        <div class="controls" data-testid="format-picker">
            <label>"Weight format "
                <select data-testid="gen-format" disabled=busy on:change=move |ev| {
                    if let Some(f) = Format::parse(&event_target_value(&ev)) {
                        format.set(f);
                        accuracy.set(None);
                    }
                }>
                    {Format::ALL.into_iter().map(|f| view! {
                        <option value=f.name() selected=move || format.get() == f>{format_label(f)}</option>
                    }).collect_view()}
                </select>
            </label>
            <label class="check" title="The routed experts read their input as E4M3 codes with one power-of-two scale per 1×128 tile, as DeepSeek-V3's dispatch sends activations; the shared expert reads it in f32.">
                <input type="checkbox" data-testid="gen-dispatch-fp8" disabled=busy
                    prop:checked=move || dispatch_fp8.get()
                    on:change=move |ev| {
                        dispatch_fp8.set(event_target_checked(&ev));
                        accuracy.set(None);
                    } />
                "FP8 expert inputs (E4M3, 1×128 tiles)"
            </label>
            <button data-testid="format-measure" on:click=move |_| actions::measure(st, &rt) disabled=move || busy() || measuring.get()>
                {move || if measuring.get() { "Measuring…" } else { "Measure accuracy vs f32" }}
            </button>
        </div>
        <p class="muted">"The attention and FFN projections are quantized at load from the weights in memory (the int8 checkpoint decoded to f32), block-scaled as in the label, and unpacked in registers by the GEMV kernels; the embedding, output head, router and norms stay f32, as DeepSeek-V3 keeps them. Needs WebGPU: the CPU fallback runs f32. FP8 expert inputs: the dispatch sends each token to its routed experts as E4M3 codes with one power-of-two scale per 1×128 tile (a 288-byte record instead of 1,040 in f32), as DeepSeek-V3's dispatch does (the shared expert reads f32); both engines run it."</p>
        {move || accuracy.get().map(|r| match r {
            Ok(a) => view! {
                <p data-testid="format-accuracy">{format!(
                    "{}{} against f32 over {} positions of 4 fixed prompts (measured): top-1 agreement {:.1}%, KL divergence {:.2e} nats, max logit error {:.3}; {:.3} bytes per parameter, {:.1} MB of weights on the GPU",
                    a.format.name(), if a.dispatch_fp8 { " with FP8 expert inputs" } else { "" }, a.positions, 100.0 * a.top1_agreement, a.kl_divergence,
                    a.max_logit_error, a.bytes_per_parameter, a.model_bytes as f64 / 1e6
                )}</p>
            }.into_any(),
            Err(e) => view! { <p class="bad" data-testid="format-accuracy">{format!("Accuracy not measured: {e}")}</p> }.into_any(),
        })}
        // The engine line always holds a line of text, and the notes that may appear go below
        // the output: nothing above the output moves when Generate is pressed.
    }
}

/// A format with its block scaling and its bytes per weight, as the picker lists it.
fn format_label(f: Format) -> String {
    let bytes = format!("{:.4}", f.bytes_per_parameter());
    let bytes = bytes.trim_end_matches('0').trim_end_matches('.');
    format!("{} ({bytes} bytes)", f.scaling())
}
