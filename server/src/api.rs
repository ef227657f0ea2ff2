//! The operator API (`/api/v1`, bearer `sbh_`): vend and list endpoints, push and list todos,
//! and the owner's actions on a todo. Tenancy: everything outside the caller's reach is the same
//! 404 `not_found` as something that does not exist.

use crate::extract::{Human, identity_within};
use crate::state::AppState;
use crate::vend::{self, VendRequest};
use crate::wire::{ApiError, ApiResult, batch_items, max_attempts, parse_body, parse_body_or_list, parse_limit};
use crate::wire_types::requests::{
    ClaimRequest, EmptyRequest, ResultRequest, TodoFilter, TodoRequest, TokenRequest, VendBody, integer, read, storable,
};
use crate::wire_types::{
    ClaimedBody, CreatedBody, Detail, EndpointBody, Endpoints, MintedToken, OneTodo, TeamBody, Teams, TodoAnswer,
    TodoPushAnswer, Todos, VendedBody,
};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use engine::pg_store::{hash_token, new_token};
use models::error::{Error, Result};
use models::identity::{Owner, QueueIdentity, ScopeRef};
use models::scope::{Actor, HumanScope, Reach};
use models::store::{Store, TodoQuery, TodoSet};
use models::todo::{CreatedByKind, NewTodo, TodoState, lease_seconds};
use serde_json::{Value, json};
use std::collections::HashMap;

/// `POST /api/v1/endpoints`: vends an endpoint and returns its bearer once.
pub async fn vend<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let body: VendBody = read(&parse_body(&body)?)?;
    let request = VendRequest {
        name: &body.name,
        queues: body.queues.iter().map(String::as_str).collect(),
        verbs: body.verbs.as_ref().map(|verbs| verbs.iter().map(String::as_str).collect()),
        team: body.team.as_deref(),
    };
    let (endpoint, token) = vend::vend(&state.store, &human, &request).await?;
    let mcp_url = state.public_url.absolute(&headers, &format!("/mcp/{}", endpoint.slug));
    let body = VendedBody { endpoint: EndpointBody::from(&endpoint), token, mcp_url };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// `GET /api/v1/endpoints`: the endpoints in the caller's reach.
pub async fn list_endpoints<S: Store>(State(state): State<AppState<S>>, Human(human): Human) -> ApiResult {
    let endpoints = state.store.list_endpoints(&human).await?;
    Ok(axum::Json(Endpoints { endpoints: endpoints.iter().map(EndpointBody::from).collect() }).into_response())
}

/// `POST /api/v1/todos`: one todo (an object: 201 with the new todo, or 200 with `deduped:
/// true`) or a batch (an array of the same objects, at most `TODOS_PER_BATCH_MAX`: one
/// transaction, answered in order; 201 if any was created, else 200).
pub async fn push_todo<S: Store>(State(state): State<AppState<S>>, Human(human): Human, body: Bytes) -> ApiResult {
    let body = parse_body_or_list(&body, "todos")?;
    let Value::Array(items) = &body else {
        let (scope, new) = requested_todo(read(&body)?, &human)?;
        let identity = identity_within(&state.store, &human.reach, &scope, &new.identity.queue).await?;
        let created = state.store.create_todo(NewTodo { identity, ..new }).await?;
        if !created.deduped {
            state.push.work_added();
        }
        let status = if created.deduped { StatusCode::OK } else { StatusCode::CREATED };
        return Ok((status, axum::Json(TodoPushAnswer::One(Box::new(CreatedBody::from(&created))))).into_response());
    };
    let mut requested = Vec::with_capacity(items.len());
    for (index, item) in batch_items(items, "todos")?.iter().enumerate() {
        let within = |error: Error| error.within_item("todos", index);
        requested.push(read(item).and_then(|request| requested_todo(request, &human)).map_err(within)?);
    }
    // Most batches name one or a few queues: each distinct (scope, queue) is resolved once.
    let mut identities: HashMap<(String, String), QueueIdentity> = HashMap::new();
    let mut news = Vec::with_capacity(requested.len());
    for (index, (scope, new)) in requested.into_iter().enumerate() {
        let key = (scope, new.identity.queue.clone());
        let identity = match identities.get(&key) {
            Some(identity) => identity.clone(),
            None => {
                let identity = identity_within(&state.store, &human.reach, &key.0, &new.identity.queue)
                    .await
                    .map_err(|error| error.within_item("todos", index))?;
                identities.insert(key, identity.clone());
                identity
            }
        };
        news.push(NewTodo { identity, ..new });
    }
    let created = state.store.create_todos(news).await?;
    let any_new = created.iter().any(|c| !c.deduped);
    if any_new {
        state.push.work_added();
    }
    let todos = created.iter().map(CreatedBody::from).collect();
    let status = if any_new { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(TodoPushAnswer::Batch(Todos { todos }))).into_response())
}

