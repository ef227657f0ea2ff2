//! SPEC-0030 on real PostgreSQL, at engine level: each requirement's scenarios by name (REQ-1 to
//! REQ-7 here; a policy that fails, changes or is abandoned mid-claim in `admission_changes.rs`).

mod support;

use chrono::Duration;
use models::admission::Reason;
use models::error::Code;
use models::store::ClaimNext;
use models::store::prelude::*;
use models::todo::{CreatedByKind, NewTodo, TodoState};
use serde_json::json;
use support::{
    World, agent_world, at, charged, claimed, daily_pacific, deferred, granted, new_todo, push_n, queue_of, set_policy,
};

// SPEC-0030 REQ-1 "No policy, no change": no admission lock, no admission row.
#[tokio::test]
async fn req1_no_policy_no_change_takes_no_admission_lock_and_writes_no_row() {
    let (world, agent) = agent_world(&["plain", "budgeted"]).await;
    set_policy(&world, &queue_of(&agent, "budgeted"), json!({"max_in_flight": 5})).await;
    push_n(&world, &queue_of(&agent, "plain"), 3).await;
    world.clock.advance(Duration::seconds(1));
    let todo = world.push(&queue_of(&agent, "plain"), "named, the youngest").await;

    // Another transaction holds the lock on every policy row (and on every usage row).
    let mut blocker = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *blocker).await.expect("lock policies");
    sqlx::query("SELECT used FROM admission_windows FOR UPDATE").execute(&mut *blocker).await.expect("lock usage");
    let plain = vec![queue_of(&agent, "plain")];
    let patience = std::time::Duration::from_secs(5);
    let next = tokio::time::timeout(patience, world.store.claim_next(&agent, &plain, 60)).await;
    claimed(next.expect("claim_next must not wait").expect("claim_next"));
    let named = tokio::time::timeout(patience, world.store.claim(&agent, &todo.id, 60)).await;
    named.expect("claim must not wait").expect("claim");
    blocker.rollback().await.expect("rollback");

    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM admission_windows")
        .fetch_one(world.store.pool())
        .await
        .expect("count");
    assert_eq!(rows, 0);
    assert_eq!(world.store.counters().snapshot().refusals.len(), 0);
}

// SPEC-0030 REQ-1 "A daily budget"
#[tokio::test]
async fn req1_a_daily_budget_admits_at_most_the_limit_between_pacific_midnights() {
    let (world, agent) = agent_world(&["investigations"]).await;
    world.clock.set(at("2026-11-30T09:00:00-08:00"));
    let queue = queue_of(&agent, "investigations");
    set_policy(&world, &queue, daily_pacific(5)).await;
    push_n(&world, &queue, 8).await;
    for _ in 0..5 {
        claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    }
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting.len(), 1);
    assert_eq!((waiting[0].reason, waiting[0].pending), (Reason::WindowExhausted, 3));
    assert_eq!(waiting[0].next_eligible_at, Some(at("2026-12-01T00:00:00-08:00")));

    world.clock.set(at("2026-11-30T23:59:59-08:00"));
    assert!(!deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next")).is_empty());
    world.clock.set(at("2026-12-01T00:00:00-08:00"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("a new Pacific day admits again"));
}

// SPEC-0030 REQ-1 "Zero pauses the queue"
#[tokio::test]
async fn req1_zero_pauses_the_queue_and_pending_stays_pending() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, json!({"max_in_flight": 0})).await;
    let todo = world.push(&queue, "t").await;
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!((waiting[0].reason, waiting[0].next_eligible_at), (Reason::Paused, None));
    let refused = world.store.claim(&agent, &todo.id, 60).await.expect_err("paused");
    assert_eq!((refused.code, refused.extras["reason"].as_str()), (Code::Deferred, Some("paused")));
    let after = world.store.get_todo(&agent, &todo.id).await.expect("get");
    assert_eq!((after.state, after.attempt), (TodoState::Pending, 0));
}

// SPEC-0030 REQ-1 "Unknown zone is refused"
#[tokio::test]
async fn req1_unknown_zone_is_refused_naming_window_tz_and_the_policy_is_unchanged() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    let saved = set_policy(&world, &queue, daily_pacific(10)).await;
    let request =
        json!({"max_claims_per_window": 99, "window": {"period": "day", "tz": "Mars/Olympus", "start": "00:00"}});
    let error = models::admission::Policy::from_request(&request).expect_err("unknown zone");
    assert_eq!((error.code, error.extras["field"].as_str()), (Code::InvalidArgument, Some("window.tz")));
    let now = world.store.queue_admissions(std::slice::from_ref(&queue)).await.expect("read").pop().expect("policy");
    assert_eq!(now.policy, saved.policy);
    assert_eq!(now.updated_at, saved.updated_at);
}

