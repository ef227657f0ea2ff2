//! The lease holder's verbs in one statement (issue #15, `engine/src/pg_store/held.rs`): they
//! succeed exactly where the step-by-step transaction would, and refuse as it does. The other
//! lifecycle tests (`base_queue.rs`) run through the same verbs; these cover what only the
//! one-statement form could get wrong: the access set bound as data, the backoff table, and the
//! attempt closed in the same statement.

mod support;

use chrono::Duration;
use models::error::Code;
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::Clock;
use models::store::prelude::*;
use models::todo::{TodoState, retry_backoff};
use serde_json::json;
use support::plans::{logged_plans, scans};
use support::{World, new_todo, queue_of, queue_of_both_kinds};

/// The agent as it would authenticate after its grant lost the identities `lost` picks: same
/// endpoint, same label.
fn without_grant(agent: &Actor, lost: impl Fn(&QueueIdentity) -> bool) -> Actor {
    let Actor::Agent(scope) = agent else { panic!("not an agent") };
    let mut narrowed = scope.clone();
    narrowed.granted = narrowed.granted.iter().filter(|identity| !lost(identity)).cloned().collect();
    Actor::Agent(narrowed)
}

#[tokio::test]
async fn a_holder_whose_grant_lost_the_queue_is_forbidden_and_the_todo_stays_claimed() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox", "other"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    let narrowed = without_grant(&agent, |identity| identity.queue == "inbox");
    for outcome in [
        world.store.heartbeat(&narrowed, &todo.id, 60).await,
        world.store.complete(&narrowed, &todo.id, None).await,
        world.store.fail(&narrowed, &todo.id, None).await,
        world.store.release(&narrowed, &todo.id).await,
    ] {
        assert_eq!(outcome.expect_err("outside the grant").code, Code::Forbidden);
    }
    let unchanged = world.store.get_todo(&agent, &todo.id).await.expect("get");
    assert_eq!((unchanged.state, unchanged.attempt), (TodoState::Claimed, 1));
    let done = world.store.complete(&agent, &todo.id, Some(json!(1))).await.expect("the full grant completes");
    assert_eq!(done.state, TodoState::Done);
}

// A grant names an owner and a queue: keeping an endpoint's `inbox` grants nothing of a team's
// `inbox`, and the other way round.
#[tokio::test]
async fn a_holder_keeping_a_queue_name_of_one_owner_kind_is_forbidden_the_other() {
    let (world, agent, identities) = queue_of_both_kinds("inbox").await;
    for (lost, kept) in [(&identities[0], &identities[1]), (&identities[1], &identities[0])] {
        let lost_todo = world.push(lost, "lost").await;
        let kept_todo = world.push(kept, "kept").await;
        for todo in [&lost_todo, &kept_todo] {
            world.store.claim(&agent, &todo.id, 60).await.expect("claim");
        }
        let narrowed = without_grant(&agent, |identity| identity == lost);
        let refused = world.store.complete(&narrowed, &lost_todo.id, None).await.expect_err("outside the grant");
        assert_eq!(refused.code, Code::Forbidden, "{lost:?} after the grant lost it");
        let done = world.store.complete(&narrowed, &kept_todo.id, None).await.expect("inside the grant");
        assert_eq!(done.state, TodoState::Done);
        world.store.complete(&agent, &lost_todo.id, None).await.expect("the full grant completes");
    }
}

