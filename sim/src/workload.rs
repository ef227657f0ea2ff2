//! The simulated clients: agents draining queues over MCP, the owner editing policies over the
//! operator API, the producer pushing todos and signed webhook deliveries, and the other owner's
//! agent probing for the team's todos. Every reply is summarised into the trace without the
//! identifiers a store generates, so the model and PostgreSQL runs of one seed compare line by
//! line.
//!
//! Exists apart from `world` (the set-up, the replicas and the fault driver) so each reads on its
//! own: this is what the users of the system do, `world` is what happens to the system.

use crate::check;
use crate::faults::Rng;
use crate::net::{self, Reply, Request};
use crate::push_world::AgentPush;
use crate::world::{QUEUES, Trace};
use chrono::Utc;
use models::store::Store;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a claim waits before its client gives up (the client-cancellation fault). Only these
/// give-ups count as cancellations; other timeouts come from partitions and crashes.
const CANCEL_AFTER: Duration = Duration::from_millis(15);

pub(crate) const LEASE_SECONDS: i64 = 20;
pub(crate) const WEBHOOK_SECRET: &str = "whsec_c2ltdWxhdGlvbi1zZWNyZXQtMDEyMzQ1Njc4OQ==";
/// The owner writes at most this many policies per run.
const OWNER_WRITES_MAX: usize = 10;

/// Ids of the team's todos as the producer learned them, for the other owner's probes.
#[derive(Clone, Default)]
pub(crate) struct FleetIds(Arc<Mutex<Vec<String>>>);

impl FleetIds {
    fn push(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(id.to_string());
    }

    fn last(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).last().cloned()
    }
}

/// Tokens and names the clients use (fixed per seed, so both stores see the same requests).
#[derive(Clone)]
pub(crate) struct Principals {
    /// Who may hold what (design invariant 6): the mirror's claims are its own queue's only.
    pub(crate) tenancy: check::Tenancy,
    pub(crate) owner_token: String,
    pub(crate) team_slug: String,
    pub(crate) agents: Vec<(String, String)>,
    /// The agents' endpoint ids, in `agents` order.
    pub(crate) agent_ids: Vec<String>,
    pub(crate) mirror: (String, String),
    pub(crate) mirror_id: String,
    pub(crate) webhook_id: String,
}

/// The initial policies (and the owner's later choices): a window budget on a DST-affected day,
/// an in-flight cap, both with an hourly window in a half-hour zone.
pub(crate) fn policy_choices(queue: &str) -> Vec<Value> {
    let window = |period: &str, tz: &str, start: &str| json!({"period": period, "tz": tz, "start": start});
    match queue {
        "metered" => vec![
            json!({"max_in_flight": null, "max_claims_per_window": 6, "window": window("day", "America/Los_Angeles", "01:30")}),
            json!({"max_in_flight": null, "max_claims_per_window": 3, "window": window("hour", "UTC", "00:15")}),
            json!({"max_in_flight": null, "max_claims_per_window": 10, "window": window("day", "America/Los_Angeles", "01:30")}),
            json!({"max_in_flight": null, "max_claims_per_window": 0, "window": window("hour", "Asia/Kolkata", "00:00")}),
            // Starts inside the spring-forward gap on 2027-03-14 (the window opens at 03:00 PDT).
            json!({"max_in_flight": null, "max_claims_per_window": 6, "window": window("day", "America/Los_Angeles", "02:30")}),
        ],
        "capped" => vec![
            json!({"max_in_flight": 1, "max_claims_per_window": null, "window": null}),
            json!({"max_in_flight": 2, "max_claims_per_window": null, "window": null}),
        ],
        _ => vec![
            json!({"max_in_flight": 2, "max_claims_per_window": 5, "window": window("hour", "Asia/Kolkata", "00:00")}),
            json!({"max_in_flight": 1, "max_claims_per_window": 8,
                "window": {"period": "week", "tz": "Europe/Berlin", "start": "09:00", "weekday": "Mon"}}),
            json!({"max_in_flight": 3, "max_claims_per_window": 4, "window": window("hour", "UTC", "00:15")}),
        ],
    }
}

/// A client's view of the replicas: one request, retried on another replica after a network
/// failure (the first attempt may have been applied: retries are the reason dedup exists).
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) name: String,
    pub(crate) replicas: usize,
    pub(crate) trace: Trace,
    /// Re-send after a 5xx too, as a webhook provider does (safe: creates carry idempotency
    /// keys, deliveries their ids). A lost acknowledgement is a 503 after the commit.
    pub(crate) retry_server_errors: bool,
    /// Gives up on some claims almost at once (the client-cancellation fault).
    pub(crate) cancels: bool,
}

