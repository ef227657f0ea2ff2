//! Push helpers for the black-box tests: an MCP session whose server stream is read in the
//! background (what an agent's client does), and a notify-hook receiver on loopback that
//! records every call (what an owner's URL sees).

#![allow(dead_code)]

use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Events that arrived on one stream, oldest first.
#[derive(Clone, Default)]
pub struct Events {
    seen: Arc<Mutex<Vec<Value>>>,
    arrived: Arc<Notify>,
    /// Event ids (`id:` lines), in arrival order.
    ids: Arc<Mutex<Vec<i64>>>,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl Events {
    pub fn all(&self) -> Vec<Value> {
        self.seen.lock().expect("events").clone()
    }

    /// Waits until at least `count` events arrived; panics after `within`.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.arrived.notified();
            let seen = self.all();
            if seen.len() >= count {
                return seen;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("expected {count} stream events within {within:?}, got {}: {seen:?}", seen.len());
            }
        }
    }

    pub fn ids(&self) -> Vec<i64> {
        self.ids.lock().expect("ids").clone()
    }

    /// Waits until the server ended the stream; panics after `within`.
    pub async fn wait_closed(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while !self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            let notified = self.arrived.notified();
            if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("the stream stayed open for {within:?}");
            }
        }
    }

    fn push(&self, event: Value) {
        self.seen.lock().expect("events").push(event);
        self.arrived.notify_waiters();
    }
}

/// `initialize` on `/mcp/{slug}`: the session id the server answered.
pub async fn initialize(base: &str, slug: &str, token: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("{base}/mcp/{slug}"))
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "blackbox", "version": "1"}}}))
        .send()
        .await
        .expect("initialize");
    assert_eq!(response.status().as_u16(), 200);
    response.headers().get("mcp-session-id").expect("Mcp-Session-Id header").to_str().expect("ascii").to_string()
}

/// Opens the session's stream on `base` (any replica) and reads it in the background. Returns
/// once the server answered the GET, so the stream is attached.
pub async fn attach(base: &str, slug: &str, token: &str, session: &str) -> Events {
    attach_after(base, slug, token, session, None).await
}

/// `attach`, resuming after event `last_event_id` (`Last-Event-ID`).
pub async fn attach_after(base: &str, slug: &str, token: &str, session: &str, last_event_id: Option<i64>) -> Events {
    let mut request = reqwest::Client::new()
        .get(format!("{base}/mcp/{slug}"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session);
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id.to_string());
    }
    let mut response = request.send().await.expect("GET stream");
    assert_eq!(response.status().as_u16(), 200, "stream refused");
    let events = Events::default();
    let sink = events.clone();
    tokio::spawn(async move {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let data: String = block.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim).collect();
                let id = block.lines().find_map(|line| line.strip_prefix("id:")).and_then(|id| id.trim().parse().ok());
                if let Ok(message) = serde_json::from_str::<Value>(&data) {
                    if let Some(id) = id {
                        sink.ids.lock().expect("ids").push(id);
                    }
                    sink.push(message);
                }
            }
        }
        sink.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        sink.arrived.notify_waiters();
    });
    events
}

/// Whether a stream event is a doorbell naming `todo_id`.
pub fn names_todo(event: &Value, todo_id: &str) -> bool {
    event["method"] == "notifications/claude/channel" && event["params"]["meta"]["todo_id"] == todo_id
}

/// One call a hook receiver got.
#[derive(Debug, Clone)]
pub struct HookHit {
    pub msg_id: String,
    pub body: Value,
}

/// How the receiver answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ok,
    Fail,
    /// Never answers the first call (its sender must give up or die); answers 200 afterwards.
    HangFirst,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    hits: Arc<Mutex<Vec<HookHit>>>,
    arrived: Arc<Notify>,
}

impl Receiver {
    pub async fn start(answer: Answer) -> Receiver {
        use axum::extract::State;
        type Shared = (Arc<Mutex<Vec<HookHit>>>, Arc<Notify>, Answer);
        async fn record(
            State((hits, arrived, answer)): State<Shared>,
            headers: axum::http::HeaderMap,
            body: axum::body::Bytes,
        ) -> axum::http::StatusCode {
            let msg_id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let first = {
                let mut hits = hits.lock().expect("hits");
                hits.push(HookHit { msg_id, body });
                hits.len() == 1
            };
            arrived.notify_waiters();
            match answer {
                Answer::Ok => axum::http::StatusCode::OK,
                Answer::Fail => axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                Answer::HangFirst if first => std::future::pending().await,
                Answer::HangFirst => axum::http::StatusCode::OK,
            }
        }
        let hits = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let app = axum::Router::new().route("/hook", axum::routing::post(record)).with_state((
            hits.clone(),
            arrived.clone(),
            answer,
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let url = format!("http://{}/hook", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { url, hits, arrived }
    }

    pub fn hits(&self) -> Vec<HookHit> {
        self.hits.lock().expect("hits").clone()
    }

    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<HookHit> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.arrived.notified();
            let hits = self.hits();
            if hits.len() >= count {
                return hits;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("expected {count} hook calls within {within:?}, got {}: {hits:?}", hits.len());
            }
        }
    }
}

/// Reads one counter's value from a `/metrics` scrape (0 when absent).
pub fn metric(scrape: &str, series: &str) -> f64 {
    scrape.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
}
