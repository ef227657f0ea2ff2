//! Fuzz entry points for Switchboard's parsers and request surfaces (issue #14 item 6).
//!
//! Owns: one module per target, each with a `run(&[u8])` that must never panic on any input and
//! asserts the target's law where there is one. The cargo-fuzz binaries (`fuzz/fuzz_targets`,
//! built from the separate `fuzz/fuzz` package by `ci/fuzz`) are one-line calls to these
//! functions, and `replay` runs every committed corpus file (`fuzz/corpus/<target>/*`) through
//! the same function as a normal `cargo test`, so a corpus is a regression suite.
//!
//! It must never change what it fuzzes: a parser that is private is reached through its public
//! caller (the router), never copied here.

pub mod cli;
pub mod mcp;
pub mod operator_api;
pub mod policy;
pub mod webhook;
pub mod window_spec;
pub mod world;

#[cfg(test)]
mod replay;
