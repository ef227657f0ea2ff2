//! Target `cli`: the operator CLI's grammar (`server::cli::OperatorCommand`, clap) over an
//! arbitrary argv: the bytes split at NUL into arguments (not necessarily UTF-8) after
//! `switchboard`.
//!
//! Only the operator commands are reachable: `serve`, `migrate` and `admin` are declared in the
//! binary's private `Cli` (server/src/main.rs), so this parser wraps the public half the same way
//! `main.rs` flattens it.
//!
//! Laws: parsing never panics (clap's own debug assertions on the command definition run on the
//! first parse of a debug or fuzz build); a refusal renders its message (help and version are
//! refusals too) without panicking; an accepted argv parses again to the same outcome.

use clap::{CommandFactory, Parser};
use std::os::unix::ffi::OsStringExt;

/// `switchboard` as far as the operator commands go.
#[derive(Parser)]
#[command(name = "switchboard", version)]
pub struct OperatorCli {
    #[command(subcommand)]
    pub command: server::cli::OperatorCommand,
}

/// Most arguments taken from one input; clap's cost grows with them, not its behaviour.
const ARGUMENTS_MAX: usize = 64;

pub fn run(data: &[u8]) {
    let argv: Vec<std::ffi::OsString> = std::iter::once("switchboard".into())
        .chain(data.split(|&b| b == 0).take(ARGUMENTS_MAX).map(|arg| std::ffi::OsString::from_vec(arg.to_vec())))
        .collect();
    match OperatorCli::try_parse_from(&argv) {
        Ok(_) => assert!(OperatorCli::try_parse_from(&argv).is_ok(), "parsing {argv:?} must be repeatable"),
        Err(refusal) => {
            let _rendered = refusal.render().to_string();
        }
    }
}

/// clap's check of the command definition itself (conflicting ids, bad defaults): a failure here
/// is a CLI declaration bug, found without any input.
pub fn assert_definition() {
    OperatorCli::command().debug_assert();
}
