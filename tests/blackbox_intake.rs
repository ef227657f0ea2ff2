//! Intake capacity and owner cancellation (context/intake-capacity.md, the provenance /
//! cancellation / capacity ADR) through the real binary on real PostgreSQL: the operator API,
//! MCP and signed webhook ingest, across one or two server processes. One test per scenario.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::{Client, Server, add_human, data_dir, run};

/// A scrape token of the minimum length or more (contract §1: at least 32 bytes).
const METRICS_TOKEN: &str = "scrape-token-for-the-intake-tests-0123456789";
const CAPACITY_PATH: &str = "/api/v1/system/queue-capacity";
const CAPACITY_ENV: &str = "SWITCHBOARD_QUEUE_MAX_PENDING";

/// One HTTP answer: status, `Retry-After`, the raw body and the body as JSON (Null if not JSON).
#[derive(Debug)]
struct Reply {
    status: u16,
    retry_after: Option<String>,
    text: String,
    body: Value,
}

async fn send(client: &Client, method: Method, path: &str, token: &str, body: Option<Value>) -> Reply {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", client.base)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("HTTP request");
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, retry_after, text, body }
}

/// A vended endpoint: its slug, its `sbk_` bearer and its scope string.
#[derive(Clone)]
struct Ep {
    slug: String,
    key: String,
    scope: String,
}

/// A registered webhook: the ingest path and its signing secret.
struct Hook {
    path: String,
    secret: String,
}

/// One database, one or more `switchboard serve` processes on it (each with its own log dir).
struct World {
    db: engine::testing::TestDatabase,
    servers: Vec<(Server, tempfile::TempDir)>,
    client: Client,
}

impl World {
    async fn start(args: &[&str], env: &[(&str, &str)]) -> World {
        let db = engine::testing::empty_database().await;
        let mut world = World { db, servers: vec![], client: Client::new("http://unused") };
        world.client = world.serve(args, env);
        world
    }

    /// Starts another server process on the same database; returns a client for it.
    fn serve(&mut self, args: &[&str], env: &[(&str, &str)]) -> Client {
        let dir = data_dir();
        let mut all = vec!["--database-url", self.db.url.as_str()];
        all.extend_from_slice(args);
        let server = Server::start(&all, env, dir.path());
        let client = Client::new(&server.base);
        self.servers.push((server, dir));
        client
    }

    fn log(&self, index: usize) -> String {
        std::fs::read_to_string(&self.servers[index].0.stderr_log).unwrap_or_default()
    }

    /// A human; returns (human_id, token).
    fn human(&self, name: &str) -> (String, String) {
        add_human(name, &["--database-url", &self.db.url])
    }

    /// An instance admin; returns the token.
    fn admin(&self, name: &str) -> String {
        add_human(name, &["--admin", "--database-url", &self.db.url]).1
    }

    async fn vend(&self, token: &str, body: Value) -> Ep {
        let endpoint = self.client.vend(token, body).await;
        let slug = endpoint["slug"].as_str().expect("slug").to_string();
        Ep { scope: format!("endpoint:{slug}"), slug, key: endpoint["token"].as_str().expect("token").to_string() }
    }

    async fn push(&self, token: &str, scope: &str, queue: &str, title: &str) -> String {
        let reply = push_on(&self.client, token, scope, queue, title).await;
        assert_eq!(reply.status, 201, "push {title}: {}", reply.text);
        id_of(&reply.body["todo"])
    }

    async fn todo(&self, token: &str, id: &str) -> Value {
        let (status, body) = self.client.get(&format!("/api/v1/todos/{id}"), token).await;
        assert_eq!(status, 200, "GET todo {id}: {body}");
        body["todo"].clone()
    }

    async fn state(&self, token: &str, id: &str) -> String {
        self.todo(token, id).await["state"].as_str().expect("state").to_string()
    }

    /// The ids of the pending todos of one queue identity.
    async fn pending(&self, token: &str, scope: &str, queue: &str) -> BTreeSet<String> {
        let path = format!("/api/v1/todos?scope={scope}&queue={queue}&state=pending&limit=200");
        let (status, body) = self.client.get(&path, token).await;
        assert_eq!(status, 200, "list pending: {body}");
        body["todos"].as_array().expect("todos").iter().map(id_of).collect()
    }

    async fn clear(&self, token: &str, scope: &str, queue: &str) -> Reply {
        send(&self.client, Method::POST, &format!("/api/v1/queues/{scope}/{queue}/clear"), token, None).await
    }

    async fn remove(&self, token: &str, scope: &str, queue: &str, id: &str) -> Reply {
        send(&self.client, Method::DELETE, &format!("/api/v1/queues/{scope}/{queue}/todos/{id}"), token, None).await
    }

    async fn edit(&self, token: &str, id: &str, body: Value) -> Reply {
        send(&self.client, Method::PATCH, &format!("/api/v1/todos/{id}"), token, Some(body)).await
    }

    async fn webhook(&self, token: &str, targets: &[(&str, &str)]) -> Hook {
        let targets: Vec<Value> =
            targets.iter().map(|(scope, queue)| json!({"scope": scope, "queue": queue})).collect();
        let (status, hook) =
            self.client.post("/api/v1/webhooks", token, json!({"name": "provider", "targets": targets})).await;
        assert_eq!(status, 201, "webhook: {hook}");
        let url = hook["ingest_url"].as_str().expect("ingest_url");
        let path = url.split_once("/ingest/").map(|(_, id)| format!("/ingest/{id}")).expect("ingest path");
        Hook { path, secret: hook["secret"].as_str().expect("secret").to_string() }
    }

    async fn deliver(&self, hook: &Hook, delivery_id: &str, body: &str) -> Reply {
        deliver_on(&self.client, hook, delivery_id, body).await
    }
}

async fn push_on(client: &Client, token: &str, scope: &str, queue: &str, title: &str) -> Reply {
    let body = json!({"scope": scope, "queue": queue, "title": title});
    send(client, Method::POST, "/api/v1/todos", token, Some(body)).await
}

async fn capacity_get(client: &Client, token: &str) -> Reply {
    send(client, Method::GET, CAPACITY_PATH, token, None).await
}

async fn capacity_patch(client: &Client, token: &str, body: Value) -> Reply {
    send(client, Method::PATCH, CAPACITY_PATH, token, Some(body)).await
}

/// PATCHes the capacity as an instance admin and expects it stored.
async fn set_capacity(client: &Client, admin: &str, max: i64) {
    let reply = capacity_patch(client, admin, json!({"max_pending_per_queue": max})).await;
    assert_eq!(reply.status, 200, "PATCH capacity {max}: {}", reply.text);
    assert_capacity(&reply.body, Some(max), max, "setting", false);
}

