//! The entry point of the page and of the CPU worker (the same wasm module): install the panic
//! hook, then mount the app, or, in a worker (no window), serve generation requests.

fn main() {
    console_error_panic_hook::set_once();
    if web_sys::window().is_some() {
        leptos::mount::mount_to_body(moescope_app::App);
    } else {
        moescope_app::worker::serve();
    }
}
