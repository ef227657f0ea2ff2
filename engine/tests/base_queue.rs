//! The base queue on real PostgreSQL: every transition of the todo state machine, dedup,
//! scoping, and exactly-once claiming under concurrency across two engine instances.

mod support;

use chrono::Duration;
use models::error::Code;
use models::store::ClaimNext;
use models::store::prelude::*;
use models::todo::{TodoState, retry_backoff};
use serde_json::json;
use support::{World, granted, new_todo, queue_of};

fn claimed(outcome: ClaimNext) -> models::todo::Todo {
    match outcome {
        ClaimNext::Claimed(claimed) => claimed.todo,
        ClaimNext::Empty { .. } => panic!("expected a claim, got empty"),
    }
}

#[tokio::test]
async fn create_then_claim_next_then_complete() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "first").await;
    assert_eq!((todo.state, todo.attempt, todo.max_attempts), (TodoState::Pending, 0, 5));

    let claim = claimed(world.store.claim_next(&agent, &granted(&agent), 300).await.expect("claim_next"));
    assert_eq!(claim.id, todo.id);
    assert_eq!((claim.state, claim.attempt), (TodoState::Claimed, 1));
    assert_eq!(claim.lease_expires_at, Some(support::epoch() + Duration::seconds(300)));
    assert_eq!(claim.owner.as_deref(), Some(agent.label().as_str()));

    let done = world.store.complete(&agent, &todo.id, Some(json!({"ok": true}))).await.expect("complete");
    assert_eq!(done.state, TodoState::Done);
    assert_eq!(done.result, Some(json!({"ok": true})));
    assert_eq!(done.lease_expires_at, None);
    assert!(matches!(world.store.claim_next(&agent, &granted(&agent), 300).await, Ok(ClaimNext::Empty { .. })));
}

#[tokio::test]
async fn claim_next_takes_the_oldest_across_granted_queues() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["a", "b"]).await;
    let older = world.push(&queue_of(&agent, "b"), "older").await;
    world.clock.advance(Duration::seconds(1));
    let newer = world.push(&queue_of(&agent, "a"), "newer").await;
    let first = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    let second = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim"));
    assert_eq!((first.id, second.id), (older.id, newer.id));
}

#[tokio::test]
async fn heartbeat_extends_the_lease_without_an_attempt() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.clock.advance(Duration::seconds(50));
    let beat = world.store.heartbeat(&agent, &todo.id, 120).await.expect("heartbeat");
    assert_eq!(beat.lease_expires_at, Some(support::epoch() + Duration::seconds(170)));
    assert_eq!(beat.attempt, 1);
}

#[tokio::test]
async fn release_returns_to_pending_and_keeps_the_attempt() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    let released = world.store.release(&agent, &todo.id).await.expect("release");
    assert_eq!((released.state, released.attempt, released.owner), (TodoState::Pending, 1, None));
    let again = world.store.claim(&agent, &todo.id, 60).await.expect("claim again").todo;
    assert_eq!(again.attempt, 2);
}

#[tokio::test]
async fn fail_parks_with_backoff_then_the_scheduler_requeues_with_attempt_kept() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    let failed = world.store.fail(&agent, &todo.id, Some(json!("boom"))).await.expect("fail");
    assert_eq!(failed.state, TodoState::Failed);
    assert_eq!(failed.next_retry_at, Some(support::epoch() + retry_backoff(1)));
    assert!(!failed.dead_letter());

    // Not yet due: neither claimable nor requeued.
    assert!(matches!(world.store.claim_next(&agent, &granted(&agent), 60).await, Ok(ClaimNext::Empty { .. })));
    assert_eq!(world.store.requeue_due_retries().await.expect("requeue"), 0);

    world.clock.advance(Duration::seconds(30));
    assert_eq!(world.store.requeue_due_retries().await.expect("requeue"), 1);
    let back = world.store.get_todo(&agent, &todo.id).await.expect("get");
    assert_eq!((back.state, back.attempt, back.next_retry_at), (TodoState::Pending, 1, None));
}

#[tokio::test]
async fn a_due_retry_is_claimable_before_the_scheduler_runs() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.store.fail(&agent, &todo.id, None).await.expect("fail");
    world.clock.advance(Duration::seconds(31));
    let again = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!((again.id, again.attempt), (todo.id, 2));
}

