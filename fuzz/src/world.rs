//! A small Switchboard for the router targets: the production router over the in-memory
//! `ModelStore`, with one owner (an instance admin, so install-wide settings are reachable), one
//! team, one endpoint granted every verb, one pending todo, one budgeted queue and one webhook,
//! and a `send` that answers one request.
//!
//! Built fresh for every input, on its own current-thread runtime, so an input's outcome never
//! depends on what ran before it: a crash reproduces from its input alone.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use engine::pg_store::hash_token;
use models::admission::Policy;
use models::identity::QueueIdentity;
use models::model_store::ModelStore;
use models::store::prelude::*;
use models::store::{NewEndpoint, PolicyActor, SystemClock};
use models::todo::{CreatedByKind, NewTodo};
use std::sync::Arc;
use tower::ServiceExt;

/// The owner's operator API bearer.
pub const OWNER_TOKEN: &str = "sbh_fuzzowner000000000000000000000000000000";
/// The endpoint's MCP bearer.
pub const AGENT_TOKEN: &str = "sbk_fuzzagent000000000000000000000000000000";
/// The webhook's signing secret (Standard Webhooks form).
pub const WEBHOOK_SECRET: &str = "whsec_ZnV6ei13ZWJob29rLXNlY3JldC0wMTIzNDU2Nzg5";
/// The endpoint's own queue (holds the pending todo) and the team's budgeted queue.
pub const OWN_QUEUE: &str = "inbox";
pub const TEAM_QUEUE: &str = "work";
/// Largest answer body read back; the API never answers more for a fuzz-sized request.
const ANSWER_BYTES_MAX: usize = 4 * 1024 * 1024;

pub struct World {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    pub endpoint_id: String,
    pub endpoint_slug: String,
    pub team_slug: String,
    pub todo_id: String,
    pub webhook_id: String,
}

/// One answer: its status and its body.
pub struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

impl World {
    /// The world every router target starts from. Set-up failures are bugs in this harness,
    /// never in the input, so they panic with their cause.
    pub fn new() -> World {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("set-up: runtime: {e}"));
        let store = ModelStore::new(Arc::new(SystemClock));
        let set_up = |what: &str, e: models::error::Error| -> ! { panic!("set-up: {what}: {e}") };
        let owner = store.add_human("owner", true, &hash_token(OWNER_TOKEN)).unwrap_or_else(|e| set_up("human", e));
        let team = store.add_team("fleet", &owner.id).unwrap_or_else(|e| set_up("team", e));
        let (endpoint, todo, webhook_id) = runtime.block_on(async {
            let endpoint = store
                .vend_endpoint(NewEndpoint {
                    name: "agent".into(),
                    owner_human_id: Some(owner.id.clone()),
                    owner_team_id: None,
                    own_queues: vec![OWN_QUEUE.into()],
                    team_queues: vec![(team.id.clone(), TEAM_QUEUE.into())],
                    verbs: models::verbs::ALL_VERBS.iter().map(|v| v.to_string()).collect(),
                    token_hash: hash_token(AGENT_TOKEN),
                    created_by_human_id: Some(owner.id.clone()),
                })
                .await
                .unwrap_or_else(|e| set_up("endpoint", e));
            let own = QueueIdentity::endpoint(endpoint.id.clone(), OWN_QUEUE);
            let todo = store
                .create_todo(NewTodo {
                    identity: own.clone(),
                    title: "seeded".into(),
                    payload: Some(serde_json::json!({ "n": 1 })),
                    idempotency_key: None,
                    max_attempts: 3,
                    created_by_kind: CreatedByKind::Human,
                    created_by_id: Some(owner.id.clone()),
                })
                .await
                .unwrap_or_else(|e| set_up("todo", e));
            let budget = serde_json::json!({
                "max_in_flight": 2, "max_claims_per_window": 5,
                "window": { "period": "day", "tz": "Europe/Berlin", "start": "06:00" },
            });
            let policy = Policy::from_request(&budget).unwrap_or_else(|e| set_up("policy", e));
            let actor = PolicyActor { human_id: Some(owner.id.clone()), endpoint_id: None };
            store
                .set_policy(&QueueIdentity::team(team.id.clone(), TEAM_QUEUE), &policy, &actor)
                .await
                .unwrap_or_else(|e| set_up("set policy", e));
            let webhook_id = store
                .create_webhook(&owner.id, "provider", WEBHOOK_SECRET, &[own])
                .await
                .unwrap_or_else(|e| set_up("webhook", e));
            (endpoint, todo, webhook_id)
        });
        let router = server::app::router(server::app::AppState::new(store));
        World {
            runtime,
            router,
            endpoint_id: endpoint.id,
            endpoint_slug: endpoint.slug,
            team_slug: team.slug,
            todo_id: todo.todo.id,
            webhook_id,
        }
    }

    /// Answers one request through the production router, as a replica would.
    pub fn send(&self, request: Request<Body>) -> Answer {
        let router = self.router.clone();
        self.runtime.block_on(async move {
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), ANSWER_BYTES_MAX)
                .await
                .unwrap_or_else(|e| panic!("answer body unreadable: {e}"));
            Answer { status, body: body.to_vec() }
        })
    }
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

/// The law every router target shares: whatever the input, the server never answers 5xx
/// (a 500 here is a constraint the API let through, `internal` in `PgStore` too).
pub fn assert_not_server_error(what: &str, answer: &Answer) {
    assert!(
        !answer.status.is_server_error(),
        "{what} answered {}: {}",
        answer.status,
        String::from_utf8_lossy(&answer.body)
    );
}

/// The API's error law: a refusal is the JSON envelope `{error, code, ...}` (one mapping of codes
/// to statuses, STYLE.md).
pub fn assert_error_envelope(what: &str, answer: &Answer) {
    if answer.status.is_success() {
        return;
    }
    let envelope = answer.json();
    let code = envelope.as_ref().and_then(|v| v.get("code")).and_then(serde_json::Value::as_str);
    let message = envelope.as_ref().and_then(|v| v.get("error")).and_then(serde_json::Value::as_str);
    assert!(
        code.is_some() && message.is_some(),
        "{what} answered {} without the error envelope: {}",
        answer.status,
        String::from_utf8_lossy(&answer.body)
    );
}
