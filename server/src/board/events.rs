//! `GET /events`: the board's live header stream (SPEC-0030 REQ-11 "The header counts MUST
//! update live"), session-scoped and best effort; a reload always shows database truth.
//!
//! Design: every second, per open board, re-read the viewer's policies from the database and
//! send each header fragment whose rendered HTML changed since the last send. Reading the
//! database, not this process's events, means a claim committed on any replica (or by MCP, or by
//! the sweeps) shows up without LISTEN/NOTIFY. The cost is a few small queries per open board per
//! second (session, scope, policies with status, capacity), bounded by `STREAM_LIFETIME`.
//! The script announces a change to exhausted, paused or unavailable in the polite announcer
//! ("investigations is now exhausted"), comparing the fragment's `data-status` with the shown one.

use super::Board;
use super::signin::viewer;
use super::snapshot;
use super::view::Names;
use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::watch;

/// How often an open board re-reads its headers.
const TICK: Duration = Duration::from_secs(1);
/// A stream ends after this long and the browser's EventSource reconnects by itself (it also
/// re-checks the session, and a stale connection cannot live forever).
const STREAM_LIFETIME: Duration = Duration::from_secs(300);
/// The reconnect delay the browser is told to use.
const RETRY: Duration = Duration::from_secs(1);

/// The server's stop signal: open streams end at once so a graceful stop does not wait on them.
#[derive(Clone)]
pub struct Shutdown(pub watch::Receiver<bool>);

/// What one stream remembers between ticks: per header key, the version it sent.
struct Tick {
    state: Board,
    headers: HeaderMap,
    names: Names,
    sent: HashMap<String, String>,
    outbox: VecDeque<Event>,
    shutdown: watch::Receiver<bool>,
    deadline: tokio::time::Instant,
    ended: bool,
}

/// `GET /events`: 401 without a live session; otherwise `header` events
/// `{key, version, html, row_html}` as headers change: `html` for a queue page's header,
/// `row_html` for the board table's row of the same queue.
pub async fn stream(
    State(state): State<Board>,
    Extension(shutdown): Extension<Shutdown>,
    headers: HeaderMap,
) -> Response {
    let viewer = match viewer(&state, &headers, false).await {
        Ok(Some(viewer)) => viewer,
        Ok(None) => return (StatusCode::UNAUTHORIZED, "sign in first\n").into_response(),
        Err(_) => return (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response(),
    };
    let names = snapshot::names(&state.store, &viewer.scope).await.unwrap_or_default();
    let tick = Tick {
        state,
        headers,
        names,
        sent: HashMap::new(),
        outbox: VecDeque::from([Event::default().retry(RETRY).comment("live headers")]),
        shutdown: shutdown.0,
        deadline: tokio::time::Instant::now() + STREAM_LIFETIME,
        ended: false,
    };
    let events = stream::unfold(tick, |mut tick| async move {
        loop {
            if let Some(event) = tick.outbox.pop_front() {
                return Some((Ok::<Event, Infallible>(event), tick));
            }
            if tick.ended || *tick.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = tick.shutdown.changed() => return None,
            }
            if tokio::time::Instant::now() >= tick.deadline {
                return None;
            }
            tick.read().await;
        }
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

impl Tick {
    /// One re-read: queue the fragments that changed, or end the stream if the session did.
    async fn read(&mut self) {
        let viewer = match viewer(&self.state, &self.headers, false).await {
            Ok(Some(viewer)) => viewer,
            Ok(None) => {
                self.outbox.push_back(Event::default().event("signed-out").data("{}"));
                self.ended = true;
                return;
            }
            // Best effort: a database hiccup skips a tick; the next one catches up.
            Err(_) => return,
        };
        let Ok(headers) = snapshot::live_headers(&self.state.store, &viewer.scope, &self.names, viewer.zone()).await
        else {
            return;
        };
        for header in headers {
            let previous = self.sent.get(&header.queue.key);
            if previous.is_some_and(|version| *version == header.version) {
                continue;
            }
            let data = HeaderEvent {
                key: &header.queue.key,
                version: &header.version,
                html: &header.fragment_html,
                row_html: &header.row_html,
            };
            let Ok(data) = serde_json::to_string(&data) else { continue };
            self.outbox.push_back(Event::default().event("header").data(data));
            self.sent.insert(header.queue.key.clone(), header.version.clone());
        }
    }
}

/// A `header` event's data: a queue's header fragment and table row as rendered now, and the
/// version the page compares with what it holds.
#[derive(serde::Serialize)]
struct HeaderEvent<'a> {
    key: &'a str,
    version: &'a str,
    html: &'a str,
    row_html: &'a str,
}
