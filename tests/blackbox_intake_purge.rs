//! Purges (context/intake-capacity.md scenario 25 and "Purge") through the real binary on real
//! PostgreSQL: deleting an endpoint or a team queue removes its work, pending and claimed; stale
//! claimants find nothing and webhooks left without targets refuse deliveries.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use support::world::{World, id_of, send, wait_for_state};
use support::{Client, Server, add_human, data_dir, run};

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

// SPEC-0030 REQ-10 "every change audited, readable by the owner", issue #51: deleting a queue
// that carries a policy removes the policy, and its removal stands in the queue's audit trail,
// which the owner still reads through the audit route after the queue is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_deleting_a_queue_audits_the_removal_of_its_policy() {
    let world = World::start(&[], &[]).await;
    let (alice_id, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "budgeted", "queues": ["lane"]})).await;
    let policy = json!({"max_in_flight": 2, "max_claims_per_window": 10,
                        "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    let (status, body) = world.client.put_admission_policy(&alice, &ep.scope, "lane", policy).await;
    assert_eq!(status, 200, "{body}");
    world.push(&alice, &ep.scope, "lane", "doomed").await;

    let queue = format!("/api/v1/queues/{}/lane", ep.scope);
    let purged = send(&world.client, Method::DELETE, &queue, &alice, None).await;
    assert_eq!(purged.status, 200, "{}", purged.text);
    let (status, gone) = world.client.get(&format!("/api/v1/admission/{}/lane", ep.scope), &alice).await;
    assert_eq!(status, 404, "the policy went with its queue: {gone}");

    let (status, audit) = world.client.get(&format!("/api/v1/admission/{}/lane/audit", ep.scope), &alice).await;
    assert_eq!(status, 200, "{audit}");
    let records = audit["records"].as_array().expect("records");
    assert_eq!(records.len(), 2, "the create and the removal: {audit}");
    let removal = &records[0];
    assert_eq!(removal["action"], "delete", "{audit}");
    assert_eq!(removal["actor_human_id"], alice_id.as_str(), "{audit}");
    assert_eq!(removal["before"]["max_claims_per_window"], 10, "{audit}");
    assert_eq!(removal["after"], Value::Null, "{audit}");
}
