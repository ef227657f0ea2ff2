//! Intake capacity and owner cancellation at engine level, on real PostgreSQL: the properties
//! that only concurrency can break (intake-capacity.md).

mod support;

use models::error::Code;
use models::store::prelude::*;
use models::store::{ClaimNext, PolicyActor};
use models::todo::TodoState;
use support::{World, granted, new_todo, queue_of};

fn owner() -> PolicyActor {
    PolicyActor { human_id: None, endpoint_id: None }
}

// intake-capacity scenario 23, at engine level: 50 creates racing through two engines into an
// empty queue with capacity 10 admit exactly 10; the other 40 are queue_full with max 10.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_exact_under_concurrency_across_two_engines() {
    let world = World::new().await;
    let second = World::store_on(&world.db, &world.clock).await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let Some(admin) = world.store.human_id_by_name("alice").await.expect("lookup") else { panic!("alice") };
    world.store.set_queue_capacity(10, &admin).await.expect("set capacity");
    let inbox = queue_of(&agent, "inbox");
    let creates: Vec<_> = (0..50)
        .map(|i| {
            let store = if i % 2 == 0 { world.store.clone() } else { second.clone() };
            let todo = new_todo(&inbox, &format!("t{i}"), None);
            tokio::spawn(async move { store.create_todo(todo).await })
        })
        .collect();
    let (mut admitted, mut full) = (0, 0);
    for create in creates {
        match create.await.expect("join") {
            Ok(_) => admitted += 1,
            Err(error) => {
                assert_eq!(error.code, Code::QueueFull);
                assert_eq!(error.extras["max"], 10);
                full += 1;
            }
        }
    }
    assert_eq!((admitted, full), (10, 40));
}

// Dedup hits and returns to pending are never capped; lowering the cap removes nothing.
#[tokio::test]
async fn intake_never_caps_dedup_or_returns_to_pending() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let inbox = queue_of(&agent, "inbox");
    let keyed = world.store.create_todo(new_todo(&inbox, "keyed", Some("k"))).await.expect("create").todo;
    world.push(&inbox, "second").await;
    let Some(admin) = world.store.human_id_by_name("alice").await.expect("lookup") else { panic!("alice") };
    world.store.set_queue_capacity(1, &admin).await.expect("lower below the pending count");
    let pending = |world: &World| {
        let query = models::store::TodoQuery {
            set: models::store::TodoSet::Queues(vec![queue_of(&agent, "inbox")]),
            state: Some(TodoState::Pending),
            limit: 100,
        };
        let store = world.store.clone();
        async move { store.list_todos(query).await.expect("list").len() }
    };
    assert_eq!(pending(&world).await, 2, "lowering removes nothing");
    let again = world.store.create_todo(new_todo(&inbox, "keyed", Some("k"))).await.expect("a dedup hit is free");
    assert!(again.deduped && again.todo.id == keyed.id);
    let refused = world.store.create_todo(new_todo(&inbox, "new", None)).await.expect_err("full");
    assert_eq!(
        (refused.code, refused.extras["pending"].as_i64(), refused.extras["max"].as_i64()),
        (Code::QueueFull, Some(2), Some(1))
    );
    // A claim and its release: back to pending at capacity, without error.
    let ClaimNext::Claimed(claimed) = world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim") else {
        panic!("claimable")
    };
    world.store.release(&agent, &claimed.todo.id).await.expect("release is never capped");
    assert_eq!(pending(&world).await, 2);
}

// intake-capacity scenario 8, at engine level: claimers racing a clear-all. Every todo ends
// claimed exactly once or discarded, and the two sets sum to the total.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clear_all_racing_claimers_loses_nothing_and_claims_nothing_twice() {
    let world = World::new().await;
    let second = World::store_on(&world.db, &world.clock).await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    for i in 0..50 {
        world.push(&queue_of(&agent, "inbox"), &format!("t{i}")).await;
    }
    let claimers: Vec<_> = (0..20)
        .map(|i| {
            let store = if i % 2 == 0 { world.store.clone() } else { second.clone() };
            let agent = agent.clone();
            tokio::spawn(async move { store.claim_next(&agent, &granted(&agent), 300).await })
        })
        .collect();
    let cleared = world.store.clear_queue(&queue_of(&agent, "inbox"), &owner()).await.expect("clear");
    let mut claimed = Vec::new();
    for claimer in claimers {
        if let ClaimNext::Claimed(c) = claimer.await.expect("join").expect("claim_next") {
            claimed.push(c.todo.id);
        }
    }
    let unique: std::collections::BTreeSet<_> = claimed.iter().collect();
    assert_eq!(unique.len(), claimed.len(), "no todo claimed twice");
    let (claimed_rows, discarded_rows): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE state = 'claimed'), count(*) FILTER (WHERE state = 'discarded') FROM todos",
    )
    .fetch_one(world.store.pool())
    .await
    .expect("count");
    assert_eq!((claimed_rows as usize, discarded_rows as u64), (claimed.len(), cleared));
    assert_eq!(claimed.len() as u64 + cleared, 50);
}

// Cancellation answers: not_pending with the state for a claimed todo, not_found for another
// identity's todo; the dedup slot survives a removal.
#[tokio::test]
async fn remove_answers_not_pending_and_not_found_and_keeps_the_dedup_slot() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox", "other"]).await;
    let inbox = queue_of(&agent, "inbox");
    let keyed = world.store.create_todo(new_todo(&inbox, "keyed", Some("delivery-1"))).await.expect("create").todo;
    let held = world.push(&inbox, "held").await;
    world.store.claim(&agent, &held.id, 60).await.expect("claim");
    let error = world.store.discard_todo(&inbox, &held.id, &owner()).await.expect_err("claimed");
    assert_eq!((error.code, error.extras["state"].as_str()), (Code::NotPending, Some("claimed")));
    let error =
        world.store.discard_todo(&queue_of(&agent, "other"), &keyed.id, &owner()).await.expect_err("other identity");
    assert_eq!(error.code, Code::NotFound);
    world.store.discard_todo(&inbox, &keyed.id, &owner()).await.expect("remove");
    let again = world.store.create_todo(new_todo(&inbox, "keyed", Some("delivery-1"))).await.expect("dedup");
    assert!(again.deduped, "a removed todo keeps its dedup slot");
    assert_eq!(again.todo.state, TodoState::Discarded);
}
