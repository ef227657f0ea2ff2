//! Bad input gets a clear error and changes nothing (issue #14, "a NUL byte becomes a 500"):
//! PostgreSQL cannot store the NUL character in text or jsonb, so a request carrying one, in a
//! title, a key, a payload at any depth, an MCP tool argument or a path segment, is refused with
//! `invalid_argument` naming the field (or the same 404 as any unknown webhook), never a 500, and
//! nothing is created.

mod support;

use serde_json::{Value, json};
use support::{Client, Server, add_human, data_dir};

/// A server on a fresh database, the human alice and her endpoint `worker` with queue `inbox`.
struct Inbox {
    _database: engine::testing::TestDatabase,
    _dir: tempfile::TempDir,
    server: Server,
    client: Client,
    alice: String,
    worker: Value,
}

impl Inbox {
    async fn start() -> Inbox {
        let database = engine::testing::empty_database().await;
        let dir = data_dir();
        let server = Server::start(&["--database-url", &database.url], &[], dir.path());
        let client = Client::new(&server.base);
        let (_, alice) = add_human("alice", &["--database-url", &database.url]);
        let worker = client.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
        Inbox { _database: database, _dir: dir, server, client, alice, worker }
    }

    fn scope(&self) -> String {
        format!("endpoint:{}", self.worker["slug"].as_str().expect("slug"))
    }

    /// A webhook named `name` into `inbox`: its ingest URL and secret.
    async fn webhook(&self, name: &str) -> (String, String) {
        let targets = json!([{"scope": self.scope(), "queue": "inbox"}]);
        let (status, hook) =
            self.client.post("/api/v1/webhooks", &self.alice, json!({"name": name, "targets": targets})).await;
        assert_eq!(status, 201, "{hook}");
        let url = self.server.url(&format!("/ingest/{}", hook["id"].as_str().expect("id")));
        (url, hook["secret"].as_str().expect("secret").to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_anywhere_in_a_request_is_refused_naming_the_field() {
    let Inbox { server, client, alice, worker, .. } = &Inbox::start().await;
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
        let (status, answer) = client.post("/api/v1/todos", alice, todo(extra.clone())).await;
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
    let (status, answer) = client.get("/api/v1/todos/td_%00", alice).await;
    assert!(status == 400 || status == 404, "GET a todo id with a NUL: {status} {answer}");

    // Nothing was created by any of it.
    let (status, listed) = client.get(&format!("/api/v1/todos?scope={scope}&queue=inbox"), alice).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["todos"], json!([]), "refused requests change nothing");
}

// Issue #14: "a webhook-timestamp far out of range reaches the library's unchecked subtraction".
// A signed delivery whose timestamp is absurd, stale or missing is refused as unauthenticated;
// the server stays up and a good delivery still lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_timestamp_out_of_range_is_refused_and_harms_nothing() {
    let inbox = Inbox::start().await;
    let (url, secret) = inbox.webhook("p").await;
    let body = r#"{"event": "x"}"#;
    let http = reqwest::Client::new();

    for timestamp in [Some(i64::MAX.to_string()), Some(i64::MIN.to_string()), Some("1".to_string()), None] {
        let mut headers = support::sign(&secret, "msg_far", body);
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
    let good = http.post(&url).headers(support::sign(&secret, "msg_ok", body)).body(body).send().await.expect("POST");
    assert_eq!(good.status().as_u16(), 202, "the server is still up and a fresh delivery lands");
}

// Issue #14: "a delivery id of 162-200 bytes or an empty title makes a verified delivery fail
// forever", and a payload with a NUL did too. A verified delivery is the provider's word: it
// always makes its todo (NULs replaced by U+FFFD, a blank title replaced by the default, a long
// delivery id hashed into the key) and a redelivery still dedups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_delivery_always_makes_its_todo_and_redelivery_still_dedups() {
    let inbox = Inbox::start().await;
    let scope = inbox.scope();
    let (url, secret) = inbox.webhook("ci").await;
    let Inbox { client, alice, .. } = &inbox;
    let http = reqwest::Client::new();
    let deliver = |delivery_id: String, body: &'static str| {
        let request = http.post(&url).headers(support::sign(&secret, &delivery_id, body)).body(body);
        async move {
            let answer = request.send().await.expect("POST ingest");
            let status = answer.status().as_u16();
            (status, answer.json::<Value>().await.unwrap_or(Value::Null))
        }
    };

