//! The stress run's push part (issue #51): doorbells judged where the engine really runs, on
//! real replicas with real concurrency, not on the serial model.
//!
//! Each listener is an endpoint that only listens: one MCP session whose event stream stays open
//! (attached to one replica, reattached to the next with `Last-Event-ID` whenever it breaks), a
//! `gated` queue holding one todo that nobody may claim, a `capped` queue (one in flight), and an
//! `inbox`. Its owner closes and reopens the gate over and over (a paused policy raised, or
//! deleted and re-created), each reopening beside a burst of new work in the inbox from every
//! replica, so that creation doorbells hold the session's row while the reopen sweep rings it.
//! Some reopenings happen while the listener is clocked out, and it clocks in after them. Between
//! gate rounds the listener itself fills the capped queue (two todos, one claimed) and completes
//! its claim, which frees the slot the other todo waits for: a reopening by a completion.
//!
//! Once per run each listener also spends its `metered` queue's minute window (one claim a
//! minute) with a second todo waiting, and claims that todo only after the next minute has begun:
//! a reopening by the window rolling over, which nobody's write or completion makes.
//!
//! The judge derives every reopening from the database (the gate's audit: a paused policy before,
//! an admitting one or none after; the capped queue's todos: a completion while another todo
//! waits; the metered queue's todos: the minute after its first claim, while the second waits)
//! and compares it with what the stream received: exactly one `reopen` ring per reopening
//! made while in; for one made while out, no ring before the clock-in and a clock-in digest naming
//! the queue; never a creation doorbell for the gated todo, which was created while paused; and
//! every judged ring the database recorded for the session received (replayed after a break, if
//! need be).
//!
//! Once per listener a reopening meets the listener's session row held exclusively past the
//! ring's lock timeout (1 s), as a session being closed holds it: the sweep's ring fails, and the
//! reopening is owed its one ring all the same, after the row is free.
//!
//! A gate stays open (and closed) for `hold` after the database is reachable, so the reopen sweep
//! (one tick a second on every replica) always meets the reopening before the next change.

use super::{StressConfig, Tally, lock};
use crate::faults::Rng;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The queue whose reopenings are judged, and the one that bursts of new work ring.
const GATED: &str = "gated";
const INBOX: &str = "inbox";
/// The queue whose reopenings come from completions that free its one in-flight slot.
const CAPPED: &str = "capped";
/// The queue whose reopening comes from its window rolling over: one claim a minute.
const METERED: &str = "metered";
const DOORBELL_METHOD: &str = "notifications/claude/channel";
/// How long a blocked round holds the listener's session row exclusively: past a push pass's
/// ring lock timeout (1 s), so at least one pass's ring meets it and fails rather than waits.
const SESSION_BLOCKED_FOR: Duration = Duration::from_millis(3000);
/// Attempts of one owner or agent request that a fault may fail (a restarting replica, a
/// restarting database, a rate-limited policy write).
const REQUEST_ATTEMPTS_MAX: usize = 60;

/// What the push part of a stress run does.
#[derive(Debug, Clone)]
pub struct PushPlan {
    pub listeners: usize,
    /// Todos created in the listener's inbox at each reopening, at once, across the replicas.
    pub burst: usize,
    /// How long a gate stays open, or closed, once the database is reachable.
    pub hold: Duration,
    /// Reopenings made while the listener is clocked out, in percent.
    pub out_percent: u64,
    /// Reopenings made by deleting the paused policy (re-created paused after), in percent.
    pub delete_percent: u64,
    /// Whether each listener's metered minute window rolls over with work waiting (the round
    /// waits for the next minute, so a run may last up to a minute longer).
    pub rollover: bool,
}

impl PushPlan {
    pub fn small() -> PushPlan {
        PushPlan {
            listeners: 2,
            burst: 24,
            hold: Duration::from_millis(2500),
            out_percent: 25,
            delete_percent: 25,
            rollover: true,
        }
    }
}

/// One event a listener's stream received.
#[derive(Debug, Clone)]
struct Received {
    message: Value,
}

/// A listener: its endpoint, its session and what its stream received.
struct Listener {
    index: usize,
    id: String,
    slug: String,
    token: String,
    session: String,
    gated_todo: String,
    received: Mutex<Vec<Received>>,
    /// Times it was clocked out and back in (as acknowledged), in order.
    out_spans: Mutex<Vec<(DateTime<Utc>, DateTime<Utc>)>>,
    streams_opened: AtomicU64,
    /// Set when its driver has made its last change: the stream is read a while longer, so the
    /// rings that change calls for arrive before the judge looks.
    driver_done: AtomicBool,
}

