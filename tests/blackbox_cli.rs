//! The operator CLI end to end: the real `switchboard serve` on a throwaway database, and the
//! real binary as `switchboard queue ...`, `switchboard todo ...` and `switchboard system ...`,
//! reading SWITCHBOARD_URL and SWITCHBOARD_TOKEN like an operator's shell would. Proves the
//! commands of SPEC-0030 REQ-10, the table REQ-11 asks for, owner cancellation and the intake
//! capacity (intake-capacity.md), and the exit statuses of contract §1.

mod support;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use support::{Client, Server, add_human, data_dir, run};

/// The viewer's zone for every CLI run here, so "local time" is a known wall clock.
const VIEWER_TZ: &str = "America/New_York";

/// A server with a human "alice" who owns one endpoint with the queue `inbox`.
struct World {
    server: Server,
    client: Client,
    database_url: String,
    alice_token: String,
    endpoint: Value,
    _dir: tempfile::TempDir,
}

impl World {
    async fn start() -> World {
        let database = engine::testing::empty_database().await;
        let dir = data_dir();
        let server = Server::start(&["--database-url", &database.url], &[], dir.path());
        let client = Client::new(&server.base);
        let (_, alice_token) = add_human("alice", &["--database-url", &database.url]);
        let endpoint = client.vend(&alice_token, json!({"name": "triage bot", "queues": ["inbox"]})).await;
        World { server, client, database_url: database.url, alice_token, endpoint, _dir: dir }
    }

    fn slug(&self) -> &str {
        self.endpoint["slug"].as_str().expect("slug")
    }

    fn scope(&self) -> String {
        format!("endpoint:{}", self.slug())
    }

    /// `switchboard ARGS` as alice; returns (exit code, stdout, stderr).
    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        self.cli_as(&self.alice_token, args)
    }

    fn cli_as(&self, token: &str, args: &[&str]) -> (i32, String, String) {
        run(args, &[("SWITCHBOARD_URL", &self.server.base), ("SWITCHBOARD_TOKEN", token), ("TZ", VIEWER_TZ)])
    }

    /// Runs a command that must succeed and returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let (code, stdout, stderr) = self.cli(args);
        assert_eq!(code, 0, "switchboard {args:?} failed\nstdout: {stdout}\nstderr: {stderr}");
        stdout
    }

    /// Runs a command as the holder of `token` that must succeed and returns its stdout.
    fn cli_ok_as(&self, token: &str, args: &[&str]) -> String {
        let (code, stdout, stderr) = self.cli_as(token, args);
        assert_eq!(code, 0, "switchboard {args:?} failed\nstdout: {stdout}\nstderr: {stderr}");
        stdout
    }

    /// Runs a `--json` command that must succeed and parses what it printed.
    fn ok_json(&self, args: &[&str]) -> Value {
        let stdout = self.ok(args);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("switchboard {args:?} --json printed non-JSON ({e}): {stdout}"))
    }
}

/// An RFC 3339 instant from the API, on the wall clock of `zone` as the CLI prints it.
fn wall_clock(instant: &Value, zone: &str) -> String {
    let instant: DateTime<Utc> = instant.as_str().expect("timestamp").parse().expect("RFC 3339");
    let zone: chrono_tz::Tz = zone.parse().expect("zone");
    instant.with_timezone(&zone).format("%Y-%m-%d %H:%M %Z").to_string()
}