// SPEC-0030 REQ-2 "A pool shares one budget"
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn req2_a_pool_of_sessions_shares_one_budget() {
    let (world, agent) = agent_world(&["lane-m"]).await;
    let queue = queue_of(&agent, "lane-m");
    set_policy(
        &world,
        &queue,
        json!({"max_claims_per_window": 20, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}}),
    )
    .await;
    push_n(&world, &queue, 30).await;
    let sessions = (0..3).map(|_| {
        let (store, agent) = (world.store.clone(), agent.clone());
        tokio::spawn(async move {
            let mut mine = 0;
            for _ in 0..15 {
                if let ClaimNext::Claimed(_) = store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next")
                {
                    mine += 1;
                }
            }
            mine
        })
    });
    // Spawn them all before awaiting any: a lazy iterator would run them one after another.
    let sessions: Vec<_> = sessions.collect();
    let mut total = 0;
    for session in sessions {
        total += session.await.expect("join");
    }
    assert_eq!(total, 20);
    assert_eq!(charged(&world, &queue).await, 20);
}

// SPEC-0030 REQ-2 "Same name, different owners" and "A fan-out copy is governed by its own endpoint"
#[tokio::test]
async fn req2_same_name_on_another_owner_is_never_governed_or_charged() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let bob = world.human("bob").await;
    let a = world.agent(&alice, &["investigations"]).await;
    let b = world.agent(&bob, &["investigations"]).await;
    let (a_queue, b_queue) = (queue_of(&a, "investigations"), queue_of(&b, "investigations"));
    set_policy(
        &world,
        &a_queue,
        json!({"max_claims_per_window": 1, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    )
    .await;
    // One event fanned out: a copy in each endpoint's queue of the same name.
    for identity in [&a_queue, &b_queue, &a_queue, &b_queue] {
        world.push(identity, "event 7").await;
    }
    claimed(world.store.claim_next(&a, &granted(&a), 60).await.expect("a"));
    assert_eq!(
        deferred(world.store.claim_next(&a, &granted(&a), 60).await.expect("a"))[0].reason,
        Reason::WindowExhausted
    );
    for _ in 0..2 {
        let bs = claimed(world.store.claim_next(&b, &granted(&b), 60).await.expect("b"));
        assert_eq!(bs.admission, None, "B's queue has no policy");
    }
    assert_eq!(charged(&world, &a_queue).await, 1);
    assert_eq!(charged(&world, &b_queue).await, 0);
}

// SPEC-0030 REQ-3 "A retry is charged"
#[tokio::test]
async fn req3_a_retry_is_charged_again() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(10)).await;
    let todo = world.push(&queue, "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.store.fail(&agent, &todo.id, None).await.expect("fail");
    world.clock.advance(Duration::seconds(31));
    world.store.requeue_due_retries().await.expect("requeue");
    let again = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    assert_eq!(again.todo.attempt, 2);
    assert_eq!(charged(&world, &queue).await, 2);
}

// SPEC-0030 REQ-3 "A takeover is charged"
#[tokio::test]
async fn req3_a_takeover_is_charged() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(10)).await;
    let todo = world.push(&queue, "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.clock.advance(Duration::seconds(61));
    let taken = world.store.claim(&agent, &todo.id, 60).await.expect("takeover");
    assert_eq!(taken.admission.and_then(|a| a.used), Some(2));
    assert_eq!(charged(&world, &queue).await, 2);
}

// SPEC-0030 REQ-3 "Release does not refund"; nor does complete, fail, the reaper or Retry now.
#[tokio::test]
async fn req3_release_does_not_refund_and_the_next_claim_is_charged_again() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(10)).await;
    let todo = world.push(&queue, "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.store.release(&agent, &todo.id).await.expect("release");
    assert_eq!(charged(&world, &queue).await, 1);
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    assert_eq!(charged(&world, &queue).await, 2);
    world.clock.advance(Duration::seconds(61));
    world.store.reap_lapsed_leases().await.expect("reap");
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.store.fail(&agent, &todo.id, None).await.expect("fail");
    let owner = world.owner("alice").await;
    world.store.retry_now(&owner, &todo.id).await.expect("retry now");
    assert_eq!(charged(&world, &queue).await, 3);
}

