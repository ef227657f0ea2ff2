//! The router, built over any `Store`, so `switchboard serve` runs it on `PgStore` and the
//! simulation runs the very same router on the reference model.
//!
//! It only maps paths to handlers and layers the body caps and response headers: it depends on
//! the handler modules, and no handler depends on it (they share `state`).

use crate::response_headers::security_headers;
use crate::state::BODY_LIMIT_BYTES;
use crate::{admission_api, api, credentials_api, intake_api, mcp, metrics, openapi, push, webhooks, wire};
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use models::error::Error;
use models::store::Store;

/// Where the simulation and the bench have always found the state.
pub use crate::state::AppState;

pub fn router<S: Store>(state: AppState<S>) -> Router {
    let routes = Router::new()
        .route("/healthz", get(healthz::<S>))
        .route("/metrics", get(metrics::scrape::<S>))
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
        .route("/api/v1/openapi.json", get(openapi::serve))
        .route("/ingest/{webhook_id}", post(webhooks::ingest::<S>))
        .route("/mcp/{slug}", post(mcp::handle::<S>).get(push::stream::open::<S>).delete(mcp::end_session::<S>))
        .fallback(|| async { wire::ApiError(Error::not_found()) });
    // Inside the security headers, so a refusal carries them too.
    let routes = match state.load.clone() {
        Some(load) => routes.layer(middleware::from_fn_with_state(load, crate::load::guard)),
        None => routes,
    };
    routes
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
