//! The stress run's actors and what they share: the bootstrapped world (owner, team, endpoints,
//! policies), the claimers' loop, the producer and the owner's policy edits.

use super::{CREATE_CONCURRENCY, EDIT_RETRIES_MAX, StressConfig, Tally, lock};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

struct Endpoint {
    slug: String,
    token: String,
}

/// Everything the agents, the producer and the owner share.
pub(super) struct World {
    pub(super) http: reqwest::Client,
    replicas: Vec<String>,
    owner_token: String,
    team_slug: String,
    endpoints: Vec<Endpoint>,
    /// The policies as last saved, by team queue name.
    policies: Mutex<BTreeMap<String, Value>>,
    pub(super) policies_saved_at: Instant,
}

/// An MCP tool's answer.
enum Tool {
    Ok(Value),
    Refused { code: String, content: Value },
    Failed(String),
}

impl World {
    /// The owner (`switchboard admin human add`), the team (`admin team add`), the endpoints
    /// (vended over the API) and the policies (PUT over the API).
    pub(super) async fn bootstrap(
        binary: &Path,
        database_url: &str,
        config: &StressConfig,
        replicas: Vec<String>,
    ) -> World {
        let human = admin(binary, &["human", "add", "stress-owner", "--database-url", database_url]).await;
        let team =
            admin(binary, &["team", "add", "pool", "--owner", "stress-owner", "--database-url", database_url]).await;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("reqwest client");
        let mut world = World {
            http,
            replicas,
            owner_token: human["token"].as_str().expect("token").to_string(),
            team_slug: team["slug"].as_str().expect("team slug").to_string(),
            endpoints: Vec::new(),
            policies: Mutex::new(BTreeMap::new()),
            policies_saved_at: Instant::now(),
        };
        for plan in &config.queues {
            if let Some(policy) = &plan.policy {
                let (status, body) = world.put_policy(0, &plan.name, policy).await;
                assert_eq!(status, 200, "PUT policy {}: {body}", plan.name);
                lock_policies(&world).insert(plan.name.clone(), policy.clone());
            }
        }
        world.policies_saved_at = Instant::now();
        for i in 0..config.endpoints.max(1) {
            let mut queues: Vec<String> =
                config.queues.iter().map(|q| format!("team:{}/{}", world.team_slug, q.name)).collect();
            if let Some((own, _)) = &config.own_queue {
                queues.push(own.clone());
            }
            let base = &world.replicas[i % world.replicas.len()];
            let (status, body) = world
                .send(
                    reqwest::Method::POST,
                    &format!("{base}/api/v1/endpoints"),
                    &world.owner_token,
                    Some(json!({"name": format!("worker-{i}"), "queues": queues})),
                )
                .await
                .unwrap_or_else(|e| panic!("vend: {e}"));
            assert_eq!(status, 201, "vend: {body}");
            world.endpoints.push(Endpoint {
                slug: body["slug"].as_str().expect("slug").to_string(),
                token: body["token"].as_str().expect("token").to_string(),
            });
        }
        world
    }

    /// (scope, queue) of every todo to create, interleaved across queues.
    pub(super) fn todo_targets(&self, config: &StressConfig) -> Vec<(String, String)> {
        let mut shares: Vec<((String, String), u32)> = config
            .queues
            .iter()
            .map(|q| ((format!("team:{}", self.team_slug), q.name.clone()), q.todo_share))
            .collect();
        if let Some((own, share)) = &config.own_queue {
            for endpoint in &self.endpoints {
                shares.push(((format!("endpoint:{}", endpoint.slug), own.clone()), *share));
            }
        }
        let total: u32 = shares.iter().map(|s| s.1).sum::<u32>().max(1);
        let mut per_target: Vec<(usize, (String, String))> = shares
            .into_iter()
            .map(|(target, share)| (config.todos * share as usize / total as usize, target))
            .collect();
        let mut targets = Vec::with_capacity(config.todos);
        while per_target.iter().any(|(left, _)| *left > 0) {
            for (left, target) in per_target.iter_mut().filter(|(left, _)| *left > 0) {
                *left -= 1;
                targets.push(target.clone());
            }
        }
        targets
    }

