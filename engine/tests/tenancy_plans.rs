//! Queries that stay inside their tenant (issue #14 item 4), proved by their plans.
//!
//! Two tenants share one database: a small one with 10 todos and a big one with 40,000 done
//! todos (half on its endpoint, half on its team), among 20,000 other humans, tokens, teams and
//! endpoints, all `ANALYZE`d. The plans PostgreSQL picks for the small tenant's listings and for
//! authentication must read rows through an index, never by scanning `todos`, `api_tokens` or
//! `endpoints`: a scan there costs every request in proportion to everyone else's data.
//!
//! The listing plans come from `PgStore::explain_listing`, which explains the very statement and
//! values `list_todos` runs. Authentication's SQL is private to `principals.rs`, so its plans are
//! captured as the store runs it (`support::plans::logged_plans`). No SQL is copied here.

mod support;

use engine::PgStore;
use engine::pg_store::{hash_token, new_token};
use models::identity::QueueIdentity;
use models::scope::Reach;
use models::store::prelude::*;
use models::store::{AgentLookup, NewEndpoint, TodoQuery, TodoSet};
use models::todo::TodoState;
use serde_json::Value;
use support::World;
use support::plans::{Scan, logged_plans, scans};

/// Rows of the big tenant, per owner (its endpoint, its team).
const BIG_TENANT_TODOS_PER_OWNER: i64 = 20_000;
/// Other humans, each with a token, an endpoint and a team: the install around the two tenants.
const OTHER_TENANTS: i64 = 20_000;
const SMALL_TENANT_TODOS: usize = 10;
/// The tables that grow with the number of tenants, which a tenant's request must never scan.
const TENANT_TABLES: [&str; 4] = ["todos", "api_tokens", "endpoints", "teams"];

struct Tenants {
    world: World,
    small_human_token: String,
    small_endpoint_slug: String,
    small_endpoint_token: String,
    small_reach: Reach,
    small_queues: Vec<QueueIdentity>,
}

