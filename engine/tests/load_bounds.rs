//! Bounds on waiting, at engine level on real PostgreSQL (issue #14, item 3): a claim that cannot
//! get its policy lock within `lock_timeout` fails closed, and claimers of one queue set past the
//! per-replica bound wait without a connection, then give up with a retryable `unavailable`.
//! Either way nothing is charged and the work is still there once the lock is free. And the pool
//! itself: a connection whose server process ended while it sat idle is replaced before a caller
//! gets it (issue #15 stopped pinging connections used in the last few seconds), and one that
//! ended since its last use fails one request with a retryable `unavailable`.

mod support;

use engine::{PgStore, PoolSettings};
use models::admission::Reason;
use models::error::Code;
use models::store::prelude::*;
use serde_json::json;
use std::time::Duration;
use support::{World, agent_world, charged, claimed, daily_pacific, deferred, granted, queue_of, set_policy};

async fn bounded_store(world: &World, claimers_per_queue_set: usize) -> PgStore {
    let settings = PoolSettings {
        connections_max: 8,
        lock_timeout: Duration::from_millis(300),
        claimers_per_queue_set,
        ..PoolSettings::default()
    };
    world.store_with(settings).await
}

// Issue #14: "a claim that cannot get its policy lock in time fails closed or is deferred, never
// holds a connection without bound"; the bound past which claimers wait without a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claimers_past_the_bound_give_up_without_a_connection_and_charge_nothing() {
    let (world, agent) = agent_world(&["work"]).await;
    let queue = queue_of(&agent, "work");
    set_policy(&world, &queue, daily_pacific(100)).await;
    // One todo per claimer: a claimer that found every todo locked by the others would answer
    // empty from the one-statement path without ever asking for a permit.
    let mut pushed = vec![];
    for i in 0..3 {
        pushed.push(world.push(&queue, &format!("t{i}")).await.id);
    }
    let store = bounded_store(&world, 1).await;

    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold policy lock");
    let claims: Vec<_> = (0..3)
        .map(|_| {
            let (store, agent, queues) = (store.clone(), agent.clone(), granted(&agent));
            tokio::spawn(async move { store.claim_next(&agent, &queues, 60).await })
        })
        .collect();
    let (mut deferred_unavailable, mut gave_up) = (0, 0);
    for claim in claims {
        match claim.await.expect("join") {
            // The one claimer let through waited on the lock until lock_timeout: fail closed
            // (nothing claimed; any reason given is admission_unavailable).
            Ok(outcome) => {
                let refused = deferred(outcome);
                assert!(refused.iter().all(|q| q.reason == Reason::AdmissionUnavailable), "{refused:?}");
                deferred_unavailable += 1;
            }
            // The others never took a connection: they waited for a permit, then gave up.
            Err(error) => {
                assert_eq!(error.code, Code::Unavailable, "{error:?}");
                assert_eq!(error.extras["retry_after_seconds"], json!(1));
                gave_up += 1;
            }
        }
    }
    assert!(deferred_unavailable >= 1 && gave_up >= 1, "{deferred_unavailable} deferred, {gave_up} gave up");
    holder.rollback().await.expect("release");

    assert_eq!(charged(&world, &queue).await, 0, "nothing was charged while the lock was held");
    let got = claimed(store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert!(pushed.contains(&got.todo.id), "the work is still there once the lock is free");
    assert_eq!(charged(&world, &queue).await, 1, "and only the claim that succeeded is charged");
}

