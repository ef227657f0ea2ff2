//! SPEC-0030 REQ-10 and the Security Requirements through the real binary, from a plain HTTP
//! client (issue #28): every policy write's audit record names who made it (the human, and the
//! endpoint when an agent acted), when, and the policy before and after, in one shape whichever
//! surface wrote it (API, board, MCP); and the board's pages carry the same security headers,
//! with their values, as the API's responses.

mod support;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use support::{Client, Server, add_human, data_dir};

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

    /// Signs `human` in on the board over plain HTTP (the login link's form, posted): the session
    /// cookie's value.
    async fn board_session(&self, human: &str) -> String {
        let (code, stdout, stderr) = support::run(
            &["admin", "login-link", human, "--base-url", &self.client.base, "--database-url", &self.db.url],
            &[],
        );
        assert_eq!(code, 0, "login-link: {stderr}");
        let response = http().post(stdout.trim()).send().await.expect("redeem the link");
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("sb_session="))
            .expect("a session cookie")
            .split(';')
            .next()
            .expect("value")
            .to_string()
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

/// A board page as the signed-in browser would fetch it: status, headers, body.
async fn board_get(base: &str, cookie: &str, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let response =
        http().get(format!("{base}{path}")).header("cookie", format!("sb_session={cookie}")).send().await.expect("GET");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.expect("body"))
}

/// The CSRF token every board form carries.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf input") + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().expect("token").to_string()
}

/// The audit records of a queue, newest first.
async fn audit(world: &World, token: &str, scope: &str, queue: &str) -> Vec<Value> {
    let (status, body) = world.client.get(&format!("/api/v1/admission/{scope}/{queue}/audit"), token).await;
    assert_eq!(status, 200, "{body}");
    body["records"].as_array().expect("records").clone()
}

fn at(record: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(record["at"].as_str().expect("at")).expect("rfc3339").to_utc()
}

/// One audit record's shape: exactly these keys, whichever surface wrote it.
fn assert_shape(record: &Value) {
    let mut keys: Vec<&str> = record.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["action", "actor_endpoint_id", "actor_human_id", "after", "at", "before"], "{record}");
}

