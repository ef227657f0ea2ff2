//! A few transitions of the model, by requirement. The differential test in
//! `engine/tests/model_store_differential.rs` checks it against `PgStore` at large.

use super::ModelStore;
use crate::admission::{Policy, Reason};
use crate::error::Code;
use crate::identity::QueueIdentity;
use crate::scope::Actor;
use crate::store::prelude::*;
use crate::store::{AgentLookup, ClaimNext, Clock, ManualClock, NewEndpoint, PolicyActor};
use crate::todo::{CreatedByKind, NewTodo, TodoState};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Every `ModelStore` future is ready on its first poll: nothing in it waits.
pub(super) fn run<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a ModelStore future waited"),
    }
}

pub(super) fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).expect("instant").to_utc()
}

/// One human with one agent endpoint granted `queues` (also the push tests' world).
pub(super) struct World {
    pub(super) clock: ManualClock,
    pub(super) store: ModelStore,
    pub(super) agent: Actor,
    pub(super) human_id: String,
}

impl World {
    pub(super) fn new(queues: &[&str]) -> World {
        let clock = ManualClock::at(at("2026-11-30T09:00:00-08:00"));
        let store = ModelStore::new(Arc::new(clock.clone()));
        let alice = store.add_human("alice", false, "hash-alice").expect("human");
        let endpoint = run(store.vend_endpoint(NewEndpoint {
            name: "alice agent".into(),
            owner_human_id: Some(alice.id.clone()),
            owner_team_id: None,
            own_queues: queues.iter().map(|q| q.to_string()).collect(),
            team_queues: vec![],
            verbs: vec!["claim".into()],
            token_hash: "hash-agent".into(),
            created_by_human_id: Some(alice.id.clone()),
        }))
        .expect("vend");
        let AgentLookup::Found(scope) = run(store.agent_by_token(&endpoint.slug, "hash-agent")).expect("lookup") else {
            panic!("the vended endpoint does not authenticate");
        };
        World { clock, store, agent: Actor::Agent(*scope), human_id: alice.id }
    }

    pub(super) fn queue(&self, name: &str) -> QueueIdentity {
        QueueIdentity::endpoint(self.agent.endpoint_id().unwrap_or_default(), name)
    }

    pub(super) fn push(&self, queue: &str, title: &str, key: Option<&str>) -> crate::todo::Created {
        let new = NewTodo {
            identity: self.queue(queue),
            title: title.into(),
            payload: None,
            idempotency_key: key.map(str::to_string),
            max_attempts: 2,
            created_by_kind: CreatedByKind::Human,
            created_by_id: Some(self.human_id.clone()),
        };
        let created = run(self.store.create_todo(new)).expect("create");
        self.clock.advance(Duration::milliseconds(1));
        created
    }

    pub(super) fn set_policy(&self, queue: &str, body: serde_json::Value) {
        let policy = Policy::from_request(&body).expect("valid policy");
        let actor = PolicyActor { human_id: Some(self.human_id.clone()), endpoint_id: None };
        run(self.store.set_policy(&self.queue(queue), &policy, &actor)).expect("set policy");
    }

    pub(super) fn claim_next(&self) -> ClaimNext {
        let Actor::Agent(scope) = &self.agent else { unreachable!("the world's actor is an agent") };
        run(self.store.claim_next(&self.agent, &scope.granted, 60)).expect("claim_next")
    }
}

#[test]
fn ids_have_pg_stores_shapes() {
    let world = World::new(&["inbox"]);
    let todo = world.push("inbox", "t", None).todo;
    assert_eq!(todo.id, format!("td_{:032x}", 1));
    assert!(world.human_id.starts_with("hu_") && world.human_id.len() == 35);
}

// base-system §2; SPEC-0030 REQ-1 "No policy, no change"
#[test]
fn a_todo_is_claimed_completed_and_counted_without_admission() {
    let world = World::new(&["inbox"]);
    let todo = world.push("inbox", "first", None).todo;
    let ClaimNext::Claimed(claimed) = world.claim_next() else { panic!("nothing claimed") };
    assert_eq!((claimed.todo.id.as_str(), claimed.todo.attempt, claimed.admission), (todo.id.as_str(), 1, None));
    assert_eq!(claimed.todo.lease_expires_at, Some(world.clock.now() + Duration::seconds(60)));
    let done = run(world.store.complete(&world.agent, &todo.id, Some(json!({"ok": true})))).expect("complete");
    assert_eq!((done.state, done.lease_expires_at), (TodoState::Done, None));
    let counters = world.store.counters().snapshot();
    assert_eq!((counters.claimed["inbox"], counters.charged.get("inbox")), (1, None));
    assert!(world.store.window_usage().is_empty());
}