/// The capacity answer: `{setting: {max_pending_per_queue}, effective: {max_pending_per_queue, source, locked}}`.
fn assert_capacity(body: &Value, setting: Option<i64>, effective: i64, source: &str, locked: bool) {
    assert_eq!(body["setting"]["max_pending_per_queue"], setting.map_or(Value::Null, Value::from), "setting: {body}");
    let shown = &body["effective"];
    assert_eq!(
        (shown["max_pending_per_queue"].as_i64(), shown["source"].as_str(), shown["locked"].as_bool()),
        (Some(effective), Some(source), Some(locked)),
        "effective: {body}"
    );
}

/// 429 `queue_full` with `Retry-After` and `{queue, pending, max, error}`.
fn assert_queue_full(reply: &Reply, queue: &str, pending: i64, max: i64) {
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

fn id_of(todo: &Value) -> String {
    todo["id"].as_str().unwrap_or_else(|| panic!("no id in {todo}")).to_string()
}

async fn deliver_on(client: &Client, hook: &Hook, delivery_id: &str, body: &str) -> Reply {
    let response = reqwest::Client::new()
        .post(format!("{}{}", client.base, hook.path))
        .headers(support::sign(&hook.secret, delivery_id, body))
        .body(body.to_string())
        .send()
        .await
        .expect("POST ingest");
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, retry_after, text, body }
}

/// `claim_next` over MCP; the claimed todo's id, or None when empty.
async fn claim_next(client: &Client, ep: &Ep, arguments: Value) -> Option<String> {
    let (is_error, answer) = client.tool(&ep.slug, &ep.key, "claim_next", arguments).await;
    assert!(!is_error, "claim_next: {answer}");
    answer["todo"]["id"].as_str().map(str::to_string)
}

async fn tool_names(client: &Client, ep: &Ep) -> Vec<String> {
    let (status, listed) = client.rpc(&ep.slug, &ep.key, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

/// Polls (bounded) until the todo is in `state`.
async fn wait_for_state(world: &World, token: &str, id: &str, state: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let now = world.state(token, id).await;
        if now == state {
            return;
        }
        assert!(Instant::now() < deadline, "todo {id} still {now}, not {state}, after {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of `name{labels}` in a Prometheus text scrape, if present (labels in any order).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<&str, &str> = labels.iter().copied().collect();
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = series.split_once('{').unwrap_or((series, "}"));
        if series_name != name {
            return None;
        }
        let body = rest.strip_suffix('}')?;
        let found: BTreeMap<&str, &str> = body
            .split(',')
            .filter(|p| !p.is_empty())
            .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k, v.trim_matches('"'))))
            .collect();
        (found == wanted).then(|| value.parse().expect("sample value"))
    })
}

// intake-capacity scenario 1
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s01_clear_all_ignores_provenance_and_reports_the_exact_count() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "other"]})).await;

    // Human, agent and ingest provenance in one queue identity. (Workflow and system todos have
    // no producer a black-box test can drive; the removal predicate ignores provenance anyway.)
    let keyed = send(
        &world.client,
        Method::POST,
        "/api/v1/todos",
        &alice,
        Some(json!({"scope": ep.scope, "queue": "inbox", "title": "by hand, keyed", "idempotency_key": "hand-1"})),
    )
    .await;
    assert_eq!(keyed.status, 201, "{}", keyed.text);
    let mut ids = vec![id_of(&keyed.body["todo"]), world.push(&alice, &ep.scope, "inbox", "by hand").await];
    for title in ["from the agent 1", "from the agent 2"] {
        let (is_error, made) =
            world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": title})).await;
        assert!(!is_error, "{made}");
        ids.push(id_of(&made["todo"]));
    }
    let hook = world.webhook(&alice, &[(&ep.scope, "inbox")]).await;
    let delivered = world.deliver(&hook, "msg_1", r#"{"title": "from a provider"}"#).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text);
    let ingested = delivered.body["todos"][0].as_str().expect("ingested id").to_string();
    ids.push(ingested.clone());
    let spared = world.push(&alice, &ep.scope, "other", "another queue identity").await;

    let mut kinds = vec![];
    for id in &ids {
        kinds.push(world.todo(&alice, id).await["created_by_kind"].as_str().expect("kind").to_string());
    }
    kinds.sort();
    assert_eq!(kinds, ["agent", "agent", "human", "human", "ingest"]);

    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(5)), "{}", cleared.text);
    for id in &ids {
        assert_eq!(world.state(&alice, id).await, "discarded", "{id}");
    }
    assert!(world.pending(&alice, &ep.scope, "inbox").await.is_empty());
    assert_eq!(world.state(&alice, &spared).await, "pending", "another queue identity is untouched");

    // Discarded work keeps its dedup slot: neither a redelivery nor the same key makes a new todo.
    let again = world.deliver(&hook, "msg_1", r#"{"title": "from a provider"}"#).await;
    assert_eq!((again.status, again.body["deduped"].as_bool()), (202, Some(true)), "{}", again.text);
    assert_eq!(again.body["todos"], json!([ingested]));
    let rekeyed = send(
        &world.client,
        Method::POST,
        "/api/v1/todos",
        &alice,
        Some(json!({"scope": ep.scope, "queue": "inbox", "title": "by hand, keyed", "idempotency_key": "hand-1"})),
    )
    .await;
    assert_eq!((rekeyed.status, rekeyed.body["deduped"].as_bool()), (200, Some(true)), "{}", rekeyed.text);
    assert_eq!(id_of(&rekeyed.body["todo"]), ids[0]);
    assert!(world.pending(&alice, &ep.scope, "inbox").await.is_empty(), "nothing was resurrected");

    let twice = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((twice.status, twice.body["removed"].as_i64()), (200, Some(0)), "{}", twice.text);
}

// intake-capacity scenario 2
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s02_clear_all_spares_claimed_work_and_its_claimant_completes() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let ids = [
        world.push(&alice, &ep.scope, "inbox", "first").await,
        world.push(&alice, &ep.scope, "inbox", "second").await,
        world.push(&alice, &ep.scope, "inbox", "third").await,
    ];
    let claimed = claim_next(&world.client, &ep, json!({})).await.expect("a claim");
    assert_eq!(claimed, ids[0]);

    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(2)), "{}", cleared.text);
    assert_eq!(world.state(&alice, &ids[0]).await, "claimed");
    assert_eq!(world.state(&alice, &ids[1]).await, "discarded");
    assert_eq!(world.state(&alice, &ids[2]).await, "discarded");

    let (is_error, done) = world.client.tool(&ep.slug, &ep.key, "complete", json!({"id": claimed})).await;
    assert!(!is_error, "{done}");
    assert_eq!(world.state(&alice, &ids[0]).await, "done");
}