// Issue #14: "lock_todo blocks on a foreign row before the access check". A todo id of another
// tenant is not_found at once, even while its row is locked: the caller's reach is part of the
// lock's predicate, so it never waits on (or learns anything from) a row it cannot see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_todo_is_not_found_without_waiting_for_its_lock() {
    let (world, alice_agent) = agent_world(&["inbox"]).await;
    let bob = world.human("bob").await;
    let bob_agent = world.agent(&bob, &["inbox"]).await;
    let todo = world.push(&queue_of(&alice_agent, "inbox"), "alice's").await;
    let store = bounded_store(&world, 8).await;

    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM todos WHERE id = $1 FOR UPDATE")
        .bind(&todo.id)
        .execute(&mut *holder)
        .await
        .expect("hold the row");
    // Were the foreign row locked first, these would wait out lock_timeout: unavailable.
    let claim = store.claim(&bob_agent, &todo.id, 60).await.expect_err("foreign");
    assert_eq!(claim.code, Code::NotFound, "{claim:?}");
    let complete = store.complete(&bob_agent, &todo.id, None).await.expect_err("foreign");
    assert_eq!(complete.code, Code::NotFound, "{complete:?}");
    holder.rollback().await.expect("release");
    store.claim(&alice_agent, &todo.id, 60).await.expect("the owner's agent still claims it");
}

/// A store on one pooled connection, so each statement runs on the connection a test ends.
async fn one_connection_store(world: &World) -> PgStore {
    world.store_with(PoolSettings { connections_max: 1, ..PoolSettings::default() }).await
}

/// The server process behind `store`'s connection.
async fn backend_of(store: &PgStore) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(store.pool()).await.expect("pid")
}

/// Ends the server process behind `store`'s connection from elsewhere, as a database restart or
/// an administrator would, and returns its id once it has exited. The connection is back in the
/// pool first: sqlx pings a connection as it returns, and a ping after the end would close it.
async fn end_backend(world: &World, store: &PgStore) -> i32 {
    let backend = backend_of(store).await;
    for _ in 0..500 {
        if store.pool().num_idle() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(store.pool().num_idle(), 1, "the connection is back in the pool");
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
        .bind(backend)
        .fetch_one(world.store.pool())
        .await
        .expect("terminate");
    assert!(ended, "the pooled connection's server process has exited");
    backend
}

// Issue #15: the pool pings only connections idle for `IDLE_BEFORE_PING` (5 s) before handing
// them out. One whose server process ended while it sat idle that long must be pinged, found
// dead and replaced, so the caller's statement runs on a live connection and succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_died_while_idle_is_replaced_before_use() {
    let (world, agent) = agent_world(&["work"]).await;
    let queue = queue_of(&agent, "work");
    let todo = world.push(&queue, "after the restart").await;
    let store = one_connection_store(&world).await;
    let ended = end_backend(&world, &store).await;
    // Longer than `IDLE_BEFORE_PING`, on the real clock the pool measures idleness with.
    tokio::time::sleep(Duration::from_millis(5_500)).await;

    let outcome = store.claim_next(&agent, std::slice::from_ref(&queue), 60).await;
    assert_eq!(claimed(outcome.expect("the claim runs on a replaced connection")).todo.id, todo.id);
    assert_ne!(backend_of(&store).await, ended, "the dead connection was replaced");
}

// Issue #15: a connection used in the last `IDLE_BEFORE_PING` is handed out without a ping, so
// when its server process has ended (a restart, an administrator) the request on it fails. That
// failure is the database's, not the request's: `unavailable`, retryable, and nothing changed.
// The connection is then replaced, and the retry succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_died_since_its_last_use_fails_one_request_as_unavailable() {
    let (world, agent) = agent_world(&["work"]).await;
    let queue = queue_of(&agent, "work");
    let todo = world.push(&queue, "after the restart").await;
    let store = one_connection_store(&world).await;
    end_backend(&world, &store).await;

    let lost = store.claim_next(&agent, std::slice::from_ref(&queue), 60).await.expect_err("a dead connection");
    assert_eq!(lost.code, Code::Unavailable, "{lost:?}");
    let retried = store.claim_next(&agent, std::slice::from_ref(&queue), 60).await.expect("the retry");
    assert_eq!(claimed(retried).todo.id, todo.id, "the failed request changed nothing");
}
