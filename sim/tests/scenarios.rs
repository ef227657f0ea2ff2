//! Scripted scenarios next to the random runs: the same world (replicas over one store, agents
//! over MCP, the owner, the producer), no random faults, and one fault struck at a chosen step,
//! so each test tells one story and asserts what happened in it, not only that no invariant
//! broke. The ledger (what committed) and the typed trace (what the clients heard) are the
//! evidence.

use chrono::{DateTime, Duration as Span, Utc};
use models::identity::QueueIdentity;
use sim::faults::Event;
use sim::replies::{ClaimReply, ReplySummary};
use sim::runner;
use sim::trace::{TraceEvent, TraceLine};
use sim::world::{Config, FaultPlan, Outcome, ScriptedFault, epoch_for};
use std::collections::BTreeMap;

/// One simulated step is 10 ms.
const STEPS_PER_SECOND: u64 = 100;
/// How long a client waits before it gives up on a reply (`workload::PATIENT`), as slack for a
/// request sent just before a fault ends.
const CLIENT_TIMEOUT_MS: u128 = 3_000;

/// A short quiet run: two replicas, three agents, thirty todos, two minutes, no random faults.
fn scenario(seed: u64, script: Vec<(u64, ScriptedFault)>) -> Outcome {
    let config = Config { seed, replicas: 2, agents: 3, todos: 30, duration_s: 120, faults: false };
    let outcome = runner::on_model_planned(config, FaultPlan::scripted(script));
    assert!(
        outcome.violations.is_empty(),
        "seed {seed}: the checker found violations:\n{}",
        outcome.violations.join("\n")
    );
    outcome
}

/// The simulated millisecond at which step `step` runs.
fn at_ms(step: u64) -> u128 {
    u128::from(step) * 10
}

/// The clock instant of simulated millisecond `ms` (no clock jumps in these scenarios).
fn instant(seed: u64, ms: u128) -> DateTime<Utc> {
    epoch_for(seed) + Span::milliseconds(ms as i64)
}

/// Claims (`claim_next` or named) the agents heard fail because the store was unavailable.
fn unavailable_claims(trace: &[TraceLine]) -> Vec<&TraceLine> {
    trace
        .iter()
        .filter(|line| match &line.event {
            TraceEvent::ClaimNext(ClaimReply::Other(ReplySummary::Error { extras, .. }))
            | TraceEvent::NamedClaim(ClaimReply::Other(ReplySummary::Error { extras, .. })) => {
                extras["code"] == "unavailable"
            }
            _ => false,
        })
        .collect()
}

fn claimed_at(event: &Event) -> Option<DateTime<Utc>> {
    match event {
        Event::Claimed { at, .. } => Some(*at),
        _ => None,
    }
}

/// SPEC-0030 REQ-4, REQ-9: a replica whose link to the database is cut answers its claims with
/// `unavailable` (no claim is admitted without the database), the other replica carries on, and
/// once the link is healed claims commit again; no todo is completed twice.
#[test]
fn req4_a_replica_cut_off_from_the_database_fails_its_claims_closed_and_the_queue_recovers() {
    let seed = 11;
    let (cut_at, cut_for) = (30 * STEPS_PER_SECOND, 20 * STEPS_PER_SECOND);
    let outcome = scenario(seed, vec![(cut_at, ScriptedFault::CutLink { replica: 0, steps: cut_for })]);
    let (from_ms, healed_ms) = (at_ms(cut_at), at_ms(cut_at + cut_for));

    assert_eq!(outcome.faults.database_partitions, 1, "{:?}", outcome.faults);
    assert!(outcome.faults.link_losses > 0, "the cut lost no request: {:?}", outcome.faults);
    // The claims routed to the cut replica were refused, and only while it was cut.
    let refused = unavailable_claims(&outcome.trace);
    assert!(!refused.is_empty(), "no claim reached the cut replica");
    for line in &refused {
        assert!(
            (from_ms..=healed_ms + CLIENT_TIMEOUT_MS).contains(&line.at_ms),
            "a claim failed outside the cut ({from_ms}..{healed_ms} ms): {line}"
        );
    }
    // The other replica kept admitting claims during the cut, and claims commit after the heal.
    let claims: Vec<DateTime<Utc>> = outcome.ledger.iter().filter_map(claimed_at).collect();
    let (from, healed) = (instant(seed, from_ms), instant(seed, healed_ms));
    assert!(claims.iter().any(|at| (from..healed).contains(at)), "no claim committed during the cut");
    assert!(claims.iter().any(|at| *at > healed), "no claim committed after the heal");
    // Each todo completed at most once, whatever the lost answers on the cut link.
    let mut completions: BTreeMap<&str, u32> = BTreeMap::new();
    for event in &outcome.ledger {
        if let Event::Ended { id, how: "complete" } = event {
            *completions.entry(id.as_str()).or_default() += 1;
        }
    }
    assert!(!completions.is_empty(), "nothing was completed");
    assert!(completions.values().all(|count| *count == 1), "a todo completed twice: {completions:?}");
}