// intake-capacity scenario 3
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s03_clear_all_on_an_empty_queue_removes_zero() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "busy"]})).await;
    for _ in 0..2 {
        let cleared = world.clear(&alice, &ep.scope, "inbox").await;
        assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(0)), "{}", cleared.text);
    }
    // A queue holding only claimed work is empty of pending todos too.
    let held = world.push(&alice, &ep.scope, "busy", "held").await;
    assert_eq!(claim_next(&world.client, &ep, json!({"queue": "busy"})).await.as_deref(), Some(held.as_str()));
    let cleared = world.clear(&alice, &ep.scope, "busy").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(0)), "{}", cleared.text);
    assert_eq!(world.state(&alice, &held).await, "claimed");
}

// intake-capacity scenario 4
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s04_removing_an_agent_todo_leaves_the_others_in_order() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let mut ids = vec![];
    for title in ["a", "b", "c", "d"] {
        let (is_error, made) =
            world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": title})).await;
        assert!(!is_error, "{made}");
        assert_eq!(made["todo"]["created_by_kind"], "agent");
        ids.push(id_of(&made["todo"]));
    }
    let removed = world.remove(&alice, &ep.scope, "inbox", &ids[1]).await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    assert_eq!(world.state(&alice, &ids[1]).await, "discarded");
    let expected: BTreeSet<String> = [&ids[0], &ids[2], &ids[3]].into_iter().cloned().collect();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, expected);

    // The survivors are claimed oldest first, exactly as before the removal.
    for id in [&ids[0], &ids[2], &ids[3]] {
        assert_eq!(claim_next(&world.client, &ep, json!({})).await.as_ref(), Some(id));
    }
    assert_eq!(claim_next(&world.client, &ep, json!({})).await, None);
}

// intake-capacity scenario 5
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s05_ingest_todos_are_not_editable_but_removable_and_own_human_todos_are_editable() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "inbox")]).await;
    let delivered = world.deliver(&hook, "msg_1", r#"{"title": "issue opened"}"#).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text);
    let ingested = delivered.body["todos"][0].as_str().expect("id").to_string();
    let (is_error, made) =
        world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": "agent's"})).await;
    assert!(!is_error, "{made}");
    let agents = id_of(&made["todo"]);
    let own = world.push(&alice, &ep.scope, "inbox", "alice's").await;

    let refused = world.edit(&alice, &ingested, json!({"title": "rewritten"})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    let refused = world.edit(&alice, &agents, json!({"payload": {"x": 1}})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    assert_eq!(world.todo(&alice, &ingested).await["title"], "issue opened", "unchanged");
    assert_eq!(world.todo(&alice, &agents).await["payload"], Value::Null, "unchanged");

    let removed = world.remove(&alice, &ep.scope, "inbox", &ingested).await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    assert_eq!(world.state(&alice, &ingested).await, "discarded");

    let edited = world.edit(&alice, &own, json!({"title": "alice's, revised", "payload": {"n": 2}})).await;
    assert_eq!(edited.status, 200, "{}", edited.text);
    assert_eq!(
        (&edited.body["todo"]["id"], &edited.body["todo"]["title"], &edited.body["todo"]["state"]),
        (&json!(own), &json!("alice's, revised"), &json!("pending"))
    );
    let shown = world.todo(&alice, &own).await;
    assert_eq!((&shown["title"], &shown["payload"]), (&json!("alice's, revised"), &json!({"n": 2})));

    // Outside the caller's reach: 404, nothing changes.
    let foreign = world.edit(&bob, &own, json!({"title": "bob was here"})).await;
    assert_eq!((foreign.status, foreign.body["code"].as_str()), (404, Some("not_found")), "{}", foreign.text);
    assert_eq!(world.todo(&alice, &own).await["title"], "alice's, revised");
}

// intake-capacity scenario 6
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s06_a_claim_committed_before_a_removal_wins() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let id = world.push(&alice, &ep.scope, "inbox", "contested").await;
    let (is_error, claimed) = world.client.tool(&ep.slug, &ep.key, "claim", json!({"id": id})).await;
    assert!(!is_error, "{claimed}");

    let refused = world.remove(&alice, &ep.scope, "inbox", &id).await;
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert_eq!(
        (refused.body["code"].as_str(), refused.body["state"].as_str()),
        (Some("not_pending"), Some("claimed")),
        "{}",
        refused.text
    );
    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!(cleared.body["removed"].as_i64(), Some(0), "{}", cleared.text);
    assert_eq!(world.state(&alice, &id).await, "claimed", "the claim won completely");

    let (is_error, done) = world.client.tool(&ep.slug, &ep.key, "complete", json!({"id": id})).await;
    assert!(!is_error, "{done}");
    let refused = world.remove(&alice, &ep.scope, "inbox", &id).await;
    assert_eq!(
        (refused.status, refused.body["code"].as_str(), refused.body["state"].as_str()),
        (409, Some("not_pending"), Some("done")),
        "{}",
        refused.text
    );
}

// intake-capacity scenario 7
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s07_a_removal_committed_before_claim_next_wins() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let removed_id = world.push(&alice, &ep.scope, "inbox", "older, removed").await;
    let kept = world.push(&alice, &ep.scope, "inbox", "newer, kept").await;
    let removed = world.remove(&alice, &ep.scope, "inbox", &removed_id).await;
    assert_eq!(removed.status, 204, "{}", removed.text);

    assert_eq!(claim_next(&world.client, &ep, json!({})).await, Some(kept));
    assert_eq!(claim_next(&world.client, &ep, json!({})).await, None, "the removed todo is never returned");
    let (is_error, refused) = world.client.tool(&ep.slug, &ep.key, "claim", json!({"id": removed_id})).await;
    assert!(is_error, "a discarded todo cannot be claimed by id either: {refused}");
    assert_eq!(world.state(&alice, &removed_id).await, "discarded");
    let again = world.remove(&alice, &ep.scope, "inbox", &removed_id).await;
    assert_eq!(
        (again.status, again.body["code"].as_str(), again.body["state"].as_str()),
        (409, Some("not_pending"), Some("discarded")),
        "{}",
        again.text
    );
}

