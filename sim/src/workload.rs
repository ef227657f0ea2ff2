//! The simulated clients: agents draining queues over MCP, the owner editing policies over the
//! operator API, the producer pushing todos and signed webhook deliveries, and the other owner's
//! agent probing for the team's todos. Every reply is summarised into the trace without the
//! identifiers a store generates, so the model and PostgreSQL runs of one seed compare line by
//! line.
//!
//! Exists apart from `world` (the set-up, the replicas and the fault driver) so each reads on its
//! own: this is what the users of the system do, `world` is what happens to the system.

use crate::check;
use crate::config::QUEUES;
use crate::fake_data::FakeData;
use crate::faults::Rng;
use crate::net::{Net, Reply, Request};
use crate::push_world::AgentPush;
use crate::replies::{ClaimReply, Created, Delivered, Heard, HttpStatus, ReplySummary, StatusReply, printable};
use crate::sim_time;
use crate::trace::{EndVerb, Trace, TraceEvent};
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

/// How a client host ends: its loop finished, or what went wrong.
pub(crate) type ClientResult = Result<(), String>;

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
            // Issue #52: a provider's limits, per minute and per hour beside the day.
            json!({"max_in_flight": null, "max_claims_per_window": 10, "window": window("day", "America/Los_Angeles", "01:30"),
                "additional_windows": [{"max_claims": 2, "window": {"period": "minute"}},
                    {"max_claims": 3, "window": window("hour", "UTC", "00:15")}]}),
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
            json!({"max_in_flight": 2, "max_claims_per_window": 6, "window": window("hour", "Asia/Kolkata", "00:00"),
                "additional_windows": [{"max_claims": 1, "window": {"period": "minute"}}]}),
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
    pub(crate) net: Net,
}

