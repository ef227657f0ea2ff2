//! SPEC-0030 through the real surfaces: the operator API, MCP and webhook ingest of the real
//! binary on real PostgreSQL. Each test is named after the requirement it proves.

mod support;

use serde_json::{Value, json};
use support::{Client, Server, add_human, data_dir};

fn daily(max: i64) -> Value {
    json!({"max_in_flight": null, "max_claims_per_window": max, "window": {"period": "day", "tz": "UTC", "start": "00:00"}})
}

struct World {
    _server: Server,
    _dir: tempfile::TempDir,
    db: engine::testing::TestDatabase,
    client: Client,
}

impl World {
    async fn start() -> World {
        let db = engine::testing::empty_database().await;
        let dir = data_dir();
        let server = Server::start(&["--database-url", &db.url], &[], dir.path());
        let client = Client::new(&server.base);
        World { _server: server, _dir: dir, db, client }
    }

    fn human(&self, name: &str) -> String {
        add_human(name, &["--database-url", &self.db.url]).1
    }

    async fn put_policy(&self, token: &str, scope: &str, queue: &str, policy: Value) -> (u16, Value) {
        let response = reqwest::Client::new()
            .put(format!("{}/api/v1/admission/{scope}/{queue}", self.client.base))
            .bearer_auth(token)
            .json(&policy)
            .send()
            .await
            .expect("PUT");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn delete_policy(&self, token: &str, scope: &str, queue: &str) -> (u16, String) {
        let response = reqwest::Client::new()
            .delete(format!("{}/api/v1/admission/{scope}/{queue}", self.client.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("DELETE");
        (response.status().as_u16(), response.text().await.unwrap_or_default())
    }

    async fn push(&self, token: &str, slug: &str, queue: &str, title: &str) -> String {
        let (status, body) = self
            .client
            .post("/api/v1/todos", token, json!({"scope": format!("endpoint:{slug}"), "queue": queue, "title": title}))
            .await;
        assert_eq!(status, 201, "{body}");
        body["todo"]["id"].as_str().expect("id").to_string()
    }
}

fn slug_key(endpoint: &Value) -> (String, String) {
    (endpoint["slug"].as_str().expect("slug").to_string(), endpoint["token"].as_str().expect("token").to_string())
}

// SPEC-0030 REQ-7 "A worker is told to wait, not to poll", "Headroom on a successful claim",
// "A specific claim in a deferred queue", and status on pending todos, over MCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req7_claim_responses_over_mcp_carry_admission() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (slug, key) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await);
    let scope = format!("endpoint:{slug}");
    assert_eq!(world.put_policy(&alice, &scope, "inbox", daily(2)).await.0, 200);
    for i in 0..5 {
        world.push(&alice, &slug, "inbox", &format!("t{i}")).await;
    }
    let (is_error, first) = world.client.tool(&slug, &key, "claim_next", json!({})).await;
    assert!(!is_error, "{first}");
    assert_eq!((first["admission"]["used"].as_i64(), first["admission"]["remaining"].as_i64()), (Some(1), Some(1)));
    assert!(first["admission"]["window_resets_at"].is_string());
    world.client.tool(&slug, &key, "claim_next", json!({})).await;

    let (_, empty) = world.client.tool(&slug, &key, "claim_next", json!({})).await;
    assert_eq!(empty["empty"], true);
    let deferred = &empty["deferred"][0];
    assert_eq!(
        (deferred["queue"].as_str(), deferred["reason"].as_str(), deferred["pending"].as_i64()),
        (Some("inbox"), Some("window_exhausted"), Some(3))
    );
    assert_eq!((deferred["exact"].as_bool(), deferred["next_eligible_at"].is_string()), (Some(true), true));

    let (_, listed) = world.client.tool(&slug, &key, "list_todos", json!({"state": "pending"})).await;
    let pending = listed["todos"].as_array().expect("todos");
    assert_eq!(pending.len(), 3);
    assert!(
        pending.iter().all(|t| t["admission"]["state"] == "deferred" && t["admission"]["reason"] == "window_exhausted")
    );

    let waiting = pending[0]["id"].as_str().expect("id");
    let (is_error, refused) = world.client.tool(&slug, &key, "claim", json!({"id": waiting})).await;
    assert!(is_error);
    assert_eq!(
        (refused["code"].as_str(), refused["reason"].as_str(), refused["queue"].as_str()),
        (Some("deferred"), Some("window_exhausted"), Some("inbox"))
    );
    // Issue #51: one instant format on every surface, the claim's `deferred` error included.
    assert_eq!(refused["next_eligible_at"], deferred["next_eligible_at"], "{refused}");
    assert!(refused["next_eligible_at"].as_str().is_some_and(|t| t.ends_with(".000Z")), "{refused}");
    let (_, after) = world.client.tool(&slug, &key, "get_todo", json!({"id": waiting})).await;
    assert_eq!((after["state"].as_str(), after["attempt"].as_i64()), (Some("pending"), Some(0)));

    // An empty queue without a policy: empty with no deferred list.
    let (other_slug, other_key) =
        slug_key(&world.client.vend(&alice, json!({"name": "idle", "queues": ["quiet"]})).await);
    let (_, idle) = world.client.tool(&other_slug, &other_key, "claim_next", json!({})).await;
    assert_eq!(idle, json!({"empty": true}));
}

// SPEC-0030 REQ-7 "Status is scoped to the caller"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req7_admission_status_is_scoped_to_the_caller() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (slug, key) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox", "lane"]})).await);
    world.put_policy(&alice, &format!("endpoint:{slug}"), "inbox", json!({"max_in_flight": 3})).await;
    let (_, listed) = world.client.rpc(&slug, &key, "tools/list", json!({})).await;
    assert!(listed["result"]["tools"].as_array().expect("tools").iter().any(|t| t["name"] == "admission_status"));
    let (is_error, status) = world.client.tool(&slug, &key, "admission_status", json!({})).await;
    assert!(!is_error, "{status}");
    let queues = status["queues"].as_array().expect("queues");
    assert_eq!(queues.len(), 2);
    let inbox = queues.iter().find(|q| q["queue"] == "inbox").expect("inbox");
    assert_eq!((inbox["status"].as_str(), inbox["policy"]["max_in_flight"].as_i64()), (Some("admitted"), Some(3)));
    let (is_error, refused) =
        world.client.tool(&slug, &key, "admission_status", json!({"queue": "someone-elses"})).await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden");
    assert_eq!(refused.as_object().map(|o| o.len()), Some(2), "reveals nothing beyond code and message: {refused}");
}

// SPEC-0030 REQ-10 "By default an agent cannot raise its own ceiling" and "An owner opts an agent in"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_agents_change_budgets_only_when_opted_in_and_only_their_own() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (plain_slug, plain_key) =
        slug_key(&world.client.vend(&alice, json!({"name": "plain", "queues": ["lane-m"]})).await);
    let granted = world
        .client
        .vend(&alice, json!({"name": "trusted", "queues": ["lane-m"], "verbs": ["claim_next", "set_admission_policy", "clear_admission_policy"]}))
        .await;
    let (slug, key) = slug_key(&granted);
    assert!(granted["verbs"].as_array().expect("verbs").iter().any(|v| v == "set_admission_policy"));

