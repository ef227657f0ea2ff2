//! The real-concurrency stress (replicas as tasks and as `switchboard serve` processes on one
//! throwaway PostgreSQL, agents over MCP), judged in SQL afterwards; and proof that the SQL
//! checker fails when the data breaks each invariant.

use engine::pg_store::{hash_token, new_token};
use engine::testing::{TestDatabase, fresh_database};
use engine::{PgStore, PoolSettings};
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::prelude::*;
use models::store::{AgentLookup, ClaimNext, NewEndpoint, PolicyActor, SystemClock};
use models::todo::{CreatedByKind, MAX_ATTEMPTS_DEFAULT, NewTodo};
use serde_json::json;
use sim::sql_invariants::{self, Invariant, InvariantReport};
use sim::stress::{self, StressConfig};
use std::sync::Arc;

// SPEC-0030 REQ-13: the race gate. Real concurrency (2 in-process + 2 process replicas, 16 MCP
// claimers, lapsing leases, reapers on every replica, policies raised mid-run) must keep every
// invariant, checked in SQL: charging equality, no window over budget, in-flight within its cap,
// nothing lost, no policy no change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_concurrency_stress_keeps_every_invariant_in_sql() {
    let db = fresh_database().await;
    let config = StressConfig::small();
    let report = stress::run(&db.url, &config).await;
    println!("{report}");
    let tally = &report.tally;
    let invariants = &report.invariants;
    assert!(invariants.passed(), "invariants broken:\n{report}");
    assert_eq!((tally.unexpected_count, tally.transport_errors, tally.unavailable), (0, 0, 0), "{report}");
    assert_eq!(report.claimed_at_end, 0, "the reapers should have returned every lapsed claim:\n{report}");
    // Every committed claim was answered to exactly one agent, and every todo is still there.
    assert_eq!(tally.claims as i64, invariants.claims_committed, "{report}");
    assert_eq!(tally.todos_created as i64, invariants.todos_by_state.values().sum::<i64>(), "{report}");
    for queue in ["team/metered", "team/capped", "team/both", "team/free", "own/metered"] {
        assert!(tally.claims_by_queue.get(queue).copied().unwrap_or(0) > 0, "no claim on {queue}:\n{report}");
    }
    for queue in ["team/metered", "team/capped", "team/both"] {
        assert!(tally.refusals_by_queue.get(queue).copied().unwrap_or(0) > 0, "no refusal on {queue}:\n{report}");
    }
    for queue in ["team/free", "own/metered"] {
        assert_eq!(tally.refusals_by_queue.get(queue), None, "a queue without a policy was refused:\n{report}");
    }
    assert!(tally.refusals_by_reason.contains_key("window_exhausted"), "{report}");
    assert!(invariants.units_charged > 0, "{report}");
    assert!(report.takeovers() > 0, "no lapsed claim was taken over:\n{report}");
    assert!(tally.policy_edits > 0, "{report}");
    // Design invariant 2: charged units == the charged metric; claims == the claimed metric.
    assert_eq!(report.metrics_claimed, Some(invariants.claims_committed as u64), "{report}");
    assert_eq!(report.metrics_charged, Some(invariants.units_charged as u64), "{report}");
    // Issue #15: the invariants held with group admission in play, some transaction claiming for
    // several claimers (more claimers than groups).
    let (groups, claimers) = report.metrics_groups.expect("every replica's group counters");
    assert!(groups > 0 && claimers > groups, "no group claimed for more than one claimer:\n{report}");
}

/// A small history made through the engine: a window-limited queue (5 per UTC hour) claimed to
/// its limit, an in-flight-capped queue (2) with two claims done and two still held, and a queue
/// without a policy. It passes the checker before a test corrupts it.
struct Fixture {
    _db: TestDatabase,
    store: PgStore,
}

