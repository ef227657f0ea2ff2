//! Issue #14 through the real binary: removing a human, and removing a team member, with
//! `switchboard admin ... remove` straight against the database while a server runs on it.
//! After removal the person cannot act, and work their agents held is pending again with its
//! attempt unchanged, so the rest of the team can pick it up at once.

mod support;

use serde_json::{Value, json};
use support::run;
use support::world::{World, claim_next};

/// `switchboard admin ARGS --database-url URL`: (exit code, stdout JSON or Null, stderr).
fn admin(world: &World, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["admin"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--database-url", &world.db.url]);
    let (code, stdout, stderr) = run(&all, &[]);
    (code, serde_json::from_str(stdout.trim()).unwrap_or(Value::Null), stderr)
}

/// Team `name` owned by `owner`; returns its scope string.
fn team(world: &World, name: &str, owner: &str) -> String {
    let (code, team, stderr) = admin(world, &["team", "add", name, "--owner", owner]);
    assert_eq!(code, 0, "team add: {stderr}");
    format!("team:{}", team["slug"].as_str().expect("slug"))
}

fn add_member(world: &World, team: &str, human: &str, role: &str) {
    let (code, _, stderr) = admin(world, &["team", "member", "add", team, human, "--role", role]);
    assert_eq!(code, 0, "member add: {stderr}");
}

// Issue #14 item 5: `admin human remove` revokes the human's operator token (401) and their
// endpoint (MCP 401), and the team todo their agent held is pending again, attempt unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_human_remove_revokes_access_and_returns_held_work_to_pending() {
    let world = World::start(&[], &[]).await;
    let (_, bob) = world.human("bob");
    let (alice_id, alice) = world.human("alice");
    let ops = team(&world, "ops", "bob");
    add_member(&world, "ops", "alice", "member");
    let ep = world.vend(&alice, json!({"name": "alices-agent", "queues": ["mine", format!("{ops}/inbox")]})).await;
    let team_todo = world.push(&bob, &ops, "inbox", "team work").await;
    let own_todo = world.push(&alice, &ep.scope, "mine", "own work").await;
    let first = claim_next(&world.client, &ep, json!({})).await.expect("a claim");
    let second = claim_next(&world.client, &ep, json!({})).await.expect("another claim");
    let mut held = vec![first, second];
    held.sort();
    let mut expected = vec![team_todo.clone(), own_todo.clone()];
    expected.sort();
    assert_eq!(held, expected);
    let claimed = world.todo(&bob, &team_todo).await;
    assert_eq!(claimed["state"], "claimed");

    let (code, removed, stderr) = admin(&world, &["human", "remove", "alice"]);
    assert_eq!(code, 0, "human remove: {stderr}");
    assert_eq!(removed["human_id"], alice_id.as_str());
    assert_eq!((removed["tokens_revoked"].as_u64(), removed["endpoints_revoked"].as_u64()), (Some(1), Some(1)));
    assert_eq!(removed["leases_released"], 2);
    assert_eq!(removed["released_todo_ids"], json!(expected));
    assert_eq!(removed["teams_left"].as_array().map(Vec::len), Some(1));

    let (status, _) = world.client.get("/api/v1/endpoints", &alice).await;
    assert_eq!(status, 401, "a removed human's token is refused");
    let (status, _) = world.client.rpc(&ep.slug, &ep.key, "tools/list", json!({})).await;
    assert_eq!(status, 401, "a removed human's endpoint is refused");
    let released = world.todo(&bob, &team_todo).await;
    assert_eq!(released["state"], "pending");
    assert_eq!(released["attempt"], claimed["attempt"], "a removal is not a failed attempt");
    assert_eq!(released["attempt"], 1);

    let (code, _, stderr) = admin(&world, &["human", "remove", "nobody"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("not found"), "{stderr}");
}

// Issue #14 item 5: `admin team member remove` ends the member's reach over the team at once
// (their token still works, the team's queues are 404 to them), releases the team todo their
// agent held (attempt unchanged) and leaves their own work alone; the last owner stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_team_member_remove_ends_reach_and_releases_only_the_teams_leases() {
    let world = World::start(&[], &[]).await;
    let (_, bob) = world.human("bob");
    let (alice_id, alice) = world.human("alice");
    let ops = team(&world, "ops", "bob");
    add_member(&world, "ops", "alice", "admin");
    let ep = world.vend(&alice, json!({"name": "alices-agent", "queues": ["mine", format!("{ops}/inbox")]})).await;
    let team_todo = world.push(&bob, &ops, "inbox", "team work").await;
    let own_todo = world.push(&alice, &ep.scope, "mine", "own work").await;
    claim_next(&world.client, &ep, json!({})).await.expect("a claim");
    claim_next(&world.client, &ep, json!({})).await.expect("another claim");
    let list = format!("/api/v1/todos?scope={ops}&queue=inbox");
    let (status, _) = world.client.get(&list, &alice).await;
    assert_eq!(status, 200, "a member reaches the team's queue");

    let (code, removed, stderr) = admin(&world, &["team", "member", "remove", "ops", "alice"]);
    assert_eq!(code, 0, "member remove: {stderr}");
    assert_eq!((removed["human_id"].as_str(), removed["role"].as_str()), (Some(alice_id.as_str()), Some("admin")));
    assert_eq!(removed["released_todo_ids"], json!([team_todo.clone()]));

    let (status, _) = world.client.get(&list, &alice).await;
    assert_eq!(status, 404, "the team's queue is out of reach at once");
    let (status, _) = world.client.get("/api/v1/endpoints", &alice).await;
    assert_eq!(status, 200, "the human is still a user");
    let released = world.todo(&bob, &team_todo).await;
    assert_eq!((released["state"].as_str(), released["attempt"].as_i64()), (Some("pending"), Some(1)));
    assert_eq!(world.state(&alice, &own_todo).await, "claimed", "their own work is untouched");

    let (code, _, stderr) = admin(&world, &["team", "member", "remove", "ops", "bob"]);
    assert_ne!(code, 0, "the last owner cannot be removed");
    assert!(stderr.contains("last owner"), "{stderr}");
    let (code, _, stderr) = admin(&world, &["team", "member", "remove", "ops", "alice"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("not a member"), "{stderr}");
}