    // Default grant: the verb is neither offered nor accepted, and nothing changes.
    let (_, tools) = world.client.rpc(&plain_slug, &plain_key, "tools/list", json!({})).await;
    assert!(!tools["result"]["tools"].as_array().expect("tools").iter().any(|t| t["name"] == "set_admission_policy"));
    let (is_error, refused) = world
        .client
        .tool(&plain_slug, &plain_key, "set_admission_policy", json!({"queue": "lane-m", "policy": daily(50)}))
        .await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden");
    let (status, _) = world.client.get(&format!("/api/v1/admission/endpoint:{plain_slug}/lane-m"), &alice).await;
    assert_eq!(status, 404, "no policy was created");

    // Opted in: saves on its own queue, audited with the endpoint and its human.
    let (is_error, saved) =
        world.client.tool(&slug, &key, "set_admission_policy", json!({"queue": "lane-m", "policy": daily(50)})).await;
    assert!(!is_error, "{saved}");
    let (status, audit) = world.client.get(&format!("/api/v1/admission/endpoint:{slug}/lane-m/audit"), &alice).await;
    assert_eq!(status, 200, "{audit}");
    let record = &audit["records"][0];
    assert_eq!(record["actor_endpoint_id"], granted["id"]);
    assert_eq!(record["actor_human_id"], granted["owner_human_id"]);
    assert_eq!(record["after"]["max_claims_per_window"], 50);
    // Naming a queue it does not own: not_found, like one that does not exist.
    let (is_error, other) =
        world.client.tool(&slug, &key, "set_admission_policy", json!({"queue": "not-mine", "policy": daily(5)})).await;
    assert!(is_error);
    assert_eq!(other["code"], "not_found");
    // Bad input names the field and changes nothing.
    let bad = json!({"max_claims_per_window": 5, "window": {"period": "day", "tz": "Mars/Olympus", "start": "00:00"}});
    let (_, invalid) =
        world.client.tool(&slug, &key, "set_admission_policy", json!({"queue": "lane-m", "policy": bad})).await;
    assert_eq!((invalid["code"].as_str(), invalid["field"].as_str()), (Some("invalid_argument"), Some("window.tz")));
    let (is_error, cleared) =
        world.client.tool(&slug, &key, "clear_admission_policy", json!({"queue": "lane-m"})).await;
    assert!(!is_error, "{cleared}");
}