// SPEC-0030 REQ-1 "A daily budget", REQ-7 "A worker is told to wait", "A specific claim"
#[test]
fn req7_an_exhausted_day_defers_with_the_next_pacific_midnight() {
    let world = World::new(&["investigations"]);
    world.set_policy(
        "investigations",
        json!({"max_claims_per_window": 2, "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}}),
    );
    let todos: Vec<_> = (0..4).map(|i| world.push("investigations", &format!("t{i}"), None).todo).collect();
    for used in 1..=2 {
        let ClaimNext::Claimed(claimed) = world.claim_next() else { panic!("budget left") };
        assert_eq!(claimed.admission.and_then(|a| a.used), Some(used));
    }
    let midnight = at("2026-12-01T00:00:00-08:00");
    let ClaimNext::Empty { deferred } = world.claim_next() else { panic!("budget spent") };
    assert_eq!(deferred.len(), 1);
    assert_eq!(
        (deferred[0].reason, deferred[0].pending, deferred[0].next_eligible_at),
        (Reason::WindowExhausted, 2, Some(midnight))
    );
    let refused = run(world.store.claim(&world.agent, &todos[3].id, 60)).expect_err("deferred");
    assert_eq!((refused.code, refused.extras["reason"].as_str()), (Code::Deferred, Some("window_exhausted")));
    assert!(refused.extras["retry_after_seconds"].as_i64().is_some_and(|s| s > 0));
    let untouched = run(world.store.get_todo(&world.agent, &todos[3].id)).expect("get");
    assert_eq!((untouched.state, untouched.attempt), (TodoState::Pending, 0));

    world.clock.set(midnight);
    let ClaimNext::Claimed(claimed) = world.claim_next() else { panic!("a new day admits") };
    assert_eq!(claimed.admission.and_then(|a| a.used), Some(1));
    assert_eq!(world.store.counters().snapshot().charged["investigations"], 3);
}

// SPEC-0030 REQ-4 "Takeover at the in-flight cap"
#[test]
fn req4_a_takeover_does_not_count_itself() {
    let world = World::new(&["inbox"]);
    world.set_policy("inbox", json!({"max_in_flight": 1}));
    let todo = world.push("inbox", "t", None).todo;
    assert!(matches!(world.claim_next(), ClaimNext::Claimed(_)));
    world.clock.advance(Duration::seconds(61));
    let taken = run(world.store.claim(&world.agent, &todo.id, 60)).expect("takeover admitted");
    assert_eq!((taken.todo.attempt, taken.admission.map(|a| a.in_flight)), (2, Some(1)));
    assert_eq!(world.store.attempts(&todo.id).first().and_then(|a| a.outcome), Some("lease_expired"));
}

// SPEC-0030 REQ-9 "A policy that cannot be evaluated"
#[test]
fn req9_a_corrupt_zone_fails_closed_for_that_queue_only() {
    let world = World::new(&["broken", "plain"]);
    world.set_policy(
        "broken",
        json!({"max_claims_per_window": 5, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}}),
    );
    let stuck = world.push("broken", "older", None).todo;
    let free = world.push("plain", "younger", None).todo;
    assert!(world.store.corrupt_policy_zone(&world.queue("broken"), "Mars/Olympus"));
    let ClaimNext::Claimed(claimed) = world.claim_next() else { panic!("plain admits") };
    assert_eq!(claimed.todo.id, free.id);
    let ClaimNext::Empty { deferred } = world.claim_next() else { panic!("broken refuses") };
    assert_eq!((deferred[0].reason, deferred[0].next_eligible_at), (Reason::AdmissionUnavailable, None));
    let refused = run(world.store.claim(&world.agent, &stuck.id, 60)).expect_err("unavailable");
    assert_eq!(refused.extras["reason"], "admission_unavailable");
    assert!(!refused.extras.contains_key("retry_after_seconds"));
    let status = run(world.store.queue_admissions(&[world.queue("broken")])).expect("status");
    assert_eq!(
        (status[0].status.status, status[0].policy.is_none()),
        (crate::admission::QueueStatus::AdmissionUnavailable, true)
    );
}

// SPEC-0030 REQ-3 "A redelivery is free"; intake-capacity.md (a full copy refuses the delivery)
#[test]
fn req3_a_redelivery_creates_nothing_and_a_full_queue_records_no_delivery() {
    let world = World::new(&["hooks"]);
    let hook = run(world.store.create_webhook(&world.human_id, "gh", "secret", &[world.queue("hooks")])).expect("hook");
    let copy = |title: &str| NewTodo {
        identity: world.queue("hooks"),
        title: title.into(),
        payload: None,
        idempotency_key: None,
        max_attempts: 5,
        created_by_kind: CreatedByKind::Ingest,
        created_by_id: Some(hook.clone()),
    };
    let first = run(world.store.ingest(&hook, "d1", vec![copy("a")])).expect("ingest");
    let again = run(world.store.ingest(&hook, "d1", vec![copy("b")])).expect("redelivery");
    assert_eq!((again.todo_ids, again.deduped), (first.todo_ids, true));

    run(world.store.set_queue_capacity(1, &world.human_id)).expect("capacity");
    let full = run(world.store.ingest(&hook, "d2", vec![copy("c")])).expect_err("full");
    assert_eq!((full.code, full.extras["pending"].as_i64()), (Code::QueueFull, Some(1)));
    run(world.store.set_queue_capacity(0, &world.human_id)).expect("unlimited");
    let later = run(world.store.ingest(&hook, "d2", vec![copy("d")])).expect("the retry is admitted");
    assert!(!later.deduped);
    let counters = world.store.counters().snapshot();
    assert_eq!(counters.intake_refusals[&("hooks".to_string(), "ingest".to_string())], 1);
}

// Issue #15 (a batch is one transaction): a refusal mid-batch undoes the todos created before
// it, and the ids they took, as PostgreSQL's rollback does in the model's terms.
#[test]
fn a_batch_refused_midway_leaves_no_todo_and_no_spent_id() {
    let world = World::new(&["bulk"]);
    let new = |title: &str| NewTodo {
        identity: world.queue("bulk"),
        title: title.into(),
        payload: None,
        idempotency_key: None,
        max_attempts: 3,
        created_by_kind: CreatedByKind::Human,
        created_by_id: Some(world.human_id.clone()),
    };
    run(world.store.set_queue_capacity(2, &world.human_id)).expect("capacity");
    let full = run(world.store.create_todos(vec![new("a"), new("b"), new("c")])).expect_err("the third is over");
    assert_eq!(full.code, Code::QueueFull);
    let pending = || world.store.lock().todos.values().filter(|t| t.state == TodoState::Pending).count();
    assert_eq!(pending(), 0, "the two created before the refusal are rolled back");
    assert_eq!(world.store.lock().push_due_mark(), 0, "their push rows too");

    let made = run(world.store.create_todos(vec![new("d")])).expect("room again");
    assert_eq!(made[0].todo.id, format!("td_{:032x}", 1), "the rolled-back ids were not spent");
    assert_eq!(pending(), 1);
}

// base-system §2: a dead letter's key may be reused; Retry now then collides, as in PostgreSQL.
#[test]
fn retry_now_of_a_dead_letter_whose_key_was_reused_is_refused() {
    let world = World::new(&["inbox"]);
    let dead = world.push("inbox", "first", Some("k")).todo;
    for _ in 0..2 {
        assert!(matches!(world.claim_next(), ClaimNext::Claimed(_)));
        run(world.store.fail(&world.agent, &dead.id, None)).expect("fail");
        world.clock.advance(Duration::minutes(5));
        run(world.store.requeue_due_retries()).expect("requeue");
    }
    assert!(run(world.store.get_todo(&world.agent, &dead.id)).expect("get").dead_letter());
    let reused = world.push("inbox", "second", Some("k"));
    assert!(!reused.deduped);
    let collided = run(world.store.retry_now(&world.agent, &dead.id)).expect_err("slot taken");
    assert_eq!(collided.code, Code::Conflict);
    let deduped = world.push("inbox", "third", Some("k"));
    assert_eq!((deduped.deduped, deduped.todo.id), (true, reused.todo.id));
}

// intake-capacity.md: discard keeps the dedup slot; only the creating human edits.
#[test]
fn a_discarded_todo_keeps_its_slot_and_only_pending_todos_are_removed() {
    let world = World::new(&["inbox"]);
    let todo = world.push("inbox", "t", Some("k")).todo;
    let by = PolicyActor { human_id: Some(world.human_id.clone()), endpoint_id: None };
    run(world.store.discard_todo(&world.queue("inbox"), &todo.id, &by)).expect("discard");
    let again = run(world.store.discard_todo(&world.queue("inbox"), &todo.id, &by)).expect_err("not pending");
    assert_eq!((again.code, again.extras["state"].as_str()), (Code::NotPending, Some("discarded")));
    let elsewhere = run(world.store.discard_todo(&world.queue("other"), &todo.id, &by)).expect_err("wrong queue");
    assert_eq!(elsewhere.code, Code::NotFound);
    assert!(world.push("inbox", "t2", Some("k")).deduped);
    assert_eq!(world.store.cancellations().len(), 1);
}

// Issue #14 item 2: a clear audits the exact count and at most the smallest hundred ids.
#[test]
fn a_large_clear_audits_the_exact_count_and_a_bounded_sorted_sample() {
    let world = World::new(&["inbox"]);
    for i in 0..150 {
        world.push("inbox", &format!("t{i}"), None);
    }
    let by = PolicyActor { human_id: Some(world.human_id.clone()), endpoint_id: None };
    assert_eq!(run(world.store.clear_queue(&world.queue("inbox"), &by)).expect("clear"), 150);
    let cancellations = world.store.cancellations();
    let [record] = cancellations.as_slice() else { panic!("one audit record") };
    assert_eq!((record.removed, record.todo_ids.len(), record.truncated), (150, 100, true));
    assert!(record.todo_ids.is_sorted());
}
