//! The push operator CLI end to end (SPEC-0030 REQ-8; contract §1): the real `switchboard serve`
//! on a throwaway database, and the real binary as `switchboard endpoint presence|clock-in|
//! clock-out|shift|hook …`, reading SWITCHBOARD_URL and SWITCHBOARD_TOKEN like an operator's
//! shell. Proves the round trips, the refusals (exit 1, `code: message` naming the field) and that
//! a hook's secret is printed once and signs what the hook receives.

mod support;

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;
use support::{Client, Server, add_human, data_dir, run};

/// The operator setting that lets hooks call loopback, as the tests' receivers listen there.
const ALLOW_PRIVATE: (&str, &str) = ("SWITCHBOARD_HOOKS_ALLOW_PRIVATE", "1");
/// A loopback URL nothing listens on (the discard port).
const DEAD_HOOK_URL: &str = "http://127.0.0.1:9/x";

/// A server with a human "alice" who owns one endpoint with the queue `inbox`.
struct World {
    server: Server,
    alice: String,
    slug: String,
    _db: engine::testing::TestDatabase,
    _dir: tempfile::TempDir,
}

impl World {
    async fn start(env: &[(&str, &str)]) -> World {
        let db = engine::testing::empty_database().await;
        let dir = data_dir();
        let server = Server::start(&["--database-url", &db.url], env, dir.path());
        let (_, alice) = add_human("alice", &["--database-url", &db.url]);
        let endpoint = Client::new(&server.base).vend(&alice, json!({"name": "push bot", "queues": ["inbox"]})).await;
        let slug = endpoint["slug"].as_str().expect("slug").to_string();
        World { server, alice, slug, _db: db, _dir: dir }
    }

    /// `switchboard ARGS` as alice; returns (exit code, stdout, stderr).
    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        run(args, &[("SWITCHBOARD_URL", &self.server.base), ("SWITCHBOARD_TOKEN", &self.alice), ("TZ", "UTC")])
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, stdout, stderr) = self.cli(args);
        assert_eq!(code, 0, "switchboard {args:?} failed\nstdout: {stdout}\nstderr: {stderr}");
        stdout
    }

    fn ok_json(&self, args: &[&str]) -> Value {
        let stdout = self.ok(args);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("switchboard {args:?} printed non-JSON ({e}): {stdout}"))
    }

    /// Runs a command the server must refuse: exit 1 and `code: message` on stderr.
    fn refused(&self, args: &[&str]) -> String {
        let (code, stdout, stderr) = self.cli(args);
        assert_eq!(code, 1, "switchboard {args:?} should be refused\nstdout: {stdout}\nstderr: {stderr}");
        stderr
    }
}

// SPEC-0030 REQ-8 presence: clock-out makes the endpoint out; clock-in --for puts it back in for
// that long; the table and --json say the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_cli_presence_round_trips_through_clock_out_and_clock_in() {
    let world = World::start(&[]).await;
    let slug = world.slug.as_str();
    let fresh = world.ok_json(&["endpoint", "presence", slug, "--json"]);
    assert_eq!((fresh["presence"].as_str(), fresh["source"].as_str()), (Some("in"), Some("default")), "{fresh}");

    let out = world.ok_json(&["endpoint", "clock-out", slug, "--json"]);
    assert_eq!(out["presence"], "out", "{out}");
    let shown = world.ok(&["endpoint", "presence", slug]);
    let row: Vec<&str> = shown.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row.get(..3), Some(&[slug, "out", "override"][..]), "{shown}");

    let before = chrono::Utc::now();
    let back_in = world.ok_json(&["endpoint", "clock-in", slug, "--for", "3600", "--json"]);
    assert_eq!((back_in["presence"].as_str(), back_in["source"].as_str()), (Some("in"), Some("override")));
    let until: chrono::DateTime<chrono::Utc> = back_in["until"].as_str().expect("until").parse().expect("RFC 3339");
    let lasts = until - before;
    assert!((3590..=3610).contains(&lasts.num_seconds()), "in for about an hour, not {lasts}");
    assert_eq!(world.ok_json(&["endpoint", "presence", slug, "--json"])["presence"], "in");

    let stderr = world.refused(&["endpoint", "clock-in", slug, "--for", "-5"]);
    assert!(stderr.starts_with("invalid_argument: "), "{stderr}");
    let (code, _, stderr) = world.cli(&["endpoint", "presence", "nobody-here"]);
    assert_eq!((code, stderr.trim()), (1, "not_found: not found"), "an unknown endpoint is refused");
}

// SPEC-0030 REQ-8 shift: a shift is stored and shown; a malformed one is refused naming `shift`;
// --clear removes it; SHIFT and --clear are one or the other (usage, exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_cli_shift_is_set_shown_refused_when_malformed_and_cleared() {
    let world = World::start(&[]).await;
    let slug = world.slug.as_str();
    let shift = "TZ=America/Los_Angeles Mon-Fri 09:00-17:00";
    let saved = world.ok_json(&["endpoint", "shift", slug, shift, "--json"]);
    assert_eq!(saved["shift"], shift, "{saved}");
    assert!(world.ok(&["endpoint", "presence", slug]).contains(shift));

    let stderr = world.refused(&["endpoint", "shift", slug, "TZ=Mars/Base Mon-Fri 09:00-17:00"]);
    assert!(stderr.starts_with("invalid_argument: shift: "), "{stderr}");
    assert!(stderr.contains("Mars/Base"), "{stderr}");
    assert_eq!(world.ok_json(&["endpoint", "presence", slug, "--json"])["shift"], shift, "a refusal changes nothing");

    let cleared = world.ok_json(&["endpoint", "shift", slug, "--clear", "--json"]);
    assert_eq!(cleared["shift"], Value::Null, "{cleared}");
    assert_eq!(world.cli(&["endpoint", "shift", slug]).0, 2, "SHIFT or --clear is required");
    assert_eq!(world.cli(&["endpoint", "shift", slug, shift, "--clear"]).0, 2, "not both");
}

