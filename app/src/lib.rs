//! MoEscope's UI (Leptos, client-side rendered). It owns no math: every number it shows comes
//! from moescope-engine. Pure state lives in `state` and is tested natively.

mod app;
pub mod checkpoint;
pub mod components;
pub mod generation;
pub mod lab_progress;
pub mod labs;
pub mod pages;
pub mod progress_store;
pub mod rack_state;
pub mod sandbox_state;
pub mod state;
pub mod training;
pub mod worker;

pub use app::App;