/// The small tenant (a human, their endpoint granted `inbox`, 10 todos) beside the big one, and
/// the rest of the install, analysed.
async fn two_tenants() -> Tenants {
    let world = World::new().await;
    let store = &world.store;
    let (small, small_human_token) = store.bootstrap_human("small", false).await.expect("small human");
    let small_endpoint_token = new_token("sbk_");
    let endpoint = store
        .vend_endpoint(NewEndpoint {
            name: "small-agent".into(),
            owner_human_id: Some(small.id.clone()),
            owner_team_id: None,
            own_queues: vec!["inbox".into()],
            team_queues: vec![],
            verbs: models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect(),
            token_hash: hash_token(&small_endpoint_token),
            created_by_human_id: Some(small.id.clone()),
        })
        .await
        .expect("vend");
    let inbox = QueueIdentity::endpoint(&endpoint.id, "inbox");
    for i in 0..SMALL_TENANT_TODOS {
        world.clock.advance(chrono::Duration::seconds(1));
        world.push(&inbox, &format!("small {i}")).await;
    }
    let big = world.human("big").await;
    let big_team = store.bootstrap_team("big-team", "big").await.expect("big team");
    let big_endpoint = store
        .vend_endpoint(NewEndpoint {
            name: "big-agent".into(),
            owner_human_id: Some(big.human.id.clone()),
            owner_team_id: None,
            own_queues: vec!["inbox".into()],
            team_queues: vec![(big_team.id.clone(), "inbox".into())],
            verbs: models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect(),
            token_hash: hash_token(&new_token("sbk_")),
            created_by_human_id: Some(big.human.id.clone()),
        })
        .await
        .expect("vend big");
    // Done todos satisfy the CHECKs: no lease (not claimed), one owner, a known provenance.
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, team_id, queue, title, state, attempt, created_at, updated_at, \
                            completed_at, created_by_kind) \
         SELECT 'td_big_' || owner.kind || '_' || i, owner.endpoint_id, owner.team_id, 'inbox', 'done ' || i, 'done', 1, \
                now() - make_interval(secs => i), now() - make_interval(secs => i), now() - make_interval(secs => i), 'system' \
         FROM (VALUES ('e', $1::text, NULL::text), ('t', NULL::text, $2::text)) AS owner (kind, endpoint_id, team_id) \
         CROSS JOIN generate_series(1, $3::bigint) AS i",
    )
    .bind(&big_endpoint.id)
    .bind(&big_team.id)
    .bind(BIG_TENANT_TODOS_PER_OWNER)
    .execute(store.pool())
    .await
    .expect("big tenant's todos");
    for statement in [
        "INSERT INTO humans (id, name) SELECT 'hu_other_' || i, 'other ' || i FROM generate_series(1, $1::bigint) AS i",
        "INSERT INTO api_tokens (token_hash, human_id) SELECT 'other-token-' || i, 'hu_other_' || i FROM generate_series(1, $1::bigint) AS i",
        "INSERT INTO teams (id, slug, name) SELECT 'tm_other_' || i, 'other-' || i, 'other ' || i FROM generate_series(1, $1::bigint) AS i",
        "INSERT INTO team_members (team_id, human_id, role) SELECT 'tm_other_' || i, 'hu_other_' || i, 'owner' FROM generate_series(1, $1::bigint) AS i",
        "INSERT INTO endpoints (id, slug, name, owner_human_id, token_hash, verbs) \
         SELECT 'ep_other_' || i, 'other-' || i, 'other ' || i, 'hu_other_' || i, 'other-endpoint-' || i, ARRAY['claim_next'] \
         FROM generate_series(1, $1::bigint) AS i",
        "INSERT INTO endpoint_grants (endpoint_id, queue) SELECT 'ep_other_' || i, 'inbox' FROM generate_series(1, $1::bigint) AS i",
    ] {
        sqlx::query(statement).bind(OTHER_TENANTS).execute(store.pool()).await.expect("other tenants");
    }
    sqlx::query("ANALYZE").execute(store.pool()).await.expect("analyze");
    Tenants {
        small_reach: Reach { endpoint_ids: vec![endpoint.id.clone()], team_ids: vec![] },
        small_queues: vec![inbox],
        small_endpoint_slug: endpoint.slug,
        world,
        small_human_token,
        small_endpoint_token,
    }
}

/// Asserts `plan` scans no tenant table sequentially and reads `table` through an index
/// (whose name starts with `index_prefix`). Returns the scans, for the failure message.
fn assert_tenant_bounded(what: &str, plan: &Value, table: &str, index_prefix: &str) {
    let found = scans(plan);
    let sequential: Vec<&Scan> = found
        .iter()
        .filter(|scan| scan.node == "Seq Scan" && scan.relation.as_deref().is_some_and(|r| TENANT_TABLES.contains(&r)))
        .collect();
    assert!(sequential.is_empty(), "{what} scans a tenant table sequentially: {sequential:?}\nplan: {plan:#}");
    assert!(
        found.iter().any(|scan| scan.relation.as_deref() == Some(table)
            && scan.index.as_deref().is_some_and(|index| index.starts_with(index_prefix))),
        "{what} does not read {table} through {index_prefix}*: {found:?}\nplan: {plan:#}"
    );
}

/// The `Plan` of `list_todos`'s statement for `query`.
async fn listing_plan(store: &PgStore, query: TodoQuery) -> Value {
    let explained = store.explain_listing(query).await.expect("explain");
    explained[0]["Plan"].clone()
}