// SPEC-0030 REQ-10 "Another human's queue is opaque", plus the API's PUT/GET/DELETE/audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_policies_through_the_api_and_foreign_queues_are_opaque() {
    let world = World::start().await;
    let alice = world.human("alice");
    let bob = world.human("bob");
    let (slug, _) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["investigations"]})).await);
    let scope = format!("endpoint:{slug}");
    let (status, saved) = world.put_policy(&alice, &scope, "investigations", daily(100)).await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["status"]["status"], "admitted");
    let (status, shown) = world.client.get(&format!("/api/v1/admission/{scope}/investigations"), &alice).await;
    assert_eq!(status, 200);
    assert_eq!(
        (shown["policy"]["max_claims_per_window"].as_i64(), shown["usage"]["used"].as_i64()),
        (Some(100), Some(0))
    );
    assert_eq!(shown["audit"][0]["action"], "create");
    let (_, listed) = world.client.get("/api/v1/admission", &alice).await;
    assert_eq!(listed["policies"].as_array().map(Vec::len), Some(1));

    // Bob: the same 404 for alice's queue as for one that does not exist, on every verb.
    let foreign =
        reqwest::get(format!("{}/api/v1/admission/{scope}/investigations", world.client.base)).await.expect("GET");
    assert_eq!(foreign.status().as_u16(), 401, "no credential");
    let opaque = |path: String| {
        let client = world.client.clone();
        let bob = bob.clone();
        async move {
            let response = reqwest::Client::new()
                .get(format!("{}{path}", client.base))
                .bearer_auth(&bob)
                .send()
                .await
                .expect("GET");
            (response.status().as_u16(), response.text().await.unwrap_or_default())
        }
    };
    let seen = opaque(format!("/api/v1/admission/{scope}/investigations")).await;
    let unknown = opaque("/api/v1/admission/endpoint:no-such-endpoint/investigations".to_string()).await;
    assert_eq!(seen, unknown);
    assert_eq!(seen.0, 404);
    assert_eq!(opaque(format!("/api/v1/admission/{scope}/investigations/audit")).await, unknown);
    assert_eq!(world.put_policy(&bob, &scope, "investigations", daily(1)).await.0, 404);
    assert_eq!(world.delete_policy(&bob, &scope, "investigations").await.0, 404);
    let (_, bobs) = world.client.get("/api/v1/admission", &bob).await;
    assert_eq!(bobs["policies"], json!([]));
    let (_, still) = world.client.get(&format!("/api/v1/admission/{scope}/investigations"), &alice).await;
    assert_eq!(still["policy"]["max_claims_per_window"], 100, "bob changed nothing");

    // Validation names the field; DELETE keeps the audit readable.
    let (status, invalid) = world.put_policy(&alice, &scope, "investigations", json!({"max_in_flight": 20000})).await;
    assert_eq!((status, invalid["field"].as_str()), (400, Some("max_in_flight")));
    assert_eq!(world.delete_policy(&alice, &scope, "investigations").await.0, 204);
    assert_eq!(world.client.get(&format!("/api/v1/admission/{scope}/investigations"), &alice).await.0, 404);
    let (status, audit) = world.client.get(&format!("/api/v1/admission/{scope}/investigations/audit"), &alice).await;
    assert_eq!(status, 200);
    let actions: Vec<&str> =
        audit["records"].as_array().expect("records").iter().filter_map(|r| r["action"].as_str()).collect();
    assert_eq!(actions, vec!["delete", "create"]);
}

