//! The claiming endpoint of the claim benchmarks (`bench_admission`, `bench_peer`, and the
//! server's `bench_mcp`): a human, an endpoint granted the given queues and the verbs the loops
//! call, optionally a budget that never binds on one queue, and the agent's scope; and the spent
//! budgets of path (c)'s exhausted queues.
//!
//! Included with `#[path = "support/bench_endpoint.rs"] mod bench_endpoint;` (from the server's
//! examples, `#[path = "../../engine/examples/support/bench_endpoint.rs"]`): cargo takes only
//! `examples/*.rs` as examples, so this file is not one.

use engine::PgStore;
use engine::pg_store::{hash_token, new_token};
use models::admission::Policy;
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::prelude::*;
use models::store::{AgentLookup, NewEndpoint, PolicyActor};
use serde_json::json;

/// The endpoint a benchmark claims as: its scope for engine loops, its slug and bearer for MCP.
#[derive(Clone)]
#[allow(dead_code, reason = "each benchmark reads the fields its loops need")]
pub struct BenchEndpoint {
    pub id: String,
    pub actor: Actor,
    pub granted: Vec<QueueIdentity>,
    pub slug: String,
    pub key: String,
}

/// A policy no benchmark run reaches: 10,000 in flight, a million claims an hour.
pub fn never_binding_policy() -> Policy {
    let never_binds = json!({"max_in_flight": 10000, "max_claims_per_window": 1_000_000,
        "window": {"period": "hour", "tz": "UTC", "start": "00:00"}});
    Policy::from_request(&never_binds).expect("policy")
}

/// Nobody in particular, as the audit records a benchmark's policy writes.
pub fn nobody() -> PolicyActor {
    PolicyActor { human_id: None, endpoint_id: None }
}

/// A human and their endpoint granted `queues` (its own) with `claim_next` and `complete`; with
/// `budgeted`, that queue gets `never_binding_policy`.
pub async fn bench_endpoint(store: &PgStore, queues: &[String], budgeted: Option<&str>) -> BenchEndpoint {
    let (_, token) = store.bootstrap_human("bench", false).await.expect("human");
    let human = store.human_by_token(&hash_token(&token)).await.expect("lookup").expect("human");
    let key = new_token("sbk_");
    let endpoint = store
        .vend_endpoint(NewEndpoint {
            name: "bench".into(),
            owner_human_id: Some(human.human.id.clone()),
            owner_team_id: None,
            own_queues: queues.to_vec(),
            team_queues: vec![],
            verbs: vec!["claim_next".into(), "complete".into()],
            token_hash: hash_token(&key),
            created_by_human_id: None,
        })
        .await
        .expect("vend");
    if let Some(queue) = budgeted {
        let identity = QueueIdentity::endpoint(&endpoint.id, queue);
        store.set_policy(&identity, &never_binding_policy(), &nobody()).await.expect("policy");
    }
    let AgentLookup::Found(scope) = store.agent_by_token(&endpoint.slug, &hash_token(&key)).await.expect("agent")
    else {
        panic!("agent lookup");
    };
    let granted = scope.granted.to_vec();
    BenchEndpoint { id: endpoint.id, actor: Actor::Agent(*scope), granted, slug: endpoint.slug, key }
}

/// Gives each of `queues` (the endpoint's own) a budget of one claim a day, already spent: the
/// exhausted queues of path (c). The caller adds their older pending work.
#[allow(dead_code, reason = "only the benchmarks with path (c) spend budgets")]
pub async fn spend_budgets(store: &PgStore, endpoint_id: &str, queues: &[String]) {
    let spent = Policy::from_request(
        &json!({"max_claims_per_window": 1, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    )
    .expect("policy");
    for queue in queues {
        store.set_policy(&QueueIdentity::endpoint(endpoint_id, queue), &spent, &nobody()).await.expect("policy");
    }
    sqlx::query(
        "INSERT INTO admission_windows (endpoint_id, team_id, queue, window_start, used, updated_at) \
         SELECT endpoint_id, team_id, queue, date_trunc('day', now()), 1, now() FROM admission_policies \
         WHERE max_claims_per_window = 1",
    )
    .execute(store.pool())
    .await
    .expect("spend budgets");
}
