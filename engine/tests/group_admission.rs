//! Issue #15, item 3, on real PostgreSQL: concurrent budgeted `claim_next` calls of one replica
//! on the same queues join one claim transaction, `decide` runs claimer by claimer under its one
//! policy lock, and a claimer that leaves before its turn is left out (SPEC-0030 REQ-4, REQ-13).
//!
//! To make the group deterministic, each test holds the queue's policy lock from another
//! session: the first claimer's transaction waits on that lock, and the claimers started after
//! it wait in memory for the next group claim (`PgStore::claimers_queued` says how many). Which rows one transaction wrote shows in
//! their `xmin`, the id of the transaction that last wrote them.

mod support;

use models::admission::Reason;
use models::store::ClaimNext;
use models::store::prelude::*;
use serde_json::json;
use std::time::Duration;
use support::{World, agent_world, charged, claimed, daily_pacific, deferred, granted, push_n, queue_of, set_policy};

/// Holds every policy row's lock in its own transaction until dropped or rolled back.
async fn hold_policy_locks(world: &World) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold policy lock");
    holder
}

/// Waits until a session of this database waits on a lock: the first claimer's transaction is
/// blocked on the held policy lock.
async fn until_a_claimer_waits_on_the_lock(world: &World) {
    for _ in 0..400 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(world.store.pool())
        .await
        .expect("sessions");
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no claimer waited on the policy lock");
}

/// Waits until exactly `n` claimers are queued in memory in `store` for the next group claim.
async fn until_queued(store: &engine::PgStore, n: usize) {
    for _ in 0..400 {
        if store.claimers_queued() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} claimers queued, expected {n}", store.claimers_queued());
}

/// The distinct transactions that wrote the claimed todos.
async fn claiming_transactions(world: &World) -> i64 {
    sqlx::query_scalar("SELECT count(DISTINCT xmin::text) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("xmin")
}

/// A queue "work" under `policy` with 12 pending todos, one of them claimed already, so this
/// queue set is known budgeted and every claimer after it goes straight to its group without a
/// statement of its own.
async fn budgeted_world(policy: serde_json::Value) -> (World, models::scope::Actor, models::identity::QueueIdentity) {
    let (world, agent) = agent_world(&["work"]).await;
    let queue = queue_of(&agent, "work");
    set_policy(&world, &queue, policy).await;
    push_n(&world, &queue, 12).await;
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("first claim"));
    (world, agent, queue)
}

/// Starts `n` concurrent `claim_next` calls of `agent` on the shared store.
fn claimers(
    world: &World,
    agent: &models::scope::Actor,
    n: usize,
) -> Vec<tokio::task::JoinHandle<models::error::Result<ClaimNext>>> {
    (0..n)
        .map(|_| {
            let (store, agent, queues) = (world.store.clone(), agent.clone(), granted(agent));
            tokio::spawn(async move { store.claim_next(&agent, &queues, 60).await })
        })
        .collect()
}

/// One claimer whose transaction waits on the held policy lock, then `queued` more waiting in
/// memory behind it: the claims of the next group.
async fn leader_and_queued(
    world: &World,
    agent: &models::scope::Actor,
    queued: usize,
) -> Vec<tokio::task::JoinHandle<models::error::Result<ClaimNext>>> {
    let mut claims = claimers(world, agent, 1);
    until_a_claimer_waits_on_the_lock(world).await;
    claims.extend(claimers(world, agent, queued));
    until_queued(&world.store, queued).await;
    claims
}

// SPEC-0030 REQ-4 with issue #15's group admission: the claimers queued behind one transaction
// are claimed for together, each charged, in fewer transactions than claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req4_queued_claimers_are_claimed_for_in_one_transaction_each_charged() {
    let (world, agent, queue) = budgeted_world(daily_pacific(100)).await;

    let holder = hold_policy_locks(&world).await;
    let claims = leader_and_queued(&world, &agent, 7).await;
    holder.rollback().await.expect("release");

    let mut ids = vec![];
    for claim in claims {
        let got = claimed(claim.await.expect("join").expect("claim_next"));
        let admission = got.admission.expect("budgeted");
        assert!(admission.used.is_some_and(|used| (2..=9).contains(&used)), "{admission:?}");
        ids.push(got.todo.id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8, "each claimer got its own todo");
    assert_eq!(charged(&world, &queue).await, 9, "one unit per claim, the first one's included");
    let transactions = claiming_transactions(&world).await;
    // The first claim's, the waiting leader's own, and one for the seven queued behind it.
    assert_eq!(transactions, 3, "9 claims in {transactions} transactions");
    // What /metrics shows operators: the same three groups, taking the nine claimers.
    let counted = world.store.counters().snapshot();
    assert_eq!((counted.claim_groups, counted.claim_group_claimers), (3, 9), "groups and the claimers they took");
}