// SPEC-0030 Security Requirements: the per-human write limiter, the 16 KiB PUT cap, headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_limiter_body_cap_and_headers() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (slug, _) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await);
    let scope = format!("endpoint:{slug}");
    let mut statuses = Vec::new();
    for max in 0..12 {
        statuses.push(world.put_policy(&alice, &scope, "inbox", json!({"max_in_flight": max})).await.0);
    }
    assert_eq!(&statuses[..10], &[200; 10], "a burst of 10 writes passes");
    assert_eq!(statuses[10], 429);
    let response = reqwest::Client::new()
        .put(format!("{}/api/v1/admission/{scope}/inbox", world.client.base))
        .bearer_auth(&alice)
        .json(&json!({"max_in_flight": 1}))
        .send()
        .await
        .expect("PUT");
    assert_eq!(response.status().as_u16(), 429);
    assert!(response.headers().get("retry-after").is_some());
    assert_eq!(response.json::<Value>().await.expect("json")["code"], "rate_limited");

    // Another human has a bucket of their own; an oversized body is 413 before anything runs.
    let bob = world.human("bob");
    let padding = "x".repeat(17 * 1024);
    let response = reqwest::Client::new()
        .put(format!("{}/api/v1/admission/{scope}/inbox", world.client.base))
        .bearer_auth(&bob)
        .header("content-type", "application/json")
        .body(format!("{{\"max_in_flight\": 1, \"pad\": \"{padding}\"}}"))
        .send()
        .await
        .expect("PUT");
    assert_eq!(response.status().as_u16(), 413);
    assert_eq!(response.json::<Value>().await.expect("json")["code"], "payload_too_large");

    for path in ["/healthz", "/api/v1/admission", "/api/v1/nope", "/mcp/nope"] {
        let response = reqwest::get(format!("{}{path}", world.client.base)).await.expect("GET");
        let headers = response.headers();
        assert_eq!(headers.get("x-frame-options").map(|v| v.as_bytes()), Some(&b"DENY"[..]), "{path}");
        assert_eq!(headers.get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]), "{path}");
        assert!(headers.get("content-security-policy").is_some() && headers.get("referrer-policy").is_some(), "{path}");
        assert!(headers.get("location").is_none(), "{path}: no redirects");
    }
}

