//! The site's entry point: install the panic hook, mount the app. Everything else is in the lib.

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(moescope_app::App);
}