// SPEC-0030 REQ-4: in a group, each decision sees the claims made before it in the same
// transaction, so the in-flight cap holds exactly and the claimers past it are deferred.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req4_a_group_admits_claimers_in_turn_up_to_the_in_flight_cap() {
    let (world, agent, _) = budgeted_world(json!({"max_in_flight": 4})).await;

    let holder = hold_policy_locks(&world).await;
    let claims = leader_and_queued(&world, &agent, 7).await;
    holder.rollback().await.expect("release");

    let (mut got, mut refused) = (0, 0);
    for claim in claims {
        match claim.await.expect("join").expect("claim_next") {
            ClaimNext::Claimed(claimed) => {
                assert!(claimed.admission.is_some_and(|a| a.in_flight <= 4), "{claimed:?}");
                got += 1;
            }
            ClaimNext::Empty { deferred } => {
                assert_eq!(deferred.len(), 1, "{deferred:?}");
                assert_eq!(deferred[0].reason, Reason::InFlightFull);
                refused += 1;
            }
        }
    }
    assert_eq!((got, refused), (3, 5), "three slots were free after the first claim");
    let in_flight: i64 = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("count");
    assert_eq!(in_flight, 4);
}

// SPEC-0030 REQ-13 with group admission: a claimer that goes away while queued for a group
// claim, or while its group's transaction waits for the policy lock, charges and claims nothing;
// the claimers that stayed are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req13_claimers_that_leave_a_group_before_their_turn_charge_nothing() {
    let (world, agent, queue) = budgeted_world(daily_pacific(100)).await;

    let holder = hold_policy_locks(&world).await;
    // The first waits in the transaction on the lock; the next queue in memory. Three leave.
    let staying = leader_and_queued(&world, &agent, 2).await;
    let leaving = claimers(&world, &agent, 3);
    until_queued(&world.store, 5).await;
    for claim in &leaving {
        claim.abort();
    }
    for claim in leaving {
        assert!(claim.await.expect_err("aborted").is_cancelled());
    }
    until_queued(&world.store, 2).await;
    holder.rollback().await.expect("release");

    for claim in staying {
        claimed(claim.await.expect("join").expect("claim_next"));
    }
    assert_eq!(charged(&world, &queue).await, 4, "the first claim and the three that stayed");
    let in_flight: i64 = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("count");
    assert_eq!(in_flight, 4, "the claimers that left claimed nothing");
}

// SPEC-0030 REQ-13 "A cancelled claim charges nothing", with group admission: the claimer goes
// away after the group's transaction took the policy lock and before the commit (here it waits
// to charge, on a usage row another session holds). Its claim and charge roll back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req13_a_claimer_that_leaves_after_the_policy_lock_charges_nothing() {
    let (world, agent, queue) = budgeted_world(daily_pacific(100)).await;

    let mut holder = world.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT used FROM admission_windows FOR UPDATE").execute(&mut *holder).await.expect("hold usage row");
    let leaving = claimers(&world, &agent, 1).pop().expect("one claimer");
    until_a_claimer_waits_on_the_lock(&world).await;
    leaving.abort();
    assert!(leaving.await.expect_err("aborted").is_cancelled());
    holder.rollback().await.expect("release");

    // The next claimer of the set is served after the left one's transaction ended, either way.
    let next = claimed(claimers(&world, &agent, 1).pop().expect("one").await.expect("join").expect("claim_next"));
    assert_eq!(next.admission.and_then(|a| a.used), Some(2), "the first claim and this one");
    assert_eq!(charged(&world, &queue).await, 2);
    let in_flight: i64 = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
        .fetch_one(world.store.pool())
        .await
        .expect("count");
    assert_eq!(in_flight, 2, "the claimer that left claimed nothing");
}

