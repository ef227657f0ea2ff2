//! SPEC-0030 on real PostgreSQL, at engine level: a policy that cannot be evaluated (REQ-9),
//! that changes between claims (REQ-10), a claim either side of a window boundary (REQ-5) and a
//! claim abandoned mid-transaction (REQ-13), each scenario by name.

mod support;

use chrono::Duration;
use engine::PoolSettings;
use models::admission::Reason;
use models::error::Code;
use models::store::prelude::*;
use models::todo::TodoState;
use serde_json::json;
use support::{
    World, agent_world, at, charged, claimed, daily_pacific, deferred, granted, push_n, queue_of, set_policy,
};

/// A second store on the same database whose `lock_timeout` is 200 ms (the pool setting of
/// issue #14), so a held policy lock becomes a database error quickly.
async fn impatient_store(world: &World) -> engine::PgStore {
    let settings = PoolSettings {
        connections_max: 4,
        lock_timeout: std::time::Duration::from_millis(200),
        ..PoolSettings::default()
    };
    world.store_with(settings).await
}

// SPEC-0030 REQ-9 "A policy that cannot be evaluated"
#[tokio::test]
async fn req9_a_stored_zone_the_database_does_not_know_fails_closed_for_that_queue_only() {
    let (world, agent) = agent_world(&["broken", "fine"]).await;
    let broken = queue_of(&agent, "broken");
    set_policy(&world, &broken, daily_pacific(10)).await;
    sqlx::query("UPDATE admission_policies SET window_tz = 'Mars/Olympus'")
        .execute(world.store.pool())
        .await
        .expect("corrupt");
    let stuck = world.push(&broken, "stuck").await;
    world.clock.advance(Duration::seconds(1));
    let fine = world.push(&queue_of(&agent, "fine"), "fine").await;

    let refused = world.store.claim(&agent, &stuck.id, 60).await.expect_err("fail closed");
    assert_eq!((refused.code, refused.extras["reason"].as_str()), (Code::Deferred, Some("admission_unavailable")));
    let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(got.todo.id, fine.id, "other queues proceed");
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!((waiting[0].identity.queue.as_str(), waiting[0].reason), ("broken", Reason::AdmissionUnavailable));
    assert_eq!(world.store.get_todo(&agent, &stuck.id).await.expect("get").state, TodoState::Pending);
    let refusals = world.store.counters().snapshot().refusals;
    assert!(refusals.get(&("broken".to_string(), Reason::AdmissionUnavailable)).copied().unwrap_or(0) >= 2);
    let status =
        world.store.queue_admissions(std::slice::from_ref(&broken)).await.expect("status").pop().expect("policy");
    assert_eq!((status.status.status, status.policy), (models::admission::QueueStatus::AdmissionUnavailable, None));
    // A todo that is not claimable anyway (here: done) says so, not that admission is unavailable.
    sqlx::query("UPDATE todos SET state = 'done', completed_at = updated_at WHERE id = $1")
        .bind(&stuck.id)
        .execute(world.store.pool())
        .await
        .expect("finish it");
    let finished = world.store.claim(&agent, &stuck.id, 60).await.expect_err("done");
    assert_eq!((finished.code, finished.extras["state"].as_str()), (Code::Conflict, Some("done")));
}

// SPEC-0030 REQ-9: a database error reading the policy (here a lock timeout) refuses that
// candidate with admission_unavailable; queues without a policy are unaffected.
#[tokio::test]
async fn req9_a_database_error_reading_the_policy_fails_closed() {
    let (world, agent) = agent_world(&["budgeted", "plain"]).await;
    let budgeted = queue_of(&agent, "budgeted");
    set_policy(&world, &budgeted, json!({"max_in_flight": 5})).await;
    let impatient = impatient_store(&world).await;
    let todo = world.push(&budgeted, "t").await;
    let plain = world.push(&queue_of(&agent, "plain"), "p").await;

    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold policy lock");
    let refused = impatient.claim(&agent, &todo.id, 60).await.expect_err("fail closed");
    assert_eq!(refused.extras["reason"].as_str(), Some("admission_unavailable"));
    impatient.claim(&agent, &plain.id, 60).await.expect("a queue without a policy is unaffected");
    holder.rollback().await.expect("rollback");
    impatient.claim(&agent, &todo.id, 60).await.expect("admitted once the policy is readable");
}