// Issue #14 item 4 (a) and (b): the owner-wide listing (the operator API and the board) and the
// granted-queues listing (MCP), with no state filter and with state=done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_reads_only_the_callers_rows_through_an_index() {
    let tenants = two_tenants().await;
    let store = &tenants.world.store;
    for state in [None, Some(TodoState::Done)] {
        let by_owner = TodoQuery { set: TodoSet::Owners(tenants.small_reach.clone()), state, limit: 50 };
        let plan = listing_plan(store, by_owner).await;
        assert_tenant_bounded(&format!("the owner listing (state {state:?})"), &plan, "todos", "todos_list_endpoint");
        let by_queue = TodoQuery { set: TodoSet::Queues(tenants.small_queues.clone()), state, limit: 50 };
        let plan = listing_plan(store, by_queue).await;
        // Either listing index of the owner will do: the planner picks by the owner's row count.
        assert_tenant_bounded(&format!("the queue listing (state {state:?})"), &plan, "todos", "todos_list_endpoint");
    }
    // As the store runs it, prepared: after five runs PostgreSQL may switch to a generic plan.
    let (reach, queues) = (tenants.small_reach.clone(), tenants.small_queues.clone());
    let plans = logged_plans(&tenants.world, "CROSS JOIN LATERAL (SELECT t.id", |store| async move {
        for state in [None, Some(TodoState::Done)] {
            for _ in 0..7 {
                let by_owner = TodoQuery { set: TodoSet::Owners(reach.clone()), state, limit: 50 };
                store.list_todos(by_owner).await.expect("list by owner");
                let by_queue = TodoQuery { set: TodoSet::Queues(queues.clone()), state, limit: 50 };
                store.list_todos(by_queue).await.expect("list by queue");
            }
        }
    })
    .await;
    assert!(plans.len() >= 28, "only {} listing plans were logged", plans.len());
    for (_, plan) in &plans {
        assert_tenant_bounded("a listing as the store runs it", plan, "todos", "todos_list_");
    }
    // The same statement answers as before: the caller's 10 todos, newest first, nothing else.
    let listed = store
        .list_todos(TodoQuery { set: TodoSet::Owners(tenants.small_reach.clone()), state: None, limit: 1000 })
        .await
        .expect("list");
    let titles: Vec<String> = listed.iter().map(|todo| todo.title.clone()).collect();
    let expected: Vec<String> = (0..SMALL_TENANT_TODOS).rev().map(|i| format!("small {i}")).collect();
    assert_eq!(titles, expected);
}

// Issue #14 item 4 (c): a human's bearer token is looked up by its digest, and their reach is
// read from their own rows. With `owner_team_id IN (SELECT …)` in `human_scope_of`
// (principals.rs) no index could serve the OR and every human request scanned every endpoint;
// `owner_team_id = ANY(ARRAY(SELECT …))` lets a BitmapOr of `endpoints_owner_human` and
// `endpoints_owner_team` serve it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_token_is_authenticated_through_indexes_only() {
    let tenants = two_tenants().await;
    let digest = hash_token(&tenants.small_human_token);
    let plans = logged_plans(&tenants.world, "FROM api_tokens k", |store| async move {
        // Several times: a prepared statement may switch to a generic plan after five runs.
        for _ in 0..7 {
            assert!(store.human_by_token(&digest).await.expect("lookup").is_some());
        }
    })
    .await;
    assert!(!plans.is_empty(), "no plan of the human-token lookup was logged");
    for (_, plan) in &plans {
        assert_tenant_bounded("the human-token lookup", plan, "api_tokens", "api_tokens_pkey");
    }
}

// Issue #14 item 4 (d): an endpoint's credential is looked up by its digest, and its grants from
// its own rows. With `t.id = e.owner_team_id OR t.id IN (SELECT …)` in `agent_by_token_tx`
// (principals.rs) every lookup scanned every team; `t.id = ANY(ARRAY(SELECT …))` is served by
// `teams_pkey`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_credential_is_authenticated_through_indexes_only() {
    let tenants = two_tenants().await;
    let (slug, digest) = (tenants.small_endpoint_slug.clone(), hash_token(&tenants.small_endpoint_token));
    let plans = logged_plans(&tenants.world, "FROM endpoint_grants g", |store| async move {
        for _ in 0..7 {
            let found = store.agent_by_token(&slug, &digest).await.expect("lookup");
            assert!(matches!(found, AgentLookup::Found(_)), "{found:?}");
        }
    })
    .await;
    assert!(!plans.is_empty(), "no plan of the endpoint-credential lookup was logged");
    for (_, plan) in &plans {
        assert_tenant_bounded("the endpoint-credential lookup", plan, "endpoints", "endpoints_token_hash");
    }
}