impl Caller {
    async fn send(&self, rng: &mut Rng, request: Request<'_>, timeout: Duration) -> Reply {
        let Request { method, path, .. } = request;
        let mut reply = Reply::Network("not sent".into());
        for _attempt in 0..3 {
            let replica = format!("r{}", rng.below(self.replicas as u64));
            reply = self.net.send(&self.name, &replica, request, timeout).await;
            match &reply {
                Reply::Network(problem) => {
                    if problem == "timed out" && timeout == CANCEL_AFTER {
                        self.trace.cancelled();
                    }
                    let (method, path, problem) = (method.to_string(), printable(path).to_string(), problem.clone());
                    self.trace.log(&self.name, TraceEvent::NetworkFailure { method, path, replica, problem });
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Reply::Http(status, _) if self.retry_server_errors && *status >= 500 => {
                    let (method, path, status) = (method.to_string(), printable(path).to_string(), *status);
                    self.trace.log(&self.name, TraceEvent::ServerErrorRetried { method, path, replica, status });
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

/// An agent's fixed part: who it is, the key it calls with, and its seeded choices.
struct Agent {
    caller: Caller,
    slug: String,
    key: String,
    rng: Rng,
    /// Empty `claim_next` answers in a row: an agent that keeps finding nothing waits longer
    /// each time (up to `IDLE_PAUSE_MAX_MS`), as a polite poller does.
    empty_in_a_row: u32,
}

/// The longest an agent pauses after empty answers in a row.
const IDLE_PAUSE_MAX_MS: u64 = 12_000;

/// The most todos an agent's `claim_next {max}` asks for.
const CLAIMS_PER_TURN_MAX: u64 = 5;

/// How long an agent waits for a reply it does not give up on.
const PATIENT: Duration = Duration::from_secs(3);

impl Agent {
    async fn tool(&mut self, name: &str, arguments: Value, timeout: Duration) -> Reply {
        self.caller.tool(&mut self.rng, &self.slug, &self.key, name, arguments, timeout).await
    }

    fn log(&self, event: TraceEvent) {
        self.caller.trace.log(&self.caller.name, event);
    }

    /// Another owner's agent tries a fleet todo by id: it must not exist for it (invariant 6).
    async fn probe_foreign(&mut self, ids: &FleetIds) {
        if self.rng.chance(100)
            && let Some(id) = ids.last()
        {
            let reply = self.tool("claim", json!({"id": id, "lease_ttl_seconds": LEASE_SECONDS}), PATIENT).await;
            self.log(TraceEvent::ForeignClaim(ClaimReply::of(&reply)));
        }
    }

    /// One turn's request: mostly `claim_next` (usually of several todos at once, issue #31's
    /// batch claim), sometimes a named claim of a listed todo or an `admission_status` read. The
    /// claimed todos' ids, or none (after a pause) when there is none.
    async fn try_claim(&mut self) -> Vec<String> {
        let choice = self.rng.below(100);
        let claimed = if choice < 8 {
            let Some(reply) = self.named_claim().await else { return vec![] };
            reply
        } else if choice < 12 {
            let reply = self.tool("admission_status", json!({}), PATIENT).await;
            self.log(TraceEvent::AdmissionStatus(StatusReply::of(&reply)));
            tokio::time::sleep(Duration::from_millis(500)).await;
            return vec![];
        } else {
            // One claim in twenty gives up almost at once: the client cancels mid-claim.
            let timeout = if self.caller.cancels && self.rng.chance(50) { CANCEL_AFTER } else { PATIENT };
            let mut arguments = json!({"lease_ttl_seconds": LEASE_SECONDS});
            if !self.rng.chance(300) {
                arguments["max"] = json!(2 + self.rng.below(CLAIMS_PER_TURN_MAX - 1));
            }
            let reply = self.tool("claim_next", arguments, timeout).await;
            self.log(TraceEvent::ClaimNext(ClaimReply::of(&reply)));
            reply
        };
        let claimed_ids = match &claimed {
            Reply::Http(200, body) if body.get("todo").is_some() => {
                vec![body["todo"]["id"].as_str().unwrap_or("").to_string()]
            }
            Reply::Http(200, body) if body["todos"].is_array() => body["todos"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|claim| claim["todo"]["id"].as_str().unwrap_or("").to_string())
                .collect(),
            Reply::Http(200, _) => {
                self.empty_in_a_row += 1;
                let pause_ms = (1000 + self.rng.below(3000)) << self.empty_in_a_row.min(4);
                tokio::time::sleep(Duration::from_millis(pause_ms.min(IDLE_PAUSE_MAX_MS))).await;
                return vec![];
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(500 + self.rng.below(1000))).await;
                return vec![];
            }
        };
        self.empty_in_a_row = 0;
        claimed_ids
    }

    /// A named claim of the first pending todo the listing shows; None (after a pause) when the
    /// listing shows none.
    async fn named_claim(&mut self) -> Option<Reply> {
        let listed = self.tool("list_todos", json!({"state": "pending", "limit": 3}), PATIENT).await;
        let first = match &listed {
            Reply::Http(200, body) => body["todos"][0]["id"].as_str().map(str::to_string),
            _ => None,
        };
        let Some(id) = first else {
            self.log(TraceEvent::ListTodos(ReplySummary::of(&listed)));
            tokio::time::sleep(Duration::from_secs(1)).await;
            return None;
        };
        let reply = self.tool("claim", json!({"id": id, "lease_ttl_seconds": LEASE_SECONDS}), PATIENT).await;
        self.log(TraceEvent::NamedClaim(ClaimReply::of(&reply)));
        Some(reply)
    }

    /// Works on the claimed todos (sometimes longer than the lease, so the reaper or a takeover
    /// gets them), then completes them (several with one `complete {ids}`), fails or releases
    /// each, or abandons them.
    async fn work_and_end(&mut self, ids: &[String]) {
        let work_ms = self.rng.below(28_000);
        if work_ms > 12_000 && self.rng.chance(300) {
            tokio::time::sleep(Duration::from_millis(work_ms / 2)).await;
            let reply =
                self.tool("heartbeat", json!({"id": ids[0], "lease_ttl_seconds": LEASE_SECONDS}), PATIENT).await;
            self.log(TraceEvent::Heartbeat(ReplySummary::of(&reply)));
            tokio::time::sleep(Duration::from_millis(work_ms / 2)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(work_ms)).await;
        }
        let verb = match self.rng.below(100) {
            0..70 => EndVerb::Complete,
            70..85 => EndVerb::Fail,
            85..95 => EndVerb::Release,
            _ => return self.log(TraceEvent::Abandoned),
        };
        if verb == EndVerb::Complete && ids.len() > 1 {
            let reply = self.tool("complete", json!({"ids": ids}), PATIENT).await;
            return self.log(TraceEvent::Ended { verb, reply: ReplySummary::of(&reply) });
        }
        for id in ids {
            let reply = self.tool(verb.as_str(), json!({"id": id}), PATIENT).await;
            self.log(TraceEvent::Ended { verb, reply: ReplySummary::of(&reply) });
        }
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
) -> ClientResult {
    let mut agent = Agent { caller, slug, key, rng: Rng::new(seed), empty_in_a_row: 0 };
    let mut push_rng = Rng::new(seed ^ 0x7075_7368);
    while sim_time::elapsed() < until {
        if let Some(push) = push.as_mut() {
            push.step(&mut push_rng, &agent.caller.trace, &agent.caller.name).await;
        }
        if let Some(ids) = &foreign {
            agent.probe_foreign(ids).await;
        }
        let claimed = agent.try_claim().await;
        if !claimed.is_empty() {
            agent.work_and_end(&claimed).await;
        }
    }
    Ok(())
}

/// The owner: now and then replaces a budgeted queue's policy over the operator API, which
/// lowers, raises and redefines its window; one write in four first deletes the policy, so the
/// PUT re-creates it (issue #28: neither may refund a charge).
pub(crate) async fn owner(caller: Caller, principals: Principals, seed: u64, until: Duration) -> ClientResult {
    let mut rng = Rng::new(seed);
    let mut writes = 0;
    while sim_time::elapsed() < until && writes < OWNER_WRITES_MAX {
        tokio::time::sleep(Duration::from_millis(15_000 + rng.below(30_000))).await;
        let queue = *rng.pick(&["metered", "capped", "both"]);
        let choices = policy_choices(queue);
        let policy = rng.pick(&choices).clone();
        let path = format!("/api/v1/admission/team:{}/{queue}", principals.team_slug);
        if rng.below(4) == 0 {
            let request = Request {
                method: "DELETE",
                path: &path,
                bearer: Some(&principals.owner_token),
                headers: &[],
                body: None,
            };
            let reply = caller.send(&mut rng, request, Duration::from_secs(3)).await;
            let reply = Heard::of(&reply, |status, body| HttpStatus { status, body_status: body["status"].clone() });
            caller
                .trace
                .log(&caller.name, TraceEvent::OwnerWrite { queue: queue.to_string(), policy: Value::Null, reply });
        }
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
        let reply = Heard::of(&reply, |status, body| HttpStatus { status, body_status: body["status"].clone() });
        caller.trace.log(&caller.name, TraceEvent::OwnerWrite { queue: queue.to_string(), policy, reply });
    }
    Ok(())
}

/// The producer: todos over the operator API (idempotency key `p{index}`, so retries dedup;
/// titles and payloads from `fake_data`, so not unique) and signed webhook deliveries fanned out
/// to two owners, some delivered twice.
pub(crate) async fn producer(
    caller: Caller,
    principals: Principals,
    seed: u64,
    todos: usize,
    fleet_ids: FleetIds,
) -> ClientResult {
    let mut rng = Rng::new(seed);
    let mut data = FakeData::new(&mut rng);
    let mut redeliver: Vec<(String, String)> = vec![];
    for index in 0..todos {
        tokio::time::sleep(Duration::from_millis(300 + rng.below(3_000))).await;
        if rng.chance(200) {
            let delivery = format!("dlv-{index}");
            let body = data.delivery_body(index).to_string();
            send_delivery(&caller, &mut rng, &principals, &delivery, &body).await;
            if rng.chance(300) {
                redeliver.push((delivery, body));
            }
        } else {
            push_todos(&caller, &mut rng, &mut data, &principals, index, &fleet_ids).await;
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

/// One create over the operator API, or (two times in five) a batch of two to six in one list
/// (issue #15's batched create), each logged as its own push.
async fn push_todos(
    caller: &Caller,
    rng: &mut Rng,
    data: &mut FakeData,
    principals: &Principals,
    index: usize,
    fleet_ids: &FleetIds,
) {
    let count = if rng.chance(400) { 2 + rng.below(5) as usize } else { 1 };
    let mut items = Vec::with_capacity(count);
    for item in 0..count {
        let queue = *rng.pick(&QUEUES);
        let key = if count == 1 { format!("p{index}") } else { format!("p{index}-{item}") };
        let mut body = json!({"scope": format!("team:{}", principals.team_slug), "queue": queue,
            "title": data.title(), "idempotency_key": key, "max_attempts": 3});
        if let Some(payload) = data.payload() {
            body["payload"] = payload;
        }
        items.push(body);
    }
    let body = if count == 1 { items[0].clone() } else { Value::Array(items.clone()) };
    let request = Request {
        method: "POST",
        path: "/api/v1/todos",
        bearer: Some(&principals.owner_token),
        headers: &[],
        body: Some(&body),
    };
    let reply = caller.send(rng, request, Duration::from_secs(3)).await;
    for (at, item) in items.iter().enumerate() {
        let answer = |body: &Value| if count == 1 { body.clone() } else { body["todos"][at].clone() };
        if let Reply::Http(201, body) = &reply
            && let Some(id) = answer(body)["todo"]["id"].as_str()
        {
            fleet_ids.push(id);
        }
        let reply = Heard::of(&reply, |status, body| Created {
            status,
            deduped: answer(body)["deduped"].clone(),
            title: answer(body)["todo"]["title"].clone(),
        });
        let (title, queue) = (item["title"].as_str().unwrap_or("").to_string(), item["queue"].as_str().unwrap_or(""));
        caller.trace.log(&caller.name, TraceEvent::TodoPushed { title, queue: queue.to_string(), reply });
    }
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
    let reply = Heard::of(&reply, |status, answer| Delivered {
        status,
        deduped: answer["deduped"].clone(),
        todos: answer["todos"].as_array().map_or(0, Vec::len),
    });
    caller.trace.log(&caller.name, TraceEvent::Delivery { delivery: delivery.to_string(), reply });
}
