//! SPEC-0030 REQ-3 on real PostgreSQL: a charge belongs to the queue identity (issue #28). No
//! policy delete, re-create, redefinition or queue purge refunds it, and the usage of the window
//! a new definition places now in counts the claims already committed in its span.

mod support;

use models::admission::Reason;
use models::store::PolicyActor;
use models::store::prelude::*;
use serde_json::json;
use support::{World, agent_world, at, claimed, deferred, granted, push_n, queue_of, set_policy};

fn owner() -> PolicyActor {
    PolicyActor { human_id: None, endpoint_id: None }
}

fn daily_utc(max: i64, start: &str) -> serde_json::Value {
    json!({"max_claims_per_window": max, "window": {"period": "day", "tz": "UTC", "start": start}})
}

/// Claims `n` todos through `claim_next`, each admitted.
async fn claim_n(world: &World, agent: &models::scope::Actor, n: usize) {
    for _ in 0..n {
        claimed(world.store.claim_next(agent, &granted(agent), 3600).await.expect("claim"));
    }
}

// SPEC-0030 REQ-3 "A charge MUST NOT be refunded by ... any policy change": DELETE then PUT of
// the same daily policy at 5 of 5 used keeps the window spent.
#[tokio::test]
async fn req3_a_policy_re_create_keeps_the_windows_charges() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T09:00:00Z"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_utc(5, "00:00")).await;
    push_n(&world, &queue, 10).await;
    claim_n(&world, &agent, 5).await;

    world.store.clear_policy(&queue, &owner()).await.expect("clear");
    let again = set_policy(&world, &queue, daily_utc(5, "00:00")).await;
    assert_eq!(again.status.used, Some(5), "the re-created policy sees the window's five charges");
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting[0].reason, Reason::WindowExhausted);
    assert_eq!(world.store.policy_detail(&queue).await.expect("detail").windows, vec![(at("2026-11-30T00:00:00Z"), 5)]);

    world.clock.set(at("2026-12-01T00:00:00Z"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("the next window is fresh"));
}

// SPEC-0030 REQ-3: deleting the queue (purge) and the policy with it, then budgeting the same
// queue identity again, refunds nothing either.
#[tokio::test]
async fn req3_a_queue_purge_and_a_new_policy_keep_the_charges() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T09:00:00Z"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, daily_utc(3, "00:00")).await;
    push_n(&world, &queue, 3).await;
    claim_n(&world, &agent, 3).await;

    world.store.purge_queue(&queue, &owner()).await.expect("purge");
    set_policy(&world, &queue, daily_utc(3, "00:00")).await;
    push_n(&world, &queue, 2).await;
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting[0].reason, Reason::WindowExhausted);
}

// SPEC-0030 REQ-3 "The number of units charged in a window MUST equal the number of claims of
// that queue identity committed in it": moving a day window's start so that the current window
// began an hour ago counts the claims committed in that hour.
#[tokio::test]
async fn req3_a_redefinition_counts_the_claims_in_the_new_window() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    world.clock.set(at("2026-11-30T08:00:00Z"));
    set_policy(&world, &queue, daily_utc(10, "00:00")).await;
    push_n(&world, &queue, 10).await;
    claim_n(&world, &agent, 3).await; // 08:00, before the new window
    world.clock.set(at("2026-11-30T09:40:00Z"));
    claim_n(&world, &agent, 2).await; // 09:40, inside it

    world.clock.set(at("2026-11-30T10:30:00Z"));
    let moved = set_policy(&world, &queue, daily_utc(3, "09:30")).await;
    assert_eq!((moved.status.window_start, moved.status.used), (Some(at("2026-11-30T09:30:00Z")), Some(2)));
    let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("one unit left"));
    assert_eq!(got.admission.and_then(|a| a.used), Some(3));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting[0].reason, Reason::WindowExhausted);
    assert_eq!(waiting[0].next_eligible_at, Some(at("2026-12-01T09:30:00Z")));

    // Back to the first definition: its window holds all six claims of the day.
    let back = set_policy(&world, &queue, daily_utc(10, "00:00")).await;
    assert_eq!(back.status.used, Some(6));
}