// intake-capacity scenario 8
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s08_twenty_claimers_racing_a_clear_across_two_servers_account_for_all_fifty() {
    let mut world = World::start(&[], &[]).await;
    let second = world.serve(&[], &[]);
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let mut ids = vec![];
    for i in 0..50 {
        ids.push(world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await);
    }

    let clients = [world.client.clone(), second];
    let mut claims = vec![];
    let mut clear = None;
    for i in 0..20 {
        let (client, claimer) = (clients[i % 2].clone(), ep.clone());
        claims.push(tokio::spawn(async move { claim_next(&client, &claimer, json!({})).await }));
        if i == 9 {
            let (client, alice, scope) = (clients[1].clone(), alice.clone(), ep.scope.clone());
            clear = Some(tokio::spawn(async move {
                send(&client, Method::POST, &format!("/api/v1/queues/{scope}/inbox/clear"), &alice, None).await
            }));
        }
    }
    let mut claimed = BTreeSet::new();
    for claim in claims {
        if let Some(id) = claim.await.expect("join") {
            assert!(claimed.insert(id.clone()), "{id} was claimed twice");
        }
    }
    let cleared = clear.expect("clear").await.expect("join");
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    let removed = cleared.body["removed"].as_u64().expect("removed") as usize;
    assert_eq!(claimed.len() + removed, 50, "claimed {} + removed {removed}", claimed.len());

    let mut discarded = 0;
    for id in &ids {
        match world.state(&alice, id).await.as_str() {
            "claimed" => assert!(claimed.contains(id), "{id} is claimed but no claimer got it"),
            "discarded" => {
                assert!(!claimed.contains(id), "{id} was handed out and then discarded");
                discarded += 1;
            }
            other => panic!("{id} ended {other}"),
        }
    }
    assert_eq!(discarded, removed, "the count matches the todos discarded");
}

// intake-capacity scenario 9
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s09_another_humans_remove_and_clear_are_404_and_change_nothing() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let (_, carol) = world.human("carol");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let bobs = world.vend(&bob, json!({"name": "b", "queues": ["inbox"]})).await;
    let first = world.push(&alice, &ep.scope, "inbox", "one").await;
    let second = world.push(&alice, &ep.scope, "inbox", "two").await;

    let nowhere = "endpoint:no-such-endpoint";
    let unknown_remove = world.remove(&bob, nowhere, "inbox", &first).await;
    let unknown_clear = world.clear(&bob, nowhere, "inbox").await;
    assert_eq!((unknown_remove.status, unknown_clear.status), (404, 404));
    let foreign_remove = world.remove(&bob, &ep.scope, "inbox", &first).await;
    let foreign_clear = world.clear(&bob, &ep.scope, "inbox").await;
    assert_eq!((foreign_remove.status, &foreign_remove.text), (404, &unknown_remove.text), "byte-identical");
    assert_eq!((foreign_clear.status, &foreign_clear.text), (404, &unknown_clear.text), "byte-identical");
    assert_eq!(foreign_remove.body["code"], "not_found");
    // Bob naming his own queue with alice's todo id: not a todo of that identity.
    let crossed = world.remove(&bob, &bobs.scope, "inbox", &first).await;
    assert_eq!((crossed.status, crossed.body["code"].as_str()), (404, Some("not_found")), "{}", crossed.text);
    let both: BTreeSet<String> = [first.clone(), second.clone()].into();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, both, "bob changed nothing");

    // A team queue: a plain member is "anyone else"; the team's admin and owner manage it.
    let team = run(&["admin", "team", "add", "core", "--owner", "alice", "--database-url", &world.db.url], &[]);
    assert_eq!(team.0, 0, "{}", team.2);
    let team: Value = serde_json::from_str(team.1.trim()).expect("team JSON");
    let slug = team["slug"].as_str().expect("team slug").to_string();
    for (human, role) in [("bob", "member"), ("carol", "admin")] {
        let added = run(
            &["admin", "team", "member", "add", &slug, human, "--role", role, "--database-url", &world.db.url],
            &[],
        );
        assert_eq!(added.0, 0, "{}", added.2);
    }
    let team_scope = format!("team:{slug}");
    let lane = [
        world.push(&alice, &team_scope, "lane", "team work 1").await,
        world.push(&alice, &team_scope, "lane", "team work 2").await,
    ];
    let unknown_team = world.clear(&bob, "team:no-such-team", "lane").await;
    let member_clear = world.clear(&bob, &team_scope, "lane").await;
    assert_eq!((member_clear.status, &member_clear.text), (404, &unknown_team.text), "byte-identical");
    let member_remove = world.remove(&bob, &team_scope, "lane", &lane[0]).await;
    assert_eq!(member_remove.status, 404, "{}", member_remove.text);
    assert_eq!(world.pending(&alice, &team_scope, "lane").await.len(), 2, "the member changed nothing");

    let by_admin = world.remove(&carol, &team_scope, "lane", &lane[0]).await;
    assert_eq!(by_admin.status, 204, "{}", by_admin.text);
    let by_owner = world.clear(&alice, &team_scope, "lane").await;
    assert_eq!((by_owner.status, by_owner.body["removed"].as_i64()), (200, Some(1)), "{}", by_owner.text);
}

// intake-capacity scenario 10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s10_a_todo_of_another_queue_identity_than_the_one_named_is_404() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let w = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "other"]})).await;
    let v = world.vend(&alice, json!({"name": "v", "queues": ["inbox"]})).await;
    let other_queue = world.push(&alice, &w.scope, "other", "w/other").await;
    let other_endpoint = world.push(&alice, &v.scope, "inbox", "v/inbox").await;
    let named = world.push(&alice, &w.scope, "inbox", "w/inbox").await;

    let never = world.remove(&alice, &w.scope, "inbox", "td_00000000-0000-0000-0000-000000000000").await;
    assert_eq!((never.status, never.body["code"].as_str()), (404, Some("not_found")), "{}", never.text);
    for id in [&other_queue, &other_endpoint] {
        let refused = world.remove(&alice, &w.scope, "inbox", id).await;
        assert_eq!((refused.status, &refused.text), (404, &never.text), "{id}: same as an id never minted");
        assert_eq!(world.state(&alice, id).await, "pending");
    }
    assert_eq!(world.state(&alice, &named).await, "pending");
    let right = world.remove(&alice, &w.scope, "other", &other_queue).await;
    assert_eq!(right.status, 204, "named with its own identity it goes: {}", right.text);
}