#[tokio::test]
async fn fail_at_max_attempts_dead_letters_and_retry_now_resets_the_attempt() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let mut new = new_todo(&queue_of(&agent, "inbox"), "t", None);
    new.max_attempts = 2;
    let todo = world.store.create_todo(new).await.expect("create").todo;
    for attempt in 1..=2 {
        let claim = world.store.claim(&agent, &todo.id, 60).await.expect("claim").todo;
        assert_eq!(claim.attempt, attempt);
        world.store.fail(&agent, &todo.id, None).await.expect("fail");
        world.clock.advance(retry_backoff(attempt) + Duration::seconds(1));
    }
    let dead = world.store.get_todo(&agent, &todo.id).await.expect("get");
    assert!(dead.dead_letter(), "failed at max_attempts is a dead letter: {dead:?}");
    assert_eq!(world.store.requeue_due_retries().await.expect("requeue"), 0);
    let refused = world.store.claim(&agent, &todo.id, 60).await.expect_err("dead letters are not claimable");
    assert_eq!((refused.code, refused.extras["state"].as_str()), (Code::Conflict, Some("failed")));

    let owner = world.owner("alice").await;
    let retried = world.store.retry_now(&owner, &todo.id).await.expect("retry now");
    assert_eq!((retried.state, retried.attempt, retried.next_retry_at), (TodoState::Pending, 0, None));
    let claim = world.store.claim(&agent, &todo.id, 60).await.expect("claim after retry now").todo;
    assert_eq!(claim.attempt, 1);
}

#[tokio::test]
async fn retry_now_refuses_a_todo_that_has_not_failed() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    let owner = world.owner("alice").await;
    let refused = world.store.retry_now(&owner, &todo.id).await.expect_err("pending cannot be retried");
    assert_eq!(refused.code, Code::Conflict);
}

#[tokio::test]
async fn a_lapsed_lease_is_taken_over_and_the_old_holder_loses_it() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let first = world.agent(&alice, &["inbox"]).await;
    let second = world.agent(&alice, &["inbox"]).await;
    // Both endpoints belong to alice but are different queue identities; share one by pushing to
    // the first endpoint's queue and letting its own second session (same actor) take over.
    let todo = world.push(&queue_of(&first, "inbox"), "t").await;
    world.store.claim(&first, &todo.id, 60).await.expect("claim");
    let live = world.store.claim(&first, &todo.id, 60).await.expect_err("a live lease cannot be taken over");
    assert_eq!(live.code, Code::Conflict);

    world.clock.advance(Duration::seconds(61));
    let taken = claimed(world.store.claim_next(&first, &granted(&first), 60).await.expect("takeover"));
    assert_eq!((taken.id.as_str(), taken.attempt), (todo.id.as_str(), 2));
    assert_eq!(taken.lease_expires_at, Some(support::epoch() + Duration::seconds(121)));
    // The other endpoint never saw it: a todo of another endpoint is not found.
    let foreign = world.store.claim(&second, &todo.id, 60).await.expect_err("foreign");
    assert_eq!(foreign.code, Code::NotFound);
}

// The reaper takes a batch of each owner kind at a time, in no order, until none is left: more
// lapsed leases than one batch holds, of both kinds, are all reaped in one sweep, and the live
// leases among them are left alone.
#[tokio::test]
async fn the_reaper_reaps_every_lapsed_lease_of_both_kinds_beyond_one_batch() {
    let (world, _, [own, teams]) = support::queue_of_both_kinds("inbox").await;
    let endpoint_id = own.endpoint_id().expect("an endpoint's queue").to_string();
    let team_id = teams.team_id().expect("a team's queue").to_string();
    // 1,300 lapsed (700 of the endpoint, 600 of the team) and 50 live, every 27th.
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, team_id, queue, title, created_by_kind, state, owner, \
                            claimed_by_endpoint_id, lease_expires_at, attempt, claimed_at, created_at, updated_at) \
         SELECT 'td_held_' || n, CASE WHEN n <= 700 THEN $1 END, CASE WHEN n > 700 THEN $2 END, 'inbox', \
                'held ' || n, 'system', 'claimed', 'endpoint/' || $1, $1, \
                $3::timestamptz + CASE WHEN n % 27 = 0 THEN interval '5 minutes' ELSE interval '-1 minute' END, \
                1, $3, $3, $3 \
         FROM generate_series(1, 1350) AS n",
    )
    .bind(&endpoint_id)
    .bind(&team_id)
    .bind(support::epoch())
    .execute(world.store.pool())
    .await
    .expect("claimed todos");

    let report = world.store.reap_lapsed_leases().await.expect("reap");
    assert_eq!((report.returned_to_pending, report.dead_lettered), (1_300, 0));
    let held: Vec<String> = sqlx::query_scalar("SELECT id FROM todos WHERE state = 'claimed' ORDER BY id")
        .fetch_all(world.store.pool())
        .await
        .expect("still claimed");
    assert_eq!(held.len(), 50);
    assert!(held.iter().all(|id| id.trim_start_matches("td_held_").parse::<u32>().is_ok_and(|n| n % 27 == 0)));
}