    let long_id = format!("msg_{}", "x".repeat(190));
    let cases: [(String, &'static str, &str); 4] = [
        (long_id.clone(), r#"{"title": "long id"}"#, "long id"),
        ("msg_blank".into(), r#"{"title": "   "}"#, "ci: delivery msg_blank"),
        ("msg_nul".into(), r#"{"title": "a\u0000b", "data": {"k\u0000": "v\u0000"}}"#, "a\u{FFFD}b"),
        ("msg_text".into(), "plain text with a \u{0} byte", "ci: delivery msg_text"),
    ];
    for (delivery_id, body, _) in &cases {
        let (status, answer) = deliver(delivery_id.clone(), body).await;
        assert_eq!(status, 202, "delivery {delivery_id:.20}: {answer}");
        assert_eq!(answer["deduped"], json!(false), "{answer}");
    }
    let (status, again) = deliver(long_id, cases[0].1).await;
    assert_eq!((status, &again["deduped"]), (202, &json!(true)), "a long delivery id still dedups: {again}");

    let (status, listed) = client.get(&format!("/api/v1/todos?scope={scope}&queue=inbox"), alice).await;
    assert_eq!(status, 200, "{listed}");
    let mut titles: Vec<&str> =
        listed["todos"].as_array().expect("todos").iter().filter_map(|t| t["title"].as_str()).collect();
    titles.sort_unstable();
    let mut expected: Vec<&str> = cases.iter().map(|(_, _, title)| *title).collect();
    expected.sort_unstable();
    assert_eq!(titles, expected, "one todo per delivery, none refused: {listed}");
    let nul = listed["todos"].as_array().expect("todos").iter().find(|t| t["title"] == "a\u{FFFD}b").expect("nul todo");
    let (status, shown) = client.get(&format!("/api/v1/todos/{}", nul["id"].as_str().expect("id")), alice).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["todo"]["payload"]["data"],
        json!({"k\u{FFFD}": "v\u{FFFD}"}),
        "NULs replaced, nothing else: {shown}"
    );
}

// Issue #14: the `wh:` key prefix belongs to webhook deliveries; a human or agent cannot take a
// delivery's dedup slot by creating a todo under its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingest_key_prefix_is_refused_to_humans_and_agents_naming_the_field() {
    let inbox = Inbox::start().await;
    let scope = inbox.scope();
    let Inbox { client, alice, .. } = &inbox;
    let body = json!({"scope": scope, "queue": "inbox", "title": "squat", "idempotency_key": "wh:wh_x:msg_1"});
    let (status, answer) = client.post("/api/v1/todos", alice, body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["code"], json!("invalid_argument"), "{answer}");
    assert_eq!(answer["field"], json!("idempotency_key"), "{answer}");
    let body = json!({"scope": scope, "queue": "inbox", "title": "fine", "idempotency_key": "w:h:msg_1"});
    let (status, answer) = client.post("/api/v1/todos", alice, body).await;
    assert_eq!(status, 201, "other keys still work: {answer}");
    let (_, listed) = client.get(&format!("/api/v1/todos?scope={scope}&queue=inbox"), alice).await;
    assert_eq!(listed["todos"].as_array().map(Vec::len), Some(1), "the refused create changed nothing: {listed}");
}

/// JSON Schema calls `7.0` an integer, and so do the OpenAPI document and the MCP tools' input
/// schemas; a generated client may send one (issue #30: schemathesis 4.32 did). Every surface
/// reads a whole float as its integer, and still refuses a fraction naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_number_written_as_a_float_is_the_integer_and_a_fraction_is_refused() {
    let inbox = Inbox::start().await;
    let Inbox { client, alice, worker, .. } = &inbox;
    let scope = inbox.scope();
    let (slug, key) = (worker["slug"].as_str().expect("slug"), worker["token"].as_str().expect("token"));

    // An admission policy: 2.0 is a cap of 2; 2.5 is refused naming the field and changes nothing.
    let (status, policy) = client.put_admission_policy(alice, &scope, "inbox", json!({"max_in_flight": 2.0})).await;
    assert_eq!(status, 200, "{policy}");
    assert_eq!(policy["policy"]["max_in_flight"], json!(2), "{policy}");
    let (status, refused) = client.put_admission_policy(alice, &scope, "inbox", json!({"max_in_flight": 2.5})).await;
    assert_eq!((status, refused["field"].as_str()), (400, Some("max_in_flight")), "{refused}");
    let (_, read) = client.get(&format!("/api/v1/admission/{scope}/inbox"), alice).await;
    assert_eq!(read["policy"]["max_in_flight"], json!(2), "the refused write changed nothing: {read}");

    // The operator API: max_attempts 4.0 is 4; a lease of 30.0 seconds is 30.
    let body = json!({"scope": scope, "queue": "inbox", "title": "whole", "max_attempts": 4.0});
    let (status, created) = client.post("/api/v1/todos", alice, body).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["todo"]["max_attempts"], json!(4), "{created}");
    let body = json!({"scope": scope, "queue": "inbox", "title": "half", "max_attempts": 1.5});
    let (status, refused) = client.post("/api/v1/todos", alice, body).await;
    assert_eq!((status, refused["field"].as_str()), (400, Some("max_attempts")), "{refused}");

    // MCP: claim_next {max: 1.0, lease_ttl_seconds: 30.0} claims the one todo.
    let arguments = json!({"max": 1.0, "lease_ttl_seconds": 30.0});
    let (is_error, claimed) = client.tool(slug, key, "claim_next", arguments).await;
    assert!(!is_error, "{claimed}");
    assert_eq!(claimed["todo"]["title"], "whole", "{claimed}");
    let (is_error, refused) = client.tool(slug, key, "claim_next", json!({"max": 0.5})).await;
    assert!(is_error, "{refused}");
    assert_eq!(refused["field"], "max", "{refused}");
}