/// One todo of a push as the caller wrote it: its scope, and the todo with the queue named but
/// not yet resolved (the identity's owner is a placeholder until `identity_within`).
fn requested_todo(request: TodoRequest, human: &HumanScope) -> Result<(String, NewTodo)> {
    let new = NewTodo {
        identity: QueueIdentity::endpoint("", &request.queue.0),
        title: request.title,
        payload: storable(request.payload),
        idempotency_key: request.idempotency_key,
        max_attempts: max_attempts(request.max_attempts)?,
        created_by_kind: CreatedByKind::Human,
        created_by_id: Some(human.human.id.clone()),
    };
    new.validate()?;
    Ok((request.scope.0, new))
}

/// `GET /api/v1/todos?scope=&queue=&state=&limit=`: newest first, within the caller's reach.
pub async fn list_todos<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult {
    let filter = TodoFilter::of(params);
    let todo_state = filter.state.as_deref().map(|s| TodoState::parse("state", s)).transpose()?;
    let limit = parse_limit(
        filter
            .limit
            .as_deref()
            .map(|l| l.parse().map_err(|_| Error::invalid("limit", "limit must be an integer")))
            .transpose()?,
    )?;
    let set = match (filter.scope.as_deref(), filter.queue.as_deref()) {
        (Some(scope), Some(queue)) => {
            TodoSet::Queues(vec![identity_within(&state.store, &human.reach, scope, queue).await?])
        }
        (Some(scope), None) => {
            match state.store.resolve_scope(&human.reach, &ScopeRef::parse("scope", scope)?).await? {
                Owner::Endpoint(id) => TodoSet::Owners(Reach { endpoint_ids: vec![id], team_ids: vec![] }),
                Owner::Team(id) => TodoSet::Owners(Reach { endpoint_ids: vec![], team_ids: vec![id] }),
            }
        }
        (None, Some(_)) => return Err(Error::invalid("scope", "scope is required when queue is given").into()),
        (None, None) => TodoSet::Owners(human.reach.clone()),
    };
    let todos = state.store.list_todos(TodoQuery { set, state: todo_state, limit }).await?;
    let todos = crate::wire::todos_with_admission(&state.store, &todos, Detail::Listed).await?;
    Ok(axum::Json(Todos { todos }).into_response())
}

/// `POST /api/v1/todos/{id}/{claim|complete|fail|release|retry}`: the owner's board actions.
pub async fn todo_action<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path((id, action)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let body = if body.is_empty() { json!({}) } else { parse_body(&body)? };
    let actor = Actor::Human(human);
    let todo = match action.as_str() {
        "claim" => {
            let request: ClaimRequest = read(&body)?;
            let lease = lease_seconds(integer(request.lease_ttl_seconds))?;
            let claimed = state.store.claim(&actor, &id, lease).await?;
            return Ok(axum::Json(TodoAnswer::Claimed(ClaimedBody::from(&claimed))).into_response());
        }
        "complete" => {
            let request: ResultRequest = read(&body)?;
            state.store.complete(&actor, &id, storable(request.result)).await?
        }
        "fail" => {
            let request: ResultRequest = read(&body)?;
            state.store.fail(&actor, &id, storable(request.result)).await?
        }
        "release" => {
            read::<EmptyRequest>(&body)?;
            state.store.release(&actor, &id).await?
        }
        "retry" => {
            read::<EmptyRequest>(&body)?;
            state.store.retry_now(&actor, &id).await?
        }
        _ => return Err(ApiError(Error::not_found())),
    };
    // A freed in-flight slot may reopen a deferred queue (REQ-8); a retried todo is new work.
    state.push.capacity_changed();
    Ok(axum::Json(TodoAnswer::Todo(OneTodo::of(&todo))).into_response())
}

