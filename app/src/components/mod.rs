//! Reusable pieces of the UI, one component per file.

mod decode_bench;
mod expert_heatmap;
mod generator;
mod header;
mod kernel_check;
mod kernel_timeline;
mod lab_step;
mod loss_curves;
mod optimization_switches;
mod rack_charts;
mod route_error_panel;
mod ticks;
mod url_share;
mod webgpu_banner;

pub use decode_bench::DecodeBenchPanel;
pub use expert_heatmap::{ExpertHeatmap, ExpertSpecialization};
pub use generator::GeneratePanel;
pub use header::Header;
pub use kernel_check::KernelCheck;
pub use kernel_timeline::KernelTimeline;
pub use lab_step::{format_value, provenance, LabStep, SandboxRun};
pub use loss_curves::LossCurves;
pub use optimization_switches::OptimizationSwitches;
pub use rack_charts::{ParetoChart, StepBreakdownBar, WaterfallChart};
pub use route_error_panel::RouteErrorPanel;
pub use url_share::{hash_query, share_links, SettingsWarnings, SharePanel};
pub use webgpu_banner::WebGpuBanner;
