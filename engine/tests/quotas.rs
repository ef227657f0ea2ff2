//! Quotas and bounded state at engine level, on real PostgreSQL (issue #14): ingest under a
//! capacity takes its intake locks in one order, so opposite fan-outs cannot deadlock.

mod support;

use models::store::prelude::*;
use models::todo::{CreatedByKind, NewTodo};
use std::collections::HashSet;
use support::{World, new_todo, queue_of};

/// The todos one delivery fans out to, in the webhook's target order.
fn delivery(targets: &[models::identity::QueueIdentity], delivery_id: &str) -> Vec<NewTodo> {
    targets
        .iter()
        .map(|target| NewTodo {
            created_by_kind: CreatedByKind::Ingest,
            created_by_id: None,
            ..new_todo(target, delivery_id, Some(delivery_id))
        })
        .collect()
}

// Issue #14 item 1: two webhooks whose targets are the same identities in opposite orders
// ingest concurrently, through two engines, with a capacity set. Every delivery lands exactly
// once and none fails (a deadlock would answer 40P01).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ingest_opposite_target_orders_never_deadlock() {
    const ROUNDS: usize = 60;
    let world = World::new().await;
    let second = World::store_on(&world.db, &world.clock).await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["a", "b", "c"]).await;
    let forward = vec![queue_of(&agent, "a"), queue_of(&agent, "b"), queue_of(&agent, "c")];
    let backward: Vec<_> = forward.iter().rev().cloned().collect();
    world.store.set_queue_capacity(100_000, &alice.human.id).await.expect("set capacity");
    let hook_forward = world.store.create_webhook(&alice.human.id, "fwd", "s1", &forward).await.expect("webhook");
    let hook_backward = world.store.create_webhook(&alice.human.id, "bwd", "s2", &backward).await.expect("webhook");

    let mut ingests = Vec::new();
    for round in 0..ROUNDS {
        for (hook, targets, store) in
            [(&hook_forward, &forward, world.store.clone()), (&hook_backward, &backward, second.clone())]
        {
            let (hook, id) = (hook.clone(), format!("{hook}-{round}"));
            let todos = delivery(targets, &id);
            ingests.push(tokio::spawn(async move { store.ingest(&hook, &id, todos).await }));
        }
    }
    let mut ids = HashSet::new();
    for ingest in ingests {
        let ingested = ingest.await.expect("join").expect("no ingest fails, deadlock or otherwise");
        assert!(!ingested.deduped);
        assert_eq!(ingested.todo_ids.len(), 3);
        ids.extend(ingested.todo_ids);
    }
    assert_eq!(ids.len(), ROUNDS * 2 * 3, "every delivery landed once");
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM todos").fetch_one(world.store.pool()).await.expect("count");
    assert_eq!(stored as usize, ROUNDS * 2 * 3);
}

/// Creates `count` pending todos in `identity`, a few at a time.
async fn fill(world: &World, identity: &models::identity::QueueIdentity, count: usize) {
    for chunk in (0..count).collect::<Vec<_>>().chunks(50) {
        let creates: Vec<_> = chunk
            .iter()
            .map(|i| {
                let (store, todo) = (world.store.clone(), new_todo(identity, &format!("t{i}"), None));
                tokio::spawn(async move { store.create_todo(todo).await })
            })
            .collect();
        for create in creates {
            create.await.expect("join").expect("create");
        }
    }
}

/// The newest audit record of `action`: (removed, listed ids, truncated).
async fn last_cancellation(world: &World, action: &str) -> (i32, Vec<String>, bool) {
    sqlx::query_as(
        "SELECT removed, todo_ids, truncated FROM queue_cancellations WHERE action = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(action)
    .fetch_one(world.store.pool())
    .await
    .expect("audit record")
}

// Issue #14 item 2: a clear of more todos than one batch removes exactly the pending ones
// (claimed work untouched), answers the exact count, and audits the count with a bounded,
// truncated id list; a purge of the same queue then deletes the rest the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clear_and_purge_in_batches_answer_the_exact_count_and_audit_a_bounded_sample() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let inbox = queue_of(&agent, "inbox");
    fill(&world, &inbox, 2_345).await;
    let claimed = world.store.claim_next(&agent, &support::granted(&agent), 60).await.expect("claim");
    let models::store::ClaimNext::Claimed(claimed) = claimed else { panic!("claimable") };
    let owner = models::store::PolicyActor { human_id: Some(alice.human.id.clone()), endpoint_id: None };

    let removed = world.store.clear_queue(&inbox, &owner).await.expect("clear");
    assert_eq!(removed, 2_344, "every pending todo, and not the claimed one");
    let (count, ids, truncated) = last_cancellation(&world, "clear").await;
    assert_eq!((count, ids.len(), truncated), (2_344, models::limits::CANCELLATION_AUDIT_IDS_MAX, true));
    assert!(!ids.contains(&claimed.todo.id));
    let held = world.store.get_todo(&agent, &claimed.todo.id).await.expect("still there");
    assert_eq!(held.state, models::todo::TodoState::Claimed);
    assert_eq!(world.store.clear_queue(&inbox, &owner).await.expect("clear again"), 0);
    let (count, ids, truncated) = last_cancellation(&world, "clear").await;
    assert_eq!((count, ids.len(), truncated), (0, 0, false));

    let purged = world.store.purge_queue(&inbox, &owner).await.expect("purge");
    assert_eq!(purged, 2_345, "discarded and claimed todos alike");
    let (count, ids, truncated) = last_cancellation(&world, "purge").await;
    assert_eq!((count, ids.len(), truncated), (2_345, models::limits::CANCELLATION_AUDIT_IDS_MAX, true));
    let left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM todos").fetch_one(world.store.pool()).await.expect("count");
    assert_eq!(left, 0);
}