// SPEC-0030 REQ-9: "Queue identities without a policy MUST be unaffected by a failure on another
// queue's policy", for claim_next too: the oldest candidate's policy cannot be locked in time (a
// database error), so that queue is refused as unavailable and the call goes on to the next.
#[tokio::test]
async fn req9_claim_next_skips_a_queue_whose_policy_errors_and_serves_the_others() {
    let (world, agent) = agent_world(&["budgeted", "plain"]).await;
    let budgeted = queue_of(&agent, "budgeted");
    set_policy(&world, &budgeted, json!({"max_in_flight": 5})).await;
    let impatient = impatient_store(&world).await;
    // The budgeted todo is the oldest, so claim_next meets its policy first.
    let oldest = world.push(&budgeted, "t").await;
    world.clock.advance(Duration::seconds(1));
    let plain = world.push(&queue_of(&agent, "plain"), "p").await;

    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold policy lock");
    let got = claimed(impatient.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next serves the others"));
    assert_eq!(got.todo.id, plain.id, "the queue without a policy is unaffected");
    let refusals = impatient.counters().snapshot();
    assert!(
        refusals.refusals.get(&("budgeted".to_string(), Reason::AdmissionUnavailable)).is_some_and(|n| *n > 0),
        "the unreadable policy counts as admission_unavailable: {:?}",
        refusals.refusals
    );
    holder.rollback().await.expect("rollback");
    let later = claimed(impatient.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(later.todo.id, oldest.id, "admitted once the policy is readable");
}

// SPEC-0030 REQ-7: "empty: true without deferred MUST keep meaning that there is no pending work
// in any granted queue." The only budgeted queue's policy lock times out (a database error that
// the unlocked status read cannot see: it shows the queue admitting), so claim_next answers empty
// with that queue deferred as admission_unavailable, after one refused pick, not two.
#[tokio::test]
async fn req7_a_queue_whose_policy_lock_times_out_is_listed_deferred() {
    let (world, agent) = agent_world(&["budgeted"]).await;
    let budgeted = queue_of(&agent, "budgeted");
    set_policy(&world, &budgeted, json!({"max_in_flight": 5})).await;
    let impatient = impatient_store(&world).await;
    world.push(&budgeted, "t").await;

    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold policy lock");
    let waiting = deferred(impatient.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    let listed: Vec<_> = waiting.iter().map(|d| (d.identity.queue.as_str(), d.reason, d.pending)).collect();
    assert_eq!(listed, vec![("budgeted", Reason::AdmissionUnavailable, 1)]);
    assert_eq!((waiting[0].next_eligible_at, waiting[0].exact), (None, None), "no time is known");
    let refusals = impatient.counters().snapshot().refusals;
    assert_eq!(refusals.get(&("budgeted".to_string(), Reason::AdmissionUnavailable)), Some(&1), "{refusals:?}");
    holder.rollback().await.expect("rollback");
    claimed(impatient.claim_next(&agent, &granted(&agent), 60).await.expect("admitted once the policy is readable"));
}

// SPEC-0030 REQ-10 "Lowering mid-window"; raising admits at once.
#[tokio::test]
async fn req10_lowering_mid_window_refuses_until_the_next_window_and_is_audited() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T08:00:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(100)).await;
    push_n(&world, &queue, 70).await;
    for _ in 0..60 {
        claimed(world.store.claim_next(&agent, &granted(&agent), 3600).await.expect("claim"));
    }
    set_policy(&world, &queue, daily_pacific(50)).await;
    assert_eq!(
        deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"))[0].reason,
        Reason::WindowExhausted
    );
    let claimed_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("count");
    assert_eq!(claimed_rows, 60, "the claims already committed stand");
    let audit = world.store.policy_audit(&queue, 10).await.expect("audit");
    assert_eq!(audit[0].action, "update");
    assert_eq!(audit[0].before.as_ref().map(|b| b["max_claims_per_window"].clone()), Some(json!(100)));
    assert_eq!(audit[0].after.as_ref().map(|a| a["max_claims_per_window"].clone()), Some(json!(50)));
    assert_eq!(audit[1].action, "create");

    set_policy(&world, &queue, daily_pacific(61)).await;
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("raising admits at once"));
    world.clock.set(at("2026-12-01T00:00:00-08:00"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("next window"));
}

// SPEC-0030 REQ-10: changing the window definition counts in the window the new definition
// places the current instant in, with the claims already committed in its span (REQ-3, issue
// #28); clearing keeps the audit.
#[tokio::test]
async fn req10_a_new_window_definition_counts_in_its_own_window_and_clear_keeps_the_audit() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T09:50:00Z"));
    let queue = queue_of(&agent, "inbox");
    set_policy(
        &world,
        &queue,
        json!({"max_claims_per_window": 2, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    )
    .await;
    push_n(&world, &queue, 4).await;
    claimed(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("claim before the hour"));
    world.clock.set(at("2026-11-30T10:30:00Z"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("claim inside the hour"));
    let hourly = set_policy(
        &world,
        &queue,
        json!({"max_claims_per_window": 1, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}}),
    )
    .await;
    assert_eq!((hourly.status.used, hourly.status.window_start), (Some(1), Some(at("2026-11-30T10:00:00Z"))));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("the hour is spent"));
    assert_eq!(waiting[0].reason, Reason::WindowExhausted);
    world.clock.set(at("2026-11-30T11:00:00Z"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("the next hour window is fresh"));
    let actor = models::store::PolicyActor { human_id: None, endpoint_id: None };
    world.store.clear_policy(&queue, &actor).await.expect("clear");
    assert_eq!(world.store.clear_policy(&queue, &actor).await.expect_err("gone").code, Code::NotFound);
    let audit = world.store.policy_audit(&queue, 10).await.expect("audit");
    assert_eq!(audit.iter().map(|a| a.action.as_str()).collect::<Vec<_>>(), vec!["delete", "update", "create"]);
    claimed(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("no policy, no limit"));
}

// SPEC-0030 REQ-13 "A cancelled claim charges nothing": the client goes away after the policy
// lock is taken and before the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req13_a_cancelled_claim_after_the_policy_lock_charges_nothing() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(10)).await;
    let first = world.push(&queue, "first").await;
    let second = world.push(&queue, "second").await;
    world.store.claim(&agent, &first.id, 60).await.expect("claim");
    assert_eq!(charged(&world, &queue).await, 1);

    // Hold the window's usage row: the next claim takes the policy lock, then waits to charge.
    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT used FROM admission_windows FOR UPDATE").execute(&mut *holder).await.expect("hold usage row");
    let cancelled =
        tokio::time::timeout(std::time::Duration::from_millis(500), world.store.claim(&agent, &second.id, 60)).await;
    assert!(cancelled.is_err(), "the claim was waiting after the policy lock, and is now cancelled");
    holder.rollback().await.expect("rollback");

    // The cancelled transaction rolls back: the policy lock comes free, nothing changed.
    let mut probe = world.store.pool().begin().await.expect("begin");
    let mut freed = false;
    for _ in 0..100 {
        if sqlx::query("SELECT id FROM admission_policies FOR UPDATE NOWAIT").execute(&mut *probe).await.is_ok() {
            freed = true;
            break;
        }
        probe.rollback().await.expect("rollback");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        probe = world.store.pool().begin().await.expect("begin");
    }
    probe.rollback().await.expect("rollback");
    assert!(freed, "the cancelled claim's policy lock was released");
    assert_eq!(charged(&world, &queue).await, 1);
    assert_eq!(world.store.get_todo(&agent, &second.id).await.expect("get"), second);
    world.store.claim(&agent, &second.id, 60).await.expect("claimable as before");
    assert_eq!(charged(&world, &queue).await, 2);
}

// SPEC-0030 REQ-9: a row damaged after it admitted claims fails closed from the next claim on.
#[tokio::test]
async fn req9_a_policy_damaged_after_it_admitted_claims_fails_closed() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(10)).await;
    push_n(&world, &queue, 4).await;
    for expected_used in 1..=2 {
        let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
        assert_eq!(got.admission.and_then(|a| a.used), Some(expected_used));
    }
    sqlx::query("UPDATE admission_policies SET window_tz = 'Mars/Olympus'")
        .execute(world.store.pool())
        .await
        .expect("corrupt");
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!((waiting[0].reason, waiting[0].pending), (Reason::AdmissionUnavailable, 2));
    assert_eq!(charged(&world, &queue).await, 2, "a refusal charges nothing");
}