// intake-capacity scenario 11
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s11_a_default_grant_neither_lists_nor_calls_the_discard_verbs() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let plain = world.vend(&alice, json!({"name": "plain", "queues": ["inbox"]})).await;
    let id = world.push(&alice, &plain.scope, "inbox", "keep me").await;

    let names = tool_names(&world.client, &plain).await;
    assert!(names.iter().any(|n| n == "claim_next"), "{names:?}");
    for verb in ["discard_todo", "clear_queue"] {
        assert!(!names.iter().any(|n| n == verb), "{verb} listed: {names:?}");
    }
    let (is_error, refused) =
        world.client.tool(&plain.slug, &plain.key, "discard_todo", json!({"queue": "inbox", "id": id})).await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden", "{refused}");
    let (is_error, refused) =
        world.client.tool(&plain.slug, &plain.key, "clear_queue", json!({"queue": "inbox"})).await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden", "{refused}");
    assert_eq!(world.state(&alice, &id).await, "pending", "nothing changed");

    // Opted in by name, the same verbs are listed and work on the endpoint's own queue.
    let opted = world
        .vend(
            &alice,
            json!({"name": "opted", "queues": ["inbox"], "verbs": ["claim_next", "discard_todo", "clear_queue"]}),
        )
        .await;
    let names = tool_names(&world.client, &opted).await;
    assert!(names.iter().any(|n| n == "discard_todo") && names.iter().any(|n| n == "clear_queue"), "{names:?}");
    let ids = [
        world.push(&alice, &opted.scope, "inbox", "one").await,
        world.push(&alice, &opted.scope, "inbox", "two").await,
    ];
    let (is_error, answer) =
        world.client.tool(&opted.slug, &opted.key, "discard_todo", json!({"queue": "inbox", "id": ids[0]})).await;
    assert!(!is_error, "{answer}");
    assert_eq!(world.state(&alice, &ids[0]).await, "discarded");
    let (is_error, answer) = world.client.tool(&opted.slug, &opted.key, "clear_queue", json!({"queue": "inbox"})).await;
    assert!(!is_error, "{answer}");
    assert_eq!(world.state(&alice, &ids[1]).await, "discarded");
    assert_eq!(world.state(&alice, &id).await, "pending", "the plain endpoint's queue is another identity");
}

// intake-capacity scenario 12
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s12_capacity_3_with_3_pending_refuses_an_api_create() {
    let world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 3).await;
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "lane"]})).await;
    for i in 0..3 {
        world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await;
    }
    let refused = push_on(&world.client, &alice, &ep.scope, "inbox", "one too many").await;
    assert_queue_full(&refused, "inbox", 3, 3);
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 3, "no todo was made");

    // MCP create_todo: a tool error carrying the same facts.
    let (is_error, refused) =
        world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": "agent's"})).await;
    assert!(is_error, "{refused}");
    assert_eq!(
        (refused["code"].as_str(), refused["queue"].as_str(), refused["pending"].as_i64(), refused["max"].as_i64()),
        (Some("queue_full"), Some("inbox"), Some(3), Some(3)),
        "{refused}"
    );
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 3);
    // Another queue identity has its own count.
    world.push(&alice, &ep.scope, "lane", "elsewhere").await;
}

// intake-capacity scenario 13
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s13_ingest_into_a_full_queue_is_refused_unrecorded_and_admitted_once_later() {
    let world = World::start(&[], &[(CAPACITY_ENV, "1")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["events"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "events")]).await;
    let blocker = world.push(&alice, &ep.scope, "events", "fills the queue").await;
    let body = r#"{"title": "push to main", "sha": "abc123"}"#;

    let refused = world.deliver(&hook, "msg_1", body).await;
    assert_queue_full(&refused, "events", 1, 1);
    let only_blocker: BTreeSet<String> = [blocker.clone()].into();
    assert_eq!(world.pending(&alice, &ep.scope, "events").await, only_blocker, "no todo was made");
    // Not recorded: the provider's retry is not mistaken for a redelivery of admitted work.
    let still = world.deliver(&hook, "msg_1", body).await;
    assert_queue_full(&still, "events", 1, 1);

    let removed = world.remove(&alice, &ep.scope, "events", &blocker).await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    let admitted = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((admitted.status, admitted.body["deduped"].as_bool()), (202, Some(false)), "{}", admitted.text);
    let todos = admitted.body["todos"].as_array().expect("todos").clone();
    assert_eq!(todos.len(), 1);
    let again = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((again.status, again.body["deduped"].as_bool()), (202, Some(true)), "{}", again.text);
    assert_eq!(again.body["todos"], json!(todos));

    let pending = world.pending(&alice, &ep.scope, "events").await;
    assert_eq!(pending.len(), 1, "admitted exactly once: {pending:?}");
    let id = todos[0].as_str().expect("id");
    assert!(pending.contains(id));
    assert_eq!(world.todo(&alice, id).await["created_by_kind"], "ingest");
}

// intake-capacity scenario 14
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s14_at_capacity_a_redelivery_of_admitted_work_is_a_free_dedup() {
    let world = World::start(&[], &[(CAPACITY_ENV, "2")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["events"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "events")]).await;
    let body = r#"{"title": "issue 9 opened"}"#;
    let first = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((first.status, first.body["deduped"].as_bool()), (202, Some(false)), "{}", first.text);
    let keyed = json!({"scope": ep.scope, "queue": "events", "title": "keyed", "idempotency_key": "k-1"});
    let made = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(keyed.clone())).await;
    assert_eq!(made.status, 201, "{}", made.text);

    // Full (2 of 2): dedup hits pass free; anything new is refused.
    let again = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((again.status, again.body["deduped"].as_bool()), (202, Some(true)), "{}", again.text);
    assert_eq!(again.body["todos"], first.body["todos"]);
    let rekeyed = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(keyed)).await;
    assert_eq!((rekeyed.status, rekeyed.body["deduped"].as_bool()), (200, Some(true)), "{}", rekeyed.text);
    assert_eq!(rekeyed.body["todo"]["id"], made.body["todo"]["id"]);

    assert_queue_full(&world.deliver(&hook, "msg_2", r#"{"title": "issue 10 opened"}"#).await, "events", 2, 2);
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "events", "new").await, "events", 2, 2);
    assert_eq!(world.pending(&alice, &ep.scope, "events").await.len(), 2);
}

// intake-capacity scenario 15
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s15_lowering_capacity_removes_nothing_and_intake_resumes_below_it() {
    let world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let mut ids = vec![];
    for i in 0..5 {
        ids.push(world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await);
    }
    set_capacity(&world.client, &admin, 3).await;
    let all: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, all, "lowering removed nothing");
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 5, 3);

    for id in &ids[..2] {
        assert_eq!(world.remove(&alice, &ep.scope, "inbox", id).await.status, 204);
    }
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 3);
    assert_eq!(world.remove(&alice, &ep.scope, "inbox", &ids[2]).await.status, 204);
    world.push(&alice, &ep.scope, "inbox", "below the cap again").await;
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 3);
}