impl Caller {
    async fn send(&self, rng: &mut Rng, request: Request<'_>, timeout: Duration) -> Reply {
        let Request { method, path, .. } = request;
        let mut reply = Reply::Network("not sent".into());
        for _attempt in 0..3 {
            let replica = format!("r{}", rng.below(self.replicas as u64));
            reply = net::send(&replica, request, timeout).await;
            match &reply {
                Reply::Network(problem) => {
                    if problem == "timed out" && timeout == CANCEL_AFTER {
                        self.trace.cancelled();
                    }
                    self.trace
                        .log(&self.name, format!("{method} {} via {replica}: network: {problem}", printable(path)));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Reply::Http(status, _) if self.retry_server_errors && *status >= 500 => {
                    self.trace.log(
                        &self.name,
                        format!("{method} {} via {replica}: http {status}, retrying", printable(path)),
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Reply::Http(..) => return reply,
            }
        }
        reply
    }

    async fn tool(
        &self,
        rng: &mut Rng,
        slug: &str,
        key: &str,
        name: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        let path = format!("/mcp/{slug}");
        let request = Request { method: "POST", path: &path, bearer: Some(key), headers: &[], body: Some(&body) };
        let reply = self.send(rng, request, timeout).await;
        match reply {
            Reply::Http(200, answer) => {
                let result = &answer["result"];
                let status = if result["isError"].as_bool() == Some(true) { 422 } else { 200 };
                Reply::Http(status, result["structuredContent"].clone())
            }
            other => other,
        }
    }
}

/// A path without the generated parts (endpoint slugs, webhook ids differ between stores).
pub(crate) fn printable(path: &str) -> &str {
    if path.starts_with("/mcp/") {
        "/mcp/<endpoint>"
    } else if path.starts_with("/ingest/") {
        "/ingest/<webhook>"
    } else if path.starts_with("/api/v1/admission/") {
        "/api/v1/admission/<team>/<queue>"
    } else {
        path
    }
}

pub(crate) fn summarize_claim(reply: &Reply) -> String {
    match reply {
        Reply::Http(200, body) if body["empty"] == json!(true) => {
            let deferred: Vec<String> = body["deferred"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .map(|d| format!("{}:{}:{}:{}", d["queue"], d["reason"], d["pending"], d["next_eligible_at"]))
                        .collect()
                })
                .unwrap_or_default();
            format!("empty deferred=[{}]", deferred.join(","))
        }
        Reply::Http(200, body) => {
            let todo = &body["todo"];
            let admission = &body["admission"];
            format!(
                "claimed {} q={} attempt={} lease={} admission={}",
                todo["title"], todo["queue"], todo["attempt"], todo["lease_expires_at"], admission
            )
        }
        other => summarize(other),
    }
}

pub(crate) fn summarize(reply: &Reply) -> String {
    match reply {
        Reply::Http(200, body) if body.get("todo").is_some() => {
            format!("ok {} state={} attempt={}", body["todo"]["title"], body["todo"]["state"], body["todo"]["attempt"])
        }
        Reply::Http(200, body) if body.get("state").is_some() => {
            format!(
                "ok {} state={} attempt={} lease={}",
                body["title"], body["state"], body["attempt"], body["lease_expires_at"]
            )
        }
        Reply::Http(status, body) if *status >= 400 => {
            let mut extras = body.as_object().cloned().unwrap_or_default();
            extras.remove("message");
            extras.remove("error");
            format!("http {status} {}", scrub(&Value::Object(extras)))
        }
        Reply::Http(status, body) => format!("http {status} {body}"),
        Reply::Network(problem) => format!("network: {problem}"),
    }
}

/// An agent: claim_next, work, then complete / fail / release / abandon; sometimes a named
/// claim of a listed todo, a heartbeat, an admission_status read, or an impatient cancel. With
/// `push`, it also keeps an MCP session's stream open on some replica and clocks in and out.
pub(crate) async fn agent<S: Store>(
    caller: Caller,
    (slug, key): (String, String),
    seed: u64,
    until: Duration,
    foreign: Option<FleetIds>,
    mut push: Option<AgentPush<S>>,
) -> turmoil::Result {
    let mut rng = Rng::new(seed);
    let mut push_rng = Rng::new(seed ^ 0x7075_7368);
    let patient = Duration::from_secs(3);
    while turmoil::sim_elapsed().unwrap_or_default() < until {
        if let Some(push) = push.as_mut() {
            push.step(&mut push_rng, &caller.trace, &caller.name).await;
        }
        // Another owner's agent tries a fleet todo by id: it must not exist for it (invariant 6).
        if let Some(ids) = &foreign
            && rng.chance(100)
            && let Some(id) = ids.last()
        {
            let reply = caller
                .tool(&mut rng, &slug, &key, "claim", json!({"id": id, "lease_ttl_seconds": LEASE_SECONDS}), patient)
                .await;
            caller.trace.log(&caller.name, format!("claim of another owner's todo -> {}", summarize_claim(&reply)));
        }
        let choice = rng.below(100);
        let claimed = if choice < 8 {
            // A named claim of the first pending todo the listing shows.
            let listed = caller
                .tool(&mut rng, &slug, &key, "list_todos", json!({"state": "pending", "limit": 3}), patient)
                .await;
            let first = match &listed {
                Reply::Http(200, body) => body["todos"][0]["id"].as_str().map(str::to_string),
                _ => None,
            };
            let Some(id) = first else {
                caller.trace.log(&caller.name, format!("list_todos -> {}", summarize(&listed)));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            let reply = caller
                .tool(&mut rng, &slug, &key, "claim", json!({"id": id, "lease_ttl_seconds": LEASE_SECONDS}), patient)
                .await;
            caller.trace.log(&caller.name, format!("claim -> {}", summarize_claim(&reply)));
            reply
        } else if choice < 12 {
            let reply = caller.tool(&mut rng, &slug, &key, "admission_status", json!({}), patient).await;
            caller.trace.log(&caller.name, format!("admission_status -> {}", admission_summary(&reply)));
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        } else {
            // One claim in twenty gives up almost at once: the client cancels mid-claim.
            let timeout = if caller.cancels && rng.chance(50) { CANCEL_AFTER } else { patient };
            let reply = caller
                .tool(&mut rng, &slug, &key, "claim_next", json!({"lease_ttl_seconds": LEASE_SECONDS}), timeout)
                .await;
            caller.trace.log(&caller.name, format!("claim_next -> {}", summarize_claim(&reply)));
            reply
        };
        let id = match &claimed {
            Reply::Http(200, body) if body.get("todo").is_some() => {
                body["todo"]["id"].as_str().unwrap_or("").to_string()
            }
            Reply::Http(200, _) => {
                tokio::time::sleep(Duration::from_millis(1000 + rng.below(3000))).await;
                continue;
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(500 + rng.below(1000))).await;
                continue;
            }
        };
        // Work: sometimes longer than the lease, so the reaper or a takeover gets it.
        let work_ms = rng.below(28_000);
        if work_ms > 12_000 && rng.chance(300) {
            tokio::time::sleep(Duration::from_millis(work_ms / 2)).await;
            let reply = caller
                .tool(
                    &mut rng,
                    &slug,
                    &key,
                    "heartbeat",
                    json!({"id": id, "lease_ttl_seconds": LEASE_SECONDS}),
                    patient,
                )
                .await;
            caller.trace.log(&caller.name, format!("heartbeat -> {}", summarize(&reply)));
            tokio::time::sleep(Duration::from_millis(work_ms / 2)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(work_ms)).await;
        }
        let verb = match rng.below(100) {
            0..70 => "complete",
            70..85 => "fail",
            85..95 => "release",
            _ => {
                caller.trace.log(&caller.name, "abandons its claim".into());
                continue;
            }
        };
        let reply = caller.tool(&mut rng, &slug, &key, verb, json!({"id": id}), patient).await;
        caller.trace.log(&caller.name, format!("{verb} -> {}", summarize(&reply)));
    }
    Ok(())
}

fn admission_summary(reply: &Reply) -> String {
    match reply {
        Reply::Http(200, body) => format!("ok {}", scrub(body)),
        other => summarize(other),
    }
}

/// A body without the generated identifiers (ids, slugs, owners), which differ between stores.
fn scrub(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    !matches!(key.as_str(), "id" | "policy_id" | "scope" | "owner" | "endpoint_id" | "team_id")
                })
                .map(|(key, value)| (key.clone(), scrub(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(scrub).collect()),
        other => other.clone(),
    }
}

/// The owner: now and then replaces a budgeted queue's policy over the operator API.
pub(crate) async fn owner(caller: Caller, principals: Principals, seed: u64, until: Duration) -> turmoil::Result {
    let mut rng = Rng::new(seed);
    let mut writes = 0;
    while turmoil::sim_elapsed().unwrap_or_default() < until && writes < OWNER_WRITES_MAX {
        tokio::time::sleep(Duration::from_millis(15_000 + rng.below(30_000))).await;
        let queue = *rng.pick(&["metered", "capped", "both"]);
        let choices = policy_choices(queue);
        let policy = rng.pick(&choices).clone();
        let path = format!("/api/v1/admission/team:{}/{queue}", principals.team_slug);
        let reply = caller
            .send(
                &mut rng,
                Request {
                    method: "PUT",
                    path: &path,
                    bearer: Some(&principals.owner_token),
                    headers: &[],
                    body: Some(&policy),
                },
                Duration::from_secs(3),
            )
            .await;
        writes += 1;
        let summary = match &reply {
            Reply::Http(status, body) => format!("http {status} {}", body["status"]),
            other => summarize(other),
        };
        caller.trace.log(&caller.name, format!("PUT {queue} {policy} -> {summary}"));
    }
    Ok(())
}

/// The producer: todos over the operator API (idempotency key = title, so retries dedup) and
/// signed webhook deliveries fanned out to two owners, some delivered twice.
pub(crate) async fn producer(
    caller: Caller,
    principals: Principals,
    seed: u64,
    todos: usize,
    fleet_ids: FleetIds,
) -> turmoil::Result {
    let mut rng = Rng::new(seed);
    let mut redeliver: Vec<(String, String)> = vec![];
    for index in 0..todos {
        tokio::time::sleep(Duration::from_millis(300 + rng.below(3_000))).await;
        if rng.chance(200) {
            let delivery = format!("dlv-{index}");
            let body = json!({"title": format!("hook {index}")}).to_string();
            send_delivery(&caller, &mut rng, &principals, &delivery, &body).await;
            if rng.chance(300) {
                redeliver.push((delivery, body));
            }
        } else {
            let queue = *rng.pick(&QUEUES);
            let title = format!("p{index}");
            let body = json!({"scope": format!("team:{}", principals.team_slug), "queue": queue, "title": title,
                "idempotency_key": title, "max_attempts": 3});
            let reply = caller
                .send(
                    &mut rng,
                    Request {
                        method: "POST",
                        path: "/api/v1/todos",
                        bearer: Some(&principals.owner_token),
                        headers: &[],
                        body: Some(&body),
                    },
                    Duration::from_secs(3),
                )
                .await;
            if let Reply::Http(201, body) = &reply
                && let Some(id) = body["todo"]["id"].as_str()
            {
                fleet_ids.push(id);
            }
            let summary = match &reply {
                Reply::Http(status, body) => {
                    format!("http {status} deduped={} {}", body["deduped"], body["todo"]["title"])
                }
                other => summarize(other),
            };
            caller.trace.log(&caller.name, format!("push {title} to {queue} -> {summary}"));
        }
        if !redeliver.is_empty() && rng.chance(250) {
            let (delivery, body) = redeliver.remove(0);
            send_delivery(&caller, &mut rng, &principals, &delivery, &body).await;
        }
    }
    for (delivery, body) in redeliver {
        send_delivery(&caller, &mut rng, &principals, &delivery, &body).await;
    }
    Ok(())
}

async fn send_delivery(caller: &Caller, rng: &mut Rng, principals: &Principals, delivery: &str, body: &str) {
    // Standard Webhooks signatures carry a timestamp the server checks against its real clock;
    // the signature never reaches the trace, so this does not affect reproducibility.
    let timestamp = Utc::now().timestamp();
    let signature = standardwebhooks::Webhook::new(WEBHOOK_SECRET)
        .and_then(|hook| hook.sign(delivery, timestamp, body.as_bytes()))
        .unwrap_or_default();
    let headers = [
        ("webhook-id", delivery.to_string()),
        ("webhook-timestamp", timestamp.to_string()),
        ("webhook-signature", signature),
    ];
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let path = format!("/ingest/{}", principals.webhook_id);
    let reply = caller
        .send(
            rng,
            Request { method: "POST", path: &path, bearer: None, headers: &headers, body: Some(&value) },
            Duration::from_secs(3),
        )
        .await;
    let summary = match &reply {
        Reply::Http(status, answer) => {
            format!(
                "http {status} deduped={} todos={}",
                answer["deduped"],
                answer["todos"].as_array().map_or(0, Vec::len)
            )
        }
        other => summarize(other),
    };
    caller.trace.log(&caller.name, format!("deliver {delivery} -> {summary}"));
}