/// The longest an operator token may be minted for: one year.
pub const MAX_TOKEN_LIFETIME_SECONDS: i64 = 366 * 24 * 3600;

/// Longest operator token label accepted.
pub const TOKEN_LABEL_LENGTH_MAX: usize = 100;

/// `POST /api/v1/tokens {label?, expires_in_seconds?}`: another operator API token for the signed-in human; shown once.
/// The body is required, `{}` at least: a create names what it creates, as every other create of
/// the API does, and a body that is not a JSON object is `invalid_argument` (API conventions).
pub async fn mint_token<S: Store>(State(state): State<AppState<S>>, Human(human): Human, body: Bytes) -> ApiResult {
    let request: TokenRequest = read(&parse_body(&body)?)?;
    let (label, expires_in_seconds) = (request.label, integer(request.expires_in_seconds));
    let token = mint_operator_token(&state.store, &human.human.id, label.as_deref(), expires_in_seconds).await?;
    let body = MintedToken { token, label, human_id: human.human.id };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// Mints another `sbh_` operator token for `human_id` and returns it (shown once; only its
/// digest is stored): the one rule of the operator API and the board. The label is at most
/// [`TOKEN_LABEL_LENGTH_MAX`] characters; the token expires `expires_in_seconds` from now, 1 to
/// [`MAX_TOKEN_LIFETIME_SECONDS`], or never when None. Refusals name `label` or
/// `expires_in_seconds`.
pub(crate) async fn mint_operator_token<S: Store>(
    store: &S,
    human_id: &str,
    label: Option<&str>,
    expires_in_seconds: Option<i64>,
) -> Result<String> {
    if label.is_some_and(|l| l.chars().count() > TOKEN_LABEL_LENGTH_MAX) {
        return Err(Error::invalid("label", format!("label must be at most {TOKEN_LABEL_LENGTH_MAX} characters")));
    }
    if expires_in_seconds.is_some_and(|secs| !(1..=MAX_TOKEN_LIFETIME_SECONDS).contains(&secs)) {
        return Err(Error::invalid(
            "expires_in_seconds",
            format!("expires_in_seconds must be between 1 and {MAX_TOKEN_LIFETIME_SECONDS}"),
        ));
    }
    let token = new_token(crate::auth::HUMAN_TOKEN_PREFIX);
    store.mint_token(human_id, label, &hash_token(&token), expires_in_seconds).await?;
    Ok(token)
}

/// `GET /api/v1/teams`: the caller's teams and their role in each.
pub async fn list_teams<S: Store>(State(state): State<AppState<S>>, Human(human): Human) -> ApiResult {
    let teams = state.store.list_teams(&human).await?;
    let teams = teams.iter().map(|(team, role)| TeamBody::of(team, *role)).collect();
    Ok(axum::Json(Teams { teams }).into_response())
}

/// `GET /api/v1/todos/{id}`: one todo in the caller's reach, with payload, result and, when
/// pending in a budgeted queue, its admission status.
pub async fn show_todo<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path(id): Path<String>,
) -> ApiResult {
    let todo = state.store.get_todo(&Actor::Human(human), &id).await?;
    let shown = crate::wire::todos_with_admission(&state.store, std::slice::from_ref(&todo), Detail::Full).await?;
    let todo = shown.into_iter().next().ok_or_else(|| Error::internal("a read todo was not shown"))?;
    Ok(axum::Json(OneTodo { todo }).into_response())
}