// SPEC-0030 REQ-3 "A redelivery is free"; a refusal is free too.
#[tokio::test]
async fn req3_a_deduped_redelivery_and_a_refusal_charge_nothing() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(
        &world,
        &queue,
        json!({"max_claims_per_window": 1, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    )
    .await;
    let delivery =
        NewTodo { created_by_kind: CreatedByKind::Ingest, ..new_todo(&queue, "delivery", Some("wh:delivery-1")) };
    let first = world.store.create_todo(delivery.clone()).await.expect("create");
    let again = world.store.create_todo(delivery).await.expect("create");
    assert!(again.deduped);
    assert_eq!(charged(&world, &queue).await, 0);
    world.store.claim(&agent, &first.todo.id, 60).await.expect("claim");
    let other = world.push(&queue, "second").await;
    world.store.claim(&agent, &other.id, 60).await.expect_err("exhausted");
    assert_eq!(charged(&world, &queue).await, 1);
}

// SPEC-0030 REQ-4 "Concurrent claimers cannot exceed the limit"
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn req4_concurrent_claimers_through_two_engines_cannot_exceed_the_limit() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let second_engine = World::store_on(&world.db, &world.clock).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(
        &world,
        &queue,
        json!({"max_claims_per_window": 10, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    )
    .await;
    push_n(&world, &queue, 50).await;
    let claimers = (0..50).map(|i| {
        let store = if i % 2 == 0 { world.store.clone() } else { second_engine.clone() };
        let agent = agent.clone();
        tokio::spawn(async move { store.claim_next(&agent, &granted(&agent), 300).await })
    });
    // Spawn them all before awaiting any: a lazy iterator would run them one after another.
    let claimers: Vec<_> = claimers.collect();
    let (mut committed, mut told_to_wait) = (0, 0);
    for claimer in claimers {
        match claimer.await.expect("join").expect("claim_next") {
            ClaimNext::Claimed(_) => committed += 1,
            ClaimNext::Empty { deferred } => {
                assert_eq!((deferred.len(), deferred[0].reason), (1, Reason::WindowExhausted));
                told_to_wait += 1;
            }
        }
    }
    assert_eq!((committed, told_to_wait), (10, 40));
    let claimed_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("count");
    assert_eq!(claimed_rows, 10);
    assert_eq!(charged(&world, &queue).await, 10);
}

// SPEC-0030 REQ-4 "In-flight cap"
#[tokio::test]
async fn req4_in_flight_cap_refuses_the_third_then_admits_after_a_completion() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, json!({"max_in_flight": 2})).await;
    push_n(&world, &queue, 3).await;
    let first = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("1"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("2"));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("3"));
    assert_eq!((waiting[0].reason, waiting[0].exact), (Reason::InFlightFull, Some(false)));
    // The hint: earliest live lease expiry plus the reaper interval (30 s by default).
    assert_eq!(waiting[0].next_eligible_at, Some(support::epoch() + Duration::seconds(90)));
    world.store.complete(&agent, &first.todo.id, None).await.expect("complete");
    let third = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("3 again"));
    assert_eq!(third.admission.map(|a| (a.in_flight, a.max_in_flight)), Some((2, Some(2))));
}

// SPEC-0030 REQ-4 "Takeover at the in-flight cap"
#[tokio::test]
async fn req4_takeover_at_the_in_flight_cap_is_admitted() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, json!({"max_in_flight": 1})).await;
    let todo = world.push(&queue, "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.clock.advance(Duration::seconds(61));
    let taken = world.store.claim(&agent, &todo.id, 60).await.expect("a takeover replaces the lapsed claim");
    assert_eq!((taken.todo.attempt, taken.admission.map(|a| a.in_flight)), (2, Some(1)));
}

