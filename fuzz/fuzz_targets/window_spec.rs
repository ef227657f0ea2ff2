#![no_main]
//! libFuzzer entry for `fuzz::window_spec`; the logic and its invariants live in the library.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::window_spec::run(data));
