//! The credential commands of the operator CLI (issue #14) end to end: the real `switchboard
//! serve` on a throwaway database, and the real binary as `switchboard token ...`, `switchboard
//! endpoint revoke|rotate` and `switchboard webhook ...`, reading SWITCHBOARD_URL and
//! SWITCHBOARD_TOKEN like an operator's shell would. Each test proves a change by what the server
//! then does with the credential (401, 200, 202, 404), not by the CLI's own words alone.

mod support;

use serde_json::{Value, json};
use support::run;
use support::world::{Ep, Hook, World};

/// `switchboard ARGS` with `token` as SWITCHBOARD_TOKEN; returns (exit code, stdout, stderr).
fn cli(world: &World, token: &str, args: &[&str]) -> (i32, String, String) {
    run(args, &[("SWITCHBOARD_URL", &world.client.base), ("SWITCHBOARD_TOKEN", token), ("TZ", "UTC")])
}

/// Runs a command that must succeed and returns its stdout.
fn cli_ok(world: &World, token: &str, args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(world, token, args);
    assert_eq!(code, 0, "switchboard {args:?} failed\nstdout: {stdout}\nstderr: {stderr}");
    stdout
}

/// Runs a `--json` command that must succeed and parses what it printed.
fn cli_json(world: &World, token: &str, args: &[&str]) -> Value {
    let stdout = cli_ok(world, token, args);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("switchboard {args:?} printed non-JSON ({e}): {stdout}"))
}

/// Runs a command the server must refuse: exit 1, nothing on stdout, stderr `code: message`.
fn cli_refused(world: &World, token: &str, args: &[&str], code: &str) -> String {
    let (exit, stdout, stderr) = cli(world, token, args);
    assert_eq!((exit, stdout.as_str()), (1, ""), "switchboard {args:?}: {stderr}");
    assert!(stderr.starts_with(&format!("{code}: ")), "switchboard {args:?}: expected {code}, got {stderr}");
    stderr
}

/// `token create --label LABEL --json`; returns the new secret.
fn create_token(world: &World, token: &str, label: &str) -> String {
    let created = cli_json(world, token, &["token", "create", "--label", label, "--json"]);
    created["token"].as_str().unwrap_or_else(|| panic!("no token in {created}")).to_string()
}

/// The id `token list --json` gives the token labelled `label`.
fn token_id(world: &World, token: &str, label: &str) -> String {
    let listed = cli_json(world, token, &["token", "list", "--json"]);
    let tokens = listed["tokens"].as_array().unwrap_or_else(|| panic!("no tokens in {listed}"));
    let found = tokens.iter().find(|t| t["label"] == label).unwrap_or_else(|| panic!("{label} not in {listed}"));
    found["id"].as_str().expect("id").to_string()
}

