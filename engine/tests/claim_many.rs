//! Issue #31 item 2 on real PostgreSQL: `claim_next {max}` makes up to `max` claims, each
//! decided and charged in turn as that many `claim_next` calls would be, in one transaction; and
//! `complete {ids}` ends several held todos at once, all or none.

mod support;

use models::admission::Reason;
use models::error::Code;
use models::store::prelude::*;
use models::todo::TodoState;
use serde_json::json;
use support::{agent_world, daily_pacific, granted, push_n, queue_of, set_policy};

/// The distinct transactions that last wrote the claimed todos (their `xmin`).
async fn claiming_transactions(world: &support::World) -> i64 {
    sqlx::query_scalar("SELECT count(DISTINCT xmin::text) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("xmin")
}

#[tokio::test]
async fn claim_next_many_takes_the_oldest_in_claim_order_in_one_statement() {
    let (world, agent) = agent_world(&["a", "b"]).await;
    let mut pushed = vec![];
    for i in 0..5 {
        let queue = if i % 2 == 0 { "a" } else { "b" };
        pushed.push(world.push(&queue_of(&agent, queue), &format!("t{i}")).await.id);
        world.clock.advance(chrono::Duration::seconds(1));
    }
    let first = world.store.claim_next_many(&agent, &granted(&agent), 60, 3).await.expect("claim 3");
    let ids: Vec<_> = first.claimed.iter().map(|c| c.todo.id.clone()).collect();
    assert_eq!(ids, pushed[..3]);
    assert!(first.claimed.iter().all(|c| c.todo.state == TodoState::Claimed && c.todo.attempt == 1));
    assert!(first.claimed.iter().all(|c| c.admission.is_none()), "no policy, no headroom");
    assert_eq!(claiming_transactions(&world).await, 1, "three claims, one statement");

    let rest = world.store.claim_next_many(&agent, &granted(&agent), 60, 10).await.expect("claim the rest");
    let ids: Vec<_> = rest.claimed.iter().map(|c| c.todo.id.clone()).collect();
    assert_eq!(ids, pushed[3..]);
    assert!(rest.deferred.is_empty());
    let none = world.store.claim_next_many(&agent, &granted(&agent), 60, 10).await.expect("empty");
    assert!(none.claimed.is_empty() && none.deferred.is_empty());
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM todo_attempts WHERE ended_at IS NULL")
        .fetch_one(world.store.pool())
        .await
        .expect("attempts");
    assert_eq!(attempts, 5, "each claim opened its attempt");
}

// SPEC-0030 REQ-3, REQ-4, REQ-7 with issue #31's batch claim: each claim is decided in turn and
// charged; the window's last unit goes to the batch and the rest stays pending, deferred with
// its reason and its time.
#[tokio::test]
async fn req4_claim_next_many_charges_each_claim_and_stops_at_the_window() {
    let (world, agent) = agent_world(&["work"]).await;
    let queue = queue_of(&agent, "work");
    set_policy(&world, &queue, daily_pacific(3)).await;
    push_n(&world, &queue, 5).await;

    let many = world.store.claim_next_many(&agent, &granted(&agent), 60, 10).await.expect("claim");
    let used: Vec<_> = many.claimed.iter().map(|c| c.admission.expect("budgeted").used).collect();
    assert_eq!(used, [Some(1), Some(2), Some(3)], "each claim charged in turn");
    assert_eq!(many.deferred.len(), 1, "{:?}", many.deferred);
    assert_eq!(many.deferred[0].reason, Reason::WindowExhausted);
    assert_eq!(many.deferred[0].pending, 2);
    assert!(many.deferred[0].next_eligible_at.is_some());
    assert_eq!(support::charged(&world, &queue).await, 3);
    assert_eq!(claiming_transactions(&world).await, 1, "one group claim, one transaction");
}

// The batch takes the unbudgeted todos at the head of the line by the one-statement path, then
// goes on into the budgeted queue, as one claim after another would.
#[tokio::test]
async fn claim_next_many_goes_on_from_an_unbudgeted_queue_into_a_budgeted_one() {
    let (world, agent) = agent_world(&["free", "metered"]).await;
    let (free, metered) = (queue_of(&agent, "free"), queue_of(&agent, "metered"));
    set_policy(&world, &metered, daily_pacific(1)).await;
    let first = world.push(&free, "free first").await;
    world.clock.advance(chrono::Duration::seconds(1));
    let second = world.push(&metered, "metered second").await;
    world.clock.advance(chrono::Duration::seconds(1));
    let third = world.push(&metered, "metered third").await;
    world.clock.advance(chrono::Duration::seconds(1));
    let fourth = world.push(&free, "free fourth").await;

    let many = world.store.claim_next_many(&agent, &granted(&agent), 60, 4).await.expect("claim");
    let ids: Vec<_> = many.claimed.iter().map(|c| c.todo.id.clone()).collect();
    assert_eq!(ids, [first.id, second.id, fourth.id], "the metered queue admits one; the free one goes on");
    assert_eq!(many.claimed[1].admission.expect("budgeted").used, Some(1));
    let pending = world.store.get_todo(&agent, &third.id).await.expect("third");
    assert_eq!(pending.state, TodoState::Pending, "over the limit it stays pending");
}

#[tokio::test]
async fn complete_many_ends_every_held_todo_or_none() {
    let (world, agent) = agent_world(&["work"]).await;
    let queue = queue_of(&agent, "work");
    push_n(&world, &queue, 4).await;
    let many = world.store.claim_next_many(&agent, &granted(&agent), 60, 3).await.expect("claim");
    let mut ids: Vec<String> = many.claimed.iter().map(|c| c.todo.id.clone()).collect();
    let unheld = world.store.list_todos(models::store::TodoQuery {
        set: models::store::TodoSet::Queues(granted(&agent)),
        state: Some(TodoState::Pending),
        limit: 10,
    });
    let unheld = unheld.await.expect("list")[0].id.clone();

    let mut with_unheld = ids.clone();
    with_unheld.insert(1, unheld.clone());
    let refused = world.store.complete_many(&agent, &with_unheld, None).await.expect_err("one not held");
    assert_eq!(refused.code, Code::Conflict);
    assert_eq!(refused.extras.get("id"), Some(&json!(unheld)), "the refusal names the id");
    for id in &ids {
        assert_eq!(world.store.get_todo(&agent, id).await.expect("get").state, TodoState::Claimed, "none completed");
    }

    ids.reverse();
    let done = world.store.complete_many(&agent, &ids, Some(json!({"ok": true}))).await.expect("complete");
    let done_ids: Vec<_> = done.iter().map(|t| t.id.clone()).collect();
    assert_eq!(done_ids, ids, "answered in the order asked");
    assert!(done.iter().all(|t| t.state == TodoState::Done && t.result == Some(json!({"ok": true}))));
    let open: i64 = sqlx::query_scalar("SELECT count(*) FROM todo_attempts WHERE ended_at IS NULL")
        .fetch_one(world.store.pool())
        .await
        .expect("attempts");
    assert_eq!(open, 0, "every attempt closed");

    let twice = world.store.complete_many(&agent, &[ids[0].clone(), ids[0].clone()], None).await;
    assert_eq!(twice.expect_err("duplicate").extras.get("field"), Some(&json!("ids")));
    let again = world.store.complete_many(&agent, &ids, None).await.expect_err("already done");
    assert_eq!(again.code, Code::Conflict);
}
