//! Bad input gets a clear error and changes nothing (issue #14, "a NUL byte becomes a 500"):
//! PostgreSQL cannot store the NUL character in text or jsonb, so a request carrying one, in a
//! title, a key, a payload at any depth, an MCP tool argument or a path segment, is refused with
//! `invalid_argument` naming the field (or the same 404 as any unknown webhook), never a 500, and
//! nothing is created.

mod support;

use serde_json::{Value, json};
use support::{Client, Server, add_human, data_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_anywhere_in_a_request_is_refused_naming_the_field() {
    let database = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &database.url], &[], dir.path());
    let client = Client::new(&server.base);
    let (_, alice) = add_human("alice", &["--database-url", &database.url]);
    let worker = client.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    let (slug, key) = (worker["slug"].as_str().expect("slug"), worker["token"].as_str().expect("token"));
    let scope = format!("endpoint:{slug}");

    // The operator API: each field named, at any depth of the payload.
    let todo = |extra: Value| {
        let mut body = json!({"scope": scope, "queue": "inbox", "title": "fine"});
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        body
    };
    for (extra, field) in [
        (json!({"title": "a\u{0}b"}), "title"),
        (json!({"idempotency_key": "k\u{0}"}), "idempotency_key"),
        (json!({"payload": {"items": [1, {"name": "x\u{0}"}]}}), "payload"),
        (json!({"payload": {"k\u{0}": true}}), "payload"),
    ] {
        let (status, answer) = client.post("/api/v1/todos", &alice, todo(extra.clone())).await;
        assert_eq!(status, 400, "{extra}: {answer}");
        assert_eq!(answer["code"], "invalid_argument", "{answer}");
        assert_eq!(answer["field"], field, "{answer}");
        assert!(answer["error"].as_str().is_some_and(|e| e.contains("NUL")), "{answer}");
    }

    // MCP: a tool argument with a NUL is the tool's invalid_argument, naming the argument.
    let (is_error, refused) = client.tool(slug, key, "create_todo", json!({"queue": "inbox", "title": "t\u{0}"})).await;
    assert!(is_error, "{refused}");
    assert_eq!((refused["code"].as_str(), refused["field"].as_str()), (Some("invalid_argument"), Some("title")));

    // A NUL in a path segment: an unknown webhook is the usual 404; elsewhere a 400, never a 500.
    let http = reqwest::Client::new();
    let ingest = http.post(server.url("/ingest/%00")).body("{}").send().await.expect("POST");
    assert_eq!(ingest.status().as_u16(), 404);
    let (status, answer) = client.get("/api/v1/todos/td_%00", &alice).await;
    assert!(status == 400 || status == 404, "GET a todo id with a NUL: {status} {answer}");

    // Nothing was created by any of it.
    let (status, listed) = client.get(&format!("/api/v1/todos?scope={scope}&queue=inbox"), &alice).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["todos"], json!([]), "refused requests change nothing");
}

// Issue #14: "a webhook-timestamp far out of range reaches the library's unchecked subtraction".
// A signed delivery whose timestamp is absurd, stale or missing is refused as unauthenticated;
// the server stays up and a good delivery still lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_timestamp_out_of_range_is_refused_and_harms_nothing() {
    let database = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &database.url], &[], dir.path());
    let client = Client::new(&server.base);
    let (_, alice) = add_human("alice", &["--database-url", &database.url]);
    let worker = client.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    let scope = format!("endpoint:{}", worker["slug"].as_str().expect("slug"));
    let (status, hook) = client
        .post("/api/v1/webhooks", &alice, json!({"name": "p", "targets": [{"scope": scope, "queue": "inbox"}]}))
        .await;
    assert_eq!(status, 201, "{hook}");
    let url = server.url(&format!("/ingest/{}", hook["id"].as_str().expect("id")));
    let secret = hook["secret"].as_str().expect("secret");
    let body = r#"{"event": "x"}"#;
    let http = reqwest::Client::new();

    for timestamp in [Some(i64::MAX.to_string()), Some(i64::MIN.to_string()), Some("1".to_string()), None] {
        let mut headers = support::sign(secret, "msg_far", body);
        match &timestamp {
            Some(value) => {
                headers.insert("webhook-timestamp", value.parse().expect("header"));
            }
            None => {
                headers.remove("webhook-timestamp");
            }
        }
        let answer = http.post(&url).headers(headers).body(body).send().await.expect("POST ingest");
        assert_eq!(answer.status().as_u16(), 401, "timestamp {timestamp:?}");
    }
    let good = http.post(&url).headers(support::sign(secret, "msg_ok", body)).body(body).send().await.expect("POST");
    assert_eq!(good.status().as_u16(), 202, "the server is still up and a fresh delivery lands");
}