impl Fixture {
    async fn new() -> Fixture {
        let db = fresh_database().await;
        let store = PgStore::connect(&db.url, PoolSettings::default(), Arc::new(SystemClock)).await.expect("connect");
        let (human, _) = store.bootstrap_human("alice", false).await.expect("human");
        let token = new_token("sbk_");
        let endpoint = store
            .vend_endpoint(NewEndpoint {
                name: "worker".into(),
                owner_human_id: Some(human.id.clone()),
                owner_team_id: None,
                own_queues: vec!["metered".into(), "capped".into(), "free".into()],
                team_queues: vec![],
                verbs: models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect(),
                token_hash: hash_token(&token),
                created_by_human_id: Some(human.id.clone()),
            })
            .await
            .expect("vend");
        let AgentLookup::Found(scope) = store.agent_by_token(&endpoint.slug, &hash_token(&token)).await.expect("agent")
        else {
            panic!("the vended endpoint does not authenticate");
        };
        let agent = Actor::Agent(*scope);
        let queue = |name: &str| QueueIdentity::endpoint(endpoint.id.clone(), name);
        let owner = PolicyActor { human_id: Some(human.id.clone()), endpoint_id: None };
        for (name, policy) in [
            (
                "metered",
                json!({"max_claims_per_window": 5, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}}),
            ),
            ("capped", json!({"max_in_flight": 2})),
        ] {
            let policy = models::admission::Policy::from_request(&policy).expect("policy");
            store.set_policy(&queue(name), &policy, &owner).await.expect("set policy");
        }
        for (name, count) in [("metered", 7), ("capped", 4), ("free", 3)] {
            for i in 0..count {
                store
                    .create_todo(NewTodo {
                        identity: queue(name),
                        title: format!("{name} {i}"),
                        payload: None,
                        idempotency_key: None,
                        max_attempts: MAX_ATTEMPTS_DEFAULT,
                        created_by_kind: CreatedByKind::Human,
                        created_by_id: None,
                    })
                    .await
                    .expect("create");
            }
        }
        let fixture = Fixture { _db: db, store };
        let granted = vec![queue("metered"), queue("capped"), queue("free")];
        // Claim all that admission allows, finish it, then claim the capped queue's last two.
        for round in 0..2 {
            let mut held = Vec::new();
            while let ClaimNext::Claimed(claimed) =
                fixture.store.claim_next(&agent, &granted, 600).await.expect("claim_next")
            {
                held.push(claimed.todo.id);
            }
            if round == 0 {
                for id in held {
                    fixture.store.complete(&agent, &id, None).await.expect("complete");
                }
            } else {
                assert_eq!(held.len(), 2, "the capped queue's last two");
            }
        }
        let report = fixture.check().await;
        assert!(report.passed(), "the fixture itself must pass:\n{report}");
        assert_eq!((report.claims_committed, report.units_charged), (12, 5), "{report}");
        fixture
    }

    async fn corrupt(&self, sql: &str) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string())).execute(self.store.pool()).await.expect("corrupt");
    }

    /// The checker without its graces: this history is sequential, so every claim ran under the
    /// policy version in force when it committed, and no lenience is needed.
    async fn check(&self) -> InvariantReport {
        let exact = sql_invariants::CheckOptions {
            policy_change_grace: chrono::Duration::zero(),
            policy_creation_grace: chrono::Duration::zero(),
        };
        sql_invariants::check_with(self.store.pool(), &exact).await.expect("check")
    }

    /// Corrupts with `sql` and expects the checker to report `invariant`.
    async fn expect_detected(&self, sql: &str, invariant: Invariant) {
        self.corrupt(sql).await;
        let report = self.check().await;
        println!("{report}");
        assert!(report.has(invariant), "{invariant:?} not reported after `{sql}`:\n{report}");
    }
}

// SPEC-0030 REQ-3: a unit charged with no claim behind it.
#[tokio::test]
async fn sql_invariants_detect_a_charge_without_a_claim() {
    let fixture = Fixture::new().await;
    fixture.expect_detected("UPDATE admission_windows SET used = used + 1", Invariant::ChargingEquality).await;
}

// SPEC-0030 REQ-3: claims charged to a window they were not committed in.
#[tokio::test]
async fn sql_invariants_detect_a_charge_in_the_wrong_window() {
    let fixture = Fixture::new().await;
    fixture
        .expect_detected(
            "UPDATE admission_windows SET window_start = window_start - interval '1 hour'",
            Invariant::ChargingEquality,
        )
        .await;
}

// SPEC-0030 REQ-4: more claims in a window than its limit allowed (the history says 3, 5 committed).
#[tokio::test]
async fn sql_invariants_detect_a_window_over_budget() {
    let fixture = Fixture::new().await;
    fixture
        .expect_detected(
            "UPDATE admission_policies SET max_claims_per_window = 3 WHERE queue = 'metered'; \
             UPDATE admission_audit SET after = jsonb_set(after, '{max_claims_per_window}', '3') WHERE queue = 'metered'",
            Invariant::WindowBudget,
        )
        .await;
}