/// What every listener shares: the owner, the replicas, the HTTP client, the fault clock.
pub(super) struct Listeners {
    http: reqwest::Client,
    replicas: Vec<String>,
    /// For the blocked round's hold on a session row.
    database_url: String,
    owner_token: String,
    listeners: Vec<Arc<Listener>>,
    /// When the database was last seen coming back from a crash (the gates wait `hold` after).
    database_back_at: Arc<Mutex<Instant>>,
    pub(super) database_down: Arc<AtomicBool>,
}

/// What the judge found: counts of what it judged, and every violation in words.
#[derive(Debug, Clone, Default)]
pub struct PushVerdict {
    /// Reopenings by a policy change while the listener was in.
    pub reopenings_in: u64,
    /// Reopenings by a completion that freed the capped queue's slot (the listener is in).
    pub reopenings_by_completion: u64,
    /// Reopenings by the metered queue's minute window rolling over.
    pub reopenings_by_rollover: u64,
    pub reopenings_out: u64,
    pub reopen_rings: u64,
    pub digests: u64,
    pub creation_rings: u64,
    pub rings_recorded: u64,
    pub streams_opened: u64,
    pub violations: Vec<String>,
}

impl PushVerdict {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

impl std::fmt::Display for PushVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "push: {} reopenings by a policy change while in, {} while out, {} by a completion, {} by a window \
             rolling over; {} reopen \
             rings, {} clock-in digests, {} creation doorbells received; {} judged rings recorded; {} streams \
             opened; {} violations",
            self.reopenings_in,
            self.reopenings_out,
            self.reopenings_by_completion,
            self.reopenings_by_rollover,
            self.reopen_rings,
            self.digests,
            self.creation_rings,
            self.rings_recorded,
            self.streams_opened,
            self.violations.len()
        )?;
        for violation in &self.violations {
            write!(f, "\n  push violation: {violation}")?;
        }
        Ok(())
    }
}

impl Listeners {
    /// The owner (`switchboard admin human add`), one endpoint per listener with its gate paused
    /// before its one todo is created, and an MCP session per listener.
    pub(super) async fn bootstrap(
        binary: &std::path::Path,
        database_url: &str,
        replicas: Vec<String>,
        plan: &PushPlan,
    ) -> Listeners {
        let owner = super::agents::admin(binary, &["human", "add", "push-owner", "--database-url", database_url]).await;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("reqwest client");
        let mut listeners = Listeners {
            http,
            replicas,
            database_url: database_url.to_string(),
            owner_token: owner["token"].as_str().expect("token").to_string(),
            listeners: Vec::new(),
            database_back_at: Arc::new(Mutex::new(Instant::now())),
            database_down: Arc::new(AtomicBool::new(false)),
        };
        for index in 0..plan.listeners {
            let base = listeners.base(index);
            let body = json!({"name": format!("listener-{index}"), "queues": [GATED, INBOX, CAPPED, METERED]});
            let (status, endpoint) =
                listeners.owner(reqwest::Method::POST, &format!("{base}/api/v1/endpoints"), Some(body)).await;
            assert_eq!(status, 201, "vend a listener: {endpoint}");
            let slug = endpoint["slug"].as_str().expect("slug").to_string();
            let scope = format!("endpoint:{slug}");
            let (status, body) = listeners
                .owner(reqwest::Method::PUT, &format!("{base}/api/v1/admission/{scope}/{GATED}"), Some(paused()))
                .await;
            assert_eq!(status, 200, "pause the gate: {body}");
            let (status, body) = listeners
                .owner(
                    reqwest::Method::PUT,
                    &format!("{base}/api/v1/admission/{scope}/{CAPPED}"),
                    Some(json!({"max_in_flight": 1})),
                )
                .await;
            assert_eq!(status, 200, "cap the capped queue: {body}");
            let (status, body) = listeners
                .owner(
                    reqwest::Method::PUT,
                    &format!("{base}/api/v1/admission/{scope}/{METERED}"),
                    Some(json!({"max_claims_per_window": 1, "window": {"period": "minute"}})),
                )
                .await;
            assert_eq!(status, 200, "meter the metered queue: {body}");
            let todo = json!({"scope": scope, "queue": GATED, "title": "waits behind the gate"});
            let (status, created) =
                listeners.owner(reqwest::Method::POST, &format!("{base}/api/v1/todos"), Some(todo)).await;
            assert_eq!(status, 201, "the gated todo: {created}");
            let session = initialize(&listeners.http, &base, &slug, endpoint["token"].as_str().expect("token")).await;
            listeners.listeners.push(Arc::new(Listener {
                index,
                id: endpoint["id"].as_str().expect("id").to_string(),
                slug,
                token: endpoint["token"].as_str().expect("token").to_string(),
                session,
                gated_todo: created["todo"]["id"].as_str().expect("todo id").to_string(),
                received: Mutex::new(Vec::new()),
                out_spans: Mutex::new(Vec::new()),
                streams_opened: AtomicU64::new(0),
                driver_done: AtomicBool::new(false),
            }));
        }
        listeners
    }