#[tokio::test]
async fn the_reaper_returns_lapsed_leases_and_dead_letters_at_max_attempts() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let survivor = world.push(&queue_of(&agent, "inbox"), "retries left").await;
    let mut last = new_todo(&queue_of(&agent, "inbox"), "last attempt", None);
    last.max_attempts = 1;
    let last = world.store.create_todo(last).await.expect("create").todo;
    world.store.claim(&agent, &survivor.id, 60).await.expect("claim");
    world.store.claim(&agent, &last.id, 60).await.expect("claim");

    let early = world.store.reap_lapsed_leases().await.expect("reap");
    assert_eq!((early.returned_to_pending, early.dead_lettered), (0, 0));
    world.clock.advance(Duration::seconds(61));
    let report = world.store.reap_lapsed_leases().await.expect("reap");
    assert_eq!((report.returned_to_pending, report.dead_lettered), (1, 1));

    let survivor = world.store.get_todo(&agent, &survivor.id).await.expect("get");
    assert_eq!((survivor.state, survivor.attempt, survivor.owner), (TodoState::Pending, 1, None));
    let last = world.store.get_todo(&agent, &last.id).await.expect("get");
    assert!(last.dead_letter());
    // The reaped holder can no longer complete.
    let late = world.store.complete(&agent, &survivor.id, None).await.expect_err("lease reaped");
    assert_eq!(late.code, Code::Conflict);
}

#[tokio::test]
async fn only_the_lease_holder_may_complete_fail_release_or_heartbeat() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    let owner = world.owner("alice").await;
    // Pending: nobody holds it.
    for outcome in [
        world.store.complete(&agent, &todo.id, None).await,
        world.store.fail(&agent, &todo.id, None).await,
        world.store.release(&agent, &todo.id).await,
        world.store.heartbeat(&agent, &todo.id, 60).await,
    ] {
        let error = outcome.expect_err("not held");
        assert_eq!((error.code, error.extras["state"].as_str()), (Code::Conflict, Some("pending")));
    }
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    let not_holder = world.store.complete(&owner, &todo.id, None).await.expect_err("the owner is not the holder");
    assert_eq!(not_holder.code, Code::Conflict);
}

#[tokio::test]
async fn dedup_on_idempotency_key_returns_the_live_todo() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox", "other"]).await;
    let inbox = queue_of(&agent, "inbox");
    let first = world.store.create_todo(new_todo(&inbox, "t", Some("k1"))).await.expect("create");
    let second = world.store.create_todo(new_todo(&inbox, "t again", Some("k1"))).await.expect("create");
    assert!(!first.deduped);
    assert!(second.deduped);
    assert_eq!(second.todo.id, first.todo.id);
    assert_eq!(second.todo.title, "t");
    // Another queue identity is another namespace.
    let elsewhere =
        world.store.create_todo(new_todo(&queue_of(&agent, "other"), "t", Some("k1"))).await.expect("create");
    assert!(!elsewhere.deduped);
    // Once done, the key is free again.
    world.store.claim(&agent, &first.todo.id, 60).await.expect("claim");
    world.store.complete(&agent, &first.todo.id, None).await.expect("complete");
    let fresh = world.store.create_todo(new_todo(&inbox, "t", Some("k1"))).await.expect("create");
    assert!(!fresh.deduped);
    assert_ne!(fresh.todo.id, first.todo.id);
}

#[tokio::test]
async fn concurrent_creates_with_one_key_make_one_todo() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let inbox = queue_of(&agent, "inbox");
    let creates = (0..20).map(|_| world.store.create_todo(new_todo(&inbox, "t", Some("same"))));
    let results = futures::future::join_all(creates).await;
    let ids: std::collections::BTreeSet<String> =
        results.iter().map(|r| r.as_ref().expect("create").todo.id.clone()).collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(results.iter().filter(|r| r.as_ref().is_ok_and(|c| !c.deduped)).count(), 1);
}