    pub(super) async fn create_todos(&self, targets: &[(String, String)], tally: &Mutex<Tally>) {
        for (chunk_index, chunk) in targets.chunks(CREATE_CONCURRENCY).enumerate() {
            let creates = chunk
                .iter()
                .enumerate()
                .map(|(i, target)| self.create_todo(chunk_index * CREATE_CONCURRENCY + i, target, tally));
            futures::future::join_all(creates).await;
        }
    }

    async fn create_todo(&self, n: usize, (scope, queue): &(String, String), tally: &Mutex<Tally>) {
        let base = &self.replicas[n % self.replicas.len()];
        let body = json!({"scope": scope, "queue": queue, "title": format!("stress {n}"), "max_attempts": 4});
        match self.send(reqwest::Method::POST, &format!("{base}/api/v1/todos"), &self.owner_token, Some(body)).await {
            Ok((201, _)) => lock(tally).todos_created += 1,
            Ok((503, _)) => lock(tally).unavailable += 1,
            Ok((status, body)) => lock(tally).unexpected(format!("create todo: {status} {body}")),
            Err(_) => lock(tally).transport_errors += 1,
        }
    }

    async fn put_policy(&self, n: usize, queue: &str, policy: &Value) -> (u16, Value) {
        let base = &self.replicas[n % self.replicas.len()];
        let url = format!("{base}/api/v1/admission/team:{}/{queue}", self.team_slug);
        self.send(reqwest::Method::PUT, &url, &self.owner_token, Some(policy.clone()))
            .await
            .unwrap_or_else(|e| (0, json!(e)))
    }

    async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        token: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        let mut request = self.http.request(method, url).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// One `tools/call` on `base`'s `/mcp/{slug}`.
    async fn tool(&self, base: &str, endpoint: &Endpoint, name: &str, arguments: Value) -> Tool {
        let url = format!("{base}/mcp/{}", endpoint.slug);
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        match self.send(reqwest::Method::POST, &url, &endpoint.token, Some(call)).await {
            Err(error) => Tool::Failed(error),
            Ok((200, answer)) => {
                let result = &answer["result"];
                let content = result["structuredContent"].clone();
                match result["isError"].as_bool() {
                    Some(false) => Tool::Ok(content),
                    Some(true) => Tool::Refused { code: content["code"].as_str().unwrap_or("").to_string(), content },
                    None => Tool::Failed(format!("{name}: not a tool result: {answer}")),
                }
            }
            Ok((status, answer)) => Tool::Failed(format!("{name}: HTTP {status} {answer}")),
        }
    }
}