    fn base(&self, n: usize) -> String {
        self.replicas[n % self.replicas.len()].clone()
    }

    /// One owner request; a transport error is status 0.
    async fn owner(&self, method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, url).bearer_auth(&self.owner_token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(error) => (0, json!(error.to_string())),
        }
    }

    /// Marks the database down (a crash is being injected) or back.
    pub(super) fn database_is(&self, up: bool) {
        self.database_down.store(!up, Ordering::SeqCst);
        if up {
            *self.database_back_at.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }
    }

    /// Waits `hold` past the later of now and the database's last return.
    async fn hold(&self, hold: Duration) {
        let started = Instant::now();
        loop {
            let back_at = *self.database_back_at.lock().unwrap_or_else(|p| p.into_inner());
            let since = started.max(back_at);
            if !self.database_down.load(Ordering::SeqCst) && since.elapsed() >= hold {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every listener's stream reader, its gate driver and its burst producer, until `stop`.
    pub(super) fn spawn(
        self: &Arc<Self>,
        plan: &PushPlan,
        config: &StressConfig,
        tally: &Arc<Mutex<Tally>>,
        stop: &Arc<AtomicBool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = Vec::new();
        for listener in &self.listeners {
            let (all, listener) = (self.clone(), listener.clone());
            tasks.push(tokio::spawn(async move { all.read_stream(&listener).await }));
        }
        for listener in &self.listeners {
            let (all, listener, stop) = (self.clone(), listener.clone(), stop.clone());
            let (plan, tally) = (plan.clone(), tally.clone());
            let seed = config.seed.wrapping_mul(7_919).wrapping_add(listener.index as u64);
            tasks.push(tokio::spawn(async move { all.drive(&listener, &plan, seed, &tally, &stop).await }));
        }
        tasks
    }

    /// Keeps the listener's stream open: attached on replica `index + 1`, and on the next one
    /// with `Last-Event-ID` each time it breaks, until its driver is done and `LINGER` after (for
    /// what its last change rings, and replays).
    async fn read_stream(&self, listener: &Listener) {
        const LINGER: Duration = Duration::from_secs(3);
        let mut replica = listener.index + 1;
        let mut last_event_id: Option<String> = None;
        let mut driver_done_at: Option<Instant> = None;
        let mut done = || {
            listener.driver_done.load(Ordering::SeqCst)
                && driver_done_at.get_or_insert_with(Instant::now).elapsed() > LINGER
        };
        while !done() {
            let base = self.base(replica);
            let mut request = self
                .http
                .get(format!("{base}/mcp/{}", listener.slug))
                .bearer_auth(&listener.token)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", &listener.session)
                .timeout(Duration::from_secs(24 * 3600));
            if let Some(id) = &last_event_id {
                request = request.header("last-event-id", id);
            }
            if let Ok(Ok(mut response)) = tokio::time::timeout(Duration::from_secs(5), request.send()).await
                && response.status().is_success()
            {
                listener.streams_opened.fetch_add(1, Ordering::SeqCst);
                let mut buffer = String::new();
                loop {
                    let chunk = tokio::select! {
                        chunk = response.chunk() => chunk,
                        () = tokio::time::sleep(Duration::from_millis(250)) => {
                            if done() { return; }
                            continue;
                        }
                    };
                    let Ok(Some(chunk)) = chunk else { break };
                    buffer.push_str(&String::from_utf8_lossy(&chunk));
                    while let Some(end) = buffer.find("\n\n") {
                        let block: String = buffer.drain(..end + 2).collect();
                        if let Some(id) = block.lines().find_map(|line| line.strip_prefix("id:")) {
                            last_event_id = Some(id.trim().to_string());
                        }
                        let data: String =
                            block.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim).collect();
                        if let Ok(message) = serde_json::from_str::<Value>(&data) {
                            listener.received.lock().unwrap_or_else(|p| p.into_inner()).push(Received { message });
                        }
                    }
                }
            }
            // The stream broke (a replica killed, the database restarted, the read timeout that
            // keeps a stopped run from waiting on it): attach again on the next replica.
            replica += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The gate's owner: close, burst and reopen, hold; some reopenings while clocked out. Beside
    /// it, once, the metered round (which may outlast the run's other work by up to a minute).
    async fn drive(&self, listener: &Listener, plan: &PushPlan, seed: u64, tally: &Mutex<Tally>, stop: &AtomicBool) {
        let scope = format!("endpoint:{}", listener.slug);
        let gate = self.drive_gate(listener, plan, seed, tally, stop);
        futures::future::join(gate, self.metered_round(listener, &scope, plan, tally)).await;
        listener.driver_done.store(true, Ordering::SeqCst);
    }

    /// The listener's session row locked `FOR UPDATE` in a transaction of its own, until the
    /// returned transaction ends; None when the database cannot be reached just now.
    async fn block_session(&self, listener: &Listener) -> Option<sqlx::Transaction<'static, sqlx::Postgres>> {
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&self.database_url).await.ok()?;
        let mut holder = pool.begin().await.ok()?;
        sqlx::query("SELECT 1 FROM mcp_sessions WHERE id = $1 FOR UPDATE")
            .bind(&listener.session)
            .execute(&mut *holder)
            .await
            .ok()?;
        Some(holder)
    }

    /// Two todos in the metered queue (one claim a minute): the first claimed and completed (the
    /// window is spent, the second waits), then, once the next minute has begun and `hold` has
    /// passed, the second claimed and completed.
    async fn metered_round(&self, listener: &Listener, scope: &str, plan: &PushPlan, tally: &Mutex<Tally>) {
        if !plan.rollover {
            return;
        }
        let ids = self.create_pair(listener, scope, METERED, 0, tally).await;
        let [first, second] = ids.as_slice() else { return };
        self.held_verb(listener, "claim", first, "claimed", tally).await;
        let spent_at = Utc::now();
        self.held_verb(listener, "complete", first, "done", tally).await;
        let next_minute = spent_at.timestamp() - spent_at.timestamp().rem_euclid(60) + 60;
        let until_next = u64::try_from(next_minute - Utc::now().timestamp()).unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(until_next)).await;
        self.hold(plan.hold).await;
        self.held_verb(listener, "claim", second, "claimed", tally).await;
        self.held_verb(listener, "complete", second, "done", tally).await;
    }

    /// Two todos in `queue`, created by the owner through faults; fewer when a fault won.
    async fn create_pair(
        &self,
        listener: &Listener,
        scope: &str,
        queue: &str,
        round: usize,
        tally: &Mutex<Tally>,
    ) -> Vec<String> {
        let mut ids = Vec::new();
        for n in 0..2 {
            let body = json!({"scope": scope, "queue": queue, "title": format!("{queue} {round}.{n}")});
            for attempt in 0..REQUEST_ATTEMPTS_MAX {
                let url = format!("{}/api/v1/todos", self.base(round + n + attempt));
                match self.owner(reqwest::Method::POST, &url, Some(body.clone())).await {
                    (201, created) => {
                        ids.push(created["todo"]["id"].as_str().unwrap_or_default().to_string());
                        break;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(300)).await,
                }
            }
        }
        if ids.len() != 2 {
            lock(tally).unexpected(format!("listener {}: {queue} todos not created", listener.index));
        }
        ids
    }

    /// The gate rounds, until `stop`.
    async fn drive_gate(
        &self,
        listener: &Listener,
        plan: &PushPlan,
        seed: u64,
        tally: &Mutex<Tally>,
        stop: &AtomicBool,
    ) {
        let mut rng = Rng::new(seed);
        let scope = format!("endpoint:{}", listener.slug);
        let mut round = 0;
        while !stop.load(Ordering::SeqCst) {
            round += 1;
            let out = rng.below(100) < plan.out_percent;
            if out {
                self.presence(listener, "clock_out", tally).await;
            }
            let out_at = Utc::now();
            let by_delete = rng.below(100) < plan.delete_percent;
            // Once, while in, the reopening meets the session's row held exclusively past the lock
            // timeout (as a session being closed holds it): the sweep's ring fails, and the watch
            // must stay for the pass after the row is free (issue #51).
            let blocker = if round == 2 && !out { self.block_session(listener).await } else { None };
            let burst = self.burst(listener, &scope, round, plan.burst, tally);
            let reopen = async {
                if by_delete {
                    self.policy(round, &scope, None, tally).await;
                } else {
                    self.policy(round, &scope, Some(json!({"max_in_flight": 1000})), tally).await;
                }
            };
            futures::future::join(burst, reopen).await;
            if let Some(blocker) = blocker {
                tokio::time::sleep(SESSION_BLOCKED_FOR).await;
                blocker.rollback().await.ok();
                lock(tally).push_sessions_blocked += 1;
            }
            self.hold(plan.hold).await;
            if out {
                self.presence(listener, "clock_in", tally).await;
                let in_at = Utc::now();
                listener.out_spans.lock().unwrap_or_else(|p| p.into_inner()).push((out_at, in_at));
                self.hold(plan.hold / 2).await;
            }
            self.policy(round, &scope, Some(paused()), tally).await;
            self.hold(plan.hold / 2).await;
            if !out && !stop.load(Ordering::SeqCst) {
                self.capped_round(listener, &scope, round, plan, tally).await;
            }
        }
    }

    /// Two todos in the capped queue, one claimed (the cap of one is full, the other waits), held,
    /// then completed (a reopening: the waiting todo is admitted), held, then the other claimed
    /// and completed (nothing waits: no reopening).
    async fn capped_round(
        &self,
        listener: &Listener,
        scope: &str,
        round: usize,
        plan: &PushPlan,
        tally: &Mutex<Tally>,
    ) {
        let ids = self.create_pair(listener, scope, CAPPED, round, tally).await;
        let [first, second] = ids.as_slice() else { return };
        self.held_verb(listener, "claim", first, "claimed", tally).await;
        self.hold(plan.hold / 2).await;
        self.held_verb(listener, "complete", first, "done", tally).await;
        self.hold(plan.hold).await;
        self.held_verb(listener, "claim", second, "claimed", tally).await;
        self.held_verb(listener, "complete", second, "done", tally).await;
    }

    /// `claim` or `complete` of `id` over MCP until the todo is in `state`: a call whose answer a
    /// fault lost may have committed, so a refusal is checked against the todo before retrying.
    async fn held_verb(&self, listener: &Listener, verb: &str, id: &str, state: &str, tally: &Mutex<Tally>) {
        let arguments = if verb == "claim" { json!({"id": id, "lease_ttl_seconds": 300}) } else { json!({"id": id}) };
        for attempt in 0..REQUEST_ATTEMPTS_MAX {
            let base = self.base(listener.index + attempt);
            if let Some(answer) = self.tool(&base, listener, verb, arguments.clone()).await {
                let reached = answer["isError"] == json!(false)
                    || self
                        .tool(&base, listener, "get_todo", json!({"id": id}))
                        .await
                        .is_some_and(|todo| todo["structuredContent"]["state"] == state);
                if reached {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        lock(tally).unexpected(format!("listener {}: {verb} {id} never reached {state}", listener.index));
    }

    /// One `tools/call` as the listener; the JSON-RPC result, or None without an answer.
    async fn tool(&self, base: &str, listener: &Listener, name: &str, arguments: Value) -> Option<Value> {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments}});
        let url = format!("{base}/mcp/{}", listener.slug);
        let response = self.http.post(&url).bearer_auth(&listener.token).json(&call).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body: Value = response.json().await.ok()?;
        Some(body["result"].clone()).filter(|result| !result.is_null())
    }

    /// Creates `burst` todos in the listener's inbox at once, spread over the replicas.
    async fn burst(&self, listener: &Listener, scope: &str, round: usize, burst: usize, tally: &Mutex<Tally>) {
        let creates = (0..burst).map(|n| {
            let url = format!("{}/api/v1/todos", self.base(n + listener.index));
            let body = json!({"scope": scope, "queue": INBOX, "title": format!("burst {round}.{n}")});
            async move {
                match self.owner(reqwest::Method::POST, &url, Some(body)).await {
                    (201, _) => lock(tally).push_todos_created += 1,
                    (0, _) => lock(tally).transport_errors += 1,
                    // A fault (a restarting replica or database) may refuse a create: it was
                    // not acknowledged, so nothing is owed.
                    (503, _) => lock(tally).push_refused_by_faults += 1,
                    (status, body) => lock(tally).unexpected(format!("burst create: {status} {body}")),
                }
            }
        });
        futures::future::join_all(creates).await;
    }

    /// Saves the gate's policy (`None`: deletes it), retrying through faults and the write
    /// limit until it is acknowledged.
    async fn policy(&self, round: usize, scope: &str, policy: Option<Value>, tally: &Mutex<Tally>) {
        for attempt in 0..REQUEST_ATTEMPTS_MAX {
            let url = format!("{}/api/v1/admission/{scope}/{GATED}", self.base(round + attempt));
            let (method, body) = match &policy {
                Some(policy) => (reqwest::Method::PUT, Some(policy.clone())),
                None => (reqwest::Method::DELETE, None),
            };
            match self.owner(method, &url, body).await {
                (200 | 204, _) => {
                    lock(tally).push_gate_changes += 1;
                    return;
                }
                // Deleted already: a retry after an answer lost to a fault.
                (404, _) if policy.is_none() => return,
                (429, body) => {
                    let wait = body["retry_after_seconds"].as_u64().unwrap_or(1);
                    tokio::time::sleep(Duration::from_secs(wait)).await;
                }
                (0 | 500 | 502 | 503, _) => tokio::time::sleep(Duration::from_millis(300)).await,
                (status, body) => {
                    lock(tally).unexpected(format!("gate policy {scope}: {status} {body}"));
                    return;
                }
            }
        }
        lock(tally).unexpected(format!("gate policy {scope}: not acknowledged in {REQUEST_ATTEMPTS_MAX} attempts"));
    }

    /// `clock_out` or `clock_in` over MCP, retried through faults until acknowledged.
    async fn presence(&self, listener: &Listener, tool: &str, tally: &Mutex<Tally>) {
        for attempt in 0..REQUEST_ATTEMPTS_MAX {
            let base = self.base(listener.index + attempt);
            if self.tool(&base, listener, tool, json!({})).await.is_some_and(|result| result["isError"] == json!(false))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        lock(tally).unexpected(format!("{tool} for listener {}: not acknowledged", listener.index));
    }

    /// Judges every listener against the database (see the module's header).
    pub(super) async fn judge(&self, pool: &sqlx::PgPool) -> Result<PushVerdict, sqlx::Error> {
        let mut verdict = PushVerdict::default();
        for listener in &self.listeners {
            verdict.streams_opened += listener.streams_opened.load(Ordering::SeqCst);
            self.judge_one(pool, listener, &mut verdict).await?;
        }
        Ok(verdict)
    }

    async fn judge_one(
        &self,
        pool: &sqlx::PgPool,
        listener: &Listener,
        verdict: &mut PushVerdict,
    ) -> Result<(), sqlx::Error> {
        let name = format!("listener {}", listener.index);
        // The gate's history: each change with the policy before and after (null: none).
        let audit: Vec<(DateTime<Utc>, Option<Value>, Option<Value>)> = sqlx::query_as(
            "SELECT at, before, after FROM admission_audit WHERE endpoint_id = $1 AND queue = $2 ORDER BY at, id",
        )
        .bind(&listener.id)
        .bind(GATED)
        .fetch_all(pool)
        .await?;
        let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
        let mut open: Option<DateTime<Utc>> = None;
        for (at, before, after) in &audit {
            match (deferred(before.as_ref()), deferred(after.as_ref())) {
                (true, false) => open = Some(*at),
                (false, true) => spans.extend(open.take().map(|opened| (opened, *at))),
                _ => {}
            }
        }
        spans.extend(open.map(|opened| (opened, DateTime::<Utc>::MAX_UTC)));

        // The rings the database recorded for the session, by ring id, with when each was decided.
        let recorded: Vec<RecordedRing> =
            sqlx::query_as("SELECT ring_id, reason, queue, at FROM doorbell_rings WHERE session_id = $1 ORDER BY seq")
                .bind(&listener.session)
                .fetch_all(pool)
                .await?;
        let decided_at: BTreeMap<&str, DateTime<Utc>> =
            recorded.iter().map(|ring| (ring.ring_id.as_str(), ring.at)).collect();

        // What the stream received, once per ring (a replay repeats a ring).
        let received = listener.received.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut reopens: Vec<DateTime<Utc>> = Vec::new();
        let mut capped_reopens: Vec<DateTime<Utc>> = Vec::new();
        let mut metered_reopens: Vec<DateTime<Utc>> = Vec::new();
        let mut digests: Vec<DateTime<Utc>> = Vec::new();
        for event in received.iter().filter(|e| e.message["method"] == DOORBELL_METHOD) {
            let meta = &event.message["params"]["meta"];
            let Some(ring) = meta["ring_id"].as_str() else { continue };
            if !seen.insert(ring.to_string()) {
                continue;
            }
            let Some(at) = decided_at.get(ring).copied() else {
                verdict.violations.push(format!("{name}: received ring {ring} the database never recorded"));
                continue;
            };
            let gated = meta["queue"] == GATED;
            match meta["reason"].as_str() {
                Some("reopen") if gated => reopens.push(at),
                Some("reopen") if meta["queue"] == CAPPED => capped_reopens.push(at),
                Some("reopen") if meta["queue"] == METERED => metered_reopens.push(at),
                Some("clock_in")
                    if meta["kind"] == "digest"
                        && meta["queues"].as_str().is_some_and(|q| q.split(',').any(|queue| queue == GATED)) =>
                {
                    digests.push(at)
                }
                Some("created" | "requeued") if meta["todo_id"] == listener.gated_todo.as_str() => {
                    verdict.creation_rings += 1;
                    verdict.violations.push(format!("{name}: the gated todo was rung {meta} although deferred"));
                }
                _ => {}
            }
        }
        verdict.reopen_rings += (reopens.len() + capped_reopens.len() + metered_reopens.len()) as u64;
        verdict.digests += digests.len() as u64;

        // Every judged ring the database recorded reached the stream.
        for RecordedRing { ring_id: ring, reason, queue, .. } in &recorded {
            let judged = (reason == "reopen" && matches!(queue.as_deref(), Some(GATED | CAPPED | METERED)))
                || reason == "digest";
            if judged {
                verdict.rings_recorded += 1;
                if !seen.contains(ring) {
                    verdict.violations.push(format!("{name}: {reason} ring {ring} recorded but never received"));
                }
            }
        }

        // The capped queue's reopenings: a completion while another of its todos waits (created,
        // not yet claimed). Each is owed one ring before that todo is claimed; the listener is in.
        let capped: Vec<CappedTodo> = sqlx::query_as(
            "SELECT created_at, claimed_at, completed_at FROM todos WHERE endpoint_id = $1 AND queue = $2",
        )
        .bind(&listener.id)
        .bind(CAPPED)
        .fetch_all(pool)
        .await?;
        for todo in &capped {
            let Some(freed) = todo.completed_at else { continue };
            let waiting_until = capped
                .iter()
                .filter(|other| other.created_at <= freed && other.claimed_at.is_none_or(|claimed| claimed > freed))
                .map(|other| other.claimed_at.unwrap_or(DateTime::<Utc>::MAX_UTC))
                .min();
            let Some(closed) = waiting_until else { continue };
            verdict.reopenings_by_completion += 1;
            let rung = capped_reopens.iter().filter(|at| **at >= freed && **at < closed).count();
            if rung != 1 {
                verdict.violations.push(format!(
                    "{name}: the completion at {freed} freed the capped queue's slot and rang {rung} times (exactly one is owed)"
                ));
            }
        }

        let out_spans = listener.out_spans.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.judge_rollover(pool, listener, &metered_reopens, &out_spans, verdict).await?;
        for (opened, closed) in spans {
            let within = |at: &DateTime<Utc>| *at >= opened && *at < closed;
            let rung = reopens.iter().filter(|at| within(at)).count();
            match out_spans.iter().find(|(out, back)| *out <= opened && opened <= *back) {
                None => {
                    verdict.reopenings_in += 1;
                    if rung != 1 {
                        verdict.violations.push(format!(
                            "{name}: the reopening at {opened} rang {rung} times while in (exactly one is owed)"
                        ));
                    }
                }
                Some((_, back)) => {
                    verdict.reopenings_out += 1;
                    if reopens.iter().any(|at| within(at) && at < back) {
                        verdict.violations.push(format!("{name}: the reopening at {opened} rang while clocked out"));
                    }
                    if rung > 1 {
                        verdict.violations.push(format!("{name}: the reopening at {opened} rang {rung} times"));
                    }
                    if !digests.iter().any(within) {
                        verdict.violations.push(format!(
                            "{name}: the reopening at {opened}, made while out, is in no clock-in digest"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// A doorbell as `doorbell_rings` recorded it for the listener's session.
#[derive(sqlx::FromRow)]
struct RecordedRing {
    ring_id: String,
    reason: String,
    queue: Option<String>,
    at: DateTime<Utc>,
}

/// A todo of the capped queue: when it was created, claimed and completed.
#[derive(sqlx::FromRow)]
struct CappedTodo {
    created_at: DateTime<Utc>,
    claimed_at: Option<DateTime<Utc>>,
    completed_at: Option<DateTime<Utc>>,
}

/// A paused gate.
fn paused() -> Value {
    json!({"max_in_flight": 0})
}

/// Whether a policy as the audit records it (null: none) defers the gate: only a pause does.
fn deferred(policy: Option<&Value>) -> bool {
    policy.is_some_and(|p| p["max_in_flight"] == json!(0) || p["max_claims_per_window"] == json!(0))
}

/// `initialize` on `/mcp/{slug}`: the session id.
async fn initialize(http: &reqwest::Client, base: &str, slug: &str, token: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "stress-listener", "version": "1"}}});
    let response =
        http.post(format!("{base}/mcp/{slug}")).bearer_auth(token).json(&body).send().await.expect("initialize");
    assert!(response.status().is_success(), "initialize: {}", response.status());
    response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("Mcp-Session-Id").to_string()
}

impl Listeners {
    /// The metered queue's reopening: the minute after its first claim begins while its second
    /// todo waits. Owed exactly one ring from then until that todo is claimed, and none in the
    /// spent minute; when the listener was clocked out as the minute turned, no ring before its
    /// clock-in and a clock-in digest after it.
    async fn judge_rollover(
        &self,
        pool: &sqlx::PgPool,
        listener: &Listener,
        rings: &[DateTime<Utc>],
        out_spans: &[(DateTime<Utc>, DateTime<Utc>)],
        verdict: &mut PushVerdict,
    ) -> Result<(), sqlx::Error> {
        let name = format!("listener {}", listener.index);
        let metered: Vec<CappedTodo> = sqlx::query_as(
            "SELECT created_at, claimed_at, completed_at FROM todos WHERE endpoint_id = $1 AND queue = $2 \
             ORDER BY claimed_at NULLS LAST",
        )
        .bind(&listener.id)
        .bind(METERED)
        .fetch_all(pool)
        .await?;
        let [first, second] = metered.as_slice() else { return Ok(()) };
        let (Some(spent_at), Some(claimed_again)) = (first.claimed_at, second.claimed_at) else { return Ok(()) };
        let minute = spent_at.timestamp() - spent_at.timestamp().rem_euclid(60);
        let Some(turned) = DateTime::<Utc>::from_timestamp(minute + 60, 0) else { return Ok(()) };
        if claimed_again < turned || second.created_at > turned {
            return Ok(()); // not a reopening with work waiting
        }
        verdict.reopenings_by_rollover += 1;
        if rings.iter().any(|at| *at >= spent_at && *at < turned) {
            verdict.violations.push(format!("{name}: the metered queue rang reopen in its spent minute {spent_at}"));
        }
        let rung = rings.iter().filter(|at| **at >= turned && **at < claimed_again).count();
        match out_spans.iter().find(|(out, back)| *out <= turned && turned <= *back) {
            None if rung != 1 => verdict.violations.push(format!(
                "{name}: the metered queue's window turned at {turned} and rang {rung} times (exactly one is owed)"
            )),
            None => {}
            Some((_, back)) => {
                if rings.iter().any(|at| *at >= turned && at < back) {
                    verdict.violations.push(format!("{name}: the metered queue's rollover rang while clocked out"));
                }
                let digest: Option<(i64,)> = sqlx::query_as(
                    "SELECT 1::bigint FROM doorbell_rings WHERE session_id = $1 AND reason = 'digest' \
                     AND at >= $2 AND at < $3 LIMIT 1",
                )
                .bind(&listener.session)
                .bind(turned)
                .bind(claimed_again)
                .fetch_optional(pool)
                .await?;
                if digest.is_none() {
                    verdict.violations.push(format!(
                        "{name}: the metered queue's rollover at {turned}, while out, is in no clock-in digest"
                    ));
                }
            }
        }
        Ok(())
    }
}
