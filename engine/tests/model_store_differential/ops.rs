//! The operations both stores are driven with: the vocabulary, the closing read-back and the
//! scripted edges.

use chrono::{DateTime, Duration, Utc};
use models::todo::TodoState;
use serde_json::{Value, json};
use std::fmt::Debug;

/// The six queue identities: endpoint A's three, the team's, endpoint B's two (B's `inbox`
/// shares a name with A's, REQ-2).
pub(crate) const IDENTITIES: usize = 6;
pub(crate) const A_QUEUES: [usize; 4] = [0, 1, 2, 3];
pub(crate) const B_QUEUES: [usize; 3] = [3, 4, 5];

/// One operation, written in store-independent terms (indexes, not ids).
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Advance(Duration),
    SetClock(DateTime<Utc>),
    Create {
        identity: usize,
        title: String,
        key: Option<String>,
        max_attempts: i32,
        by: Creator,
        payload: Option<Value>,
    },
    /// Several `Create`s in one batch (`create_todos`).
    CreateBatch(Vec<Op>),
    ClaimNext {
        actor: usize,
        queues: Vec<usize>,
        lease: i64,
    },
    /// `claim_next {max}` (issue #31 item 2).
    ClaimNextMany {
        actor: usize,
        queues: Vec<usize>,
        lease: i64,
        max: usize,
    },
    Claim {
        actor: usize,
        todo: usize,
        lease: i64,
    },
    Heartbeat {
        actor: usize,
        todo: usize,
        lease: i64,
    },
    Complete {
        actor: usize,
        todo: usize,
        result: Option<Value>,
    },
    /// `complete {ids}` (issue #31 item 2).
    CompleteMany {
        actor: usize,
        todos: Vec<usize>,
        result: Option<Value>,
    },
    Fail {
        actor: usize,
        todo: usize,
        result: Option<Value>,
    },
    Release {
        actor: usize,
        todo: usize,
    },
    RetryNow {
        actor: usize,
        todo: usize,
    },
    Get {
        actor: usize,
        todo: usize,
    },
    SetPolicy {
        identity: usize,
        policy: Value,
        human: usize,
        via_endpoint: bool,
    },
    ClearPolicy {
        identity: usize,
        human: usize,
    },
    CorruptZone {
        identity: usize,
    },
    Reap,
    Requeue,
    Prune,
    Ingest {
        webhook: usize,
        delivery: String,
        title: String,
        key: Option<String>,
    },
    Discard {
        identity: usize,
        todo: usize,
    },
    ClearQueue {
        identity: usize,
    },
    Purge {
        identity: usize,
    },
    QueueAdmissions {
        identities: Vec<usize>,
    },
    ReachAdmissions {
        human: usize,
    },
    AllAdmissions,
    PolicyDetail {
        identity: usize,
    },
    PolicyAudit {
        identity: usize,
        limit: i64,
    },
    ListTodos {
        owners_of: Option<usize>,
        queues: Vec<usize>,
        state: Option<TodoState>,
        limit: i64,
    },
    SetCapacity {
        max: i64,
    },
    QueueCapacity,
    Route {
        webhook: usize,
    },
    AgentLookup {
        agent: usize,
    },
    DeleteEndpoint {
        human: usize,
        endpoint: usize,
    },
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Creator {
    Human(usize),
    Agent(usize),
    System,
}

/// The end of every seed: a sweep, everything read back, then endpoint B deleted (by someone who
/// may not, then by its owner) and read back again.
pub(crate) fn final_ops() -> Vec<Op> {
    let reads = || {
        let mut ops = vec![Op::Reap, Op::Requeue, Op::AllAdmissions, Op::QueueCapacity, Op::Route { webhook: 1 }];
        for identity in 0..IDENTITIES {
            ops.push(Op::PolicyDetail { identity });
        }
        for human in 0..2 {
            ops.push(Op::ListTodos { owners_of: Some(human), queues: vec![], state: None, limit: 1000 });
            ops.push(Op::ReachAdmissions { human });
        }
        ops
    };
    let mut ops = reads();
    ops.push(Op::DeleteEndpoint { human: 0, endpoint: 1 });
    ops.push(Op::DeleteEndpoint { human: 1, endpoint: 1 });
    ops.push(Op::AgentLookup { agent: 1 });
    ops.extend(reads());
    ops
}

/// The scripted edges. Todos are numbered by first appearance, so the comments name them.
pub(crate) fn scripted_edges(start: DateTime<Utc>) -> Vec<Op> {
    assert_eq!(start, at("2026-03-07T18:00:00Z"), "the script's instants assume this start");
    [
        daily_budget_across_spring_forward(),
        in_flight_cap_counts_lapsed_claims(),
        dedup_keys_across_dead_letters_and_discards(),
        intake_capacity_refuses_whole_deliveries(),
        half_hour_zone_corrupt_zone_and_clear(),
        zero_pauses_and_week_window(),
        purge_keeps_the_audit_and_usage_is_pruned(),
        pre_read_first_stands_for_refusals_only(),
        usage_rows_left_by_earlier_windows(),
    ]
    .concat()
}

fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).expect("instant").to_utc()
}

/// Scripted todo `n`, created by human 0.
fn create(identity: usize, n: usize, key: Option<&str>, max_attempts: i32) -> Op {
    Op::Create {
        identity,
        title: format!("scripted {n}"),
        key: key.map(str::to_string),
        max_attempts,
        by: Creator::Human(0),
        payload: None,
    }
}

fn next(actor: usize, queues: &[usize]) -> Op {
    Op::ClaimNext { actor, queues: queues.to_vec(), lease: 300 }
}

fn policy(identity: usize, policy: Value) -> Op {
    Op::SetPolicy { identity, policy, human: 0, via_endpoint: false }
}

/// REQ-1 "A daily budget" (REQ-5: the spring-forward day is a 23-hour window); REQ-7.
fn daily_budget_across_spring_forward() -> Vec<Op> {
    vec![
        policy(
            0,
            json!({"max_claims_per_window": 2,
                "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}}),
        ),
        create(0, 0, None, 3),
        create(0, 1, None, 3),
        create(0, 2, None, 3),
        create(0, 3, None, 3),
        next(0, &[0]),
        next(0, &[0]),
        next(0, &[0]),
        Op::Claim { actor: 0, todo: 2, lease: 300 },
        Op::Fail { actor: 0, todo: 0, result: Some(json!({"error": "x"})) },
        Op::Advance(Duration::seconds(31)),
        Op::Requeue,
        Op::QueueAdmissions { identities: vec![0, 1, 2, 3] },
        Op::SetClock(at("2026-03-08T07:59:59Z")),
        next(0, &[0]),
        Op::SetClock(at("2026-03-08T08:00:00Z")),
        next(0, &[0]),
        next(0, &[0]),
        Op::PolicyDetail { identity: 0 },
    ]
}

/// REQ-4 the in-flight cap counts lapsed claims; a takeover does not count itself; REQ-10.
fn in_flight_cap_counts_lapsed_claims() -> Vec<Op> {
    vec![
        Op::SetPolicy { identity: 0, policy: json!({"max_in_flight": 2}), human: 0, via_endpoint: true },
        Op::Claim { actor: 2, todo: 3, lease: 300 },
        policy(0, json!({"max_in_flight": 3})),
        Op::Claim { actor: 2, todo: 1, lease: 300 },
        Op::Claim { actor: 2, todo: 3, lease: 300 },
        Op::Heartbeat { actor: 0, todo: 1, lease: 60 },
        Op::Advance(Duration::seconds(61)),
        Op::Claim { actor: 2, todo: 1, lease: 300 },
        Op::Complete { actor: 0, todo: 1, result: None },
        Op::Advance(Duration::seconds(301)),
        Op::Reap,
        Op::RetryNow { actor: 2, todo: 0 },
        Op::ListTodos { owners_of: Some(0), queues: vec![], state: None, limit: 10 },
    ]
}

/// Dedup: a dead letter frees its key; Retry now then collides; discarded keeps the slot.
fn dedup_keys_across_dead_letters_and_discards() -> Vec<Op> {
    vec![
        create(1, 4, Some("k"), 1),
        next(0, &[1]),
        Op::Fail { actor: 0, todo: 4, result: None },
        create(1, 5, Some("k"), 1),
        Op::RetryNow { actor: 0, todo: 4 },
        create(1, 6, Some("k"), 1),
        Op::Discard { identity: 1, todo: 5 },
        create(1, 7, Some("k"), 1),
        Op::Discard { identity: 1, todo: 5 },
        Op::Discard { identity: 0, todo: 5 },
    ]
}

/// Intake capacity: a full copy refuses the whole delivery, which stays unrecorded.
fn intake_capacity_refuses_whole_deliveries() -> Vec<Op> {
    vec![
        Op::SetCapacity { max: 1 },
        Op::Ingest { webhook: 1, delivery: "x".into(), title: "hook x".into(), key: None },
        Op::Ingest { webhook: 1, delivery: "y".into(), title: "hook y".into(), key: None },
        Op::Ingest { webhook: 1, delivery: "x".into(), title: "hook x again".into(), key: None },
        create(1, 8, None, 3),
        create(1, 9, Some("k"), 3),
        Op::QueueCapacity,
        Op::SetCapacity { max: 0 },
        Op::Ingest { webhook: 1, delivery: "y".into(), title: "hook y again".into(), key: None },
        Op::Ingest { webhook: 0, delivery: "y".into(), title: "hook y single".into(), key: None },
    ]
}

/// REQ-5 an hour window in a half-hour zone; REQ-9 a corrupt zone; REQ-10 clear and re-set.
fn half_hour_zone_corrupt_zone_and_clear() -> Vec<Op> {
    let kolkata_hourly =
        json!({"max_claims_per_window": 1, "window": {"period": "hour", "tz": "Asia/Kolkata", "start": "00:00"}});
    vec![
        policy(3, kolkata_hourly.clone()),
        create(3, 10, None, 3),
        next(1, &[3]),
        create(3, 11, None, 3),
        next(1, &[3]),
        next(1, &[3, 4, 5]),
        Op::CorruptZone { identity: 3 },
        next(1, &[3]),
        Op::Claim { actor: 1, todo: 12, lease: 300 },
        Op::QueueAdmissions { identities: vec![3, 4, 5] },
        Op::ClearPolicy { identity: 3, human: 1 },
        Op::ClearPolicy { identity: 3, human: 1 },
        policy(3, kolkata_hourly),
        next(1, &[3]),
        Op::PolicyAudit { identity: 3, limit: 10 },
        Op::PolicyDetail { identity: 3 },
    ]
}

/// REQ-1 zero pauses; a week window in Berlin.
fn zero_pauses_and_week_window() -> Vec<Op> {
    vec![
        policy(
            2,
            json!({"max_in_flight": 0, "max_claims_per_window": 5,
            "window": {"period": "week", "tz": "Europe/Berlin", "start": "09:15", "weekday": "Sun"}}),
        ),
        create(2, 12, None, 3),
        next(0, &[2]),
        Op::Claim { actor: 0, todo: 13, lease: 300 },
        policy(
            2,
            json!({"max_claims_per_window": 5,
            "window": {"period": "week", "tz": "Europe/Berlin", "start": "09:15", "weekday": "Sun"}}),
        ),
        next(0, &[0, 1, 2]),
    ]
}

/// Purge: the policy goes, the audit stays, a stale claimant finds nothing; REQ-1 usage retention.
fn purge_keeps_the_audit_and_usage_is_pruned() -> Vec<Op> {
    vec![
        next(0, &[0]),
        Op::Purge { identity: 0 },
        Op::Complete { actor: 0, todo: 0, result: None },
        Op::PolicyDetail { identity: 0 },
        Op::PolicyAudit { identity: 0, limit: 50 },
        Op::Advance(Duration::days(36)),
        Op::Prune,
        Op::Prune,
        Op::AllAdmissions,
    ]
}

/// Issue #15: the pre-skip read before a first pick (PgStore, after a refusal on the same queues)
/// stands for a window refusal, counted as the refusal was; it leaves the takeover of a lapsed
/// claim in an in_flight_full queue to the lock, which admits it.
fn pre_read_first_stands_for_refusals_only() -> Vec<Op> {
    let daily = json!({"max_claims_per_window": 1, "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    vec![
        policy(4, json!({"max_in_flight": 1})),
        policy(5, daily),
        create(4, 14, None, 3),
        create(5, 15, None, 3),
        create(5, 16, None, 3),
        create(4, 17, None, 3),
        Op::ClaimNext { actor: 1, queues: vec![4, 5], lease: 60 },
        next(1, &[4, 5]),
        next(1, &[4, 5]),
        next(1, &[4, 5]),
        Op::Advance(Duration::seconds(61)),
        next(1, &[4, 5]),
        next(1, &[4, 5]),
        Op::QueueAdmissions { identities: vec![4, 5] },
    ]
}

/// REQ-6 after REQ-10 changes: a status finds the current window's usage past rows that earlier
/// windows of the same policy left starting later (hourly at :15 and at :30, then on the hour).
fn usage_rows_left_by_earlier_windows() -> Vec<Op> {
    let hourly = |tz: &str, start: &str| json!({"max_claims_per_window": 5, "window": {"period": "hour", "tz": tz, "start": start}});
    let claim_one = |n: usize| vec![create(4, n, None, 3), next(1, &[4])];
    [
        vec![Op::SetClock(at("2026-04-13T08:20:00Z")), policy(4, hourly("UTC", "00:15"))],
        claim_one(18),
        vec![Op::SetClock(at("2026-04-13T08:40:00Z")), policy(4, hourly("Asia/Kolkata", "00:00"))],
        claim_one(19),
        vec![policy(4, hourly("UTC", "00:00")), Op::QueueAdmissions { identities: vec![4] }],
        claim_one(20),
        vec![Op::QueueAdmissions { identities: vec![4] }, Op::PolicyDetail { identity: 4 }],
    ]
    .concat()
}
