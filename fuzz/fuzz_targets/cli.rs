#![no_main]
//! libFuzzer entry for `fuzz::cli`; the logic and its invariants live in the library.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::cli::run(data));
