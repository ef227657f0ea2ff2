//! Who is asking, and for which queue or endpoint: the operator API's repeated preamble as axum
//! extractors, so a handler's signature says what it needs and its body starts at the work.
//!
//! `Human` authenticates the `sbh_` bearer; `ManagedQueue` adds `{scope}/{queue}` resolved to an
//! identity the human manages; `ManagedEndpoint` adds `{reference}` resolved to an endpoint they
//! manage. Authentication always runs first, so a missing or bad bearer is 401 before any 404.
//! Anything foreign or absent is the same 404 `not_found`; this module never decides more than
//! that (tenancy lives in the store's `resolve_scope`).

use crate::auth::require_human;
use crate::state::AppState;
use crate::wire::ApiError;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use models::error::{Error, Result};
use models::identity::{Owner, QueueIdentity, ScopeRef, validate_queue_name};
use models::scope::{HumanScope, Reach};
use models::store::Store;
use serde::Deserialize;

/// The authenticated human behind an operator API call.
pub struct Human(pub HumanScope);

impl<S: Store> FromRequestParts<AppState<S>> for Human {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> std::result::Result<Self, ApiError> {
        Ok(Human(require_human(&state.store, &parts.headers).await?))
    }
}

/// `{scope}/{queue}` of a route, as written in the path (other parameters are ignored).
#[derive(Deserialize)]
struct QueuePath {
    scope: String,
    queue: String,
}

/// A queue identity the authenticated human manages (owner scope), from `{scope}/{queue}`.
pub struct ManagedQueue {
    pub human: HumanScope,
    pub identity: QueueIdentity,
}

impl<S: Store> FromRequestParts<AppState<S>> for ManagedQueue {
    /// The error envelope, or axum's own answer to a path that does not decode (as before).
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> std::result::Result<Self, Response> {
        let Human(human) = Human::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        let Path(path) =
            Path::<QueuePath>::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        let identity = managed_identity(&state.store, &human, &path.scope, &path.queue)
            .await
            .map_err(|error| ApiError(error).into_response())?;
        Ok(ManagedQueue { human, identity })
    }
}

/// `{reference}` of a route (other parameters are ignored).
#[derive(Deserialize)]
struct EndpointPath {
    reference: String,
}

/// The id of an endpoint the authenticated human manages, from `{reference}` (slug or id).
pub struct ManagedEndpoint {
    pub id: String,
}

impl<S: Store> FromRequestParts<AppState<S>> for ManagedEndpoint {
    /// The error envelope, or axum's own answer to a path that does not decode (as before).
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> std::result::Result<Self, Response> {
        let Human(human) = Human::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        let Path(path) =
            Path::<EndpointPath>::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        let id =
            managed_endpoint(&state.store, &human, path.reference).await.map_err(|e| ApiError(e).into_response())?;
        Ok(ManagedEndpoint { id })
    }
}

/// The id of the endpoint `reference` (slug or id) names, when the human manages it; anything
/// else is `not_found`. Shared by the API's extractor and the board's endpoint pages.
pub(crate) async fn managed_endpoint<S: Store>(store: &S, human: &HumanScope, reference: String) -> Result<String> {
    match store.resolve_scope(&human.manages, &ScopeRef::Endpoint(reference)).await? {
        Owner::Endpoint(id) => Ok(id),
        Owner::Team(_) => Err(Error::not_found()),
    }
}

/// Resolves `{scope}/{queue}` to an identity the human manages; otherwise `not_found`. Shared by
/// every route that acts for a queue's owner scope (policies, cancellation, purge), on the API
/// and the board.
pub(crate) async fn managed_identity<S: Store>(
    store: &S,
    human: &HumanScope,
    scope: &str,
    queue: &str,
) -> Result<QueueIdentity> {
    identity_within(store, &human.manages, scope, queue).await
}

/// Resolves `scope` + `queue` to a queue identity within `within` (what the human reaches or
/// manages); otherwise `not_found`.
pub(crate) async fn identity_within<S: Store>(
    store: &S,
    within: &Reach,
    scope: &str,
    queue: &str,
) -> Result<QueueIdentity> {
    let scope = ScopeRef::parse("scope", scope)?;
    validate_queue_name("queue", queue)?;
    let owner = store.resolve_scope(within, &scope).await?;
    Ok(QueueIdentity { owner, queue: queue.to_string() })
}