// Issue #52: more claims in a minute than an additional window allowed (the history says 1 a
// minute; the 5 claims fell in at most two minutes).
#[tokio::test]
async fn sql_invariants_detect_an_additional_window_over_budget() {
    let fixture = Fixture::new().await;
    let minute = r#"[{"max_claims": 1, "window": {"period": "minute"}}]"#;
    fixture
        .expect_detected(
            &format!(
                "UPDATE admission_policies SET additional_windows = '{minute}' WHERE queue = 'metered'; \
                 UPDATE admission_audit SET after = jsonb_set(after, '{{additional_windows}}', '{minute}') \
                 WHERE queue = 'metered'"
            ),
            Invariant::WindowBudget,
        )
        .await;
}

// SPEC-0030 REQ-4: a claim committed while the in-flight cap was already reached.
#[tokio::test]
async fn sql_invariants_detect_in_flight_over_the_cap() {
    let fixture = Fixture::new().await;
    fixture
        .expect_detected(
            "UPDATE todo_attempts a SET ended_at = a.ended_at + interval '1 day' FROM todos t \
             WHERE t.id = a.todo_id AND t.queue = 'capped' AND a.ended_at IS NOT NULL",
            Invariant::InFlightCap,
        )
        .await;
}

// Nothing lost: one todo held by two claims at once.
#[tokio::test]
async fn sql_invariants_detect_a_todo_held_twice() {
    let fixture = Fixture::new().await;
    fixture
        .expect_detected(
            "INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at) \
             SELECT todo_id, seq + 1, 'endpoint:ep_intruder', NULL, started_at + interval '1 millisecond' \
             FROM todo_attempts WHERE ended_at IS NULL ORDER BY todo_id LIMIT 1",
            Invariant::NothingLost,
        )
        .await;
}

// Nothing lost: a claimed todo whose holder is gone.
#[tokio::test]
async fn sql_invariants_detect_a_claim_without_an_owner() {
    let fixture = Fixture::new().await;
    fixture.expect_detected("UPDATE todos SET owner = NULL WHERE state = 'claimed'", Invariant::NothingLost).await;
}

// Nothing lost: more attempts counted than max_attempts and the claims committed allow.
#[tokio::test]
async fn sql_invariants_detect_an_attempt_beyond_max_attempts() {
    let fixture = Fixture::new().await;
    fixture
        .expect_detected("UPDATE todos SET attempt = max_attempts + 1 WHERE state = 'done'", Invariant::NothingLost)
        .await;
}

// SPEC-0030 REQ-1: usage charged to a policy that never had a window limit.
#[tokio::test]
async fn sql_invariants_detect_a_charge_on_a_policy_without_a_window_limit() {
    let fixture = Fixture::new().await;
    fixture
        .expect_detected(
            "INSERT INTO admission_windows (endpoint_id, team_id, queue, window_start, used, updated_at) \
             SELECT endpoint_id, team_id, queue, date_trunc('hour', now()), 1, now() FROM admission_policies \
             WHERE queue = 'capped'",
            Invariant::NoPolicyNoChange,
        )
        .await;
}

// SPEC-0030 REQ-10: a policy changed without an audit record.
#[tokio::test]
async fn sql_invariants_detect_an_unaudited_policy_change() {
    let fixture = Fixture::new().await;
    fixture
        .expect_detected(
            "UPDATE admission_policies SET max_in_flight = 9 WHERE queue = 'capped'",
            Invariant::AuditTrail,
        )
        .await;
}

/// Serves the engine with the policy lookup switched off on the in-process replicas (the knob
/// the admission benchmark uses): every claim there is treated as unbudgeted.
struct SkipsAdmission;

impl stress::StoreHook for SkipsAdmission {
    type Store = PgStore;
    fn wrap(&self, _replica: usize, store: PgStore) -> PgStore {
        store.benchmark_without_admission_lookup()
    }
}

// SPEC-0030 REQ-13: the stress is a gate only if it fails on a broken engine. Through the store
// hook, replicas that skip admission over-admit, and the SQL checks say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_catches_replicas_that_skip_admission() {
    let db = fresh_database().await;
    let config = StressConfig { run_for: std::time::Duration::from_secs(3), policy_edits: 2, ..StressConfig::small() };
    let report = stress::run_with(&db.url, &config, &SkipsAdmission).await;
    println!("{report}");
    for invariant in [Invariant::ChargingEquality, Invariant::WindowBudget, Invariant::InFlightCap] {
        assert!(report.invariants.has(invariant), "{invariant:?} not reported:\n{report}");
    }
}
