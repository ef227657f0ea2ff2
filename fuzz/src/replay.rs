//! Every committed corpus file replayed through its target, as a normal test: what the fuzzer
//! once found interesting stays a regression test without libFuzzer (`fuzz/corpus/<target>/`).

use std::path::PathBuf;

/// One target's entry point.
type Target = fn(&[u8]);

/// The targets and their functions; `ci/fuzz` runs the same names.
const TARGETS: &[(&str, Target)] = &[
    ("cli", crate::cli::run),
    ("mcp", crate::mcp::run),
    ("operator_api", crate::operator_api::run),
    ("policy", crate::policy::run),
    ("webhook", crate::webhook::run),
    ("window_spec", crate::window_spec::run),
];

fn corpus(target: &str) -> Vec<PathBuf> {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    let entries = std::fs::read_dir(&directory).unwrap_or_else(|e| panic!("{}: {e}", directory.display()));
    let mut files: Vec<PathBuf> =
        entries.filter_map(|entry| entry.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

fn replay(target: &str) {
    let (_, run) = TARGETS.iter().find(|(name, _)| *name == target).unwrap_or_else(|| panic!("no target {target}"));
    let files = corpus(target);
    assert!(!files.is_empty(), "the {target} corpus is empty");
    for file in files {
        let input = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if let Err(panic) = std::panic::catch_unwind(|| run(&input)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
                .unwrap_or_default();
            panic!("{target}: {} panicked: {message}", file.display());
        }
    }
}

#[test]
fn cli_corpus_replays_without_panicking() {
    replay("cli");
}

#[test]
fn cli_definition_passes_clap_debug_asserts() {
    crate::cli::assert_definition();
}

#[test]
fn mcp_corpus_replays_without_panicking() {
    replay("mcp");
}

#[test]
fn operator_api_corpus_replays_without_panicking() {
    replay("operator_api");
}

#[test]
fn policy_corpus_replays_without_panicking() {
    replay("policy");
}

#[test]
fn webhook_corpus_replays_without_panicking() {
    replay("webhook");
}

#[test]
fn window_spec_corpus_replays_without_panicking() {
    replay("window_spec");
}

#[test]
fn every_target_has_a_fuzz_binary() {
    let binaries = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz_targets");
    for (target, _) in TARGETS {
        assert!(binaries.join(format!("{target}.rs")).is_file(), "fuzz_targets/{target}.rs is missing");
    }
}
