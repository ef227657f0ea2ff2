//! The foundation, end to end through the real binary: a fresh data dir with the embedded
//! PostgreSQL, bootstrap, vend, push, drain over MCP, restart, and the work is still there.
//! Also the edges of authentication and grants on the real surfaces.

mod support;

use serde_json::json;
use support::{Client, Server, add_human, data_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_default_serves_drains_and_keeps_work_across_a_restart() {
    let dir = data_dir();
    let data = dir.path().join("state");
    let data_arg = data.to_str().expect("utf-8 path");

    // Bootstrap before the server ever ran: the command starts and stops the cluster itself.
    let (_, token) = add_human("alice", &["--data-dir", data_arg]);
    assert!(token.starts_with("sbh_"));

    let mut server = Server::start(&["--data-dir", data_arg], &[], dir.path());
    let client = Client::new(&server.base);
    let health = reqwest::get(server.url("/healthz")).await.expect("healthz");
    assert_eq!(health.status().as_u16(), 200);

    // Bootstrap again while serve runs on the same data dir.
    let (_, bob_token) = add_human("bob", &["--data-dir", data_arg]);
    assert!(bob_token.starts_with("sbh_"));

    let endpoint = client.vend(&token, json!({"name": "triage bot", "queues": ["inbox"]})).await;
    let (slug, key) = (endpoint["slug"].as_str().expect("slug"), endpoint["token"].as_str().expect("token"));
    assert!(key.starts_with("sbk_"));
    assert!(endpoint["mcp_url"].as_str().expect("mcp_url").ends_with(&format!("/mcp/{slug}")));

    let (status, pushed) = client
        .post(
            "/api/v1/todos",
            &token,
            json!({"scope": format!("endpoint:{slug}"), "queue": "inbox", "title": "look at it"}),
        )
        .await;
    assert_eq!(status, 201, "{pushed}");
    let todo_id = pushed["todo"]["id"].as_str().expect("id").to_string();

    let (status, init) =
        client.rpc(slug, key, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}})).await;
    assert_eq!(status, 200);
    assert_eq!(init["result"]["serverInfo"]["name"], "switchboard");
    let (is_error, claim) = client.tool(slug, key, "claim_next", json!({})).await;
    assert!(!is_error, "{claim}");
    assert_eq!((claim["empty"].as_bool(), claim["todo"]["id"].as_str()), (Some(false), Some(todo_id.as_str())));
    let (is_error, done) = client.tool(slug, key, "complete", json!({"id": todo_id, "result": {"ok": true}})).await;
    assert!(!is_error, "{done}");
    assert_eq!(done["state"], "done");

    assert_eq!(server.stop(), 0, "graceful stop exits 0");
    let server = Server::start(&["--data-dir", data_arg], &[], dir.path());
    let client = Client::new(&server.base);
    let (status, listed) = client.get(&format!("/api/v1/todos?scope=endpoint:{slug}&queue=inbox"), &token).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["todos"][0]["id"], todo_id.as_str());
    assert_eq!(listed["todos"][0]["state"], "done");
}

/// Credentials on the right surface and URL, verbs and queues inside the grant, arguments
/// named when bad.
async fn assert_credentials_and_grants_on_mcp(
    client: &Client,
    alice: &str,
    (narrow_slug, narrow_key): (&str, &str),
    (worker_slug, worker_key): (&str, &str),
) {
    // No credential, a human token on MCP, an endpoint token on the API: 401.
    assert_eq!(client.rpc(worker_slug, "", "tools/list", json!({})).await.0, 401);
    assert_eq!(client.rpc(worker_slug, alice, "tools/list", json!({})).await.0, 401);
    assert_eq!(client.get("/api/v1/endpoints", worker_key).await.0, 401);
    // A valid credential on another endpoint's URL: 403.
    assert_eq!(client.rpc(worker_slug, narrow_key, "tools/list", json!({})).await.0, 403);

    // A verb outside the grant is absent from tools/list and refused with forbidden.
    let (_, listed) = client.rpc(narrow_slug, narrow_key, "tools/list", json!({})).await;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    // The self verbs (base-system §4: clock_in, clock_out, presence) are outside every grant and
    // always allowed, so they follow the one granted verb.
    assert_eq!(names, vec!["list_todos", "clock_in", "clock_out", "presence"]);
    let (is_error, refused) = client.tool(narrow_slug, narrow_key, "claim_next", json!({})).await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden");
    // A name no tool has is invalid_argument naming `name`; a self verb needs no grant.
    let (is_error, refused) = client.tool(narrow_slug, narrow_key, "claim_everything", json!({})).await;
    assert!(is_error);
    assert_eq!((refused["code"].as_str(), refused["field"].as_str()), (Some("invalid_argument"), Some("name")));
    let (is_error, presence) = client.tool(narrow_slug, narrow_key, "presence", json!({})).await;
    assert!(!is_error, "{presence}");
    // The default grant never includes the admission-policy or discard verbs.
    let (_, listed) = client.rpc(worker_slug, worker_key, "tools/list", json!({})).await;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    for opt_in in models::verbs::OPT_IN_ONLY {
        assert!(!names.contains(opt_in), "{opt_in} must not be in a default grant");
    }

    // A queue outside the grant is forbidden; bad arguments name their field.
    let (is_error, refused) = client.tool(worker_slug, worker_key, "claim_next", json!({"queue": "secret"})).await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden");
    let (is_error, refused) =
        client.tool(worker_slug, worker_key, "claim_next", json!({"lease_ttl_seconds": "soon"})).await;
    assert!(is_error);
    assert_eq!(
        (refused["code"].as_str(), refused["field"].as_str()),
        (Some("invalid_argument"), Some("lease_ttl_seconds"))
    );
}

