#![no_main]
//! libFuzzer entry for `fuzz::mcp`; the logic and its invariants live in the library.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::mcp::run(data));