// The one statement is the common case, not an optimisation that quietly never applies: a
// holder inside its grant (an agent) or its reach (a human), on a queue of either owner kind, is
// answered by it alone for every verb, and the step-by-step transactions, whose first statements
// lock the todos by reach or by id, never run.
#[tokio::test]
async fn a_holder_inside_its_grant_is_answered_by_the_one_statement_alone() {
    let (world, agent, identities) = queue_of_both_kinds("inbox").await;
    let owner = world.owner("alice").await;
    // For each holder and owner kind: todos to complete, fail and release, and two to complete
    // at once.
    let mut held = Vec::new();
    for holder in [&agent, &owner] {
        for identity in &identities {
            let mut ids = Vec::new();
            for _ in 0..5 {
                let todo = world.push(identity, "t").await;
                world.store.claim(holder, &todo.id, 60).await.expect("claim");
                ids.push(todo.id);
            }
            held.push((holder.clone(), ids));
        }
    }
    let logged = logged_plans(&world, "todos", |store| async move {
        for (holder, ids) in &held {
            for id in ids {
                store.heartbeat(holder, id, 60).await.expect("heartbeat");
            }
            store.complete(holder, &ids[0], None).await.expect("complete");
            store.fail(holder, &ids[1], None).await.expect("fail");
            store.release(holder, &ids[2]).await.expect("release");
            store.complete_many(holder, &ids[3..], None).await.expect("complete two");
        }
    })
    .await;
    // The held verbs' statements are the ones that test the grant as bound arrays (`HOLDS`).
    let verbs: Vec<&(String, serde_json::Value)> =
        logged.iter().filter(|(text, _)| text.contains("t.endpoint_id = ANY($4::text[])")).collect();
    assert_eq!(verbs.len(), 4 * 9, "one statement per verb: five heartbeats and four others per holder and kind");
    // A verb of one todo takes the row's lock with its update, not with a `FOR UPDATE` first: a
    // lock is a WAL record of its own (issue #31). Complete of several locks its rows first.
    let one_todo_verbs: Vec<_> = verbs.iter().filter(|(text, _)| !text.contains("ANY($1::text[])")).collect();
    assert_eq!(one_todo_verbs.len(), 4 * 8);
    for (text, plan) in one_todo_verbs {
        let nodes: Vec<String> = scans(plan).into_iter().map(|scan| scan.node).collect();
        assert!(!nodes.iter().any(|node| node == "LockRows"), "a row lock before the update: {nodes:?} in {text}");
    }
    let steps: Vec<&String> = logged
        .iter()
        .map(|(text, _)| text)
        .filter(|text| {
            text.contains("t.team_id = ANY($3)) FOR UPDATE")
                || text.contains("WHERE id = ANY($1) ORDER BY id FOR UPDATE")
        })
        .collect();
    assert!(steps.is_empty(), "a verb ran step by step: {steps:?}");
}

#[tokio::test]
async fn the_owner_acting_on_its_own_claim_goes_through_its_reach() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    let owner = world.owner("alice").await;
    world.store.claim(&owner, &todo.id, 60).await.expect("the owner claims");
    world.clock.advance(Duration::seconds(5));
    let beat = world.store.heartbeat(&owner, &todo.id, 90).await.expect("heartbeat");
    assert_eq!(beat.lease_expires_at, Some(support::epoch() + Duration::seconds(95)));
    let released = world.store.release(&owner, &todo.id).await.expect("release");
    assert_eq!((released.state, released.owner, released.attempt), (TodoState::Pending, None, 1));
}

#[tokio::test]
async fn each_failed_attempt_parks_for_its_backoff_up_to_the_cap_then_dead_letters() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let mut new = new_todo(&queue_of(&agent, "inbox"), "flaky", None);
    new.max_attempts = 9;
    let todo = world.store.create_todo(new).await.expect("create").todo;
    for attempt in 1..=9 {
        let claimed = world.store.claim(&agent, &todo.id, 60).await.expect("claim").todo;
        assert_eq!(claimed.attempt, attempt);
        let now = world.clock.now();
        let failed = world.store.fail(&agent, &todo.id, Some(json!({"attempt": attempt}))).await.expect("fail");
        assert_eq!(failed.state, TodoState::Failed);
        if attempt < 9 {
            assert_eq!(failed.next_retry_at, Some(now + retry_backoff(attempt)), "backoff after attempt {attempt}");
            world.clock.advance(retry_backoff(attempt));
        } else {
            assert!(failed.dead_letter(), "the last attempt dead-letters");
        }
    }
}

#[tokio::test]
async fn a_completed_todo_has_its_attempt_closed_in_the_same_statement() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let todo = world.push(&queue_of(&agent, "inbox"), "t").await;
    world.store.claim(&agent, &todo.id, 60).await.expect("claim");
    world.clock.advance(Duration::seconds(7));
    world.store.complete(&agent, &todo.id, None).await.expect("complete");
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("connect");
    let attempts: Vec<(Option<String>, Option<chrono::DateTime<chrono::Utc>>)> =
        sqlx::query_as("SELECT outcome, ended_at FROM todo_attempts WHERE todo_id = $1")
            .bind(&todo.id)
            .fetch_all(&pool)
            .await
            .expect("attempts");
    assert_eq!(attempts, vec![(Some("completed".to_string()), Some(support::epoch() + Duration::seconds(7)))]);
}
