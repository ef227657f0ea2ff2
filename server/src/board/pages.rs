//! The board's read-only pages: the board (`/`, `/board`), a queue (`/queues/{scope}/{queue}`),
//! a todo (`/todos/{id}`) and a policy's audit history (`.../audit`).
//!
//! Seeing follows the viewer's reach (as `GET /api/v1/todos` does); the audit history follows
//! what they manage (as `GET /api/v1/admission/.../audit` does). Outside either: 404.

use super::signin::{Viewer, require};
use super::snapshot::{self, Card};
use super::usage::UsageView;
use super::view::{LocalTime, QueueRef, policy_zone, zone_moment};
use super::{Board, Nav, PageError, PageResult};
use crate::extract::managed_identity;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use chrono::TimeDelta;
use engine::PgStore;
use models::error::{Error, Result};
use models::identity::{QueueIdentity, ScopeRef, validate_queue_name};
use models::limits::USAGE_RETENTION_DAYS;
use models::scope::Actor;
use models::store::{QueueAdmission, Store, TodoQuery, TodoSet};
use models::todo::TodoState;
use serde::Deserialize;

/// Most todos a queue page lists.
const QUEUE_TODOS_MAX: i64 = 200;

#[derive(Template, WebTemplate)]
#[template(path = "board.html")]
struct BoardPage {
    nav: Option<Nav>,
    csrf: String,
    cards: Vec<Card>,
}

/// `GET /` and `GET /board`: one card per queue identity the viewer can see.
pub async fn board(State(state): State<Board>, headers: HeaderMap) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let cards = snapshot::cards(&state.store, &viewer.scope).await?;
    Ok(BoardPage { nav: Some(viewer.nav()), csrf: viewer.session.csrf_token.clone(), cards }.into_response())
}

/// `{scope}/{queue}` resolved within what the viewer reaches; otherwise `not_found`.
pub async fn visible_identity(store: &PgStore, viewer: &Viewer, scope: &str, queue: &str) -> Result<QueueIdentity> {
    let scope = ScopeRef::parse("scope", scope)?;
    validate_queue_name("queue", queue)?;
    let owner = store.resolve_scope(&viewer.scope.reach, &scope).await?;
    Ok(QueueIdentity { owner, queue: queue.to_string() })
}

#[derive(Template, WebTemplate)]
#[template(path = "queue.html")]
struct QueuePage {
    nav: Option<Nav>,
    csrf: String,
    card: Card,
    todos: Vec<super::view::TodoView>,
    cleared: Option<u64>,
    usage: Option<UsageView>,
}

#[derive(Deserialize)]
pub struct QueueQuery {
    cleared: Option<u64>,
}

/// `GET /queues/{scope}/{queue}`: the header, every todo in a table, and the owner's controls.
pub async fn queue(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
    Query(query): Query<QueueQuery>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let identity = visible_identity(&state.store, &viewer, &scope, &queue).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let capacity = state.store.queue_capacity().await?;
    let admissions = state.store.queue_admissions(std::slice::from_ref(&identity)).await?;
    let todos = state
        .store
        .list_todos(TodoQuery { set: TodoSet::Queues(vec![identity.clone()]), state: None, limit: QUEUE_TODOS_MAX })
        .await?;
    let own: Vec<_> = todos.iter().collect();
    let card = snapshot::card(&identity, &names, &viewer.scope, admissions.first(), &own, &capacity);
    let rows = todos.iter().map(|t| super::view::todo_view(t, admissions.first())).collect();
    let usage = if card.header.manages { usage(&state.store, &identity, admissions.first()).await? } else { None };
    Ok(QueuePage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        card,
        todos: rows,
        cleared: query.cleared,
        usage,
    }
    .into_response())
}

/// The usage section of a queue whose policy limits claims per window (managers only, as the
/// API's policy detail is): the last windows' usage and the last 24 hours' claims.
async fn usage(
    store: &PgStore,
    identity: &QueueIdentity,
    admission: Option<&QueueAdmission>,
) -> Result<Option<UsageView>> {
    let Some(policy) = admission.and_then(|a| a.policy.as_ref()) else { return Ok(None) };
    let (Some(limit), Some(window)) = (policy.max_claims_per_window, policy.window.as_ref()) else { return Ok(None) };
    let detail = store.policy_detail(identity).await?;
    let now = store.now();
    let day_ago = now - TimeDelta::hours(24);
    let oldest = detail.windows.iter().map(|(start, _)| *start).min().unwrap_or(day_ago).min(day_ago);
    let history = store.claim_history(identity, oldest.max(now - TimeDelta::days(USAGE_RETENTION_DAYS))).await?;
    let end_of = |start| window.window_containing(start).1;
    Ok(Some(super::usage::usage_view(limit, window.tz, &detail.windows, end_of, &history, now)))
}

