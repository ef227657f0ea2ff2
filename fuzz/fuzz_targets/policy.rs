#![no_main]
//! libFuzzer entry for `fuzz::policy`; the logic and its invariants live in the library.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::policy::run(data));