// SPEC-0030 REQ-2 "A fan-out copy is governed by its own endpoint"; REQ-3 "A redelivery is free".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req2_req3_webhook_fan_out_is_charged_per_copy_and_a_redelivery_is_free() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (a_slug, a_key) = slug_key(&world.client.vend(&alice, json!({"name": "a", "queues": ["events"]})).await);
    let (b_slug, b_key) = slug_key(&world.client.vend(&alice, json!({"name": "b", "queues": ["events"]})).await);
    world.put_policy(&alice, &format!("endpoint:{a_slug}"), "events", daily(10)).await;
    let (status, hook) = world
        .client
        .post(
            "/api/v1/webhooks",
            &alice,
            json!({"name": "gh", "targets": [{"scope": format!("endpoint:{a_slug}"), "queue": "events"},
                                              {"scope": format!("endpoint:{b_slug}"), "queue": "events"}]}),
        )
        .await;
    assert_eq!(status, 201, "{hook}");
    let (ingest_url, secret) =
        (hook["ingest_url"].as_str().expect("url").to_string(), hook["secret"].as_str().expect("secret").to_string());
    let ingest_path = ingest_url.split_once("/ingest/").map(|(_, id)| format!("/ingest/{id}")).expect("path");
    let body = r#"{"title": "issue 7 opened", "number": 7}"#;
    let deliver = |delivery: &'static str, secret: String| {
        let url = format!("{}{ingest_path}", world.client.base);
        async move {
            let response = reqwest::Client::new()
                .post(url)
                .headers(support::sign(&secret, delivery, body))
                .body(body)
                .send()
                .await
                .expect("POST");
            (response.status().as_u16(), response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, first) = deliver("msg_1", secret.clone()).await;
    assert_eq!(status, 202, "{first}");
    assert_eq!((first["todos"].as_array().map(Vec::len), first["deduped"].as_bool()), (Some(2), Some(false)));
    let (status, again) = deliver("msg_1", secret.clone()).await;
    assert_eq!((status, again["deduped"].as_bool(), &again["todos"]), (202, Some(true), &first["todos"]));
    assert_eq!(
        deliver("msg_2", "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into()).await.0,
        401,
        "a bad signature is refused"
    );

    // Each copy is claimed and charged to its own queue identity only.
    let (_, a_claim) = world.client.tool(&a_slug, &a_key, "claim_next", json!({})).await;
    assert_eq!(a_claim["todo"]["created_by_kind"], "ingest");
    assert_eq!(a_claim["admission"]["used"], 1);
    let (_, b_claim) = world.client.tool(&b_slug, &b_key, "claim_next", json!({})).await;
    assert!(b_claim["admission"].is_null(), "B's copy has no policy: {b_claim}");
    // The redelivery created nothing and charged nothing.
    let (_, shown) = world.client.get(&format!("/api/v1/admission/endpoint:{a_slug}/events"), &alice).await;
    assert_eq!(shown["usage"]["used"], 1);
    let (_, a_pending) = world.client.tool(&a_slug, &a_key, "claim_next", json!({})).await;
    assert_eq!(a_pending, json!({"empty": true}));
}

// SPEC-0030 REQ-4 "Concurrent claimers cannot exceed the limit", across two server processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn req4_fifty_mcp_claimers_across_two_servers_commit_exactly_ten() {
    let world = World::start().await;
    let dir = data_dir();
    let second = Server::start(&["--database-url", &world.db.url], &[], dir.path());
    let alice = world.human("alice");
    let (slug, key) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await);
    world.put_policy(&alice, &format!("endpoint:{slug}"), "inbox", daily(10)).await;
    for i in 0..50 {
        world.push(&alice, &slug, "inbox", &format!("t{i}")).await;
    }
    let clients = [world.client.clone(), Client::new(&second.base)];
    let calls: Vec<_> = (0..50)
        .map(|i| {
            let (client, slug, key) = (clients[i % 2].clone(), slug.clone(), key.clone());
            tokio::spawn(async move { client.tool(&slug, &key, "claim_next", json!({})).await })
        })
        .collect();
    let mut claimed = 0;
    for call in calls {
        let (is_error, answer) = call.await.expect("join");
        assert!(!is_error, "{answer}");
        if answer["empty"] == false {
            claimed += 1;
        } else {
            assert_eq!(answer["deferred"][0]["reason"], "window_exhausted");
        }
    }
    assert_eq!(claimed, 10);
    let (_, shown) = world.client.get(&format!("/api/v1/admission/endpoint:{slug}/inbox"), &alice).await;
    assert_eq!(
        (shown["usage"]["used"].as_i64(), shown["status"]["status"].as_str()),
        (Some(10), Some("window_exhausted"))
    );
}

// The OpenAPI document is kept in sync: every documented operation is routed, and every one but
// the document itself refuses a caller without credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_every_operation_and_each_is_served() {
    let world = World::start().await;
    let response = reqwest::get(format!("{}/api/v1/openapi.json", world.client.base)).await.expect("GET");
    assert_eq!(response.status().as_u16(), 200);
    let document: Value = response.json().await.expect("json");
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().expect("paths");
    assert!(paths.len() >= 10, "{paths:?}");
    for (path, operations) in paths {
        let concrete = path
            .replace("{scope}", "endpoint:x")
            .replace("{queue}", "q")
            .replace("{id}", "td_x")
            .replace("{action}", "claim");
        for method in operations.as_object().expect("operations").keys() {
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let response = reqwest::Client::new()
                .request(method.clone(), format!("{}{concrete}", world.client.base))
                .send()
                .await
                .expect("call");
            let expected = if path == "/api/v1/openapi.json" { 200 } else { 401 };
            assert_eq!(response.status().as_u16(), expected, "{method} {path}");
        }
    }
}

