//! Any address: the route, the rack explorer's state and the sandbox's state must parse without
//! panicking, and what they write back must read back without complaint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moescope_app::{rack_state, sandbox_state, state};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = state::parse_route(text);
    let (rack, _) = rack_state::parse(text);
    let (_, warnings) = rack_state::parse(&rack_state::encode(&rack));
    assert!(warnings.is_empty(), "{warnings:?}");
    let (sandbox, _) = sandbox_state::parse(text);
    let (back, warnings) = sandbox_state::parse(&sandbox_state::encode(&sandbox));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(back, sandbox);
});
