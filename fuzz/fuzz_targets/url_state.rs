//! Any address: the route, the rack explorer's, the sandbox's and the labs' state must parse
//! without panicking, and what they write back must read back without complaint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moescope_app::{labs, rack_state, sandbox_state, state};

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
    let shipped: Vec<labs::Lab> = labs::SHIPPED.iter().filter_map(|t| labs::parse(t).ok()).collect();
    let (lab, _) = labs::parse_state(text, &shipped);
    let (again, warnings) = labs::parse_state(&labs::encode_state(&shipped[lab]), &shipped);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(again, lab);
});