// Issue: auth. A signed-in human mints more operator tokens; each works on the API and never on
// MCP; teams list with the caller's role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minted_tokens_work_on_the_api_only_and_teams_show_roles() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (status, minted) = world.client.post("/api/v1/tokens", &alice, json!({"label": "laptop"})).await;
    assert_eq!(status, 201, "{minted}");
    let token = minted["token"].as_str().expect("token").to_string();
    assert!(token.starts_with("sbh_") && token != alice);
    let (status, _) = world.client.get("/api/v1/endpoints", &token).await;
    assert_eq!(status, 200);
    let (slug, _) = slug_key(&world.client.vend(&token, json!({"name": "w", "queues": ["inbox"]})).await);
    assert_eq!(
        world.client.rpc(&slug, &token, "tools/list", json!({})).await.0,
        401,
        "an operator token is not an MCP credential"
    );
    let (status, invalid) = world.client.post("/api/v1/tokens", &alice, json!({"label": "x".repeat(101)})).await;
    assert_eq!((status, invalid["field"].as_str()), (400, Some("label")));

    let team =
        support::run(&["admin", "team", "add", "core", "--owner", "alice", "--database-url", &world.db.url], &[]);
    assert_eq!(team.0, 0, "{}", team.2);
    let (status, teams) = world.client.get("/api/v1/teams", &token).await;
    assert_eq!(status, 200);
    assert_eq!((teams["teams"][0]["name"].as_str(), teams["teams"][0]["role"].as_str()), (Some("core"), Some("owner")));
    let bob = world.human("bob");
    let (_, bobs) = world.client.get("/api/v1/teams", &bob).await;
    assert_eq!(bobs["teams"], json!([]));
}

// SPEC-0030 Security Requirements: the MCP policy verbs have a per-endpoint write limiter too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_mcp_policy_writes_are_rate_limited_per_endpoint() {
    let world = World::start().await;
    let alice = world.human("alice");
    let endpoint =
        world.client.vend(&alice, json!({"name": "t", "queues": ["lane"], "verbs": ["set_admission_policy"]})).await;
    let (slug, key) = slug_key(&endpoint);
    let mut codes = Vec::new();
    for max in 0..11 {
        let (is_error, answer) = world
            .client
            .tool(&slug, &key, "set_admission_policy", json!({"queue": "lane", "policy": {"max_in_flight": max}}))
            .await;
        codes.push(if is_error { answer["code"].as_str().unwrap_or("?").to_string() } else { "ok".to_string() });
    }
    assert_eq!(&codes[..10], &vec!["ok".to_string(); 10][..], "a burst of 10 passes");
    assert_eq!(codes[10], "rate_limited");
    let (_, shown) = world.client.get(&format!("/api/v1/admission/endpoint:{slug}/lane"), &alice).await;
    assert_eq!(shown["policy"]["max_in_flight"], 9, "the refused write changed nothing");
}

// SPEC-0030 REQ-13 "A client disconnects after the policy lock is taken" (issue #28), through
// the real binary: an agent's claim_next waits on the queue's policy lock, which another
// connection holds; the agent's HTTP client gives up and closes its connection. When the lock
// comes free, nothing has been claimed or charged, and the todo is there for the next claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req13_an_mcp_client_that_leaves_while_its_claim_waits_on_the_policy_lock_charges_nothing() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (slug, key) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await);
    assert_eq!(world.put_policy(&alice, &format!("endpoint:{slug}"), "inbox", daily(5)).await.0, 200);
    let todo = world.push(&alice, &slug, "inbox", "waits for the lock").await;
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("connect");
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold the lock");

    let impatient = reqwest::Client::builder().timeout(std::time::Duration::from_millis(1500)).build().expect("client");
    let left = impatient
        .post(format!("{}/mcp/{slug}", world.client.base))
        .bearer_auth(&key)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "claim_next", "arguments": {}}}))
        .send()
        .await
        .expect_err("the claim waits on the lock until the client leaves");
    assert!(left.is_timeout(), "{left}");
    let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        .fetch_one(&pool)
        .await
        .expect("waiters");
    assert!(waiting >= 1, "the claim was waiting on the policy lock when its client left");
    holder.rollback().await.expect("release the lock");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;

    let state: String =
        sqlx::query_scalar("SELECT state FROM todos WHERE id = $1").bind(&todo).fetch_one(&pool).await.expect("todo");
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM todo_attempts").fetch_one(&pool).await.expect("n");
    let charged: i64 = sqlx::query_scalar("SELECT coalesce(sum(used), 0)::bigint FROM admission_windows")
        .fetch_one(&pool)
        .await
        .expect("usage");
    assert_eq!((state.as_str(), attempts, charged), ("pending", 0, 0), "nothing claimed or charged");
    let (is_error, claimed) = world.client.tool(&slug, &key, "claim_next", json!({})).await;
    assert!(!is_error, "{claimed}");
    assert_eq!((claimed["todo"]["id"].as_str(), claimed["admission"]["used"].as_i64()), (Some(todo.as_str()), Some(1)));
}

