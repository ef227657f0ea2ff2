//! Credential management (contract §3, issue #14) through the real binary on real PostgreSQL:
//! a human lists and revokes their own operator tokens and mints expiring ones; an endpoint's
//! manager revokes its MCP credential (keeping its work, ending its streams) or rotates it.

mod push_support;
mod support;

use push_support::{attach, initialize};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use support::world::{Hook, Reply, World, send};

async fn mint(world: &World, token: &str, body: Value) -> Reply {
    send(&world.client, Method::POST, "/api/v1/tokens", token, Some(body)).await
}

async fn minted(world: &World, token: &str, body: Value) -> String {
    let reply = mint(world, token, body).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body["token"].as_str().expect("token").to_string()
}

async fn list_tokens(world: &World, token: &str) -> Vec<Value> {
    let reply = send(&world.client, Method::GET, "/api/v1/tokens", token, None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["tokens"].as_array().expect("tokens").clone()
}

/// Whether an operator bearer is accepted on a few unrelated routes: true if 200 on all, false
/// if refused (401 `unauthenticated`) on all; panics on a mix.
async fn operator_accepted(world: &World, token: &str) -> bool {
    let mut outcomes = vec![];
    for (method, path) in
        [(Method::GET, "/api/v1/tokens"), (Method::GET, "/api/v1/endpoints"), (Method::GET, "/api/v1/teams")]
    {
        let reply = send(&world.client, method, path, token, None).await;
        match reply.status {
            200 => outcomes.push(true),
            401 => {
                assert_eq!(reply.body["code"], "unauthenticated", "{path}: {}", reply.text);
                outcomes.push(false);
            }
            other => panic!("{path}: unexpected {other}: {}", reply.text),
        }
    }
    assert!(outcomes.iter().all(|o| *o == outcomes[0]), "mixed answers: {outcomes:?}");
    outcomes[0]
}

async fn mcp_status(world: &World, slug: &str, key: &str) -> u16 {
    world.client.rpc(slug, key, "tools/list", json!({})).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_tokens_are_listed_without_their_secrets() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let second = minted(&world, &alice, json!({"label": "ci"})).await;
    let third = minted(&world, &alice, json!({})).await;
    // A create names what it creates: no body at all is refused, not read as `{}`.
    let bodiless = send(&world.client, Method::POST, "/api/v1/tokens", &alice, None).await;
    assert_eq!((bodiless.status, bodiless.body["field"].as_str()), (400, Some("body")), "{}", bodiless.text);

    let reply = send(&world.client, Method::GET, "/api/v1/tokens", &second, None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    for secret in [&alice, &second, &third] {
        assert!(!reply.text.contains(secret.as_str()), "a secret is listed: {}", reply.text);
        let digest = engine::pg_store::hash_token(secret);
        assert!(!reply.text.contains(&digest), "a digest is listed: {}", reply.text);
    }
    let tokens = reply.body["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), 3, "{}", reply.text);
    let labels: Vec<Option<&str>> = tokens.iter().map(|t| t["label"].as_str()).collect();
    assert_eq!(labels, vec![Some("bootstrap"), Some("ci"), None], "{}", reply.text);
    for token in tokens {
        assert!(token["id"].as_str().is_some_and(|id| !id.is_empty()), "{token}");
        assert!(token["created_at"].as_str().is_some(), "{token}");
        assert!(token["expires_at"].is_null(), "{token}");
        assert!(token.get("token").is_none() && token.get("token_hash").is_none(), "{token}");
    }

    // Another human sees only their own.
    let (_, bob) = world.human("bob");
    let bobs = list_tokens(&world, &bob).await;
    assert_eq!(bobs.len(), 1, "{bobs:?}");
    assert!(tokens.iter().all(|t| t["id"] != bobs[0]["id"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_operator_token_is_refused_everywhere_and_others_still_work() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let doomed = minted(&world, &alice, json!({"label": "doomed"})).await;
    let kept = minted(&world, &alice, json!({"label": "kept"})).await;
    let listed = list_tokens(&world, &alice).await;
    let id_of = |label: &str| {
        listed.iter().find(|t| t["label"] == label).and_then(|t| t["id"].as_str()).expect("listed").to_string()
    };
    let (doomed_id, kept_id) = (id_of("doomed"), id_of("kept"));
    assert!(operator_accepted(&world, &doomed).await);

    // Someone else's token id, and an unknown one: the same 404.
    let foreign = send(&world.client, Method::DELETE, &format!("/api/v1/tokens/{kept_id}"), &bob, None).await;
    let unknown = send(&world.client, Method::DELETE, "/api/v1/tokens/tk_nosuchtoken", &alice, None).await;
    assert_eq!((foreign.status, foreign.body["code"].as_str()), (404, Some("not_found")), "{}", foreign.text);
    assert_eq!(foreign.text, unknown.text);
    assert_eq!(unknown.status, 404);
    assert!(operator_accepted(&world, &kept).await, "a foreign revoke attempt must not touch the token");

    let revoked = send(&world.client, Method::DELETE, &format!("/api/v1/tokens/{doomed_id}"), &alice, None).await;
    assert_eq!(revoked.status, 204, "{}", revoked.text);
    assert!(!operator_accepted(&world, &doomed).await);
    let push = send(
        &world.client,
        Method::POST,
        "/api/v1/endpoints",
        &doomed,
        Some(json!({"name": "nope", "queues": ["inbox"]})),
    )
    .await;
    assert_eq!(push.status, 401, "{}", push.text);
    assert!(operator_accepted(&world, &kept).await);
    assert!(operator_accepted(&world, &alice).await);

    let ids: Vec<Value> = list_tokens(&world, &alice).await.iter().map(|t| t["id"].clone()).collect();
    assert!(!ids.contains(&json!(doomed_id)) && ids.contains(&json!(kept_id)), "{ids:?}");
    // Revoking it again: already gone.
    let again = send(&world.client, Method::DELETE, &format!("/api/v1/tokens/{doomed_id}"), &alice, None).await;
    assert_eq!(again.status, 404, "{}", again.text);
    // A token may revoke itself.
    let own = send(&world.client, Method::DELETE, &format!("/api/v1/tokens/{kept_id}"), &kept, None).await;
    assert_eq!(own.status, 204, "{}", own.text);
    assert!(!operator_accepted(&world, &kept).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_operator_token_is_refused_once_it_has_expired() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let short = minted(&world, &alice, json!({"label": "short", "expires_in_seconds": 2})).await;
    let long = minted(&world, &alice, json!({"label": "long", "expires_in_seconds": 3600})).await;
    assert!(operator_accepted(&world, &short).await);
    let listed = list_tokens(&world, &alice).await;
    let short_row = listed.iter().find(|t| t["label"] == "short").expect("listed");
    assert!(short_row["expires_at"].as_str().is_some(), "{short_row}");

    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!operator_accepted(&world, &short).await);
    assert!(operator_accepted(&world, &long).await);
    assert!(operator_accepted(&world, &alice).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_token_lifetime_is_refused_naming_the_field() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    for bad in [json!(0), json!(-5), json!(40_000_000), json!("60"), json!(1.5), json!(true)] {
        let reply = mint(&world, &alice, json!({"expires_in_seconds": bad})).await;
        assert_eq!(reply.status, 400, "{bad}: {}", reply.text);
        assert_eq!(reply.body["code"], "invalid_argument", "{bad}: {}", reply.text);
        assert_eq!(reply.body["field"], "expires_in_seconds", "{bad}: {}", reply.text);
    }
    assert_eq!(list_tokens(&world, &alice).await.len(), 1, "nothing was minted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_endpoint_is_refused_on_mcp_keeps_its_todos_and_its_stream_ends() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    let todo = world.push(&alice, &ep.scope, "inbox", "keep me").await;
    assert_eq!(mcp_status(&world, &ep.slug, &ep.key).await, 200);
    let session = initialize(&world.client.base, &ep.slug, &ep.key).await;
    let stream = attach(&world.client.base, &ep.slug, &ep.key, &session).await;

    let foreign = send(&world.client, Method::POST, &format!("/api/v1/endpoints/{}/revoke", ep.slug), &bob, None).await;
    let unknown = send(&world.client, Method::POST, "/api/v1/endpoints/no-such-endpoint/revoke", &alice, None).await;
    assert_eq!((foreign.status, foreign.body["code"].as_str()), (404, Some("not_found")), "{}", foreign.text);
    assert_eq!(foreign.text, unknown.text);
    assert_eq!(mcp_status(&world, &ep.slug, &ep.key).await, 200, "a foreign revoke must not take effect");

    let revoked =
        send(&world.client, Method::POST, &format!("/api/v1/endpoints/{}/revoke", ep.slug), &alice, None).await;
    assert_eq!(revoked.status, 204, "{}", revoked.text);
    stream.wait_closed(Duration::from_secs(30)).await;
    let (status, answer) = world.client.rpc(&ep.slug, &ep.key, "tools/list", json!({})).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("unauthenticated")), "{answer}");
    let reopened = reqwest::Client::new()
        .get(format!("{}/mcp/{}", world.client.base, ep.slug))
        .bearer_auth(&ep.key)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("GET stream");
    assert_eq!(reopened.status().as_u16(), 401);

    // The endpoint and its work stay.
    assert!(world.pending(&alice, &ep.scope, "inbox").await.contains(&todo));
    let (status, endpoints) = world.client.get("/api/v1/endpoints", &alice).await;
    assert_eq!(status, 200);
    assert!(endpoints.to_string().contains(&ep.slug), "{endpoints}");

    // Rotating a revoked endpoint brings it back with the new key only.
    let rotated =
        send(&world.client, Method::POST, &format!("/api/v1/endpoints/{}/rotate", ep.slug), &alice, None).await;
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    let new_key = rotated.body["token"].as_str().expect("token");
    assert!(new_key.starts_with("sbk_"), "{new_key}");
    assert_eq!(mcp_status(&world, &ep.slug, new_key).await, 200);
    assert_eq!(mcp_status(&world, &ep.slug, &ep.key).await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_an_endpoint_key_refuses_the_old_one_at_once_and_only_managers_may() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    let todo = world.push(&alice, &ep.scope, "inbox", "still mine").await;

    let foreign = send(&world.client, Method::POST, &format!("/api/v1/endpoints/{}/rotate", ep.slug), &bob, None).await;
    let unknown = send(&world.client, Method::POST, "/api/v1/endpoints/no-such-endpoint/rotate", &alice, None).await;
    assert_eq!((foreign.status, foreign.body["code"].as_str()), (404, Some("not_found")), "{}", foreign.text);
    assert_eq!(foreign.text, unknown.text);
    assert_eq!(mcp_status(&world, &ep.slug, &ep.key).await, 200, "a foreign rotate must not take effect");

    let rotated =
        send(&world.client, Method::POST, &format!("/api/v1/endpoints/{}/rotate", ep.slug), &alice, None).await;
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    let new_key = rotated.body["token"].as_str().expect("token").to_string();
    assert_ne!(new_key, ep.key);
    assert_eq!(mcp_status(&world, &ep.slug, &ep.key).await, 401);
    let (is_error, claimed) = world.client.tool(&ep.slug, &new_key, "claim", json!({"id": todo})).await;
    assert!(!is_error, "{claimed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_listed_without_secrets_rotated_and_deleted_by_their_owner_only() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "worker", "queues": ["inbox", "other"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "inbox"), (&ep.scope, "other")]).await;
    let id = hook.path.trim_start_matches("/ingest/").to_string();

    let listed = send(&world.client, Method::GET, "/api/v1/webhooks", &alice, None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert!(!listed.text.contains(&hook.secret), "the secret is listed: {}", listed.text);
    let webhooks = listed.body["webhooks"].as_array().expect("webhooks");
    assert_eq!(webhooks.len(), 1, "{}", listed.text);
    assert_eq!(webhooks[0]["id"], id.as_str());
    assert_eq!(webhooks[0]["name"], "provider");
    let queues: Vec<&str> = webhooks[0]["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| t["queue"].as_str().expect("queue"))
        .collect();
    assert_eq!(queues, vec!["inbox", "other"]);
    let (status, bobs) = world.client.get("/api/v1/webhooks", &bob).await;
    assert_eq!((status, bobs["webhooks"].as_array().map(Vec::len)), (200, Some(0)), "{bobs}");

    // Someone else's webhook is the same 404 as an unknown one, and nothing changes.
    for path in [format!("/api/v1/webhooks/{id}/rotate"), "/api/v1/webhooks/wh_nosuchhook/rotate".to_string()] {
        let reply = send(&world.client, Method::POST, &path, &bob, None).await;
        assert_eq!((reply.status, reply.body["code"].as_str()), (404, Some("not_found")), "{path}: {}", reply.text);
    }
    let foreign = send(&world.client, Method::DELETE, &format!("/api/v1/webhooks/{id}"), &bob, None).await;
    assert_eq!((foreign.status, foreign.body["code"].as_str()), (404, Some("not_found")), "{}", foreign.text);
    let delivered = world.deliver(&hook, "msg_1", r#"{"title": "before rotation"}"#).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text);

    let rotated = send(&world.client, Method::POST, &format!("/api/v1/webhooks/{id}/rotate"), &alice, None).await;
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    let secret = rotated.body["secret"].as_str().expect("secret").to_string();
    assert!(secret.starts_with("whsec_") && secret != hook.secret, "{secret}");
    // Issue #14: the old secret keeps verifying for the grace (a day), so a provider not yet
    // switched loses nothing; the answer says until when.
    let grace_end = rotated.body["previous_secret_expires_at"].as_str().unwrap_or_else(|| panic!("{}", rotated.text));
    let grace_end = chrono::DateTime::parse_from_rfc3339(grace_end).expect("RFC 3339").to_utc();
    let grace_left = grace_end - chrono::Utc::now();
    assert!(grace_left > chrono::Duration::hours(23) && grace_left <= chrono::Duration::hours(24), "{}", rotated.text);
    let stale = world.deliver(&hook, "msg_2", r#"{"title": "old secret"}"#).await;
    assert_eq!(stale.status, 202, "the old secret is accepted within the grace: {}", stale.text);
    let fresh = Hook { path: hook.path.clone(), secret };
    let delivered = world.deliver(&fresh, "msg_3", r#"{"title": "new secret"}"#).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text);

    let deleted = send(&world.client, Method::DELETE, &format!("/api/v1/webhooks/{id}"), &alice, None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    let gone = world.deliver(&fresh, "msg_4", r#"{"title": "after delete"}"#).await;
    assert_eq!(gone.status, 404, "{}", gone.text);
    let (_, after) = world.client.get("/api/v1/webhooks", &alice).await;
    assert_eq!(after["webhooks"].as_array().map(Vec::len), Some(0), "{after}");
    let old_gone = world.deliver(&hook, "msg_5", r#"{"title": "old secret after delete"}"#).await;
    assert_eq!(old_gone.status, 404, "deleting ends the previous secret too: {}", old_gone.text);
    // The todos it delivered stay.
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 3);
}

/// Delivers `body` to the webhook at `ingest_path` signed with `secret`; (status, answer).
async fn deliver(base: &str, ingest_path: &str, secret: &str, delivery_id: &str, body: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .post(format!("{base}{ingest_path}"))
        .headers(support::sign(secret, delivery_id, body))
        .body(body.to_string())
        .send()
        .await
        .expect("POST ingest");
    (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
}

// Issue #14: "ingest re-checks the owner's live reach on every delivery": a team admin's webhook
// stops writing into the team's queue once its owner is no longer an admin there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_stops_writing_into_a_team_queue_its_owner_no_longer_manages() {
    let db = engine::testing::empty_database().await;
    let dir = support::data_dir();
    let server = support::Server::start(&["--database-url", &db.url], &[], dir.path());
    let client = support::Client::new(&server.base);
    let database = ["--database-url", db.url.as_str()];
    let alice = support::add_human("alice", &database).1;
    let bob = support::add_human("bob", &database).1;
    let (code, team, stderr) =
        support::run(&["admin", "team", "add", "ops", "--owner", "alice", "--database-url", &db.url], &[]);
    assert_eq!(code, 0, "{stderr}");
    let slug = serde_json::from_str::<Value>(team.trim()).expect("json")["slug"].as_str().expect("slug").to_string();
    let role = |role: &str| {
        let (code, _, stderr) = support::run(
            &["admin", "team", "member", "add", &slug, "bob", "--role", role, "--database-url", &db.url],
            &[],
        );
        assert_eq!(code, 0, "{stderr}");
    };
    role("admin");
    let scope = format!("team:{slug}");
    let (status, hook) = client
        .post("/api/v1/webhooks", &bob, json!({"name": "alerts", "targets": [{"scope": scope, "queue": "lane"}]}))
        .await;
    assert_eq!(status, 201, "{hook}");
    let path = format!("/ingest/{}", hook["id"].as_str().expect("id"));
    let secret = hook["secret"].as_str().expect("secret");

    let (status, first) = deliver(&server.base, &path, secret, "msg_1", r#"{"n": 1}"#).await;
    assert_eq!(status, 202, "an admin's webhook writes into the team queue: {first}");

    role("member");
    let (status, refused) = deliver(&server.base, &path, secret, "msg_2", r#"{"n": 2}"#).await;
    assert_eq!(status, 409, "a webhook whose owner no longer manages its target: {refused}");
    let (status, listed) = client.get(&format!("/api/v1/todos?scope={scope}&queue=lane"), &alice).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["todos"].as_array().map(Vec::len), Some(1), "only the first delivery made a todo: {listed}");

    role("admin");
    let (status, again) = deliver(&server.base, &path, secret, "msg_3", r#"{"n": 3}"#).await;
    assert_eq!(status, 202, "managing it again, the webhook writes again: {again}");
}
