//! The rack: a calibrated analytic model of GB200 NVL72 and its peers. Not built yet.

use leptos::prelude::*;

#[component]
pub fn RackPage() -> impl IntoView {
    view! {
        <h1>"Rack"</h1>
        <section class="card placeholder" data-testid="rack-placeholder">
            <p>
                "Not built yet. Here a calibrated model of a GB200 NVL72 rack (and DGX B200, HGX H800/H200) "
                "serving DeepSeek-R1 and Llama 4 Maverick will show how each optimization (fused AllToAll "
                "over LL128, PDL, FP8/FP4, speculative decoding, disaggregation, expert parallelism) moves "
                "tokens/s per user, tokens/s per GPU and users per rack."
            </p>
        </section>
    }
}