#[tokio::test]
async fn scoping_foreign_todos_are_not_found_and_ungranted_queues_forbidden() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let bob = world.human("bob").await;
    let alice_agent = world.agent(&alice, &["inbox"]).await;
    let bob_agent = world.agent(&bob, &["inbox"]).await;
    let narrow = world.agent(&alice, &["inbox"]).await;
    let bobs = world.push(&queue_of(&bob_agent, "inbox"), "bob's").await;

    for outcome in [
        world.store.claim(&alice_agent, &bobs.id, 60).await.map(|c| c.todo),
        world.store.get_todo(&alice_agent, &bobs.id).await,
        world.store.claim(&alice_agent, "td_doesnotexist", 60).await.map(|c| c.todo),
    ] {
        assert_eq!(outcome.expect_err("foreign").code, Code::NotFound);
    }
    // claim_next never reaches another endpoint's queue of the same name.
    assert!(matches!(
        world.store.claim_next(&alice_agent, &granted(&alice_agent), 60).await,
        Ok(ClaimNext::Empty { .. })
    ));

    // An own todo in a queue outside the grant: forbidden for claim, not_found for get_todo.
    let Some(endpoint_id) = alice_agent.endpoint_id().map(str::to_string) else { panic!("agent") };
    let ungranted = world.push(&models::identity::QueueIdentity::endpoint(&endpoint_id, "secret"), "t").await;
    assert_eq!(world.store.claim(&alice_agent, &ungranted.id, 60).await.expect_err("ungranted").code, Code::Forbidden);
    assert_eq!(world.store.get_todo(&alice_agent, &ungranted.id).await.expect_err("ungranted").code, Code::NotFound);
    // A granted queue name outside the grant is refused before the store is asked.
    let models::scope::Actor::Agent(scope) = &narrow else { panic!("agent") };
    assert_eq!(scope.narrow(Some("secret")).expect_err("outside grant").code, Code::Forbidden);
}

/// 50 concurrent claim_next callers on 50 pending todos through two engine instances (separate
/// pools, one database): every todo is claimed exactly once, and nobody gets two.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_claimers_through_two_engines_claim_each_todo_once() {
    let world = World::new().await;
    let second_engine = World::store_on(&world.db, &world.clock).await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    for i in 0..50 {
        world.push(&queue_of(&agent, "inbox"), &format!("todo {i}")).await;
    }
    let queues = granted(&agent);
    let claimers = (0..50).map(|i| {
        let store = if i % 2 == 0 { world.store.clone() } else { second_engine.clone() };
        let (agent, queues) = (agent.clone(), queues.clone());
        tokio::spawn(async move { store.claim_next(&agent, &queues, 300).await })
    });
    // Spawn them all before awaiting any: a lazy iterator would run them one after another.
    let claimers: Vec<_> = claimers.collect();
    let mut ids = Vec::new();
    for claimer in claimers {
        ids.push(claimed(claimer.await.expect("join").expect("claim_next")).id);
    }
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (50, 50));

    let (claimed_rows, attempts): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM todos WHERE state = 'claimed' AND attempt = 1), (SELECT count(*) FROM todo_attempts)",
    )
    .fetch_one(world.store.pool())
    .await
    .expect("count");
    assert_eq!((claimed_rows, attempts), (50, 50));
    assert!(matches!(world.store.claim_next(&agent, &queues, 60).await, Ok(ClaimNext::Empty { .. })));
}

#[tokio::test]
async fn retry_now_of_a_dead_letter_whose_key_a_newer_todo_holds_is_a_conflict() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let inbox = queue_of(&agent, "inbox");
    let mut once = new_todo(&inbox, "t", Some("k1"));
    once.max_attempts = 1;
    let dead = world.store.create_todo(once).await.expect("create").todo;
    world.store.claim(&agent, &dead.id, 60).await.expect("claim");
    world.store.fail(&agent, &dead.id, None).await.expect("fail: dead letter at its only attempt");
    // The dead letter freed its key; new work takes it.
    let newer = world.store.create_todo(new_todo(&inbox, "t", Some("k1"))).await.expect("create");
    assert!(!newer.deduped);
    let owner = world.owner("alice").await;
    let refused = world.store.retry_now(&owner, &dead.id).await.expect_err("the key is taken");
    assert_eq!(refused.code, Code::Conflict, "{refused}");
    assert_eq!(world.store.get_todo(&owner, &dead.id).await.expect("still there").state, TodoState::Failed);
}