// SPEC-0030 REQ-3 across a change of period and zone: an hour window placed over claims made
// under a day window in another zone counts exactly the claims inside the hour.
#[tokio::test]
async fn req3_a_new_period_and_zone_count_the_claims_already_in_their_window() {
    let (world, agent) = agent_world(&["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    world.clock.set(at("2026-11-30T10:20:00Z"));
    set_policy(&world, &queue, daily_utc(10, "00:00")).await;
    push_n(&world, &queue, 5).await;
    claim_n(&world, &agent, 2).await; // 10:20 UTC = 15:50 in Kolkata
    world.clock.set(at("2026-11-30T10:31:00Z"));
    claim_n(&world, &agent, 1).await; // 16:01 in Kolkata

    // Kolkata is UTC+05:30: hour windows starting at :00 there start at :30 UTC.
    let hourly = set_policy(
        &world,
        &queue,
        json!({"max_claims_per_window": 1, "window": {"period": "hour", "tz": "Asia/Kolkata", "start": "00:00"}}),
    )
    .await;
    assert_eq!((hourly.status.window_start, hourly.status.used), (Some(at("2026-11-30T10:30:00Z")), Some(1)));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting[0].reason, Reason::WindowExhausted);
}

// The charges go only with their owner: deleting the endpoint deletes its usage and ledger.
#[tokio::test]
async fn req3_charges_are_deleted_with_their_endpoint_only() {
    let world = World::new().await;
    let (_, token) = world.store.bootstrap_human("alice", false).await.expect("bootstrap human");
    let agent = world.agent(&world.human_scope(&token).await, &["inbox"]).await;
    let queue = queue_of(&agent, "inbox");
    world.clock.set(at("2026-11-30T09:00:00Z"));
    set_policy(&world, &queue, daily_utc(5, "00:00")).await;
    push_n(&world, &queue, 2).await;
    claim_n(&world, &agent, 2).await;
    let rows = |table: &'static str| {
        let pool = world.store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                .fetch_one(&pool)
                .await
                .expect("count")
        }
    };
    world.store.clear_policy(&queue, &owner()).await.expect("clear");
    assert_eq!((rows("admission_windows").await, rows("admission_charges").await), (1, 1));
    let endpoint = models::identity::ScopeRef::Endpoint(queue.owner_id().to_string());
    // The scope read after the vend, so it manages the new endpoint.
    let alice = world.human_scope(&token).await;
    world.store.delete_endpoint(&alice, &endpoint).await.expect("delete endpoint");
    assert_eq!((rows("admission_windows").await, rows("admission_charges").await), (0, 0));
}

// SPEC-0030 REQ-10, issue #51: an endpoint deleted with its budgeted queues leaves the removal of
// each policy in the audit, with the human who deleted it; the audit has no foreign keys, so it
// outlives the endpoint.
#[tokio::test]
async fn req10_deleting_an_endpoint_audits_the_removal_of_each_policy() {
    let world = World::new().await;
    let (_, token) = world.store.bootstrap_human("alice", false).await.expect("bootstrap human");
    let agent = world.agent(&world.human_scope(&token).await, &["a", "b"]).await;
    let (a, b) = (queue_of(&agent, "a"), queue_of(&agent, "b"));
    set_policy(&world, &a, daily_utc(5, "00:00")).await;
    set_policy(&world, &b, json!({"max_in_flight": 3})).await;
    let alice = world.human_scope(&token).await;
    let endpoint = models::identity::ScopeRef::Endpoint(a.owner_id().to_string());
    world.store.delete_endpoint(&alice, &endpoint).await.expect("delete endpoint");

    for (identity, before) in [(&a, json!(5)), (&b, json!(null))] {
        let audit = world.store.policy_audit(identity, 10).await.expect("audit");
        assert_eq!(audit.len(), 2, "{identity}: the create and the removal: {audit:?}");
        let removal = &audit[0];
        assert_eq!(removal.action, "delete", "{identity}");
        assert_eq!(removal.actor_human_id.as_deref(), Some(alice.human.id.as_str()));
        assert_eq!(removal.before.as_ref().map(|b| b["max_claims_per_window"].clone()), Some(before));
        assert_eq!(removal.after, None);
    }
}
