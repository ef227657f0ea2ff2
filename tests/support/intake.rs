//! Intake-capacity helpers (context/intake-capacity.md): the instance-wide queue capacity
//! setting, its environment override and the `queue_full` refusal.

use super::Client;
use super::world::{Reply, send};
use reqwest::Method;
use serde_json::{Value, json};

/// A scrape token of the minimum length or more (contract §1: at least 32 bytes).
pub const METRICS_TOKEN: &str = "scrape-token-for-the-intake-tests-0123456789";
pub const CAPACITY_PATH: &str = "/api/v1/system/queue-capacity";
pub const CAPACITY_ENV: &str = "SWITCHBOARD_QUEUE_MAX_PENDING";

pub async fn capacity_get(client: &Client, token: &str) -> Reply {
    send(client, Method::GET, CAPACITY_PATH, token, None).await
}

pub async fn capacity_patch(client: &Client, token: &str, body: Value) -> Reply {
    send(client, Method::PATCH, CAPACITY_PATH, token, Some(body)).await
}

/// PATCHes the capacity as an instance admin and expects it stored.
pub async fn set_capacity(client: &Client, admin: &str, max: i64) {
    let reply = capacity_patch(client, admin, json!({"max_pending_per_queue": max})).await;
    assert_eq!(reply.status, 200, "PATCH capacity {max}: {}", reply.text);
    assert_capacity(&reply.body, Some(max), max, "setting", false);
}

/// The capacity answer: `{setting: {max_pending_per_queue}, effective: {max_pending_per_queue, source, locked}}`.
pub fn assert_capacity(body: &Value, setting: Option<i64>, effective: i64, source: &str, locked: bool) {
    assert_eq!(body["setting"]["max_pending_per_queue"], setting.map_or(Value::Null, Value::from), "setting: {body}");
    let shown = &body["effective"];
    assert_eq!(
        (shown["max_pending_per_queue"].as_i64(), shown["source"].as_str(), shown["locked"].as_bool()),
        (Some(effective), Some(source), Some(locked)),
        "effective: {body}"
    );
}

/// 429 `queue_full` with `Retry-After` and `{queue, pending, max, error}`.
pub fn assert_queue_full(reply: &Reply, queue: &str, pending: i64, max: i64) {
    assert_eq!(reply.status, 429, "{}", reply.text);
    let body = &reply.body;
    assert_eq!(
        (body["code"].as_str(), body["queue"].as_str(), body["pending"].as_i64(), body["max"].as_i64()),
        (Some("queue_full"), Some(queue), Some(pending), Some(max)),
        "{}",
        reply.text
    );
    assert!(body["error"].is_string(), "{}", reply.text);
    let seconds: Option<u64> = reply.retry_after.as_deref().and_then(|s| s.parse().ok());
    assert!(seconds.is_some_and(|s| s >= 1), "Retry-After: {:?}", reply.retry_after);
}
