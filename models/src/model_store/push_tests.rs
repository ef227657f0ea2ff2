//! The model's push transitions, by requirement (SPEC-0030 REQ-8 over doorbells, presence and
//! notify hooks). The simulation judges them at large, against the ledger, on every seed.

use super::tests::{World, at, run};
use crate::presence::{self, Presence};
use crate::push::{self, HookOutcome, RingReason};
use crate::store::prelude::*;
use crate::store::{ClaimNext, Clock, OverrideBy};
use chrono::Duration;
use serde_json::json;

impl World {
    fn endpoint_id(&self) -> String {
        self.agent.endpoint_id().unwrap_or_default().to_string()
    }

    /// A session with its stream open on `replica`.
    fn stream(&self, replica: &str) -> String {
        let session = run(self.store.open_session(&self.endpoint_id())).expect("open session");
        assert!(run(self.store.attach_session(&self.endpoint_id(), &session, replica)).expect("attach"));
        session
    }

    /// Midnight UTC, the next day; `session`'s replica has kept its stream refreshed.
    fn midnight_with(&self, session: &str) {
        self.clock.set(at("2026-12-01T00:00:00Z"));
        let closing = run(self.store.refresh_sessions("r0", &[session.to_string()])).expect("refresh");
        assert!(closing.is_empty());
    }

    fn dispatch(&self) -> push::PushReport {
        run(self.store.dispatch_pushes()).expect("dispatch")
    }

    fn reopen(&self) -> push::PushReport {
        run(self.store.reopen_sweep()).expect("reopen sweep")
    }

    fn hook(&self, url: &str) -> push::NotifyHook {
        run(self.store.add_hook(&self.endpoint_id(), url, "whsec_test", false)).expect("add hook")
    }

    fn set_presence(&self, presence: Presence) {
        let override_ = match presence {
            Presence::In => presence::clock_in(None, self.clock.now(), None).expect("clock in"),
            Presence::Out => presence::clock_out(None, self.clock.now()),
        };
        run(self.store.set_presence_override(&self.endpoint_id(), Some(override_), OverrideBy::Agent))
            .expect("set presence");
    }