// SPEC-0030 REQ-4 "Takeover at the in-flight cap" through claim_next, issue #51: the cap of 1 is
// held by a lapsed, not yet reaped claim and an older todo is pending. claim_next must not answer
// empty: the pending todo is refused (in_flight_full), and the takeover of the lapsed claim
// behind it, which the cap admits, is made. Then the cap is full again.
#[tokio::test]
async fn req4_claim_next_takes_over_a_lapsed_claim_behind_an_older_pending_todo() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, json!({"max_in_flight": 1})).await;
    let older = world.push(&queue, "pending, older").await;
    world.clock.advance(Duration::seconds(1));
    let lapsed = world.push(&queue, "claimed, then lapsed").await;
    world.store.claim(&agent, &lapsed.id, 60).await.expect("claim the newer one by name");
    world.clock.advance(Duration::seconds(61));

    let taken = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(taken.todo.id, lapsed.id, "the takeover, not the pending todo the cap refuses");
    assert_eq!((taken.todo.attempt, taken.admission.map(|a| a.in_flight)), (2, Some(1)));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!((waiting[0].reason, waiting[0].pending), (Reason::InFlightFull, 1), "{} waits", older.id);
}

// SPEC-0030 REQ-4 "One deferred queue does not starve the others"
#[tokio::test]
async fn req4_one_deferred_queue_does_not_starve_the_others() {
    let (world, agent) = agent_world(&["triage", "lane-s"]).await;
    let lane_s = queue_of(&agent, "lane-s");
    set_policy(&world, &lane_s, json!({"max_in_flight": 0})).await;
    let _oldest = world.push(&lane_s, "oldest, but lane-s is paused").await;
    world.clock.advance(Duration::seconds(1));
    let triage = world.push(&queue_of(&agent, "triage"), "triage").await;
    let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(got.todo.id, triage.id);
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(
        waiting.iter().map(|d| (d.identity.queue.as_str(), d.reason)).collect::<Vec<_>>(),
        vec![("lane-s", Reason::Paused)]
    );
}

// SPEC-0030 REQ-4: a deferred queue does not starve another owner's queue of the same name. The
// pick skipped refused queues with `NOT ((endpoint_id, queue) IN … OR (team_id, queue) IN …)`,
// which is NULL for a team's row when its endpoint's queue of that name was refused, so the
// team's queue was skipped too (issue #15 review).
#[tokio::test]
async fn req4_a_deferred_endpoint_queue_does_not_starve_a_team_queue_of_the_same_name() {
    let (world, agent, [own_x, team_x]) = support::queue_of_both_kinds("x").await;
    set_policy(&world, &own_x, json!({"max_in_flight": 0})).await;
    world.push(&own_x, "oldest, but the endpoint's x is paused").await;
    world.clock.advance(Duration::seconds(1));
    let teams = world.push(&team_x, "the team's x").await;
    let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(got.todo.id, teams.id);
}

// SPEC-0030 REQ-5 "A Pacific day": the boundary reopens the queue and writes nothing to any todo.
#[tokio::test]
async fn req5_a_pacific_day_reopens_at_midnight_without_writing_to_todos() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T16:59:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(1)).await;
    push_n(&world, &queue, 2).await;
    world.clock.set(at("2026-11-30T17:00:00-08:00"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!((waiting[0].next_eligible_at, waiting[0].exact), (Some(at("2026-12-01T00:00:00-08:00")), Some(true)));
    let touched_before: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT max(updated_at) FROM todos").fetch_one(world.store.pool()).await.expect("max");
    world.clock.set(at("2026-12-01T00:00:00-08:00"));
    let touched_after: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT max(updated_at) FROM todos").fetch_one(world.store.pool()).await.expect("max");
    assert_eq!(touched_before, touched_after, "a window turning writes nothing to todos");
    let next = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    assert_eq!(next.admission.and_then(|a| a.used), Some(1), "the new window starts at zero");
}

// SPEC-0030 REQ-6 "An exhausted day keeps its work"
#[tokio::test]
async fn req6_an_exhausted_day_keeps_its_work_pending_and_explained() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T10:00:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(1)).await;
    world.push(&queue, "the day's one").await;
    let ones = claimed(world.store.claim_next(&agent, &granted(&agent), 3600).await.expect("claim"));
    world.store.complete(&agent, &ones.todo.id, None).await.expect("complete");
    for i in 0..40 {
        world.clock.set(at("2026-11-30T10:00:00-08:00") + Duration::minutes(i * 20));
        world.push(&queue, &format!("arrival {i}")).await;
    }
    world.clock.set(at("2026-11-30T23:59:00-08:00"));
    world.store.reap_lapsed_leases().await.expect("reap");
    world.store.requeue_due_retries().await.expect("requeue");
    let status =
        world.store.queue_admissions(std::slice::from_ref(&queue)).await.expect("status").pop().expect("policy");
    assert_eq!((status.status.status, status.pending), (models::admission::QueueStatus::WindowExhausted, 40));
    assert_eq!(status.status.hint.next_eligible_at, Some(at("2026-12-01T00:00:00-08:00")));
    let pending: Vec<_> = world
        .store
        .list_todos(models::store::TodoQuery {
            set: models::store::TodoSet::Queues(vec![queue.clone()]),
            state: Some(TodoState::Pending),
            limit: 100,
        })
        .await
        .expect("list");
    assert_eq!(pending.len(), 40);
    assert!(pending.iter().all(|t| t.attempt == 0 && !t.dead_letter() && t.state == TodoState::Pending));
}