/// SPEC-0030 REQ-4 (check, charge and claim commit together or not at all): a replica crashes in
/// the middle of the run; its clients' requests fail over to the other replica, and every
/// admitted claim on a budgeted queue is charged exactly once: within each window, the usage each
/// claim reported counts up 1, 2, 3, … with no gap and no repeat.
#[test]
fn req4_a_replica_crash_loses_no_claim_and_charges_each_admitted_claim_exactly_once() {
    let seed = 12;
    let (crash_at, down_for) = (40 * STEPS_PER_SECOND, 15 * STEPS_PER_SECOND);
    let outcome = scenario(seed, vec![(crash_at, ScriptedFault::Crash { replica: 1, steps: down_for })]);
    let (from_ms, back_ms) = (at_ms(crash_at), at_ms(crash_at + down_for));

    assert_eq!(outcome.faults.crashes, 1, "{:?}", outcome.faults);
    // Only the crashed replica failed to answer, and only while it was down.
    let failures: Vec<&TraceLine> =
        outcome.trace.iter().filter(|line| matches!(line.event, TraceEvent::NetworkFailure { .. })).collect();
    assert!(!failures.is_empty(), "no request reached the crashed replica");
    for line in &failures {
        let TraceEvent::NetworkFailure { replica, .. } = &line.event else { unreachable!() };
        assert_eq!(replica, "r1", "a request to the live replica failed: {line}");
        assert!(
            (from_ms..=back_ms + CLIENT_TIMEOUT_MS).contains(&line.at_ms),
            "a request failed outside the crash ({from_ms}..{back_ms} ms): {line}"
        );
    }
    // Charged exactly once per admitted claim: per (queue identity, window), the usage reported
    // after each claim is 1, 2, 3, … in commit order.
    let mut windows: BTreeMap<(QueueIdentity, DateTime<Utc>), Vec<i64>> = BTreeMap::new();
    for event in &outcome.ledger {
        if let Event::Claimed { identity, admission: Some(headroom), .. } = event
            && let (Some(used), Some(resets_at)) = (headroom.used, headroom.window_resets_at)
        {
            windows.entry((identity.clone(), resets_at)).or_default().push(used);
        }
    }
    assert!(!windows.is_empty(), "no budgeted claim was admitted");
    for ((identity, resets_at), used) in &windows {
        let expected: Vec<i64> = (1..=used.len() as i64).collect();
        assert_eq!(used, &expected, "{} window ending {resets_at}: usage after each claim", identity.queue);
    }
    assert!(outcome.claims > 10, "only {} claims", outcome.claims);
}

/// SPEC-0030 REQ-9: when the metered queue's stored policy row is damaged, every claim on that
/// queue is refused `admission_unavailable` until the owner writes a policy again, while the
/// other queues keep admitting claims.
#[test]
fn req9_a_damaged_policy_row_fails_closed_while_the_other_queues_carry_on() {
    let seed = 13;
    let damage_at = 20 * STEPS_PER_SECOND;
    let outcome = scenario(seed, vec![(damage_at, ScriptedFault::DamagePolicy { queue: "metered".into() })]);

    assert_eq!(outcome.faults.corruptions, 1, "{:?}", outcome.faults);
    let damaged = outcome
        .ledger
        .iter()
        .position(|event| matches!(event, Event::PolicyCorrupted { identity } if identity.queue == "metered"))
        .unwrap_or_else(|| panic!("the metered policy was not damaged"));
    // From the damage until the owner's next write of the metered policy (if any).
    let repaired = outcome.ledger[damaged..]
        .iter()
        .position(|event| matches!(event, Event::PolicySet { identity, .. } if identity.queue == "metered"))
        .map_or(outcome.ledger.len(), |offset| damaged + offset);
    let while_damaged = &outcome.ledger[damaged..repaired];
    let claims_on = |queue: &str| {
        while_damaged.iter().filter(|e| matches!(e, Event::Claimed { identity, .. } if identity.queue == queue)).count()
    };
    assert_eq!(claims_on("metered"), 0, "a claim was admitted on the damaged queue");
    assert!(
        claims_on("capped") + claims_on("both") + claims_on("free") > 0,
        "no other queue admitted a claim while metered was damaged"
    );
    let refusals = outcome.coverage.refusals.get("admission_unavailable").copied().unwrap_or(0);
    assert!(refusals > 0, "no agent was told admission_unavailable: {:?}", outcome.coverage.refusals);
}