/// Runs `switchboard admin ARGS` and returns its JSON answer.
pub(super) async fn admin(binary: &Path, args: &[&str]) -> Value {
    let output = tokio::process::Command::new(binary)
        .arg("admin")
        .args(args)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap_or_else(|e| panic!("run switchboard admin {args:?}: {e}"));
    assert!(output.status.success(), "switchboard admin {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("switchboard admin {args:?} printed no JSON: {e}"))
}

/// `team/QUEUE` or `own/QUEUE` for a todo or a deferred entry.
fn queue_key(item: &Value) -> String {
    let kind = if item["scope"].as_str().is_some_and(|s| s.starts_with("team:")) { "team" } else { "own" };
    format!("{kind}/{}", item["queue"].as_str().unwrap_or("?"))
}

/// One agent: claim, then do something with the claim, until `stop`.
pub(super) async fn claim_loop(
    claimer: usize,
    world: &World,
    config: &StressConfig,
    tally: &Mutex<Tally>,
    stop: &AtomicBool,
) {
    // The agents' choices are seeded (the run itself is not deterministic: real threads, real time).
    let mut choices = crate::faults::Rng::new(config.seed.wrapping_mul(1_000_003).wrapping_add(claimer as u64));
    let endpoint = &world.endpoints[claimer % world.endpoints.len()];
    let lease = config.lease_seconds;
    let mut step = claimer;
    while !stop.load(Ordering::SeqCst) {
        step += 1;
        let base = &world.replicas[step % world.replicas.len()];
        let claimed = if choices.below(100) < 15 {
            named_claim(world, base, endpoint, lease, &mut choices, tally).await
        } else {
            match world.tool(base, endpoint, "claim_next", json!({"lease_ttl_seconds": lease})).await {
                Tool::Ok(answer) if answer["empty"] == json!(false) => Some(answer["todo"].clone()),
                Tool::Ok(answer) => {
                    let mut tally = lock(tally);
                    for entry in answer["deferred"].as_array().into_iter().flatten() {
                        tally.refused(&queue_key(entry), entry["reason"].as_str().unwrap_or("?"));
                    }
                    None
                }
                outcome => {
                    unexpected(tally, "claim_next", outcome);
                    None
                }
            }
        };
        let Some(todo) = claimed else {
            tokio::time::sleep(Duration::from_millis(40 + choices.below(80))).await;
            continue;
        };
        {
            let mut tally = lock(tally);
            tally.claims += 1;
            *tally.claims_by_queue.entry(queue_key(&todo)).or_default() += 1;
        }
        let id = todo["id"].as_str().unwrap_or_default().to_string();
        tokio::time::sleep(Duration::from_millis(choices.below(20))).await;
        let base = &world.replicas[(step + 1) % world.replicas.len()];
        let verb = match choices.below(100) {
            0..68 => "complete",
            68..75 => "fail",
            75..83 => "release",
            83..93 => {
                lock(tally).abandoned += 1;
                continue;
            }
            _ => {
                // A worker too slow for its lease: by now the reaper or another claimer may
                // have taken the todo, and finishing it must then be refused.
                tokio::time::sleep(Duration::from_millis(lease.max(0) as u64 * 1000 + 400)).await;
                "complete"
            }
        };
        match world.tool(base, endpoint, verb, json!({"id": id})).await {
            Tool::Ok(_) => {
                let mut tally = lock(tally);
                match verb {
                    "complete" => tally.completes += 1,
                    "fail" => tally.fails += 1,
                    _ => tally.releases += 1,
                }
            }
            // The lease lapsed before the call: the todo was reaped or taken over meanwhile.
            Tool::Refused { code, .. } if code == "conflict" => lock(tally).stale_refused += 1,
            outcome => unexpected(tally, verb, outcome),
        }
    }
}

/// `claim` of a named todo: a lapsed claim when the listing shows one (a takeover through the
/// blocking path), else a pending todo (which a deferred queue refuses).
async fn named_claim(
    world: &World,
    base: &str,
    endpoint: &Endpoint,
    lease: i64,
    choices: &mut crate::faults::Rng,
    tally: &Mutex<Tally>,
) -> Option<Value> {
    let now = chrono::Utc::now();
    let mut candidates = Vec::new();
    for state in ["claimed", "pending"] {
        match world.tool(base, endpoint, "list_todos", json!({"state": state, "limit": 50})).await {
            Tool::Ok(answer) => {
                candidates = answer["todos"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| {
                        state == "pending"
                            || t["lease_expires_at"]
                                .as_str()
                                .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                                .is_some_and(|at| at < now)
                    })
                    .filter_map(|t| Some((t["id"].as_str()?.to_string(), queue_key(t))))
                    .collect();
            }
            outcome => unexpected(tally, "list_todos", outcome),
        }
        if !candidates.is_empty() {
            break;
        }
    }
    if candidates.is_empty() {
        return None;
    }
    let (id, key) = &candidates[choices.below(candidates.len() as u64) as usize];
    match world.tool(base, endpoint, "claim", json!({"id": id, "lease_ttl_seconds": lease})).await {
        Tool::Ok(answer) => {
            lock(tally).named_claims += 1;
            Some(answer["todo"].clone())
        }
        Tool::Refused { code, content } if code == "deferred" => {
            // The error names the queue but not its scope; the listing had both.
            lock(tally).refused(key, content["reason"].as_str().unwrap_or("?"));
            None
        }
        Tool::Refused { code, .. } if code == "conflict" => {
            lock(tally).claim_conflicts += 1;
            None
        }
        outcome => {
            unexpected(tally, "claim", outcome);
            None
        }
    }
}

fn unexpected(tally: &Mutex<Tally>, verb: &str, outcome: Tool) {
    let mut tally = lock(tally);
    match outcome {
        Tool::Refused { code, .. } if code == "unavailable" => tally.unavailable += 1,
        Tool::Failed(error) if error.contains("HTTP 503") => tally.unavailable += 1,
        Tool::Ok(answer) => tally.unexpected(format!("{verb}: unexpected answer {answer}")),
        Tool::Refused { content, .. } => tally.unexpected(format!("{verb}: {content}")),
        Tool::Failed(error) if error.contains("HTTP") || error.contains("not a tool result") => {
            tally.unexpected(format!("{verb}: {error}"))
        }
        Tool::Failed(_) => tally.transport_errors += 1,
    }
}

/// Creates the remaining todos evenly over `spread`.
pub(super) async fn produce(world: &World, targets: &[(String, String)], spread: Duration, tally: &Mutex<Tally>) {
    let pause = spread.checked_div(targets.len().max(1) as u32).unwrap_or_default();
    for (i, target) in targets.iter().enumerate() {
        world.create_todo(10_000 + i, target, tally).await;
        tokio::time::sleep(pause).await;
    }
}

/// The owner's edits, spread over the run: raise the window limit by 2, raise the in-flight cap
/// by 1 (at most once per queue), or save the policy unchanged. Never lower, never a new window.
pub(super) async fn edit_policies(world: &World, config: &StressConfig, tally: &Mutex<Tally>) {
    let budgeted: Vec<String> = lock_policies(world).keys().cloned().collect();
    if budgeted.is_empty() || config.policy_edits == 0 {
        return;
    }
    let pause = config.run_for.checked_div(config.policy_edits as u32 + 1).unwrap_or_default();
    let mut raised_in_flight: Vec<String> = Vec::new();
    for edit in 0..config.policy_edits {
        tokio::time::sleep(pause).await;
        let queue = &budgeted[edit % budgeted.len()];
        let mut policy = lock_policies(world)[queue].clone();
        if edit % 4 != 3 {
            if let Some(max) = policy["max_claims_per_window"].as_i64() {
                policy["max_claims_per_window"] = json!(max + 2);
            } else if let Some(max) = policy["max_in_flight"].as_i64()
                && !raised_in_flight.contains(queue)
            {
                policy["max_in_flight"] = json!(max + 1);
                raised_in_flight.push(queue.clone());
            }
        }
        for attempt in 0..=EDIT_RETRIES_MAX {
            let (status, body) = world.put_policy(edit + attempt, queue, &policy).await;
            match status {
                200 => {
                    lock(tally).policy_edits += 1;
                    lock_policies(world).insert(queue.clone(), policy.clone());
                    break;
                }
                429 => tokio::time::sleep(Duration::from_millis(1100)).await,
                503 => {
                    lock(tally).unavailable += 1;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                _ => {
                    lock(tally).unexpected(format!("PUT policy {queue}: {status} {body}"));
                    break;
                }
            }
        }
    }
}

fn lock_policies(world: &World) -> std::sync::MutexGuard<'_, BTreeMap<String, Value>> {
    world.policies.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Clients that hang up mid-request (issue #51): `count` requests spread over `spread`, each an
/// MCP `claim_next` or an API create, abandoned after 0–30 ms. Some are cut before the claim
/// transaction takes its policy lock, some after it, some after the commit; what committed must
/// keep every invariant, and what did not must leave no trace (a claim whose answer was lost
/// lapses and is reaped like any other).
pub(super) async fn abandon_requests(world: &World, count: usize, spread: Duration, seed: u64, tally: &Mutex<Tally>) {
    if count == 0 {
        return;
    }
    let mut rng = crate::faults::Rng::new(seed ^ 0xab4d_0051);
    let pause = spread.checked_div(count as u32).unwrap_or_default();
    let team_queues: Vec<String> = lock_policies(world).keys().cloned().collect();
    for n in 0..count {
        let base = &world.replicas[n % world.replicas.len()];
        let endpoint = &world.endpoints[n % world.endpoints.len()];
        let request = if rng.below(2) == 0 || team_queues.is_empty() {
            let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "claim_next", "arguments": {"lease_ttl_seconds": 1}}});
            world.http.post(format!("{base}/mcp/{}", endpoint.slug)).bearer_auth(&endpoint.token).json(&call)
        } else {
            let queue = &team_queues[rng.below(team_queues.len() as u64) as usize];
            let body = json!({"scope": format!("team:{}", world.team_slug), "queue": queue,
                              "title": format!("abandoned {n}"), "max_attempts": 4});
            world.http.post(format!("{base}/api/v1/todos")).bearer_auth(&world.owner_token).json(&body)
        };
        let give_up_after = Duration::from_millis(rng.below(30));
        let _ = tokio::time::timeout(give_up_after, request.send()).await;
        lock(tally).aborted_requests += 1;
        tokio::time::sleep(pause).await;
    }
}