// SPEC-0030 REQ-6 "Deferral outlives the retry backoff"
#[tokio::test]
async fn req6_deferral_outlives_the_retry_backoff() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T15:59:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(1)).await;
    let todo = world.push(&queue, "t").await;
    world.store.claim(&agent, &todo.id, 600).await.expect("claim");
    world.clock.set(at("2026-11-30T16:00:00-08:00"));
    let failed = world.store.fail(&agent, &todo.id, None).await.expect("fail");
    assert_eq!(failed.next_retry_at, Some(at("2026-11-30T16:00:30-08:00")));
    world.clock.set(at("2026-11-30T16:01:00-08:00"));
    assert_eq!(world.store.requeue_due_retries().await.expect("requeue"), 1);
    let back = world.store.get_todo(&agent, &todo.id).await.expect("get");
    assert_eq!((back.state, back.attempt), (TodoState::Pending, 1));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting[0].next_eligible_at, Some(at("2026-12-01T00:00:00-08:00")));
    world.clock.set(at("2026-12-01T00:00:00-08:00"));
    assert_eq!(claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim")).todo.attempt, 2);
}

// SPEC-0030 REQ-7 "A worker is told to wait, not to poll"; empty without deferred means no work.
#[tokio::test]
async fn req7_a_worker_is_told_to_wait_not_to_poll() {
    let (world, agent) = agent_world(&["inbox"]).await;
    assert!(deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("empty")).is_empty());
    world.clock.set(at("2026-11-30T12:00:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(0)).await;
    set_policy(&world, &queue, daily_pacific(1)).await;
    push_n(&world, &queue, 13).await;
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting.len(), 1);
    let entry = &waiting[0];
    assert_eq!((entry.identity.queue.as_str(), entry.reason, entry.pending), ("inbox", Reason::WindowExhausted, 12));
    assert_eq!((entry.next_eligible_at, entry.exact), (Some(at("2026-12-01T00:00:00-08:00")), Some(true)));
}

// SPEC-0030 REQ-7 "Headroom on a successful claim"
#[tokio::test]
async fn req7_headroom_on_the_73rd_claim_of_100() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T08:00:00-08:00"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_pacific(100)).await;
    push_n(&world, &queue, 73).await;
    let mut last = None;
    for _ in 0..73 {
        last = Some(claimed(world.store.claim_next(&agent, &granted(&agent), 600).await.expect("claim")));
    }
    let headroom = last.and_then(|c| c.admission).expect("budgeted claims carry headroom");
    assert_eq!((headroom.used, headroom.remaining, headroom.max_claims_per_window), (Some(73), Some(27), Some(100)));
    assert_eq!(headroom.window_resets_at, Some(at("2026-12-01T00:00:00-08:00")));
    assert_eq!((headroom.in_flight, headroom.max_in_flight), (73, None));
}

// SPEC-0030 REQ-7 "A specific claim in a deferred queue"
#[tokio::test]
async fn req7_a_specific_claim_in_a_paused_queue_fails_deferred_and_changes_nothing() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    let todo = world.push(&queue, "t").await;
    set_policy(&world, &queue, json!({"max_in_flight": 0})).await;
    let refused = world.store.claim(&agent, &todo.id, 60).await.expect_err("paused");
    assert_eq!(refused.code, Code::Deferred);
    assert_eq!((refused.extras["queue"].as_str(), refused.extras["reason"].as_str()), (Some("inbox"), Some("paused")));
    assert!(refused.extras["next_eligible_at"].is_null());
    let after = world.store.get_todo(&agent, &todo.id).await.expect("get");
    assert_eq!(after, todo);
    assert_eq!(charged(&world, &queue).await, 0);
}