// SPEC-0030 REQ-10: limits changed after claims were admitted take effect on the next claim,
// both ways.
#[tokio::test]
async fn req10_a_changed_limit_applies_to_the_next_claim_in_both_directions() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T08:00:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(3)).await;
    push_n(&world, &queue, 6).await;
    for _ in 0..2 {
        claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    }
    set_policy(&world, &queue, daily_pacific(2)).await;
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("lowered"));
    assert_eq!(waiting[0].reason, Reason::WindowExhausted);
    set_policy(&world, &queue, daily_pacific(4)).await;
    for expected_used in 3..=4 {
        let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("raised"));
        assert_eq!(got.admission.map(|a| (a.used, a.max_claims_per_window)), Some((Some(expected_used), Some(4))));
    }
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("spent again"));
    assert_eq!(waiting[0].reason, Reason::WindowExhausted);
    assert_eq!(charged(&world, &queue).await, 4);
}

// SPEC-0030 REQ-5 across a window boundary: each claim is charged to the window the clock is
// in when it commits, and reports that window's end.
#[tokio::test]
async fn req5_claims_either_side_of_midnight_are_charged_to_their_own_windows() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T23:58:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(5)).await;
    push_n(&world, &queue, 5).await;
    for expected_used in 1..=3 {
        let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("before midnight"));
        assert_eq!(got.admission.and_then(|a| a.window_resets_at), Some(at("2026-12-01T00:00:00-08:00")));
        assert_eq!(got.admission.and_then(|a| a.used), Some(expected_used));
    }
    world.clock.set(at("2026-12-01T00:00:00-08:00"));
    for expected_used in 1..=2 {
        let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("after midnight"));
        assert_eq!(got.admission.and_then(|a| a.window_resets_at), Some(at("2026-12-02T00:00:00-08:00")));
        assert_eq!(got.admission.and_then(|a| a.used), Some(expected_used));
    }
    let rows: Vec<(chrono::DateTime<chrono::Utc>, i32)> =
        sqlx::query_as("SELECT window_start, used FROM admission_windows ORDER BY window_start")
            .fetch_all(world.store.pool())
            .await
            .expect("usage rows");
    assert_eq!(rows, vec![(at("2026-11-30T00:00:00-08:00"), 3), (at("2026-12-01T00:00:00-08:00"), 2)]);
}

