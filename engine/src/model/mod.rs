//! The sandbox model. For now only its CPU reference operations; the deepseek-mini config,
//! weights, KV cache and decode loop land with the engine issue.

pub mod reference;
