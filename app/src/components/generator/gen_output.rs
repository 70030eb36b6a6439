//! The engine line, the generated text, the per-step numbers, and any fallback note or error.

use leptos::prelude::*;

use super::state::{GenState, Status, StepSummary};

pub(super) fn gen_output(st: GenState) -> impl IntoView {
    let GenState {
        backend_label,
        fallback_note,
        output,
        prompt,
        stats,
        status,
        ..
    } = st;
    let busy = move || matches!(status.get(), Status::Preparing | Status::Running);
    view! {
        <p class="muted" data-testid="gen-backend">{move || {
            let label = backend_label.get();
            if label.is_empty() { "Engine: chosen when you press Generate (WebGPU if available, else the CPU reference).".to_string() } else { label }
        }}</p>
        <pre class="gen-output" data-testid="gen-output" aria-live="polite">
            <span class="prompt">{move || if output.get().is_empty() && !busy() { String::new() } else { prompt.get() }}</span>
            {move || output.get()}
        </pre>
        <p data-testid="gen-stats">{move || match stats.get() {
            None => if busy() { "Running…".to_owned() } else { String::new() },
            Some(StepSummary { tokens_per_s, ms, kernels, submissions, mb }) => format!(
                "{tokens_per_s:.1} tokens/s ({ms:.1} ms per decode step, measured) · {kernels} kernels in {submissions} queue submissions per step · {mb:.1} MB read and written per step (computed from the shapes)"
            ),
        }}</p>
        {move || fallback_note.get().map(|note| view! {
            <p class="banner warn" data-testid="gen-fallback">{note}</p>
        })}
        {move || match status.get() {
            Status::Error(e) => Some(view! { <p class="bad" data-testid="gen-error">{e}</p> }),
            _ => None,
        }}
    }
}