// intake-capacity scenario 16
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s16_a_failed_todo_returning_to_pending_bypasses_the_cap_but_new_intake_is_refused() {
    let world = World::start(&["--reaper-interval", "1"], &[(CAPACITY_ENV, "2")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let failing = world.push(&alice, &ep.scope, "inbox", "will fail").await;
    let waiting = world.push(&alice, &ep.scope, "inbox", "waits").await;
    assert_eq!(claim_next(&world.client, &ep, json!({})).await.as_ref(), Some(&failing));
    let (is_error, failed) = world.client.tool(&ep.slug, &ep.key, "fail", json!({"id": failing})).await;
    assert!(!is_error, "{failed}");
    assert_eq!(world.state(&alice, &failing).await, "failed");
    let filler = world.push(&alice, &ep.scope, "inbox", "fills the freed slot").await;
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 2, 2);

    // The backoff after a first failure is 30 s; rather than wait it out, the owner's "Retry now"
    // returns the failed todo to pending (the same kind of return as the retry scheduler's).
    let retried = send(&world.client, Method::POST, &format!("/api/v1/todos/{failing}/retry"), &alice, None).await;
    assert_eq!(retried.status, 200, "a return to pending is never capped: {}", retried.text);
    assert_eq!(world.state(&alice, &failing).await, "pending");
    let expected: BTreeSet<String> = [failing, waiting, filler].into();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, expected, "3 pending over a cap of 2");
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 2);
}

// intake-capacity scenario 17
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s17_release_and_the_reaper_return_work_to_pending_at_capacity() {
    let world = World::start(&["--reaper-interval", "1"], &[(CAPACITY_ENV, "2")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let reaped = world.push(&alice, &ep.scope, "inbox", "will lapse").await;
    let released = world.push(&alice, &ep.scope, "inbox", "will be released").await;
    for id in [&reaped, &released] {
        let (is_error, claimed) = world.client.tool(&ep.slug, &ep.key, "claim", json!({"id": id})).await;
        assert!(!is_error, "{claimed}");
    }
    let fillers = [
        world.push(&alice, &ep.scope, "inbox", "filler 1").await,
        world.push(&alice, &ep.scope, "inbox", "filler 2").await,
    ];
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 2, 2);

    let (is_error, answer) = world.client.tool(&ep.slug, &ep.key, "release", json!({"id": released})).await;
    assert!(!is_error, "release at capacity: {answer}");
    assert_eq!(world.state(&alice, &released).await, "pending");

    // The lease is cut to 1 s only now that the queue is full, so the reaper returns it to a
    // queue that is over its cap (a heartbeat sets the lease exactly like a claim's TTL).
    let (is_error, answer) =
        world.client.tool(&ep.slug, &ep.key, "heartbeat", json!({"id": reaped, "lease_ttl_seconds": 1})).await;
    assert!(!is_error, "{answer}");
    wait_for_state(&world, &alice, &reaped, "pending", Duration::from_secs(30)).await;

    let expected: BTreeSet<String> = [reaped, released, fillers[0].clone(), fillers[1].clone()].into();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, expected);
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 4, 2);
}

// intake-capacity scenario 18
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s18_deferred_todos_count_toward_capacity_and_clearing_drops_the_deferred_gauge() {
    let world = World::start(&[], &[(CAPACITY_ENV, "4"), ("SWITCHBOARD_METRICS_TOKEN", METRICS_TOKEN)]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let daily = json!({"max_in_flight": null, "max_claims_per_window": 1,
                       "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    let (status, policy) = world.client.put_admission_policy(&alice, &ep.scope, "inbox", daily).await;
    assert_eq!(status, 200, "{policy}");
    world.push(&alice, &ep.scope, "inbox", "today's one").await;
    assert!(claim_next(&world.client, &ep, json!({})).await.is_some(), "the day's budget is spent");

    // The exhausted queue keeps filling up to the cap, then refuses intake with queue_full.
    for i in 0..4 {
        world.push(&alice, &ep.scope, "inbox", &format!("deferred {i}")).await;
    }
    let (_, listed) =
        world.client.get(&format!("/api/v1/todos?scope={}&queue=inbox&state=pending", ep.scope), &alice).await;
    let listed = listed["todos"].as_array().expect("todos").clone();
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|t| t["admission"]["state"] == "deferred"), "{listed:?}");
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 4, 4);

    let gauge = |text: &str| {
        sample(text, "switchboard_admission_deferred_todos", &[("queue", "inbox"), ("reason", "window_exhausted")])
    };
    let (status, before) = world.client.scrape_metrics(Some(METRICS_TOKEN)).await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(gauge(&before), Some(4.0), "{before}");
    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(4)), "{}", cleared.text);
    let (_, after) = world.client.scrape_metrics(Some(METRICS_TOKEN)).await;
    assert_eq!(gauge(&before).zip(gauge(&after)).map(|(b, a)| b - a), Some(4.0), "{after}");

    // Removals never refund the window: the day's one claim stays spent.
    let (_, shown) = world.client.get(&format!("/api/v1/admission/{}/inbox", ep.scope), &alice).await;
    assert_eq!(shown["usage"]["used"], 1, "{shown}");
}

// intake-capacity scenario 19
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s19_environment_20_over_persisted_6_wins_locks_and_stores_nothing() {
    let mut world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 6).await;
    let locked = world.serve(&[], &[(CAPACITY_ENV, "20")]);

    let shown = capacity_get(&locked, &alice).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_capacity(&shown.body, Some(6), 20, "environment", true);
    let refused = capacity_patch(&locked, &admin, json!({"max_pending_per_queue": 9})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    assert_capacity(&capacity_get(&locked, &alice).await.body, Some(6), 20, "environment", true);
    assert_capacity(&capacity_get(&world.client, &alice).await.body, Some(6), 6, "setting", false);

    // The environment is the locked process's own: it admits 7, the other process still caps at 6.
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    for i in 0..7 {
        let made = push_on(&locked, &alice, &ep.scope, "inbox", &format!("t{i}")).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 7, 6);
}

