//! Owner cancellation and intake capacity on the operator API (intake-capacity.md):
//! `POST /api/v1/queues/{scope}/{queue}/clear`, `DELETE /api/v1/queues/{scope}/{queue}/todos/{id}`,
//! `GET | PATCH /api/v1/system/queue-capacity`, `PATCH /api/v1/todos/{id}` (editing, governed
//! by provenance) and `DELETE /api/v1/endpoints/{ref}` (purge).
//!
//! Cancellation is for the queue identity's owner scope, the same people who manage its
//! admission policy; anyone else gets the same 404 as for a queue that does not exist.

use crate::admission_api::by;
use crate::extract::{Human, ManagedQueue};
use crate::state::AppState;
use crate::wire::{ApiResult, parse_body};
use crate::wire_types::requests::{CapacityRequest, Integer, StorableJson, TodoEdit, read};
use crate::wire_types::{CapacityBody, ClearedBody, OneTodo, PurgedBody};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use models::error::{Code, Error};
use models::identity::ScopeRef;
use models::store::Store;

/// `POST /api/v1/queues/{scope}/{queue}/clear` → `{removed: N}`.
pub async fn clear<S: Store>(
    State(state): State<AppState<S>>,
    ManagedQueue { human, identity }: ManagedQueue,
) -> ApiResult {
    let removed = state.store.clear_queue(&identity, &by(&human)).await?;
    tracing::info!(queue = %identity, removed, human = %human.human.id, "queue cleared");
    Ok(axum::Json(ClearedBody { removed }).into_response())
}

/// `DELETE /api/v1/queues/{scope}/{queue}/todos/{id}` → 204, or 409 `not_pending` with `state`.
pub async fn remove<S: Store>(
    State(state): State<AppState<S>>,
    ManagedQueue { human, identity }: ManagedQueue,
    Path((_, _, id)): Path<(String, String, String)>,
) -> ApiResult {
    state.store.discard_todo(&identity, &id, &by(&human)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /api/v1/system/queue-capacity`: any signed-in human.
pub async fn show_capacity<S: Store>(State(state): State<AppState<S>>, _: Human) -> ApiResult {
    Ok(axum::Json(CapacityBody::from(&state.store.queue_capacity().await?)).into_response())
}

/// `PATCH /api/v1/system/queue-capacity {max_pending_per_queue}`: instance admins only.
pub async fn set_capacity<S: Store>(State(state): State<AppState<S>>, Human(human): Human, body: Bytes) -> ApiResult {
    if !human.human.instance_admin {
        return Err(Error::new(Code::Forbidden, "only an instance admin may change the queue capacity").into());
    }
    let request: CapacityRequest = read(&parse_body(&body)?)?;
    let Integer(max) = request.max_pending_per_queue;
    let capacity = state.store.set_queue_capacity(max, &human.human.id).await?;
    Ok(axum::Json(CapacityBody::from(&capacity)).into_response())
}

/// `PATCH /api/v1/todos/{id} {title?, payload?}`: only the human who created a pending todo.
pub async fn edit<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let TodoEdit { title, payload } = read(&parse_body(&body)?)?;
    let payload = payload.map(|StorableJson(payload)| payload);
    if title.is_none() && payload.is_none() {
        return Err(Error::invalid("title", "give a title, a payload, or both").into());
    }
    let todo = state.store.edit_todo(&human, &id, title, payload).await?;
    Ok(axum::Json(OneTodo::of(&todo)).into_response())
}

/// `DELETE /api/v1/queues/{scope}/{queue}`: deletes the queue identity with every todo of it,
/// pending and claimed, and its policy (purge). Answers `{purged: N}`.
pub async fn purge<S: Store>(
    State(state): State<AppState<S>>,
    ManagedQueue { human, identity }: ManagedQueue,
) -> ApiResult {
    let purged = state.store.purge_queue(&identity, &by(&human)).await?;
    Ok(axum::Json(PurgedBody { purged }).into_response())
}

/// `DELETE /api/v1/endpoints/{ref}`: the endpoint and every todo of its queues (purge).
pub async fn delete_endpoint<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path(reference): Path<String>,
) -> ApiResult {
    state.store.delete_endpoint(&human, &ScopeRef::Endpoint(reference)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
