//! The router, built over any `Store`, so `switchboard serve` runs it on `PgStore` and the
//! simulation runs the very same router on the reference model.

use crate::admission_api::{self, WriteLimiter};
use crate::{api, credentials_api, intake_api, mcp, push, webhooks};
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use models::error::{Code, Error};
use models::store::Store;
use std::sync::Arc;

/// Largest request body the API and MCP accept (base-system §7: `/api/v1` caps at 64 KiB).
pub const BODY_LIMIT_BYTES: usize = 64 * 1024;

/// What every handler shares. Cheap to clone.
pub struct AppState<S: Store> {
    pub store: S,
    /// Limiter on admission policy writes, per human (operator API) and per endpoint (MCP)
    /// (SPEC-0030 Security Requirements).
    pub admission_writes: Arc<WriteLimiter>,
    /// The `/metrics` credential, queue-label limiter and collection-error counts (SPEC-0023).
    pub metrics: Arc<crate::metrics::MetricsConfig>,
    /// This replica's MCP streams and the push loops' nudges (REQ-8).
    pub push: Arc<crate::push::Hub>,
    /// Which addresses notify hooks may call (the SSRF guard's setting).
    pub hook_addresses: crate::hook_sender::AddressPolicy,
}

impl<S: Store> AppState<S> {
    pub fn new(store: S) -> Self {
        AppState {
            store,
            admission_writes: Arc::default(),
            metrics: Arc::new(crate::metrics::MetricsConfig::closed()),
            push: Arc::new(crate::push::Hub::new("local")),
            hook_addresses: crate::hook_sender::AddressPolicy::PublicOnly,
        }
    }
}

impl<S: Store> Clone for AppState<S> {
    fn clone(&self) -> Self {
        AppState {
            store: self.store.clone(),
            admission_writes: self.admission_writes.clone(),
            metrics: self.metrics.clone(),
            push: self.push.clone(),
            hook_addresses: self.hook_addresses,
        }
    }
}

pub fn router<S: Store>(state: AppState<S>) -> Router {
    Router::new()
        .route("/healthz", get(healthz::<S>))
        .route("/metrics", get(crate::metrics::scrape::<S>))
        .route("/api/v1/endpoints", post(api::vend::<S>).get(api::list_endpoints::<S>))
        .route("/api/v1/endpoints/{reference}", delete(intake_api::delete_endpoint::<S>))
        .route(
            "/api/v1/endpoints/{reference}/presence",
            get(push::api::show_presence::<S>).put(push::api::put_presence::<S>).delete(push::api::clear_presence::<S>),
        )
        .route("/api/v1/endpoints/{reference}/shift", put(push::api::put_shift::<S>))
        .route("/api/v1/endpoints/{reference}/hooks", get(push::api::list_hooks::<S>).post(push::api::add_hook::<S>))
        .route("/api/v1/endpoints/{reference}/hooks/{hook_id}", delete(push::api::remove_hook::<S>))
        .route("/api/v1/endpoints/{reference}/hooks/{hook_id}/test", post(push::api::test_hook::<S>))
        .route("/api/v1/todos", post(api::push_todo::<S>).get(api::list_todos::<S>))
        .route("/api/v1/todos/{id}", get(api::show_todo::<S>).patch(intake_api::edit::<S>))
        .route("/api/v1/queues/{scope}/{queue}", delete(intake_api::purge::<S>))
        .route("/api/v1/queues/{scope}/{queue}/clear", post(intake_api::clear::<S>))
        .route("/api/v1/queues/{scope}/{queue}/todos/{id}", delete(intake_api::remove::<S>))
        .route(
            "/api/v1/system/queue-capacity",
            get(intake_api::show_capacity::<S>)
                .patch(intake_api::set_capacity::<S>)
                .layer(DefaultBodyLimit::max(admission_api::POLICY_BODY_LIMIT_BYTES)),
        )
        .route("/api/v1/todos/{id}/{action}", post(api::todo_action::<S>))
        .route("/api/v1/tokens", post(api::mint_token::<S>).get(credentials_api::list_tokens::<S>))
        .route("/api/v1/tokens/{id}", delete(credentials_api::revoke_token::<S>))
        .route("/api/v1/endpoints/{reference}/revoke", post(credentials_api::revoke_endpoint::<S>))
        .route("/api/v1/endpoints/{reference}/rotate", post(credentials_api::rotate_endpoint::<S>))
        .route("/api/v1/teams", get(api::list_teams::<S>))
        .route("/api/v1/admission", get(admission_api::list::<S>))
        .route(
            "/api/v1/admission/{scope}/{queue}",
            get(admission_api::show::<S>)
                .put(admission_api::put::<S>)
                .delete(admission_api::delete::<S>)
                .layer(DefaultBodyLimit::max(admission_api::POLICY_BODY_LIMIT_BYTES)),
        )
        .route("/api/v1/admission/{scope}/{queue}/audit", get(admission_api::audit::<S>))
        .route("/api/v1/webhooks", post(webhooks::create::<S>).get(webhooks::list::<S>))
        .route("/api/v1/webhooks/{id}", delete(webhooks::delete::<S>))
        .route("/api/v1/webhooks/{id}/rotate", post(webhooks::rotate::<S>))
        .route("/api/v1/openapi.json", get(crate::openapi::serve))
        .route("/ingest/{webhook_id}", post(webhooks::ingest::<S>))
        .route("/mcp/{slug}", post(mcp::handle::<S>).get(push::stream::open::<S>))
        .fallback(|| async { crate::wire::ApiError(Error::not_found()) })
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .layer(middleware::map_response(security_headers))
        .with_state(state)
}

/// `GET /healthz`: 200 once the database answers, 503 otherwise.
async fn healthz<S: Store>(State(state): State<AppState<S>>) -> Response {
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response(),
    }
}

/// Headers every response carries, and the error envelope on bodies the framework refused
/// before a handler ran (an oversized body is 413 `payload_too_large`).
pub(crate) async fn security_headers(response: Response) -> Response {
    let mut response = if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_json(&response) {
        crate::wire::ApiError(Error::new(
            Code::PayloadTooLarge,
            format!("request body exceeds {BODY_LIMIT_BYTES} bytes"),
        ))
        .into_response()
    } else {
        response
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

fn is_json(response: &Response) -> bool {
    response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}