#[derive(Template, WebTemplate)]
#[template(path = "todo.html")]
struct TodoPage {
    nav: Option<Nav>,
    csrf: String,
    todo: super::view::TodoView,
    queue: QueueRef,
    owner: Option<String>,
    dedup_key: Option<String>,
    payload: String,
    result: Option<String>,
    created: LocalTime,
    next_retry: Option<LocalTime>,
    actions: Vec<(&'static str, &'static str)>,
    manages: bool,
}

/// The owner actions a todo in this state offers, as (path segment, button label).
fn actions_for(state: TodoState) -> Vec<(&'static str, &'static str)> {
    match state {
        TodoState::Pending => vec![("claim", "Claim (5-minute lease)")],
        TodoState::Claimed => vec![("complete", "Complete"), ("fail", "Fail"), ("release", "Release")],
        TodoState::Failed => vec![("retry", "Retry now")],
        TodoState::Done | TodoState::Discarded => vec![],
    }
}

/// `GET /todos/{id}`: state, attempts, lease expiry, dedup key, the payload (escaped) and the
/// owner's actions.
pub async fn todo(State(state): State<Board>, headers: HeaderMap, Path(id): Path<String>) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let nav = viewer.nav();
    let csrf = viewer.session.csrf_token.clone();
    let manages_any = viewer.scope.manages.clone();
    let todo = state.store.get_todo(&Actor::Human(viewer.scope.clone()), &id).await?;
    let admissions = state.store.queue_admissions(std::slice::from_ref(&todo.identity)).await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let pretty = |value: &serde_json::Value| serde_json::to_string_pretty(value).unwrap_or_default();
    let mut view = super::view::todo_view(&todo, admissions.first());
    if todo.state != TodoState::Pending {
        view.chip = None;
    }
    Ok(TodoPage {
        nav: Some(nav),
        csrf,
        queue: QueueRef::new(&todo.identity, &names),
        owner: todo.owner.clone(),
        dedup_key: todo.idempotency_key.clone(),
        payload: todo.payload.as_ref().map_or_else(|| "(none)".to_string(), pretty),
        result: todo.result.as_ref().map(pretty),
        created: LocalTime::new(todo.created_at),
        next_retry: todo.next_retry_at.map(LocalTime::new),
        actions: actions_for(todo.state),
        manages: manages_any.contains(&todo.identity),
        todo: view,
    }
    .into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "audit.html")]
struct AuditPage {
    nav: Option<Nav>,
    queue: QueueRef,
    records: Vec<AuditRow>,
}

struct AuditRow {
    at: LocalTime,
    at_zone: String,
    actor: String,
    action: String,
    before: String,
    after: String,
}

/// `GET /queues/{scope}/{queue}/audit`: who changed the policy, when, from what to what.
pub async fn audit(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    let records = state.store.policy_audit(&identity, 500).await?;
    if records.is_empty() {
        // As on the API: a queue that never had a policy is as unknown as a foreign one.
        return Err(PageError::from(Error::not_found()));
    }
    let admissions = state.store.queue_admissions(std::slice::from_ref(&identity)).await?;
    let zone = policy_zone(admissions.first());
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    let show = |value: &Option<serde_json::Value>| value.as_ref().map_or_else(|| "none".into(), |v| v.to_string());
    let records = records
        .iter()
        .map(|r| AuditRow {
            at: LocalTime::new(r.at),
            at_zone: zone_moment(r.at, zone),
            actor: match (&r.actor_human_id, &r.actor_endpoint_id) {
                (_, Some(endpoint)) => format!("endpoint {endpoint}"),
                (Some(human), None) => format!("human {human}"),
                (None, None) => "system".into(),
            },
            action: r.action.clone(),
            before: show(&r.before),
            after: show(&r.after),
        })
        .collect();
    Ok(AuditPage { nav: Some(viewer.nav()), queue: QueueRef::new(&identity, &names), records }.into_response())
}
