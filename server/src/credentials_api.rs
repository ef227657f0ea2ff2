//! Credential management (contract §3, issue #14): a human's own operator tokens (list, revoke)
//! and the MCP credential of an endpoint they manage (revoke keeping its work, rotate).
//!
//! A token id that is not the caller's, or an endpoint they do not manage, is 404 `not_found`,
//! exactly as for one that does not exist.

use crate::auth::ENDPOINT_TOKEN_PREFIX;
use crate::extract::{Human, ManagedEndpoint};
use crate::state::AppState;
use crate::wire::ApiResult;
use crate::wire_types::{RotatedToken, TokenBody, Tokens};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use engine::pg_store::{hash_token, new_token};
use models::error::Result;
use models::store::Store;

/// `GET /api/v1/tokens`: the caller's unrevoked operator tokens, never the secret or its digest.
pub async fn list_tokens<S: Store>(State(state): State<AppState<S>>, Human(human): Human) -> ApiResult {
    let tokens = state.store.list_tokens(&human.human.id).await?;
    Ok(axum::Json(Tokens { tokens: tokens.iter().map(TokenBody::from).collect() }).into_response())
}

/// `DELETE /api/v1/tokens/{id}`: revokes one of the caller's own tokens (it is 401 from now on).
pub async fn revoke_token<S: Store>(
    State(state): State<AppState<S>>,
    Human(human): Human,
    Path(id): Path<String>,
) -> ApiResult {
    state.store.revoke_token(&human.human.id, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /api/v1/endpoints/{ref}/revoke`: the endpoint's MCP credential stops working (401) and
/// its open streams on this replica close; the endpoint and its todos stay. Answers 204.
pub async fn revoke_endpoint<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id }: ManagedEndpoint,
) -> ApiResult {
    revoke(&state, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Revokes endpoint `id`'s MCP credential and closes its open streams on this replica. The
/// caller has checked that the human manages it (the API and the board alike).
pub(crate) async fn revoke<S: Store>(state: &AppState<S>, id: &str) -> Result<()> {
    state.store.revoke_endpoint(id).await?;
    state.push.close(&[], Some(id));
    Ok(())
}

/// A new MCP credential for endpoint `id` (returned once); the old one fails at once and its
/// streams on this replica close. The caller has checked that the human manages it.
pub(crate) async fn rotate<S: Store>(state: &AppState<S>, id: &str) -> Result<String> {
    let token = new_token(ENDPOINT_TOKEN_PREFIX);
    state.store.rotate_endpoint(id, &hash_token(&token)).await?;
    state.push.close(&[], Some(id));
    Ok(token)
}

/// `POST /api/v1/endpoints/{ref}/rotate`: a new MCP credential `{token}`, shown once; the old one
/// is 401 at once and a revoked endpoint is live again.
pub async fn rotate_endpoint<S: Store>(
    State(state): State<AppState<S>>,
    ManagedEndpoint { id }: ManagedEndpoint,
) -> ApiResult {
    let token = rotate(&state, &id).await?;
    Ok(axum::Json(RotatedToken { token }).into_response())
}
