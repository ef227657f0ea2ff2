#![no_main]
//! libFuzzer entry for `fuzz::operator_api`; the logic and its invariants live in the library.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::operator_api::run(data));
