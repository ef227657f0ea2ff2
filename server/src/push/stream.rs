//! `GET /mcp/{slug}` with `Accept: text/event-stream`: the streamable-HTTP server stream of one
//! MCP session (contract §5), which carries doorbells as `notifications/claude/channel`.
//!
//! Same bearer rules as `POST`; the session must be one `initialize` opened for this endpoint
//! (`Mcp-Session-Id`). On attach the stream replays what the client missed after its
//! `Last-Event-ID` (bounded), and may get one reconnect digest. Keep-alive comments keep proxies
//! from closing an idle stream. The stream ends when the client goes, or when the session or its
//! endpoint is revoked or deleted (found on the replica's session refresh, or announced).

use super::{StreamSignal, tasks};
use crate::mcp::transport::{SESSION_HEADER, transport_agent};
use crate::state::AppState;
use crate::wire::ApiError;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use models::error::{Code, Error};
use models::store::Store;
use std::convert::Infallible;
use std::time::Duration;

/// How often an idle stream gets a keep-alive comment.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(15);

pub async fn open<S: Store>(
    State(state): State<AppState<S>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    let agent = match transport_agent(&state, &headers, &slug).await {
        Ok(agent) => agent,
        Err(refused) => return refused,
    };
    let accepts_stream = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if !accepts_stream {
        return (
            StatusCode::NOT_ACCEPTABLE,
            "GET /mcp/{slug} opens the event stream: send Accept: text/event-stream\n",
        )
            .into_response();
    }
    let Some(session_id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string) else {
        return ApiError(Error::invalid(
            "Mcp-Session-Id",
            "the stream needs the Mcp-Session-Id that initialize answered",
        ))
        .into_response();
    };
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i64>().ok());
    let hub = state.push.clone();
    match state.store.attach_session(&agent.endpoint_id, &session_id, hub.replica_id()).await {
        Ok(true) => {}
        // Streamable HTTP: an unknown session is 404, and the client starts a new one.
        Ok(false) => {
            return ApiError(Error::new(Code::NotFound, "unknown MCP session; initialize again")).into_response();
        }
        Err(error) => return ApiError(error).into_response(),
    }
    let receiver = hub.register(&session_id, &agent.endpoint_id, last_event_id.unwrap_or(0));
    tracing::info!(endpoint = %agent.endpoint_id, session = %session_id, "MCP stream attached");

    // What the client missed, in order and before anything announced since it attached (issue
    // #51: a newer ring sent first would make a client that breaks off resume past the older),
    // then (bounded, rate-limited in the store) a reconnect digest.
    let missed = match last_event_id {
        Some(after) => state.store.rings_since(&session_id, after).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "could not replay missed doorbells");
            Vec::new()
        }),
        None => Vec::new(),
    };
    hub.replayed(&session_id, &missed);
    match state.store.reconnect_digest(&agent.endpoint_id, &session_id).await {
        Ok(report) => tasks::deliver(&hub, &report),
        Err(error) => tracing::warn!(%error, "reconnect digest failed"),
    }

    let guard = DetachOnDrop { state: state.clone(), session_id: session_id.clone() };
    let events = futures::stream::unfold((receiver, guard), |(mut receiver, guard)| async move {
        let _ = &guard;
        match receiver.recv().await {
            Some(StreamSignal::Event(event)) => {
                let sse = Event::default().id(event.seq.to_string()).event("message").data(event.message.to_string());
                Some((Ok::<Event, Infallible>(sse), (receiver, guard)))
            }
            Some(StreamSignal::Close) | None => None,
        }
    });
    let keep_alive = KeepAlive::new().interval(KEEP_ALIVE_INTERVAL).text("keep-alive");
    let mut response = Sse::new(events).keep_alive(keep_alive).into_response();
    if let Ok(value) = session_id.parse() {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// Detaches the session in the store when the stream ends, whichever way it ends.
struct DetachOnDrop<S: Store> {
    state: AppState<S>,
    session_id: String,
}

impl<S: Store> Drop for DetachOnDrop<S> {
    fn drop(&mut self) {
        let state = self.state.clone();
        let session_id = std::mem::take(&mut self.session_id);
        state.push.unregister(&session_id, false);
        // Drop cannot await; the detach runs on the runtime if one is still there.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = state.store.detach_session(&session_id, state.push.replica_id()).await {
                    tracing::debug!(%error, "detach failed; the session goes stale on its own");
                }
                tracing::info!(session = %session_id, "MCP stream detached");
            });
        }
    }
}