async fn mcp_status(world: &World, ep: &Ep, key: &str) -> u16 {
    world.client.rpc(&ep.slug, key, "tools/list", json!({})).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_token_create_mints_a_working_expiring_token_that_list_shows_without_its_secret() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");

    let stdout = cli_ok(&world, &alice, &["token", "create", "--label", "laptop", "--expires-in", "3600"]);
    let line = stdout.lines().find(|l| l.starts_with("token: ")).unwrap_or_else(|| panic!("no token in {stdout}"));
    let laptop = line.trim_start_matches("token: ").to_string();
    assert!(laptop.starts_with("sbh_"), "{stdout}");
    assert!(stdout.contains("expires in 3600 s") && stdout.contains("shown this once only"), "{stdout}");

    // The new token is an operator bearer: the CLI works with it, and lists it without secrets.
    let listed = cli_json(&world, &laptop, &["token", "list", "--json"]);
    let tokens = listed["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), 2, "{listed}");
    let entry = tokens.iter().find(|t| t["label"] == "laptop").unwrap_or_else(|| panic!("{listed}"));
    assert!(entry["expires_at"].is_string(), "an expiring token shows when: {entry}");
    let table = cli_ok(&world, &laptop, &["token", "list"]);
    assert!(table.starts_with("ID ") && table.contains("laptop") && table.contains("bootstrap"), "{table}");
    assert!(table.contains(entry["id"].as_str().expect("id")), "{table}");
    for secret in [&alice, &laptop] {
        assert!(!table.contains(secret.as_str()) && !listed.to_string().contains(secret.as_str()), "secret listed");
    }

    // The server says which lifetimes it accepts; a bad one mints nothing.
    let stderr = cli_refused(&world, &alice, &["token", "create", "--expires-in", "0"], "invalid_argument");
    assert!(stderr.contains("expires_in_seconds"), "{stderr}");
    let (code, _, stderr) = cli(&world, &alice, &["token", "revoke"]);
    assert_eq!(code, 2, "a missing ID is a usage error: {stderr}");
    assert_eq!(cli_json(&world, &alice, &["token", "list", "--json"])["tokens"].as_array().map(Vec::len), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_token_revoke_makes_the_token_unauthenticated() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let doomed = create_token(&world, &alice, "doomed");
    let kept = create_token(&world, &alice, "kept");
    let doomed_id = token_id(&world, &alice, "doomed");
    cli_ok(&world, &doomed, &["token", "list"]);

    // Another human's token id is not found, like an unknown one, and stays valid.
    cli_refused(&world, &bob, &["token", "revoke", &doomed_id], "not_found");
    cli_ok(&world, &doomed, &["token", "list"]);

    let stdout = cli_ok(&world, &alice, &["token", "revoke", &doomed_id]);
    assert_eq!(stdout.trim(), format!("revoked token {doomed_id}"));
    let stderr = cli_refused(&world, &doomed, &["token", "list"], "unauthenticated");
    assert!(!stderr.contains(&doomed), "the refusal does not echo the secret: {stderr}");
    cli_refused(&world, &doomed, &["webhook", "list"], "unauthenticated");
    cli_refused(&world, &alice, &["token", "revoke", &doomed_id], "not_found");

    // The human's other tokens still work, and the revoked one is no longer listed.
    let listed = cli_json(&world, &kept, &["token", "list", "--json"]);
    let labels: Vec<&str> =
        listed["tokens"].as_array().expect("tokens").iter().filter_map(|t| t["label"].as_str()).collect();
    assert_eq!(labels, ["bootstrap", "kept"], "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_endpoint_rotate_refuses_the_old_credential_on_mcp_and_the_new_one_works() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "worker", "queues": ["inbox"]})).await;
    let todo = world.push(&alice, &ep.scope, "inbox", "outlives its credential").await;
    assert_eq!(mcp_status(&world, &ep, &ep.key).await, 200);

    // Someone who does not manage the endpoint is refused as not found; nothing changes.
    cli_refused(&world, &bob, &["endpoint", "rotate", &ep.slug], "not_found");
    cli_refused(&world, &bob, &["endpoint", "revoke", &ep.slug], "not_found");
    assert_eq!(mcp_status(&world, &ep, &ep.key).await, 200);

    let stdout = cli_ok(&world, &alice, &["endpoint", "rotate", &ep.slug]);
    let line = stdout.lines().find(|l| l.starts_with("token: ")).unwrap_or_else(|| panic!("no token in {stdout}"));
    let rotated = line.trim_start_matches("token: ").to_string();
    assert!(rotated.starts_with("sbk_") && rotated != ep.key, "{stdout}");
    assert_eq!(mcp_status(&world, &ep, &ep.key).await, 401, "the old credential is refused at once");
    let (is_error, claimed) = world.client.tool(&ep.slug, &rotated, "claim_next", json!({})).await;
    assert!(!is_error, "{claimed}");
    assert_eq!(claimed["todo"]["id"], todo.as_str(), "{claimed}");

    // Revoke refuses every credential of the endpoint; rotate (--json: the API body) revives it.
    let stdout = cli_ok(&world, &alice, &["endpoint", "revoke", &ep.slug]);
    assert!(stdout.contains("revoked the MCP credential"), "{stdout}");
    assert_eq!(mcp_status(&world, &ep, &rotated).await, 401);
    let answer = cli_json(&world, &alice, &["endpoint", "rotate", &ep.slug, "--json"]);
    let revived = answer["token"].as_str().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(mcp_status(&world, &ep, revived).await, 200);
    assert_eq!(mcp_status(&world, &ep, &rotated).await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_webhook_list_rotate_and_delete_act_on_the_owners_webhook_only() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "worker", "queues": ["inbox", "other"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "inbox"), (&ep.scope, "other")]).await;
    let id = hook.path.trim_start_matches("/ingest/").to_string();

    // The table shows each target as the API names it (the endpoint by id), SCOPE/QUEUE.
    let listed = cli_json(&world, &alice, &["webhook", "list", "--json"]);
    let target_scope = listed["webhooks"][0]["targets"][0]["scope"].as_str().unwrap_or_else(|| panic!("{listed}"));
    assert!(target_scope.starts_with("endpoint:"), "{listed}");
    let table = cli_ok(&world, &alice, &["webhook", "list"]);
    let row = table.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("{id} not in\n{table}"));
    assert!(row.contains("provider") && row.ends_with(&format!("{target_scope}/inbox, {target_scope}/other")), "{row}");
    assert!(!table.contains(&hook.secret), "the secret is listed: {table}");
    assert_eq!(cli_ok(&world, &bob, &["webhook", "list"]).trim(), "no webhooks");

    // Another human cannot rotate or delete it: not found, and deliveries still verify.
    cli_refused(&world, &bob, &["webhook", "rotate", &id], "not_found");
    cli_refused(&world, &bob, &["webhook", "delete", &id], "not_found");
    assert_eq!(world.deliver(&hook, "msg_1", r#"{"title": "before rotation"}"#).await.status, 202);

    let stdout = cli_ok(&world, &alice, &["webhook", "rotate", &id]);
    let line = stdout.lines().find(|l| l.starts_with("secret: ")).unwrap_or_else(|| panic!("no secret in {stdout}"));
    let fresh = Hook { path: hook.path.clone(), secret: line.trim_start_matches("secret: ").to_string() };
    assert!(fresh.secret.starts_with("whsec_") && fresh.secret != hook.secret, "{stdout}");
    // Issue #14: the old secret keeps verifying for the grace, and the CLI says until when.
    assert!(stdout.contains("deliveries signed with the old one are accepted until 20"), "{stdout}");
    assert_eq!(world.deliver(&hook, "msg_2", r#"{"title": "old secret"}"#).await.status, 202);
    assert_eq!(world.deliver(&fresh, "msg_3", r#"{"title": "new secret"}"#).await.status, 202);

    let stdout = cli_ok(&world, &alice, &["webhook", "delete", &id]);
    assert_eq!(stdout.trim(), format!("deleted webhook {id}"));
    assert_eq!(world.deliver(&fresh, "msg_4", r#"{"title": "after delete"}"#).await.status, 404);
    assert_eq!(world.deliver(&hook, "msg_5", r#"{"title": "old secret after delete"}"#).await.status, 404);
    assert_eq!(cli_json(&world, &alice, &["webhook", "list", "--json"]), json!({"webhooks": []}));
    cli_refused(&world, &alice, &["webhook", "delete", &id], "not_found");
    // The todos it delivered stay: one per target for each accepted delivery.
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 3);
}