// intake-capacity scenario 20
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s20_environment_parsing_warns_on_garbage_locks_on_negative_and_defaults_to_zero() {
    let mut world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    assert_capacity(&capacity_get(&world.client, &alice).await.body, None, 0, "default", false);
    set_capacity(&world.client, &admin, 5).await;

    // `many`: a warning naming the variable; the persisted value applies, unlocked.
    let garbage = world.serve(&[], &[(CAPACITY_ENV, "many")]);
    let shown = capacity_get(&garbage, &alice).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_capacity(&shown.body, Some(5), 5, "setting", false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !world.log(1).lines().any(|l| l.contains(CAPACITY_ENV) && l.to_lowercase().contains("warn")) {
        assert!(Instant::now() < deadline, "no warning naming {CAPACITY_ENV}:\n{}", world.log(1));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // `-3`: 0 (unlimited), locked.
    let negative = world.serve(&[], &[(CAPACITY_ENV, "-3")]);
    assert_capacity(&capacity_get(&negative, &alice).await.body, Some(5), 0, "environment", true);
    let refused = capacity_patch(&negative, &admin, json!({"max_pending_per_queue": 2})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    for i in 0..6 {
        let made = push_on(&negative, &alice, &ep.scope, "inbox", &format!("t{i}")).await;
        assert_eq!(made.status, 201, "unlimited: {}", made.text);
    }

    // Nothing set (blank counts as unset): the default 0 on a database with no setting.
    let fresh = World::start(&[], &[(CAPACITY_ENV, "")]).await;
    let (_, carol) = fresh.human("carol");
    assert_capacity(&capacity_get(&fresh.client, &carol).await.body, None, 0, "default", false);
}

// intake-capacity scenario 21
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s21_a_patch_on_one_server_applies_to_the_others_next_intake() {
    let mut world = World::start(&[], &[]).await;
    let other = world.serve(&[], &[]);
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    for i in 0..3 {
        assert_eq!(push_on(&other, &alice, &ep.scope, "inbox", &format!("t{i}")).await.status, 201);
    }
    set_capacity(&world.client, &admin, 3).await;
    assert_queue_full(&push_on(&other, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 3);
    assert_capacity(&capacity_get(&other, &alice).await.body, Some(3), 3, "setting", false);

    set_capacity(&world.client, &admin, 4).await;
    assert_eq!(push_on(&other, &alice, &ep.scope, "inbox", "fourth").await.status, 201);
    assert_queue_full(&push_on(&other, &alice, &ep.scope, "inbox", "x").await, "inbox", 4, 4);

    set_capacity(&world.client, &admin, 0).await;
    for i in 0..3 {
        assert_eq!(push_on(&other, &alice, &ep.scope, "inbox", &format!("u{i}")).await.status, 201);
    }
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 7);
}

// intake-capacity scenario 22
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s22_patch_is_admin_only_validated_consistent_and_repairs_a_corrupt_value() {
    let mut world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let admin = world.admin("root");
    assert_capacity(&capacity_get(&world.client, &alice).await.body, None, 0, "default", false);

    let refused = capacity_patch(&world.client, &alice, json!({"max_pending_per_queue": 5})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (403, Some("forbidden")), "{}", refused.text);
    for bad in [json!(-1), json!(1_000_001), json!("ten")] {
        let refused = capacity_patch(&world.client, &admin, json!({"max_pending_per_queue": bad})).await;
        assert_eq!(
            (refused.status, refused.body["code"].as_str(), refused.body["field"].as_str()),
            (400, Some("invalid_argument"), Some("max_pending_per_queue")),
            "{bad}: {}",
            refused.text
        );
    }
    assert_capacity(&capacity_get(&world.client, &alice).await.body, None, 0, "default", false);
    set_capacity(&world.client, &admin, 1_000_000).await;

    // Overlapping writes (another admin, so no earlier write spends this one's write budget).
    let racer = world.admin("racer");
    let writes: Vec<_> = (11..=16)
        .map(|n| {
            let (client, racer) = (world.client.clone(), racer.clone());
            tokio::spawn(async move {
                (n, capacity_patch(&client, &racer, json!({"max_pending_per_queue": n})).await.status)
            })
        })
        .collect();
    let mut stored = BTreeSet::new();
    for write in writes {
        let (n, status) = write.await.expect("join");
        assert!(status == 200 || status == 429, "PATCH {n}: {status}");
        if status == 200 {
            stored.insert(n);
        }
    }
    assert!(!stored.is_empty());
    let shown = capacity_get(&world.client, &alice).await.body;
    let setting = shown["setting"]["max_pending_per_queue"].as_i64().expect("setting");
    assert!(stored.contains(&setting), "{setting} is none of the values written: {stored:?}");
    assert_capacity(&shown, Some(setting), setting, "setting", false);

    // The one place this test touches the database directly: corrupt the stored value.
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&world.db.url).await.expect("connect");
    let updated = sqlx::query("UPDATE settings SET value = '\"ten\"'::jsonb WHERE key = 'queue_max_pending_per_queue'")
        .execute(&mut connection)
        .await
        .expect("corrupt the setting");
    assert_eq!(updated.rows_affected(), 1);
    <sqlx::PgConnection as sqlx::Connection>::close(connection).await.expect("close");

    // A process started now (so no cached value can hide the row) falls back to the default.
    let fresh = world.serve(&[], &[]);
    assert_capacity(&capacity_get(&fresh, &alice).await.body, None, 0, "default", false);
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    assert_eq!(push_on(&fresh, &alice, &ep.scope, "inbox", "still admitted").await.status, 201);
    let repairer = world.admin("repairer");
    set_capacity(&fresh, &repairer, 7).await;
    assert_capacity(&capacity_get(&fresh, &alice).await.body, Some(7), 7, "setting", false);
    assert_capacity(&capacity_get(&world.client, &alice).await.body, Some(7), 7, "setting", false);
}

// intake-capacity scenario 23
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s23_fifty_racing_creates_across_two_servers_admit_exactly_ten() {
    let mut world = World::start(&[], &[]).await;
    let second = world.serve(&[], &[]);
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 10).await;
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;

    let clients = [world.client.clone(), second];
    let creates: Vec<_> = (0..50)
        .map(|i| {
            let (client, alice, scope) = (clients[i % 2].clone(), alice.clone(), ep.scope.clone());
            tokio::spawn(async move { push_on(&client, &alice, &scope, "inbox", &format!("t{i}")).await })
        })
        .collect();
    let (mut created, mut full) = (0, 0);
    for create in creates {
        let reply = create.await.expect("join");
        match reply.status {
            201 => created += 1,
            _ => {
                assert_queue_full(&reply, "inbox", 10, 10);
                full += 1;
            }
        }
    }
    assert_eq!((created, full), (10, 40));
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 10);
}

// intake-capacity scenario 24
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s24_capacity_0_admits_sixty_creates_into_one_queue() {
    let world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 0).await;
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let creates: Vec<_> = (0..60)
        .map(|i| {
            let (client, alice, scope) = (world.client.clone(), alice.clone(), ep.scope.clone());
            tokio::spawn(async move { push_on(&client, &alice, &scope, "inbox", &format!("t{i}")).await })
        })
        .collect();
    for create in creates {
        let reply = create.await.expect("join");
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 60);
}

