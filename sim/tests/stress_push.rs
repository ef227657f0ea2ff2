//! Issue #51: the real-concurrency stress judges push too, with faults where the engine really
//! runs. Its own test binary, because it crashes this binary's throwaway PostgreSQL mid-run.
//!
//! Real replicas (2 in process, 2 `switchboard serve` processes) on one database; claimers,
//! a producer and an owner's policy edits as in `stress.rs`; listeners holding MCP sessions with
//! open streams while their gates close and reopen beside bursts of doorbells, some reopenings
//! while clocked out, and each one's minute window rolling over with work waiting; a replica process killed with SIGKILL and started again; PostgreSQL
//! crashed and restarted under the running replicas; clients hanging up mid-request. Afterwards
//! every SQL invariant and the push judge must hold.

use engine::testing::fresh_database;
use sim::stress::{self, StressConfig};

// SPEC-0030 REQ-8 (exactly one doorbell per endpoint and queue on every reopening, the clock-in
// digest for what reopened while out, nothing rung while deferred) and REQ-13 (every invariant
// under faults), judged on the real engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_req13_push_and_every_invariant_hold_on_real_replicas_under_faults() {
    let db = fresh_database().await;
    let config = StressConfig::push_and_faults();
    let report = stress::run(&db.url, &config).await;
    println!("{report}");
    assert!(report.invariants.passed(), "invariants broken:\n{report}");
    let push = report.push.as_ref().expect("the push judge ran");
    assert!(push.passed(), "push broken:\n{report}");
    // The run judged what it is meant to: reopenings both ways, their rings and digests, every
    // fault injected, and work that was claimed, refused and charged throughout.
    assert!(push.reopenings_in >= 3 && push.reopen_rings >= push.reopenings_in, "too few reopenings judged:\n{report}");
    assert!(push.reopenings_out >= 1 && push.digests >= 1, "no reopening while clocked out:\n{report}");
    assert!(push.reopenings_by_completion >= 2, "too few reopenings by a freed slot:\n{report}");
    assert!(report.tally.push_sessions_blocked >= 1, "no reopening met its session row held:\n{report}");
    // Issue #51 (with #52's minute windows): every listener's minute window rolled over once.
    assert_eq!(push.reopenings_by_rollover, 2, "a window rollover was not judged:\n{report}");
    assert!(push.streams_opened > 2, "no stream was broken and resumed:\n{report}");
    assert_eq!(report.faults_injected.len(), 2, "a fault was not injected:\n{report}");
    assert!(report.tally.aborted_requests > 0, "{report}");
    assert!(report.tally.claims > 0 && report.invariants.units_charged > 0, "{report}");
    assert_eq!(report.tally.unexpected_count, 0, "{report}");
    assert_eq!(report.claimed_at_end, 0, "the reapers should have returned every lapsed claim:\n{report}");
}