// SPEC-0030 REQ-10 "Every change is audited": the API's, the board's and an agent's writes of
// one queue's policy each leave a record with the human (and the endpoint, for the agent), the
// time it was made, and the policy before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_audit_records_carry_who_when_before_and_after_on_every_surface() {
    let world = World::start().await;
    let (alice_id, alice) = add_human("alice", &["--database-url", &world.db.url]);
    let endpoint = world
        .client
        .vend(&alice, json!({"name": "w", "queues": ["inbox"], "verbs": ["claim_next", "set_admission_policy"]}))
        .await;
    let (slug, key, endpoint_id) = (
        endpoint["slug"].as_str().expect("slug").to_string(),
        endpoint["token"].as_str().expect("token").to_string(),
        endpoint["id"].as_str().expect("id").to_string(),
    );
    let scope = format!("endpoint:{slug}");
    let first = json!({"max_in_flight": 2, "max_claims_per_window": null, "window": null});

    let before_api = Utc::now() - chrono::Duration::milliseconds(1);
    let response = http()
        .put(format!("{}/api/v1/admission/{scope}/inbox", world.client.base))
        .bearer_auth(&alice)
        .json(&first)
        .send()
        .await
        .expect("PUT");
    assert_eq!(response.status().as_u16(), 200);
    let after_api = Utc::now();

    // The board's budget form, posted with the session's CSRF token.
    let cookie = world.board_session("alice").await;
    let budget_path = format!("/queues/endpoint:{endpoint_id}/inbox/budget");
    let (status, _, page) = board_get(&world.client.base, &cookie, &budget_path).await;
    assert_eq!(status, 200, "{page}");
    let form = format!(
        "csrf={}&max_in_flight=3&max_claims_per_window=&period=day&tz=UTC&start=00%3A00&weekday=",
        csrf_of(&page)
    );
    let before_board = Utc::now() - chrono::Duration::milliseconds(1);
    let saved = http()
        .post(format!("{}{budget_path}", world.client.base))
        .header("cookie", format!("sb_session={cookie}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .expect("POST budget");
    assert_eq!(saved.status().as_u16(), 303, "{}", saved.text().await.unwrap_or_default());
    let after_board = Utc::now();

    let (is_error, answer) = world
        .client
        .tool(&slug, &key, "set_admission_policy", json!({"queue": "inbox", "policy": {"max_in_flight": 4}}))
        .await;
    assert!(!is_error, "{answer}");
    let after_mcp = Utc::now();

    let records = audit(&world, &alice, &scope, "inbox").await;
    assert_eq!(records.len(), 3, "{records:?}");
    records.iter().for_each(assert_shape);
    let (mcp, board, api) = (&records[0], &records[1], &records[2]);

    assert_eq!((api["action"].as_str(), api["actor_human_id"].as_str()), (Some("create"), Some(alice_id.as_str())));
    assert_eq!(
        (api["actor_endpoint_id"].clone(), api["before"].clone(), api["after"].clone()),
        (Value::Null, Value::Null, first.clone())
    );
    assert!(before_api <= at(api) && at(api) <= after_api, "API write at {}", at(api));

    assert_eq!((board["action"].as_str(), board["actor_human_id"].as_str()), (Some("update"), Some(alice_id.as_str())));
    assert_eq!(board["actor_endpoint_id"], Value::Null);
    assert_eq!((board["before"].clone(), board["after"]["max_in_flight"].clone()), (first.clone(), json!(3)));
    assert!(before_board <= at(board) && at(board) <= after_board, "board write at {}", at(board));

    assert_eq!(
        (mcp["action"].as_str(), mcp["actor_endpoint_id"].as_str()),
        (Some("update"), Some(endpoint_id.as_str()))
    );
    assert_eq!(mcp["actor_human_id"].as_str(), Some(alice_id.as_str()), "the agent acts for its human");
    assert_eq!((mcp["before"]["max_in_flight"].clone(), mcp["after"]["max_in_flight"].clone()), (json!(3), json!(4)));
    assert!(after_board <= at(mcp) && at(mcp) <= after_mcp, "MCP write at {}", at(mcp));
}

// SPEC-0030 Security Requirements "Responses keep CSP, X-Frame-Options: DENY,
// X-Content-Type-Options: nosniff and a referrer policy", on the board's pages too: signed in
// or not, a page, an error page and a static asset, each with the values the API sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_board_pages_carry_the_security_headers_with_their_values() {
    let world = World::start().await;
    let (_, alice) = add_human("alice", &["--database-url", &world.db.url]);
    let endpoint = world.client.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let endpoint_id = endpoint["id"].as_str().expect("id").to_string();
    let cookie = world.board_session("alice").await;
    let queue = format!("/queues/endpoint:{endpoint_id}/inbox");
    let api =
        http().get(format!("{}/api/v1/admission", world.client.base)).bearer_auth(&alice).send().await.expect("GET");
    let expected: Vec<(&str, String)> =
        ["content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy"]
            .into_iter()
            .map(|name| (name, api.headers().get(name).and_then(|v| v.to_str().ok()).expect(name).to_string()))
            .collect();
    assert!(expected[0].1.contains("default-src 'self'"), "{expected:?}");
    assert_eq!((expected[1].1.as_str(), expected[2].1.as_str()), ("DENY", "nosniff"));
    assert_eq!(expected[3].1, "no-referrer");

    let signed_in =
        ["/board", queue.as_str(), &format!("{queue}/budget"), &format!("{queue}/audit"), "/settings/capacity"];
    for path in signed_in.iter().copied().chain(["/queues/endpoint:ep_nope/inbox"]) {
        let (status, headers, _) = board_get(&world.client.base, &cookie, path).await;
        assert!(status == 200 || status == 404, "{path}: {status}");
        for (name, value) in &expected {
            assert_eq!(headers.get(*name).and_then(|v| v.to_str().ok()), Some(value.as_str()), "{path}: {name}");
        }
    }
    for path in ["/login", "/board"] {
        let (_, headers, _) = board_get(&world.client.base, "none", path).await;
        for (name, value) in &expected {
            assert_eq!(
                headers.get(*name).and_then(|v| v.to_str().ok()),
                Some(value.as_str()),
                "signed out {path}: {name}"
            );
        }
    }
}