/// Another human's endpoint and todos: the same 404 as made-up ones, `not_found` over MCP.
async fn assert_another_humans_endpoint_is_invisible(client: &Client, alice: &str, bob: &str, worker_slug: &str) {
    // Bob cannot push into, list, or even learn of alice's endpoint: the same 404 as a made-up one.
    let (status, foreign) = client
        .post("/api/v1/todos", bob, json!({"scope": format!("endpoint:{worker_slug}"), "queue": "inbox", "title": "x"}))
        .await;
    let (status_unknown, unknown) = client
        .post("/api/v1/todos", bob, json!({"scope": "endpoint:no-such-endpoint", "queue": "inbox", "title": "x"}))
        .await;
    assert_eq!((status, status_unknown), (404, 404));
    assert_eq!(foreign, unknown);

    // A todo of alice's is not_found for bob's own endpoint.
    let (_, pushed) = client
        .post(
            "/api/v1/todos",
            alice,
            json!({"scope": format!("endpoint:{worker_slug}"), "queue": "inbox", "title": "x"}),
        )
        .await;
    let bob_endpoint = client.vend(bob, json!({"name": "bobs", "queues": ["inbox"]})).await;
    let (is_error, refused) = client
        .tool(
            bob_endpoint["slug"].as_str().expect("slug"),
            bob_endpoint["token"].as_str().expect("token"),
            "claim",
            json!({"id": pushed["todo"]["id"]}),
        )
        .await;
    assert!(is_error);
    assert_eq!(refused["code"], "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_grants_are_enforced_on_the_real_surfaces() {
    let database = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &database.url], &[], dir.path());
    let client = Client::new(&server.base);
    let db = ["--database-url", database.url.as_str()];
    let (_, alice) = add_human("alice", &db);
    let (_, bob) = add_human("bob", &db);

    let narrow = client.vend(&alice, json!({"name": "reader", "queues": ["inbox"], "verbs": ["list_todos"]})).await;
    let worker = client.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    let (narrow_slug, narrow_key) = (narrow["slug"].as_str().expect("slug"), narrow["token"].as_str().expect("token"));
    let (worker_slug, worker_key) = (worker["slug"].as_str().expect("slug"), worker["token"].as_str().expect("token"));

    assert_credentials_and_grants_on_mcp(&client, &alice, (narrow_slug, narrow_key), (worker_slug, worker_key)).await;
    assert_another_humans_endpoint_is_invisible(&client, &alice, &bob, worker_slug).await;

    // Dedup through the API: the same key twice is one todo, 201 then 200 with deduped.
    let body =
        json!({"scope": format!("endpoint:{worker_slug}"), "queue": "inbox", "title": "k", "idempotency_key": "d-1"});
    let (first_status, first) = client.post("/api/v1/todos", &alice, body.clone()).await;
    let (second_status, second) = client.post("/api/v1/todos", &alice, body).await;
    assert_eq!((first_status, second_status), (201, 200));
    assert_eq!((second["deduped"].as_bool(), &second["todo"]["id"]), (Some(true), &first["todo"]["id"]));
}

// Without PostgreSQL's server binaries the embedded default refuses with a message saying how
// to install them, and changes nothing. (PG_BIN pointing at a directory without them takes the
// same path as a machine that has none.)
#[test]
fn without_server_binaries_the_embedded_default_says_how_to_install_them() {
    let dir = data_dir();
    let data = dir.path().join("state");
    let empty_bin = dir.path().join("no-postgres-here");
    std::fs::create_dir_all(&empty_bin).expect("mkdir");
    let (code, stdout, stderr) = support::run(
        &["admin", "human", "add", "alice", "--data-dir", data.to_str().expect("utf-8")],
        &[("PG_BIN", empty_bin.to_str().expect("utf-8"))],
    );
    assert_eq!(code, 1, "stdout: {stdout}");
    assert!(stderr.contains("apt-get install postgresql"), "{stderr}");
    assert!(stdout.is_empty());
    assert!(!data.join("pg").join("data").exists(), "nothing was initialised");
}