// SPEC-0030 REQ-4 with group admission: a lapsed claim among a group's later candidates is still
// in flight when an earlier candidate is decided, so the oldest candidate (pending) is refused
// at the cap of 1; the takeover of the lapsed claim behind it is admitted (it replaces its own
// slot), so exactly one claimer of the group takes it over and the others are told the queue is
// full (issue #51: claim_next never answers empty while an admitted claim is there to make).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req4_a_group_refused_at_the_cap_still_takes_over_the_lapsed_claim_behind_it() {
    let (world, agent) = agent_world(&["work"]).await;
    let queue = queue_of(&agent, "work");
    set_policy(&world, &queue, json!({"max_in_flight": 1})).await;
    let older = world.push(&queue, "pending, older").await;
    world.clock.advance(chrono::Duration::seconds(1));
    let lapsed = world.push(&queue, "claimed, then lapsed").await;
    world.store.claim(&agent, &lapsed.id, 60).await.expect("claim the newer one by name");
    world.clock.advance(chrono::Duration::seconds(61));

    let holder = hold_policy_locks(&world).await;
    let claims = leader_and_queued(&world, &agent, 3).await;
    holder.rollback().await.expect("release");

    let (mut took_over, mut refused, claimers) = (0, 0, claims.len());
    for claim in claims {
        match claim.await.expect("join").expect("claim_next") {
            ClaimNext::Empty { deferred } => {
                assert_eq!(deferred.len(), 1, "{deferred:?}");
                assert_eq!(deferred[0].reason, Reason::InFlightFull);
                refused += 1;
            }
            ClaimNext::Claimed(claimed) => {
                assert_eq!(claimed.todo.id, lapsed.id, "the pending todo was claimed past the cap");
                took_over += 1;
            }
        }
    }
    assert_eq!((took_over, refused), (1, claimers - 1), "one takeover, the others told the queue is full");
    let claimed: Vec<String> = sqlx::query_scalar("SELECT id FROM todos WHERE state = 'claimed'")
        .fetch_all(world.store.pool())
        .await
        .expect("claimed");
    assert_eq!(claimed, vec![lapsed.id], "{} stayed pending", older.id);
}

// SPEC-0030 REQ-4, REQ-7 (issue #15): from its second group on, a leader begins the next group's
// read first while a group claims, so that read may be older than the claims just made. It only
// excludes queues: every claim is still decided under the lock, and the answer stays exact. Here
// groups of one claimer each take the last units of a window one by one; whatever the read
// first saw, the claimer after the last unit is deferred with the exact list, and nothing is
// charged past the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req4_a_read_first_begun_ahead_of_its_group_keeps_the_answer_exact() {
    let (world, agent) = agent_world(&["spent", "open"]).await;
    let (spent, open) = (queue_of(&agent, "spent"), queue_of(&agent, "open"));
    set_policy(&world, &spent, daily_pacific(0)).await;
    set_policy(&world, &open, daily_pacific(3)).await;
    // The oldest work is in the paused queue (a budget of 0), so every claim meets its refusal.
    push_n(&world, &spent, 2).await;
    push_n(&world, &open, 5).await;
    let store = world.store_with(engine::PoolSettings { claimers_per_queue_set: 1, ..Default::default() }).await;
    let claim = || {
        let (store, agent, queues) = (store.clone(), agent.clone(), granted(&agent));
        tokio::spawn(async move { store.claim_next(&agent, &queues, 60).await })
    };
    // The refusal marks the queue set, so the claims after it read first: one unit used.
    let first = claimed(claim().await.expect("join").expect("claim_next"));
    assert_eq!(first.todo.identity, open);

    // Three groups of one, one after another: the window's last two units, then one claimer past
    // the budget, whose group reads first on a read begun as the second group started.
    let holder = hold_policy_locks(&world).await;
    let mut claims = vec![claim()];
    until_a_claimer_waits_on_the_lock(&world).await;
    claims.push(claim());
    claims.push(claim());
    until_queued(&store, 2).await;
    holder.rollback().await.expect("release");

    let mut outcomes = vec![];
    for claim in claims {
        outcomes.push(claim.await.expect("join").expect("claim_next"));
    }
    let claimed_now = outcomes.iter().filter(|outcome| matches!(outcome, ClaimNext::Claimed(_))).count();
    assert_eq!(claimed_now, 2, "the window's last two units, one claim each: {outcomes:?}");
    for outcome in outcomes.into_iter().filter(|outcome| matches!(outcome, ClaimNext::Empty { .. })) {
        let mut listed: Vec<(String, Reason, i64)> =
            deferred(outcome).into_iter().map(|d| (d.identity.queue, d.reason, d.pending)).collect();
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            listed,
            [("open".to_string(), Reason::WindowExhausted, 2), ("spent".to_string(), Reason::Paused, 2)],
            "both queues deferred, with their pending work"
        );
    }
    assert_eq!(charged(&world, &open).await, 3, "charged up to the budget and no further");
}
