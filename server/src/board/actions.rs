//! The owner's state-changing board actions, each a CSRF-checked POST form that redirects to a
//! fixed page: Claim (5-minute lease), Complete, Fail, Release, Retry now on a todo; Remove one
//! pending todo; and "Clear all pending (N)" behind a full confirmation page.
//!
//! Each is the very `Store` call the operator API makes for the same action, with the same
//! actor, so the board can refuse nothing the API allows and allow nothing it refuses.

use super::pages::visible_identity;
use super::signin::{CsrfForm, require, require_form};
use super::snapshot;
use super::view::QueueRef;
use super::{Board, Nav, PageError, PageResult};
use crate::extract::managed_identity;
use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect};
use models::error::Error;
use models::scope::{Actor, HumanScope};
use models::store::prelude::*;
use models::store::{PolicyActor, TodoQuery, TodoSet};
use models::todo::TodoState;

/// The lease a board Claim takes.
const BOARD_LEASE_SECONDS: i64 = 300;
/// Most pending todos the confirmation page counts (the clear itself has no limit).
const CLEAR_COUNT_MAX: i64 = 10_000;

fn by(human: &HumanScope) -> PolicyActor {
    PolicyActor { human_id: Some(human.human.id.clone()), endpoint_id: None }
}

/// `POST /todos/{id}/{claim|complete|fail|release|retry}`, then back to the todo's page.
pub async fn todo_action(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    let actor = Actor::Human(viewer.scope);
    match action.as_str() {
        "claim" => state.store.claim(&actor, &id, BOARD_LEASE_SECONDS).await.map(|_| ())?,
        "complete" => state.store.complete(&actor, &id, None).await.map(|_| ())?,
        "fail" => state.store.fail(&actor, &id, None).await.map(|_| ())?,
        "release" => state.store.release(&actor, &id).await.map(|_| ())?,
        "retry" => state.store.retry_now(&actor, &id).await.map(|_| ())?,
        _ => return Err(PageError::from(Error::not_found())),
    }
    // As on the API: a freed slot may reopen a deferred queue; a retried todo is new work.
    state.push.capacity_changed();
    // The id went through the store, which found it: it names a todo, not a path of our choosing.
    Ok(Redirect::to(&format!("/todos/{}", urlencode(&id))).into_response())
}

/// `POST /queues/{scope}/{queue}/todos/{id}/remove`: one pending todo, then back to the queue.
pub async fn remove(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue, id)): Path<(String, String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    state.store.discard_todo(&identity, &id, &by(&viewer.scope)).await?;
    Ok(Redirect::to(&queue_path(&identity)).into_response())
}

/// The queue page's path, built from the resolved identity (never from what the request said).
pub fn queue_path(identity: &models::identity::QueueIdentity) -> String {
    QueueRef::new(identity, &Default::default()).href
}

/// Percent-encodes anything outside `[A-Za-z0-9_-]`, for an id placed in a path.
pub fn urlencode(raw: &str) -> String {
    raw.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[derive(Template, WebTemplate)]
#[template(path = "clear_confirm.html")]
struct ClearConfirmPage {
    nav: Option<Nav>,
    csrf: String,
    queue: QueueRef,
    count: usize,
}

/// `GET /queues/{scope}/{queue}/clear`: a full page stating how many pending todos would go.
pub async fn clear_confirm(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
) -> PageResult {
    let viewer = require(&state, &headers).await?;
    // Seeing the queue is not enough to clear it: only its owner scope may.
    visible_identity(&state.store, &viewer, &scope, &queue).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    let pending = state
        .store
        .list_todos(TodoQuery {
            set: TodoSet::Queues(vec![identity.clone()]),
            state: Some(TodoState::Pending),
            limit: CLEAR_COUNT_MAX,
        })
        .await?;
    let names = snapshot::names(&state.store, &viewer.scope).await?;
    Ok(ClearConfirmPage {
        nav: Some(viewer.nav()),
        csrf: viewer.session.csrf_token.clone(),
        queue: QueueRef::new(&identity, &names),
        count: pending.len(),
    }
    .into_response())
}

/// `POST /queues/{scope}/{queue}/clear`: removes every pending todo (deferred ones too; claimed
/// ones stay) and returns to the queue page, which says how many went.
pub async fn clear(
    State(state): State<Board>,
    headers: HeaderMap,
    Path((scope, queue)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult {
    let viewer = require_form(&state, &headers, &form.csrf).await?;
    let identity = managed_identity(&state.store, &viewer.scope, &scope, &queue).await?;
    let removed = state.store.clear_queue(&identity, &by(&viewer.scope)).await?;
    tracing::info!(queue = %identity, removed, human = %viewer.scope.human.id, "queue cleared from the board");
    Ok(Redirect::to(&format!("{}?cleared={removed}", queue_path(&identity))).into_response())
}
