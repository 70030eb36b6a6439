//! One component per page.

mod embed;
mod labs;
mod rack;
pub mod rack_explorer;
mod sandbox;

pub use embed::EmbedPage;
pub use labs::LabsPage;
pub use rack::RackPage;
pub use sandbox::SandboxPage;