    /// A daily budget of `max` claims, spent: the queue is deferred until the next midnight.
    fn exhaust_daily_budget(&self, queue: &str, max: i64) {
        self.set_policy(
            queue,
            json!({"max_claims_per_window": max, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
        );
        for index in 0..max {
            self.push(queue, &format!("spent {index}"), None);
            let ClaimNext::Claimed(claimed) = self.claim_next() else { panic!("budget left") };
            run(self.store.complete(&self.agent, &claimed.todo.id, None)).expect("complete");
        }
        self.dispatch();
    }

    fn rings(&self, reason: RingReason) -> usize {
        self.store.push_journal().rings.iter().filter(|r| r.reason == reason).count()
    }
}

#[test]
fn req8_a_created_todo_rings_one_session_the_least_recently_rung() {
    let world = World::new(&["inbox"]);
    let first = world.stream("r0");
    let second = world.stream("r1");
    world.hook("https://hooks.example/inbox");
    let todo = world.push("inbox", "new work", None).todo;
    let report = world.dispatch();
    assert_eq!(report.rings.len(), 1);
    let ring = &report.rings[0];
    assert_eq!(
        (ring.reason, ring.session_id.as_str(), ring.replica_id.as_str()),
        (RingReason::Created, first.as_str(), "r0")
    );
    assert_eq!(ring.message["params"]["meta"]["todo_id"], json!(todo.id));
    assert_eq!(report.hook_calls_enqueued, 1);
    assert!(world.dispatch().is_empty(), "a push_due row is consumed by the pass that takes it");
    world.push("inbox", "more work", None);
    let next = world.dispatch();
    assert_eq!(next.rings.iter().map(|r| r.session_id.as_str()).collect::<Vec<_>>(), vec![second.as_str()]);
    assert_eq!(world.store.counters().snapshot().rings[&RingReason::Created], 2);
}

#[test]
fn req8_a_deferred_identity_is_withheld_and_watched() {
    let world = World::new(&["inbox"]);
    world.stream("r0");
    world.hook("https://hooks.example/inbox");
    world.exhaust_daily_budget("inbox", 1);
    let calls_before = world.store.push_journal().outbox.len();
    world.push("inbox", "waits for midnight", None);
    let report = world.dispatch();
    assert!(report.rings.is_empty());
    assert_eq!((report.withheld_deferred, report.hook_calls_enqueued), (1, 0));
    let journal = world.store.push_journal();
    assert_eq!(journal.outbox.len(), calls_before, "no hook call while deferred");
    assert_eq!(journal.watches.last().map(|w| w.identity.clone()), Some(world.queue("inbox")));
}

#[test]
fn req8_reopen_rings_once_per_endpoint_and_queue_after_the_boundary_and_never_while_deferred() {
    let world = World::new(&["inbox"]);
    let session = world.stream("r0");
    world.hook("https://hooks.example/inbox");
    world.exhaust_daily_budget("inbox", 1);
    let calls_before = world.store.push_journal().outbox.len();
    for index in 0..40 {
        world.push("inbox", &format!("waiting {index}"), None);
    }
    world.dispatch();
    assert!(world.reopen().is_empty(), "still deferred: no reopen ring");
    world.midnight_with(&session);
    let reopened = world.reopen();
    assert_eq!((reopened.reopens, reopened.rings.len(), reopened.hook_calls_enqueued), (1, 1, 1));
    assert_eq!(reopened.rings[0].reason, RingReason::Reopen);
    assert_eq!(world.store.push_journal().outbox.len(), calls_before + 1, "the hook is called once");
    assert!(world.reopen().is_empty(), "one ring per reopening");
    assert_eq!(world.rings(RingReason::Reopen), 1);
}

// SPEC-0030 REQ-8: the reopen sweep looks at every watched identity, not only the oldest batch:
// a hundred queues paused for the day, watched first, do not hide the one watched after them
// that reopens (the PostgreSQL store's test of the same is in `engine/tests/push.rs`).
#[test]
fn req8_a_reopening_behind_a_full_batch_of_deferred_watches_still_rings() {
    let names: Vec<String> = (0..=push::PUSH_BATCH_MAX).map(|i| format!("q{i:03}")).collect();
    let queues: Vec<&str> = names.iter().map(String::as_str).collect();
    let world = World::new(&queues);
    world.stream("r0");
    let paused = json!({"max_claims_per_window": 0, "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    for name in &queues {
        world.set_policy(name, paused.clone());
        world.push(name, "waits", None);
        world.dispatch();
    }
    assert_eq!(world.store.push_journal().watches.len() as i64, push::PUSH_BATCH_MAX + 1);
    assert!(world.reopen().is_empty(), "all deferred");
    let last = queues[queues.len() - 1];
    world.set_policy(
        last,
        json!({"max_claims_per_window": 5, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    );
    let reopened = world.reopen();
    assert_eq!((reopened.reopens, reopened.rings.len()), (1, 1), "the raised queue rings");
    assert_eq!(reopened.rings[0].queue.as_deref(), Some(last));
    assert!(world.reopen().is_empty(), "once");
}

// SPEC-0030 REQ-8: the heartbeat weighs the longest-unrung todos of queues that admit claims; a
// backlog older than any other in a queue paused for the day does not hide another queue's todo
// (the PostgreSQL store's test of the same is in `engine/tests/push.rs`).
#[test]
fn req8_a_deferred_backlog_does_not_keep_the_heartbeat_from_other_queues() {
    let world = World::new(&["backlog", "free"]);
    let session = world.stream("r0");
    world.set_policy(
        "backlog",
        json!({"max_claims_per_window": 0, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    );
    for index in 0..push::HEARTBEAT_CANDIDATES_MAX {
        world.push("backlog", &format!("waits {index}"), None);
    }
    let free = world.push("free", "rings on schedule", None).todo;
    assert_eq!(world.dispatch().rings.len(), 1, "only the free queue's todo rings on creation");
    world.clock.advance(Duration::minutes(5));
    assert!(run(world.store.refresh_sessions("r0", &[session])).expect("refresh").is_empty());
    let swept = run(world.store.heartbeat_sweep()).expect("heartbeat");
    assert_eq!(swept.rings.len(), 1, "the free queue's todo is re-rung: {:?}", swept.rings);
    assert_eq!(swept.rings[0].todo_id.as_deref(), Some(free.id.as_str()));
    assert_eq!(swept.rings[0].reason, RingReason::Heartbeat);
}

#[test]
fn req8_clocked_out_endpoint_is_not_rung_and_clocking_in_rings_one_digest() {
    let world = World::new(&["inbox"]);
    world.stream("r0");
    world.set_presence(Presence::Out);
    world.push("inbox", "while out", None);
    let report = world.dispatch();
    assert!(report.rings.is_empty());
    assert_eq!(report.withheld_out, 1);
    assert!(run(world.store.presence_sweep()).expect("sweep").is_empty());
    world.set_presence(Presence::In);
    let journal = world.store.push_journal();
    let digests: Vec<_> = journal.rings.iter().filter(|r| r.reason == RingReason::Digest).collect();
    assert_eq!(digests.len(), 1, "clock-in rings one digest");
    assert_eq!(digests[0].message["params"]["meta"]["pending"], json!("1"));
    assert_eq!(digests[0].message["params"]["meta"]["reason"], json!("clock_in"));
    assert!(run(world.store.presence_sweep()).expect("sweep").is_empty(), "the change is acted on once");
}

#[test]
fn req8_reopening_while_clocked_out_waits_for_the_clock_in_digest() {
    let world = World::new(&["inbox"]);
    let session = world.stream("r0");
    world.exhaust_daily_budget("inbox", 1);
    world.push("inbox", "waits", None);
    world.dispatch();
    world.set_presence(Presence::Out);
    world.midnight_with(&session);
    let reopened = world.reopen();
    assert_eq!((reopened.reopens, reopened.rings.len(), reopened.withheld_out), (1, 0, 1));
    world.set_presence(Presence::In);
    assert_eq!((world.rings(RingReason::Reopen), world.rings(RingReason::Digest)), (0, 1));
}

#[test]
fn spec0024_a_call_leased_by_a_crashed_replica_is_leased_again_and_finished_once() {
    let world = World::new(&["inbox"]);
    world.hook("https://hooks.example/inbox");
    world.push("inbox", "hooked", None);
    assert_eq!(world.dispatch().hook_calls_enqueued, 1);
    let taken = run(world.store.take_hook_calls("r0")).expect("take");
    assert_eq!(taken.len(), 1);
    // r0 crashes: it never finishes. Nobody else may send the call while the lease holds.
    assert!(run(world.store.take_hook_calls("r1")).expect("take").is_empty());
    world.clock.advance(Duration::seconds(push::HOOK_LEASE_SECONDS));
    assert!(run(world.store.take_hook_calls("r1")).expect("take").is_empty());
    world.clock.advance(Duration::seconds(1));
    let again = run(world.store.take_hook_calls("r1")).expect("take");
    assert_eq!(again.iter().map(|c| c.id).collect::<Vec<_>>(), vec![taken[0].id]);
    // r0's late report no longer counts; r1's does, once.
    run(world.store.finish_hook_call(taken[0].id, "r0", &HookOutcome::Failed("late".into()))).expect("finish");
    run(world.store.finish_hook_call(again[0].id, "r1", &HookOutcome::Delivered)).expect("finish");
    run(world.store.finish_hook_call(again[0].id, "r1", &HookOutcome::Delivered)).expect("finish");
    let outbox = world.store.push_journal().outbox;
    assert_eq!(outbox.len(), 1);
    assert_eq!((outbox[0].outcome.as_deref(), outbox[0].attempts), (Some("delivered"), 1));
    world.clock.advance(Duration::seconds(push::HOOK_LEASE_SECONDS * 2));
    assert!(run(world.store.take_hook_calls("r2")).expect("take").is_empty());
}

#[test]
fn spec0024_ten_failed_calls_disable_a_hook_and_drop_its_waiting_calls() {
    let world = World::new(&["inbox"]);
    let hook = world.hook("https://hooks.example/down");
    let fail = |call: &push::HookCall| {
        run(world.store.finish_hook_call(call.id, "r0", &HookOutcome::Failed("503".into()))).expect("finish")
    };
    for index in 0..3 {
        world.push("inbox", &format!("t{index}"), None);
    }
    world.dispatch();
    for _attempt in 0..push::HOOK_ATTEMPTS_MAX {
        let calls = run(world.store.take_hook_calls("r0")).expect("take");
        assert_eq!(calls.len(), 3);
        calls.iter().for_each(fail);
        world.clock.advance(Duration::seconds(6));
    }
    // Nine failures: three calls given up after three attempts each; the hook still works.
    world.push("inbox", "fourth", None);
    world.push("inbox", "fifth", None);
    world.dispatch();
    let calls = run(world.store.take_hook_calls("r0")).expect("take");
    fail(&calls[0]);
    // The tenth disables the hook; its waiting calls are dropped, a late delivery changes nothing.
    run(world.store.finish_hook_call(calls[1].id, "r0", &HookOutcome::Delivered)).expect("finish");
    let hooks = run(world.store.list_hooks(&world.endpoint_id())).expect("list");
    assert_eq!(hooks[0].id, hook.id);
    assert!(!hooks[0].enabled);
    assert_eq!(hooks[0].disabled_reason.as_deref(), Some("disabled after 10 consecutive failed calls"));
    let outcomes: Vec<Option<String>> = world.store.push_journal().outbox.into_iter().map(|o| o.outcome).collect();
    let expected = ["failed", "failed", "failed", "dropped", "dropped"].map(|o| Some(o.to_string()));
    assert_eq!(outcomes, expected);
    world.push("inbox", "after", None);
    assert_eq!(world.dispatch().hook_calls_enqueued, 0, "a disabled hook is not called");
    assert!(run(world.store.take_hook_calls("r0")).expect("take").is_empty());
}

#[test]
fn spec0024_an_endpoint_has_at_most_five_hooks() {
    let world = World::new(&["inbox"]);
    for index in 0..push::HOOKS_PER_ENDPOINT_MAX {
        world.hook(&format!("https://hooks.example/{index}"));
    }
    let refused = run(world.store.add_hook(&world.endpoint_id(), "https://hooks.example/6", "s", false));
    assert_eq!(refused.expect_err("capped").code, crate::error::Code::Conflict);
}