// SPEC-0030 REQ-13 for claim_next: a claim cancelled while it waits for the policy lock charges
// nothing and claims nothing once the lock comes free (the database must not finish it for a
// caller that is gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req13_a_claim_next_cancelled_while_waiting_for_the_policy_lock_charges_nothing() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(10)).await;
    push_n(&world, &queue, 3).await;
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    assert_eq!(charged(&world, &queue).await, 1);

    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold policy lock");
    let queues = granted(&agent);
    let waiting = world.store.claim_next(&agent, &queues, 60);
    let cancelled = tokio::time::timeout(std::time::Duration::from_millis(500), waiting).await;
    assert!(cancelled.is_err(), "the claim was waiting for the policy lock, and is now cancelled");
    holder.rollback().await.expect("rollback");

    // Wait until every other session of this database is idle: the cancelled claim's statement
    // has ended, whichever way. Then nothing may have changed.
    let mut settled = false;
    for _ in 0..200 {
        let busy: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
               AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'",
        )
        .fetch_one(world.store.pool())
        .await
        .expect("sessions");
        if busy == 0 {
            settled = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(settled, "the cancelled claim's session went idle");
    assert_eq!(charged(&world, &queue).await, 1, "the cancelled claim charged nothing");
    let claimed_now: i64 = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("count");
    assert_eq!(claimed_now, 1, "the cancelled claim claimed nothing");
    let next = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    assert_eq!(next.admission.and_then(|a| a.used), Some(2));
}

// SPEC-0030 REQ-6: the status reads the current window's usage whichever usage row is the
// identity's newest. A window redefined to start earlier leaves a newer row of the old
// definition, which is not the current window's; a window with no row yet reads 0 however recent
// the rows before it. (A status read that took the newest row as the current window's, one way
// to save its second statement, fails here.)
#[tokio::test]
async fn req6_the_status_reads_the_current_windows_usage_whichever_usage_row_is_newest() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T10:30:00Z"));
    let queue = queue_of(&agent, "inbox");
    let hourly = json!({"max_claims_per_window": 5, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}});
    set_policy(&world, &queue, hourly).await;
    push_n(&world, &queue, 5).await;
    for _ in 0..2 {
        claimed(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("claim"));
    }
    let used =
        |detail: models::store::PolicyDetail| (detail.admission.status.used, detail.admission.status.window_start);
    let detail = world.store.policy_detail(&queue).await.expect("detail");
    assert_eq!(used(detail), (Some(2), Some(at("2026-11-30T10:00:00Z"))), "the newest row is the current window's");

    // Daily from midnight: its window began before the hourly row's, which stays the newest.
    let daily = json!({"max_claims_per_window": 5, "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    set_policy(&world, &queue, daily).await;
    claimed(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("claim in the daily window"));
    let detail = world.store.policy_detail(&queue).await.expect("detail");
    assert_eq!(used(detail), (Some(3), Some(at("2026-11-30T00:00:00Z"))), "read by the current window's start");

    world.clock.set(at("2026-12-01T00:30:00Z"));
    let detail = world.store.policy_detail(&queue).await.expect("detail");
    assert_eq!(used(detail), (Some(0), Some(at("2026-12-01T00:00:00Z"))), "no row for today yet");
}
