//! Issue #31 item 3 through the real binary: two replicas on one database each answer an
//! endpoint credential from their cache, and a revocation or rotation made through either is
//! refused on the very next MCP request to the other (`engine/src/pg_store/credential_cache.rs`).
//! A replica that dies without giving up its lease holds a revocation for one lease (3 s), no more.
//!
//! Through HTTP the other replica has usually applied the change from its notification before
//! the next request arrives, wait or no wait; `engine/tests/credential_cache.rs` holds a replica
//! back to prove the writer's wait itself.

mod support;

use reqwest::Method;
use serde_json::json;
use support::Client;
use support::world::{World, send};

/// The MCP status of `tools/list` with `key` through `client`; a refusal is `unauthenticated`.
async fn mcp_status(client: &Client, slug: &str, key: &str) -> u16 {
    let (status, answer) = client.rpc(slug, key, "tools/list", json!({})).await;
    if status == 401 {
        assert_eq!(answer["code"], "unauthenticated", "{answer}");
    }
    status
}

/// `POST /api/v1/endpoints/{slug}/{verb}` (revoke or rotate) through `client`: status and the
/// rotated key, if any.
async fn endpoint_call(client: &Client, human: &str, slug: &str, verb: &str) -> (u16, Option<String>) {
    let reply = send(client, Method::POST, &format!("/api/v1/endpoints/{slug}/{verb}"), human, None).await;
    (reply.status, reply.body["token"].as_str().map(str::to_string))
}

/// Two requests on each replica, alternately, each admitted: both caches hold the key.
async fn warm(replicas: &[&Client; 2], slug: &str, key: &str, round: usize) {
    for client in [replicas[0], replicas[1], replicas[0], replicas[1]] {
        assert_eq!(mcp_status(client, slug, key).await, 200, "round {round}: warm on {}", client.base);
    }
}

// Issue #31 item 3: "a revoked credential's very next request is still refused, on any
// replica". Each round warms both replicas' caches, revokes through one replica and asks the
// other at once, then rotates twice through the other and asks the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_or_rotated_credential_is_refused_at_once_on_the_other_replica() {
    let mut world = World::start(&[], &[]).await;
    let second = world.serve(&[], &[]);
    let replicas = [&world.client, &second];
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    let mut key = ep.key.clone();
    for round in 0..4 {
        let (writer, other) = (replicas[round % 2], replicas[(round + 1) % 2]);
        warm(&replicas, &ep.slug, &key, round).await;
        assert_eq!(endpoint_call(writer, &alice, &ep.slug, "revoke").await.0, 204);
        assert_eq!(mcp_status(other, &ep.slug, &key).await, 401, "round {round}: revoked, other replica");
        assert_eq!(mcp_status(writer, &ep.slug, &key).await, 401, "round {round}: revoked, same replica");

        let (status, rotated) = endpoint_call(other, &alice, &ep.slug, "rotate").await;
        assert_eq!(status, 200);
        let rotated = rotated.expect("a rotation answers the new key");
        warm(&replicas, &ep.slug, &rotated, round).await;
        let (status, newest) = endpoint_call(other, &alice, &ep.slug, "rotate").await;
        assert_eq!(status, 200);
        assert_eq!(mcp_status(writer, &ep.slug, &rotated).await, 401, "round {round}: rotated away, other replica");
        key = newest.expect("a rotation answers the new key");
    }
}

// A replica killed without giving up its lease does not hold a revocation forever: the
// survivor's revoke returns once the dead replica has been silent for a lease, and refuses the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replica_holds_a_revocation_for_one_lease_only() {
    let mut world = World::start(&[], &[]).await;
    let second = world.serve(&[], &[]);
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    warm(&[&world.client, &second], &ep.slug, &ep.key, 0).await;
    world.servers[1].0.kill();
    assert_eq!(endpoint_call(&world.client, &alice, &ep.slug, "revoke").await.0, 204);
    assert_eq!(mcp_status(&world.client, &ep.slug, &ep.key).await, 401);
}