/// Claims `count` todos of `inbox` over MCP; each must be admitted.
async fn claim_admitted(world: &World, slug: &str, key: &str, count: usize) {
    for n in 0..count {
        let (is_error, answer) = world.client.tool(slug, key, "claim_next", json!({})).await;
        assert!(!is_error && answer["empty"] == false, "claim {n} was not admitted: {answer}");
    }
}

/// `usage.used` of `GET /api/v1/admission/{scope}/inbox`.
async fn used(world: &World, token: &str, scope: &str) -> Value {
    let (status, detail) = world.client.get(&format!("/api/v1/admission/{scope}/inbox"), token).await;
    assert_eq!(status, 200, "{detail}");
    detail["usage"]["used"].clone()
}

// SPEC-0030 REQ-3 (issue #28, leak 1): "A charge MUST NOT be refunded by ... any policy change".
// A day spent 5 of 5, then DELETE and PUT of the same policy: still 5 used, nothing admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req3_a_deleted_and_re_created_policy_keeps_the_days_charges_over_the_api() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (slug, key) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await);
    let scope = format!("endpoint:{slug}");
    assert_eq!(world.put_policy(&alice, &scope, "inbox", daily(5)).await.0, 200);
    for i in 0..8 {
        world.push(&alice, &slug, "inbox", &format!("t{i}")).await;
    }
    claim_admitted(&world, &slug, &key, 5).await;
    assert_eq!(world.delete_policy(&alice, &scope, "inbox").await.0, 204);
    assert_eq!(world.put_policy(&alice, &scope, "inbox", daily(5)).await.0, 200);
    assert_eq!(used(&world, &alice, &scope).await, 5, "the re-created policy refunded the day");
    let (is_error, answer) = world.client.tool(&slug, &key, "claim_next", json!({})).await;
    assert!(!is_error, "{answer}");
    assert_eq!(answer["empty"], true, "a sixth claim was admitted the same day: {answer}");
    assert_eq!(answer["deferred"][0]["reason"], "window_exhausted", "{answer}");
}

// SPEC-0030 REQ-3 (issue #28, leak 2): "The number of units charged in a window MUST equal the
// number of claims of that queue identity committed in it." Moving the day's start so that the
// current window began an hour ago counts the claims committed since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req3_a_redefined_window_counts_the_claims_already_in_it_over_the_api() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (slug, key) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await);
    let scope = format!("endpoint:{slug}");
    assert_eq!(world.put_policy(&alice, &scope, "inbox", daily(5)).await.0, 200);
    for i in 0..4 {
        world.push(&alice, &slug, "inbox", &format!("t{i}")).await;
    }
    claim_admitted(&world, &slug, &key, 3).await;
    let start = (chrono::Utc::now() - chrono::Duration::hours(1)).format("%H:%M").to_string();
    let moved = json!({"max_in_flight": null, "max_claims_per_window": 5,
                       "window": {"period": "day", "tz": "UTC", "start": start}});
    assert_eq!(world.put_policy(&alice, &scope, "inbox", moved).await.0, 200);
    assert_eq!(used(&world, &alice, &scope).await, 3, "the redefined window forgot the claims in its span");
}