// SPEC-0030 REQ-10, REQ-11
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_cli_sets_shows_and_clears_a_budget() {
    let world = World::start().await;
    let scope = world.scope();

    // Set: a full replace, answered with the budget as it now stands.
    let stdout = world.ok(&[
        "queue",
        "budget",
        "set",
        &scope,
        "inbox",
        "--per-day",
        "100",
        "--tz",
        "America/Los_Angeles",
        "--max-in-flight",
        "5",
    ]);
    assert!(stdout.contains("100/day from 00:00 America/Los_Angeles; 5 in flight"), "{stdout}");

    // Show one queue as JSON: the API body verbatim.
    let detail = world.ok_json(&["queue", "budget", "show", &scope, "inbox", "--json"]);
    assert_eq!(detail["policy"]["window"], json!({"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}));
    assert_eq!(detail["policy"]["max_in_flight"], 5);
    assert_eq!(detail["status"]["status"], "admitted");
    assert_eq!(detail["audit"][0]["action"], "create");

    // Show one queue as a table: used of limit, in flight of limit, and "resets at" in the
    // policy's zone and in the viewer's local time (REQ-11).
    let resets = &detail["status"]["window_resets_at"];
    let stdout = world.ok(&["queue", "budget", "show", &scope, "inbox"]);
    for expected in [
        "admitted".to_string(),
        "0 of 100 this window (100 remaining)".to_string(),
        "0 of 5".to_string(),
        format!("{} (America/Los_Angeles)", wall_clock(resets, "America/Los_Angeles")),
        format!("{} (local)", wall_clock(resets, VIEWER_TZ)),
        "create".to_string(),
    ] {
        assert!(stdout.contains(&expected), "{expected:?} missing from\n{stdout}");
    }

    // The list of everything alice manages, as a table and as JSON.
    let endpoint_id = world.endpoint["id"].as_str().expect("id");
    let stdout = world.ok(&["queue", "budget", "show"]);
    let row = stdout.lines().find(|line| line.contains(endpoint_id)).unwrap_or_else(|| panic!("no row:\n{stdout}"));
    for expected in ["inbox", "admitted", "0/100", "0/5", wall_clock(resets, "America/Los_Angeles").as_str()] {
        assert!(row.contains(expected), "{expected:?} missing from {row}");
    }
    let listed = world.ok_json(&["queue", "budget", "show", "--json"]);
    assert_eq!(listed["policies"].as_array().map(Vec::len), Some(1), "{listed}");

    // SCOPE alone filters the list; the slug finds the budget the list names by id.
    let stdout = world.ok(&["queue", "budget", "show", &scope]);
    assert!(stdout.contains("inbox") && stdout.contains("0/100"), "{stdout}");
    let stdout = world.ok(&["queue", "budget", "show", "endpoint:someone-else"]);
    assert!(!stdout.contains("inbox"), "{stdout}");

    // Clear: the budget is gone, so showing it is refused as not found.
    let stdout = world.ok(&["queue", "budget", "clear", &scope, "inbox"]);
    assert!(stdout.contains("cleared"), "{stdout}");
    let (code, _, stderr) = world.cli(&["queue", "budget", "show", &scope, "inbox"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("not_found: "), "{stderr}");
    let listed = world.ok_json(&["queue", "budget", "show", "--json"]);
    assert_eq!(listed["policies"], json!([]));
}

// SPEC-0030 REQ-10; contract §1 exit statuses
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_cli_usage_errors_exit_2_and_refusals_exit_1_with_code_and_message() {
    let world = World::start().await;
    let scope = world.scope();

    // Usage errors: nothing is sent, exit 2.
    let (code, _, stderr) =
        world.cli(&["queue", "budget", "set", &scope, "inbox", "--per-day", "3", "--weekday", "Mon"]);
    assert_eq!(code, 2, "--weekday belongs to --per-week only: {stderr}");
    assert!(stderr.contains("--weekday"), "{stderr}");
    let (code, _, stderr) = world.cli(&["queue", "budget", "set", &scope, "inbox", "--per-week", "3"]);
    assert_eq!(code, 2, "--per-week needs --weekday: {stderr}");
    let (code, _, stderr) =
        world.cli(&["queue", "budget", "set", &scope, "inbox", "--per-day", "3", "--per-hour", "1"]);
    assert_eq!(code, 2, "the per-* limits exclude one another: {stderr}");
    let (code, _, stderr) = world.cli(&["queue", "budget", "set", "triage-bot", "inbox", "--per-day", "3"]);
    assert_eq!(code, 2, "SCOPE needs its kind: {stderr}");
    let (code, _, stderr) = run(&["queue", "budget", "show"], &[("SWITCHBOARD_URL", &world.server.base)]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("SWITCHBOARD_TOKEN"), "the message names the variable: {stderr}");

    // Refused by the server: exit 1 and `code: message`, naming the offending field.
    let (code, _, stderr) =
        world.cli(&["queue", "budget", "set", &scope, "inbox", "--per-day", "10", "--tz", "Mars/Olympus_Mons"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("invalid_argument: "), "{stderr}");
    assert!(stderr.contains("window.tz"), "{stderr}");
    let (code, _, stderr) = world.cli(&["queue", "budget", "set", &scope, "inbox", "--per-day", "2000000"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("max_claims_per_window"), "{stderr}");

    // Another human's queue is not found, exactly like one that does not exist.
    let (_, bob_token) = add_human("bob", &["--database-url", &world.database_url]);
    let bob_endpoint = world.client.vend(&bob_token, json!({"name": "bob bot", "queues": ["inbox"]})).await;
    let bob_scope = format!("endpoint:{}", bob_endpoint["slug"].as_str().expect("slug"));
    let bob_scope = bob_scope.as_str();
    for args in [
        vec!["queue", "budget", "set", bob_scope, "inbox", "--per-day", "1"],
        vec!["queue", "budget", "show", bob_scope, "inbox"],
        vec!["queue", "budget", "set", "endpoint:no-such-endpoint", "inbox", "--per-day", "1"],
    ] {
        let (code, stdout, stderr) = world.cli(&args);
        assert_eq!((code, stdout.as_str()), (1, ""), "{args:?}: {stderr}");
        assert!(stderr.starts_with("not_found: "), "{args:?}: {stderr}");
    }
    let (code, _, stderr) = world.cli_as(&bob_token, &["queue", "budget", "show", bob_scope, "inbox"]);
    assert_eq!(code, 1, "bob has no budget on his queue yet: {stderr}");

    // An unreachable server is said plainly, exit 1.
    let (code, _, stderr) = run(
        &["queue", "budget", "show"],
        &[("SWITCHBOARD_URL", "http://127.0.0.1:1"), ("SWITCHBOARD_TOKEN", &world.alice_token)],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot reach switchboard at http://127.0.0.1:1"), "{stderr}");
}

// SPEC-0030 REQ-11: each deferred pending todo carries a chip with the reason and next_eligible_at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_cli_todo_list_shows_why_pending_work_waits() {
    let world = World::start().await;
    let scope = world.scope();
    world.ok(&["queue", "budget", "set", &scope, "inbox", "--per-day", "1"]);
    for title in ["first", "second"] {
        let (status, pushed) = world
            .client
            .post("/api/v1/todos", &world.alice_token, json!({"scope": scope, "queue": "inbox", "title": title}))
            .await;
        assert_eq!(status, 201, "{pushed}");
    }
    // The agent spends the day's one claim; the other todo now waits for the next window.
    let (slug, key) = (world.slug(), world.endpoint["token"].as_str().expect("token"));
    world.client.rpc(slug, key, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}})).await;
    let (is_error, claimed) = world.client.tool(slug, key, "claim_next", json!({})).await;
    assert!(!is_error, "{claimed}");

    let listed =
        world.ok_json(&["todo", "list", "--scope", &scope, "--queue", "inbox", "--state", "pending", "--json"]);
    let waiting = &listed["todos"][0];
    assert_eq!(listed["todos"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(waiting["admission"]["state"], "deferred");
    assert_eq!(waiting["admission"]["reason"], "window_exhausted");
    let waiting_id = waiting["id"].as_str().expect("id");
    let eligible = wall_clock(&waiting["admission"]["next_eligible_at"], VIEWER_TZ);

    let stdout = world.ok(&["todo", "list", "--scope", &scope, "--queue", "inbox"]);
    let row = stdout.lines().find(|line| line.contains(waiting_id)).unwrap_or_else(|| panic!("no row:\n{stdout}"));
    assert!(row.contains(&format!("deferred · budget · eligible {eligible}")), "{row}");
    assert!(stdout.lines().any(|line| line.contains("claimed")), "the claimed todo is listed too:\n{stdout}");

    let stdout = world.ok(&["todo", "show", waiting_id]);
    for expected in [waiting_id, "second", "pending", "deferred · budget"] {
        assert!(stdout.contains(expected), "{expected:?} missing from\n{stdout}");
    }
    let shown = world.ok_json(&["todo", "show", waiting_id, "--json"]);
    assert_eq!(shown["todo"]["id"], waiting_id);

    // The queue's header agrees: the window is spent.
    let stdout = world.ok(&["queue", "budget", "show"]);
    assert!(stdout.contains("window_exhausted") && stdout.contains("1/1"), "{stdout}");

    let (code, _, stderr) = world.cli(&["todo", "show", "td_does_not_exist"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("not_found: "), "{stderr}");
}

/// The capacity: readable by anyone signed in, set by an instance admin only, locked by a
/// server's environment.
fn assert_the_queue_capacity_cli(world: &World) {
    let stdout = world.ok(&["system", "queue-capacity", "show"]);
    let row = stdout.lines().find(|line| line.contains("default")).unwrap_or_else(|| panic!("no row:\n{stdout}"));
    assert!(row.starts_with("not set") && row.contains("unlimited (0)") && row.ends_with("no"), "{row}");
    assert!(stdout.contains("never removes waiting todos"), "{stdout}");

    let (_, root_token) = add_human("root", &["--admin", "--database-url", &world.database_url]);
    let stdout = world.cli_ok_as(&root_token, &["system", "queue-capacity", "set", "5"]);
    assert!(stdout.starts_with("queue capacity set to 5"), "{stdout}");
    let row = stdout.lines().find(|line| line.contains("setting")).unwrap_or_else(|| panic!("no row:\n{stdout}"));
    assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["5", "5", "setting", "no"], "{stdout}");
    let shown = world.ok_json(&["system", "queue-capacity", "show", "--json"]);
    assert_eq!(
        shown,
        json!({"setting": {"max_pending_per_queue": 5},
               "effective": {"max_pending_per_queue": 5, "source": "setting", "locked": false}})
    );

    let (code, stdout, stderr) = world.cli(&["system", "queue-capacity", "set", "6"]);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(stderr.starts_with("forbidden: "), "{stderr}");
    let (code, _, stderr) = world.cli_as(&root_token, &["system", "queue-capacity", "set", "-1"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("invalid_argument: "), "{stderr}");
    let (code, _, stderr) = world.cli_as(&root_token, &["system", "queue-capacity", "set", "ten"]);
    assert_eq!(code, 2, "{stderr}");

    // A second server on the same database whose environment locks the capacity: show names the
    // variable, and set is refused as a conflict.
    let dir = data_dir();
    let locked =
        Server::start(&["--database-url", &world.database_url], &[("SWITCHBOARD_QUEUE_MAX_PENDING", "20")], dir.path());
    let env = [("SWITCHBOARD_URL", locked.base.as_str()), ("SWITCHBOARD_TOKEN", root_token.as_str())];
    let (code, stdout, stderr) = run(&["system", "queue-capacity", "show"], &env);
    assert_eq!(code, 0, "{stderr}");
    let row = stdout.lines().find(|line| line.contains("environment")).unwrap_or_else(|| panic!("no row:\n{stdout}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["5", "20", "environment", "yes,", "by", "SWITCHBOARD_QUEUE_MAX_PENDING"],
        "{stdout}"
    );
    assert!(stdout.contains("Locked by SWITCHBOARD_QUEUE_MAX_PENDING"), "{stdout}");
    let (code, _, stderr) = run(&["system", "queue-capacity", "set", "7"], &env);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("conflict: "), "{stderr}");
}

// Intake ADR (intake-capacity.md): owner cancellation and the intake capacity from the CLI;
// contract §1 exit statuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_cli_clears_removes_and_sets_the_queue_capacity() {
    let world = World::start().await;
    let scope = world.scope();
    let mut ids = vec![];
    for title in ["one", "two", "three"] {
        let (status, pushed) = world
            .client
            .post("/api/v1/todos", &world.alice_token, json!({"scope": scope, "queue": "inbox", "title": title}))
            .await;
        assert_eq!(status, 201, "{pushed}");
        ids.push(pushed["todo"]["id"].as_str().expect("id").to_string());
    }
    let pending = |world: &World| {
        let listed =
            world.ok_json(&["todo", "list", "--scope", &scope, "--queue", "inbox", "--state", "pending", "--json"]);
        listed["todos"].as_array().map_or(0, Vec::len)
    };

    // Without --yes and without a terminal on stdin nobody can confirm: a usage error, nothing sent.
    for args in [vec!["queue", "clear", scope.as_str(), "inbox"], vec!["todo", "remove", ids[0].as_str()]] {
        let (code, stdout, stderr) = world.cli(&args);
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
        assert!(stderr.contains("--yes"), "the message says how to go ahead: {stderr}");
    }
    assert_eq!(pending(&world), 3, "nothing was removed");

    // Remove one, by id alone: the CLI finds its queue.
    let stdout = world.ok(&["todo", "remove", &ids[0], "--yes"]);
    assert_eq!(stdout.trim(), format!("removed {}", ids[0]));
    let shown = world.ok_json(&["todo", "show", &ids[0], "--json"]);
    assert_eq!(shown["todo"]["state"], "discarded", "{shown}");
    // It is no longer pending, so a second removal is refused with its state.
    let (code, _, stderr) = world.cli(&["todo", "remove", &ids[0], "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("not_pending: ") && stderr.contains("discarded"), "{stderr}");
    let (code, _, stderr) = world.cli(&["todo", "remove", "td_does_not_exist", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("not_found: "), "{stderr}");

    // Clear the rest: the exact count, then 0 (idempotent) as the API body verbatim.
    let stdout = world.ok(&["queue", "clear", &scope, "inbox", "--yes"]);
    assert_eq!(stdout.trim(), "removed 2");
    assert_eq!(pending(&world), 0);
    assert_eq!(world.ok_json(&["queue", "clear", &scope, "inbox", "--yes", "--json"]), json!({"removed": 0}));

    assert_the_queue_capacity_cli(&world);
}