fn endpoint_for(owner: &models::scope::HumanScope, name: &str) -> models::store::NewEndpoint {
    models::store::NewEndpoint {
        name: name.to_string(),
        owner_human_id: Some(owner.human.id.clone()),
        owner_team_id: None,
        own_queues: vec!["inbox".to_string()],
        team_queues: vec![],
        verbs: models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect(),
        token_hash: engine::pg_store::hash_token(&engine::pg_store::new_token("sbk_")),
        created_by_human_id: Some(owner.human.id.clone()),
    }
}

// Issue #14 item 3: an owner holds at most ENDPOINTS_PER_OWNER_MAX endpoints, exactly, even
// when vends race through two engines; the refusal is `conflict` naming the limit, and another
// owner is not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn endpoints_per_owner_are_capped_exactly_under_concurrency() {
    use models::limits::ENDPOINTS_PER_OWNER_MAX;
    let world = World::new().await;
    let second = World::store_on(&world.db, &world.clock).await;
    let alice = world.human("alice").await;
    let attempts = ENDPOINTS_PER_OWNER_MAX as usize + 20;
    let vends: Vec<_> = (0..attempts)
        .map(|i| {
            let store = if i % 2 == 0 { world.store.clone() } else { second.clone() };
            let new = endpoint_for(&alice, &format!("agent-{i}"));
            tokio::spawn(async move { store.vend_endpoint(new).await })
        })
        .collect();
    let (mut vended, mut refused) = (0, 0);
    for vend in vends {
        match vend.await.expect("join") {
            Ok(_) => vended += 1,
            Err(error) => {
                assert_eq!(error.code, models::error::Code::Conflict);
                assert_eq!(error.extras["limit"], "endpoints_per_owner_max");
                assert!(error.message.contains(&ENDPOINTS_PER_OWNER_MAX.to_string()), "{}", error.message);
                refused += 1;
            }
        }
    }
    assert_eq!((vended, refused), (ENDPOINTS_PER_OWNER_MAX as usize, 20));
    let bob = world.human("bob").await;
    world.store.vend_endpoint(endpoint_for(&bob, "bobs")).await.expect("another owner has room");
}

// Issue #14 item 3: many team references resolve in one call, in order, by id or slug; one
// outside the reach makes the whole call `not_found`.
#[tokio::test]
async fn team_grants_resolve_together_in_order_and_foreign_ones_are_not_found() {
    let world = World::new().await;
    world.human("alice").await;
    world.human("mallory").await;
    let mut teams = Vec::new();
    for i in 0..12 {
        teams.push(world.store.bootstrap_team(&format!("team-{i}"), "alice").await.expect("team"));
    }
    let foreign = world.store.bootstrap_team("elsewhere", "mallory").await.expect("team");
    let alice = world.human("alice").await;
    let references: Vec<String> = teams
        .iter()
        .rev()
        .enumerate()
        .map(|(i, team)| if i % 2 == 0 { team.slug.clone() } else { team.id.clone() })
        .collect();
    let ids = world.store.resolve_teams(&alice.reach, &references).await.expect("resolve");
    let expected: Vec<String> = teams.iter().rev().map(|team| team.id.clone()).collect();
    assert_eq!(ids, expected);
    let mut with_foreign = references.clone();
    with_foreign.push(foreign.slug.clone());
    let refused = world.store.resolve_teams(&alice.reach, &with_foreign).await.expect_err("foreign");
    assert_eq!(refused.code, models::error::Code::NotFound);
    assert_eq!(world.store.resolve_teams(&alice.reach, &[]).await.expect("none"), Vec::<String>::new());
}

// Issue #14 item 1: "a stolen token copies itself". A human holds at most TOKENS_PER_HUMAN_MAX
// live tokens, exactly, even when mints race through two engines; revoking one makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_per_human_are_capped_exactly_under_concurrency() {
    use models::limits::TOKENS_PER_HUMAN_MAX;
    let world = World::new().await;
    let second = World::store_on(&world.db, &world.clock).await;
    let alice = world.human("alice").await;
    let held = world.store.list_tokens(&alice.human.id).await.expect("list").len() as i64;
    let room = (TOKENS_PER_HUMAN_MAX - held) as usize;
    let mints: Vec<_> = (0..room + 10)
        .map(|i| {
            let store = if i % 2 == 0 { world.store.clone() } else { second.clone() };
            let human_id = alice.human.id.clone();
            tokio::spawn(async move { store.mint_token(&human_id, Some("loop"), &format!("digest-{i}"), None).await })
        })
        .collect();
    let (mut minted, mut refused) = (0, 0);
    for mint in mints {
        match mint.await.expect("join") {
            Ok(()) => minted += 1,
            Err(error) => {
                assert_eq!(error.code, models::error::Code::Conflict);
                assert_eq!(error.extras["limit"], "tokens_per_human_max");
                refused += 1;
            }
        }
    }
    assert_eq!((minted, refused), (room, 10));
    let tokens = world.store.list_tokens(&alice.human.id).await.expect("list");
    assert_eq!(tokens.len() as i64, TOKENS_PER_HUMAN_MAX);
    world.store.revoke_token(&alice.human.id, &tokens[0].id).await.expect("revoke");
    world.store.mint_token(&alice.human.id, None, "digest-after", None).await.expect("a revoked token makes room");
}