/// Waits, if need be, until the wall clock is early enough in its minute that a few quick
/// claims all fall in one minute window (at most 20 s).
async fn early_in_a_minute() {
    use chrono::Timelike;
    let second = chrono::Utc::now().second();
    if second > 40 {
        tokio::time::sleep(std::time::Duration::from_secs(u64::from(61 - second))).await;
    }
}

// Issue #52 "a minute window defers the third quick claim", over the API and MCP: a per-minute
// plus per-day policy; bad windows refused naming the field; the refusal names its window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ext52_a_minute_window_defers_the_third_quick_claim_over_the_api_and_mcp() {
    let world = World::start().await;
    let alice = world.human("alice");
    let (slug, key) = slug_key(&world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await);
    let scope = format!("endpoint:{slug}");
    let minute = json!({"max_claims": 2, "window": {"period": "minute"}});
    let policy = |additional: Value| {
        json!({"max_in_flight": null, "max_claims_per_window": 5000,
            "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}, "additional_windows": additional})
    };
    let (status, saved) = world.put_policy(&alice, &scope, "inbox", policy(json!([minute]))).await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["policy"]["additional_windows"], json!([minute]));
    assert_eq!(saved["status"]["windows"].as_array().map(Vec::len), Some(2), "{saved}");

    for (bad, field) in [
        (policy(json!([minute, minute, minute, minute, minute])), "additional_windows[4]"),
        (
            policy(json!([{"max_claims": 2, "window": {"period": "minute", "tz": "UTC"}}])),
            "additional_windows[0].window.tz",
        ),
        (
            policy(json!([minute, minute, {"max_claims": 2, "window": {"period": "fortnight"}}])),
            "additional_windows[2].window.period",
        ),
    ] {
        let (status, refused) = world.put_policy(&alice, &scope, "inbox", bad).await;
        assert_eq!((status, refused["field"].as_str()), (400, Some(field)), "{refused}");
    }
    let (_, detail) = world.client.get(&format!("/api/v1/admission/{scope}/inbox"), &alice).await;
    assert_eq!(detail["policy"]["additional_windows"], json!([minute]), "a refused write changed the policy");

    for i in 0..4 {
        world.push(&alice, &slug, "inbox", &format!("t{i}")).await;
    }
    early_in_a_minute().await;
    claim_admitted(&world, &slug, &key, 2).await;
    let (_, empty) = world.client.tool(&slug, &key, "claim_next", json!({})).await;
    assert_eq!(empty["empty"], true, "{empty}");
    let deferred = &empty["deferred"][0];
    assert_eq!(
        (deferred["reason"].as_str(), &deferred["window"]),
        (Some("window_exhausted"), &json!({"period": "minute"}))
    );
    let next = deferred["next_eligible_at"].as_str().expect("next_eligible_at");
    assert!(next.ends_with(":00.000Z"), "a minute window turns on the minute: {next}");

    let (_, listed) = world.client.tool(&slug, &key, "list_todos", json!({"state": "pending"})).await;
    let waiting = listed["todos"][0]["id"].as_str().expect("id").to_string();
    let (is_error, refused) = world.client.tool(&slug, &key, "claim", json!({"id": waiting})).await;
    assert!(is_error);
    assert_eq!(
        (refused["reason"].as_str(), &refused["window"]),
        (Some("window_exhausted"), &json!({"period": "minute"}))
    );

    let (_, admission) = world.client.tool(&slug, &key, "admission_status", json!({})).await;
    let inbox = &admission["queues"][0];
    assert_eq!((inbox["status"].as_str(), &inbox["window"]), (Some("window_exhausted"), &json!({"period": "minute"})));
    let windows: Vec<(Value, Value, Value)> = inbox["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .map(|w| (w["window"]["period"].clone(), w["used"].clone(), w["remaining"].clone()))
        .collect();
    assert_eq!(windows, [(json!("day"), json!(2), json!(4998)), (json!("minute"), json!(2), json!(0))], "{inbox}");
    assert_eq!((inbox["used"].as_i64(), inbox["remaining"].as_i64()), (Some(2), Some(4998)), "the primary's fields");
    // At two claims in the last minutes the day lasts past its reset: no forecast, but the field.
    assert_eq!(inbox.get("forecast_exhausted_at"), Some(&Value::Null), "{inbox}");
}