// SPEC-0030 REQ-8 hooks, SSRF guard: without SWITCHBOARD_HOOKS_ALLOW_PRIVATE a loopback hook URL
// is refused naming `url`, and nothing is added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_cli_a_loopback_hook_is_refused_without_the_allow_private_setting() {
    let world = World::start(&[]).await;
    let slug = world.slug.as_str();
    let stderr = world.refused(&["endpoint", "hook", "add", slug, DEAD_HOOK_URL]);
    assert!(stderr.starts_with("invalid_argument: url: "), "{stderr}");
    assert_eq!(world.ok_json(&["endpoint", "hook", "list", slug, "--json"]), json!({"hooks": []}));
}

// SPEC-0030 REQ-8 hooks with private addresses allowed: add prints the secret once, list shows
// the hook without it, test calls it (signed with that secret) and reports the outcome, remove
// takes it away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_cli_hooks_are_added_listed_tested_and_removed() {
    let world = World::start(&[ALLOW_PRIVATE]).await;
    let slug = world.slug.as_str();
    let (receiver_url, received) = one_shot_receiver();

    let added = world.ok(&["endpoint", "hook", "add", slug, &receiver_url]);
    let secret = added
        .lines()
        .find_map(|line| line.strip_prefix("secret: "))
        .unwrap_or_else(|| panic!("hook add prints the secret: {added}"))
        .to_string();
    assert!(secret.starts_with("whsec_"), "{added}");
    let hook_id = added.split_whitespace().nth(2).expect("added hook <id>").to_string();

    let dead = world.ok_json(&["endpoint", "hook", "add", slug, DEAD_HOOK_URL, "--ignore-presence", "--json"]);
    let dead_id = dead["hook"]["id"].as_str().expect("hook id").to_string();
    assert_eq!(dead["hook"]["ignore_presence"], true, "{dead}");

    let listed = world.ok_json(&["endpoint", "hook", "list", slug, "--json"]);
    let ids: Vec<&str> = listed["hooks"].as_array().expect("hooks").iter().filter_map(|h| h["id"].as_str()).collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(ids.contains(&hook_id.as_str()) && ids.contains(&dead_id.as_str()), "{listed}");
    assert!(!listed.to_string().contains(&secret), "the secret is shown once only");
    let table = world.ok(&["endpoint", "hook", "list", slug]);
    assert!(table.contains(&receiver_url) && table.contains(DEAD_HOOK_URL), "{table}");

    assert_eq!(world.ok(&["endpoint", "hook", "test", slug, &hook_id]).trim(), "delivered (HTTP 204)");
    let delivery = received.recv_timeout(Duration::from_secs(10)).expect("the receiver got the test call");
    let signature = standardwebhooks::Webhook::new(&secret).expect("secret").sign(
        &delivery.header("webhook-id"),
        delivery.header("webhook-timestamp").parse().expect("timestamp"),
        delivery.body.as_bytes(),
    );
    assert_eq!(signature.expect("sign"), delivery.header("webhook-signature"), "signed with the printed secret");
    let body: Value = serde_json::from_str(&delivery.body).expect("JSON body");
    assert_eq!(body["type"], "hook.test", "{body}");

    let (code, stdout, stderr) = world.cli(&["endpoint", "hook", "test", slug, &dead_id]);
    assert_eq!(code, 1, "an undelivered test exits 1\nstdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.starts_with("failed: "), "{stdout}");

    assert_eq!(world.ok(&["endpoint", "hook", "remove", slug, &dead_id]).trim(), format!("removed hook {dead_id}"));
    let stderr = world.refused(&["endpoint", "hook", "remove", slug, &dead_id]);
    assert!(stderr.starts_with("not_found: "), "{stderr}");
    world.ok(&["endpoint", "hook", "remove", slug, &hook_id]);
    assert_eq!(world.ok(&["endpoint", "hook", "list", slug]).trim(), "no hooks");
}

/// One HTTP request as a receiver saw it.
struct Delivery {
    head: String,
    body: String,
}

impl Delivery {
    fn header(&self, name: &str) -> String {
        self.head
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(key, _)| key.trim().eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} header in:\n{}", self.head))
    }
}

/// A loopback HTTP receiver that answers one request with 204 and hands it over.
fn one_shot_receiver() -> (String, std::sync::mpsc::Receiver<Delivery>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("address"));
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else { return };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        // Read the head, then as many body bytes as Content-Length says.
        let delivery = loop {
            let Ok(read) = stream.read(&mut chunk) else { return };
            if read == 0 {
                return;
            }
            bytes.extend_from_slice(&chunk[..read]);
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
            let delivery = Delivery { head: head.to_string(), body: body.to_string() };
            let length: usize = delivery.header("content-length").parse().unwrap_or(0);
            if delivery.body.len() >= length {
                break delivery;
            }
        };
        let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let _ = sender.send(delivery);
    });
    (url, received)
}