// intake-capacity scenario 25
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s25_deleting_an_endpoint_purges_claimed_work_and_its_claimants_fail_finds_nothing() {
    let world = World::start(&["--reaper-interval", "1"], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "doomed", "queues": ["inbox"]})).await;
    let probe = world.vend(&alice, json!({"name": "probe", "queues": ["inbox"]})).await;
    let by_agent = world.push(&alice, &ep.scope, "inbox", "claimed over MCP").await;
    let by_owner = world.push(&alice, &ep.scope, "inbox", "claimed on the board").await;
    let waiting = world.push(&alice, &ep.scope, "inbox", "pending").await;
    let (is_error, claimed) =
        world.client.tool(&ep.slug, &ep.key, "claim", json!({"id": by_agent, "lease_ttl_seconds": 1})).await;
    assert!(!is_error, "{claimed}");
    let claimed = send(
        &world.client,
        Method::POST,
        &format!("/api/v1/todos/{by_owner}/claim"),
        &alice,
        Some(json!({"lease_ttl_seconds": 1})),
    )
    .await;
    assert_eq!(claimed.status, 200, "{}", claimed.text);

    let foreign = send(&world.client, Method::DELETE, &format!("/api/v1/endpoints/{}", ep.slug), &bob, None).await;
    assert_eq!((foreign.status, foreign.body["code"].as_str()), (404, Some("not_found")), "{}", foreign.text);
    let deleted = send(&world.client, Method::DELETE, &format!("/api/v1/endpoints/{}", ep.slug), &alice, None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);

    // The board claimant (the owner over the API): not_found.
    let failed = send(&world.client, Method::POST, &format!("/api/v1/todos/{by_owner}/fail"), &alice, None).await;
    assert_eq!((failed.status, failed.body["code"].as_str()), (404, Some("not_found")), "{}", failed.text);
    // The MCP claimant was the deleted endpoint itself, so its bearer went with it: the call is
    // refused as an unknown credential (401) or as a not_found (HTTP 404, or a not_found tool
    // error were the credential still honoured). Never a success.
    let (status, answer) =
        world.client.rpc(&ep.slug, &ep.key, "tools/call", json!({"name": "fail", "arguments": {"id": by_agent}})).await;
    let unknown_credential = status == 401 && answer["code"] == "unauthenticated";
    let not_found = (status == 404 && answer["code"] == "not_found")
        || (status == 200
            && answer["result"]["isError"] == true
            && answer["result"]["structuredContent"]["code"] == "not_found");
    assert!(unknown_credential || not_found, "{status}: {answer}");

    // No todo reappears: a witness claimed with a 1 s lease after the purged claims lapses and is
    // returned by the reaper, so the reaper has swept past both purged leases by then.
    let witness = world.push(&alice, &probe.scope, "inbox", "reaper witness").await;
    let (is_error, answer) =
        world.client.tool(&probe.slug, &probe.key, "claim", json!({"id": witness, "lease_ttl_seconds": 1})).await;
    assert!(!is_error, "{answer}");
    wait_for_state(&world, &alice, &witness, "pending", Duration::from_secs(30)).await;
    for id in [&by_agent, &by_owner, &waiting] {
        let (status, body) = world.client.get(&format!("/api/v1/todos/{id}"), &alice).await;
        assert_eq!((status, body["code"].as_str()), (404, Some("not_found")), "{id}: {body}");
    }
    let (_, listed) = world.client.get("/api/v1/todos?limit=200", &alice).await;
    let ids: Vec<String> = listed["todos"].as_array().expect("todos").iter().map(id_of).collect();
    assert_eq!(ids, vec![witness], "only the witness is left");
}

// intake-capacity.md "Purge": deleting a team queue removes its todos, pending and claimed; the
// stale claimant (a member's endpoint, still alive) gets not_found on fail, and nothing returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_purge_deleting_a_team_queue_leaves_its_stale_claimant_not_found() {
    let db = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &db.url], &[], dir.path());
    let client = Client::new(&server.base);
    let database = ["--database-url", db.url.as_str()];
    let alice = add_human("alice", &database).1;
    let bob = add_human("bob", &database).1;
    let (code, team, stderr) =
        run(&["admin", "team", "add", "core", "--owner", "alice", "--database-url", &db.url], &[]);
    assert_eq!(code, 0, "{stderr}");
    let slug = serde_json::from_str::<Value>(team.trim()).expect("json")["slug"].as_str().expect("slug").to_string();
    let (code, _, stderr) =
        run(&["admin", "team", "member", "add", &slug, "bob", "--role", "member", "--database-url", &db.url], &[]);
    assert_eq!(code, 0, "{stderr}");
    let endpoint = client.vend(&bob, json!({"name": "bobs worker", "queues": [format!("team:{slug}/lane")]})).await;
    let (ep_slug, key) =
        (endpoint["slug"].as_str().expect("slug").to_string(), endpoint["token"].as_str().expect("token").to_string());
    let scope = format!("team:{slug}");
    for title in ["first", "second"] {
        let (status, body) =
            client.post("/api/v1/todos", &alice, json!({"scope": scope, "queue": "lane", "title": title})).await;
        assert_eq!(status, 201, "{body}");
    }
    let (is_error, claim) = client.tool(&ep_slug, &key, "claim_next", json!({})).await;
    assert!(!is_error, "{claim}");
    let held = claim["todo"]["id"].as_str().expect("id").to_string();

    // A member cannot delete the team queue: the same 404 as for a team that does not exist.
    let url = |scope: &str| format!("{}/api/v1/queues/{scope}/lane", server.base);
    let refused = reqwest::Client::new().delete(url(&scope)).bearer_auth(&bob).send().await.expect("DELETE");
    let unknown =
        reqwest::Client::new().delete(url("team:no-such-team")).bearer_auth(&bob).send().await.expect("DELETE");
    assert_eq!((refused.status().as_u16(), unknown.status().as_u16()), (404, 404));
    assert_eq!(refused.text().await.expect("body"), unknown.text().await.expect("body"));

    let purged = reqwest::Client::new().delete(url(&scope)).bearer_auth(&alice).send().await.expect("DELETE");
    assert_eq!(purged.status().as_u16(), 200);
    assert_eq!(purged.json::<Value>().await.expect("json")["purged"], 2);
    let (is_error, late) = client.tool(&ep_slug, &key, "fail", json!({"id": held})).await;
    assert!(is_error);
    assert_eq!(late["code"], "not_found");
    let (_, listed) = client.get(&format!("/api/v1/todos?scope={scope}&queue=lane"), &alice).await;
    assert_eq!(listed["todos"], json!([]), "nothing reappears");
    let (_, next) = client.tool(&ep_slug, &key, "claim_next", json!({})).await;
    assert_eq!(next, json!({"empty": true}));
}

// A webhook whose every target queue went with its deleted endpoint refuses deliveries (409)
// and records nothing: a redelivery is refused again, never answered as a deduped success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_whose_targets_are_all_gone_refuses_deliveries_and_records_nothing() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "doomed", "queues": ["inbox"]})).await;
    let hook = world.webhook(&alice, &[(ep.scope.as_str(), "inbox")]).await;
    let deleted = send(&world.client, Method::DELETE, &format!("/api/v1/endpoints/{}", ep.slug), &alice, None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    for attempt in 0..2 {
        let reply = world.deliver(&hook, "dlv-orphan", r#"{"title": "nobody home"}"#).await;
        assert_eq!(
            (reply.status, reply.body["code"].as_str()),
            (409, Some("conflict")),
            "attempt {attempt}: {}",
            reply.text
        );
    }
}
