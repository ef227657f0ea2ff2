//! SPEC-0030 Security Requirements through the real binary on real PostgreSQL: the admission
//! write limiter (1 write/s, burst 10, per human) holds across replicas (issue #28), refills at
//! its rate, counts deletes as writes, and keeps one bucket per human. Its state is in the
//! database (`write_limits`), so every replica reads and moves the same bucket.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{Client, Server, add_human, data_dir};

/// `replicas` servers on one database.
struct World {
    servers: Vec<Server>,
    _dir: tempfile::TempDir,
    db: engine::testing::TestDatabase,
}

impl World {
    async fn start(replicas: usize) -> World {
        let db = engine::testing::empty_database().await;
        let dir = data_dir();
        let servers = (0..replicas).map(|_| Server::start(&["--database-url", &db.url], &[], dir.path())).collect();
        World { servers, _dir: dir, db }
    }

    fn human(&self, name: &str) -> String {
        add_human(name, &["--database-url", &self.db.url]).1
    }

    /// Vends an endpoint for `token`'s human on replica 0; its scope.
    async fn scope_of(&self, token: &str, name: &str) -> String {
        let endpoint = Client::new(&self.servers[0].base).vend(token, json!({"name": name, "queues": ["inbox"]})).await;
        format!("endpoint:{}", endpoint["slug"].as_str().expect("slug"))
    }

    /// A policy write (`PUT` with a body, `DELETE` without) on replica `on`: status, `Retry-After`
    /// and the error code.
    async fn write(&self, on: usize, method: reqwest::Method, token: &str, scope: &str, body: Option<Value>) -> Answer {
        let url = format!("{}/api/v1/admission/{scope}/inbox", self.servers[on].base);
        let mut request = reqwest::Client::new().request(method, url).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("policy write");
        let status = response.status().as_u16();
        let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let body: Value = response.json().await.unwrap_or(Value::Null);
        Answer { status, retry_after, code: body["code"].as_str().map(str::to_string) }
    }

    async fn put(&self, on: usize, token: &str, scope: &str, max: i64) -> Answer {
        self.write(on, reqwest::Method::PUT, token, scope, Some(json!({"max_in_flight": max}))).await
    }
}

#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after: Option<u64>,
    code: Option<String>,
}

impl Answer {
    fn limited(&self) -> bool {
        self.status == 429 && self.code.as_deref() == Some("rate_limited") && self.retry_after.is_some_and(|s| s >= 1)
    }
}

// SPEC-0030 Security Requirements "at most 1 write per second, burst 10, per human", with the
// normal deployment of two replicas: 40 quick writes alternating between them admit the burst
// and what the rate refilled meanwhile, not twice that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_the_write_limiter_holds_across_two_replicas() {
    let world = World::start(2).await;
    let alice = world.human("alice");
    let scope = world.scope_of(&alice, "w").await;
    let started = Instant::now();
    let mut answers = Vec::new();
    for n in 0..40 {
        answers.push(world.put(n % 2, &alice, &scope, n as i64).await);
    }
    let elapsed = started.elapsed();
    let accepted = answers.iter().filter(|a| a.status == 200).count() as u64;
    assert!(answers.iter().all(|a| a.status == 200 || a.limited()), "each write admitted or limited: {answers:?}");
    assert!(answers[..10].iter().all(|a| a.status == 200), "the burst passes, on either replica: {answers:?}");
    let refilled = elapsed.as_secs() + 1;
    assert!(
        accepted <= 10 + refilled,
        "{accepted} of 40 admitted in {elapsed:?} over two replicas; the cluster allows 10 + {refilled}"
    );
    // Both replicas refused: the bucket is shared, not per replica.
    assert!(answers.iter().enumerate().any(|(n, a)| n % 2 == 0 && a.limited()), "{answers:?}");
    assert!(answers.iter().enumerate().any(|(n, a)| n % 2 == 1 && a.limited()), "{answers:?}");
}

// SPEC-0030 Security Requirements: a DELETE is a policy write and spends the same bucket, which
// refills at one write a second (the `Retry-After` of a refusal is when the next one passes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_the_write_limiter_counts_deletes_and_refills_one_write_a_second() {
    let world = World::start(1).await;
    let alice = world.human("alice");
    let scope = world.scope_of(&alice, "w").await;
    for n in 0..5 {
        assert_eq!(world.put(0, &alice, &scope, n).await.status, 200, "write {}", 2 * n);
        let deleted = world.write(0, reqwest::Method::DELETE, &alice, &scope, None).await;
        assert_eq!(deleted.status, 204, "write {}", 2 * n + 1);
    }
    let refused = world.write(0, reqwest::Method::DELETE, &alice, &scope, None).await;
    assert!(refused.limited(), "the eleventh write, a DELETE, is limited: {refused:?}");
    let refused = world.put(0, &alice, &scope, 7).await;
    assert!(refused.limited(), "{refused:?}");
    assert_eq!(refused.retry_after, Some(1));

    tokio::time::sleep(Duration::from_secs(refused.retry_after.unwrap_or(1))).await;
    assert_eq!(world.put(0, &alice, &scope, 8).await.status, 200, "one write a second refills");
    assert!(world.put(0, &alice, &scope, 9).await.limited(), "and only one");
    let (status, shown) =
        Client::new(&world.servers[0].base).get(&format!("/api/v1/admission/{scope}/inbox"), &alice).await;
    assert_eq!(
        (status, shown["policy"]["max_in_flight"].as_i64()),
        (200, Some(8)),
        "the refused writes changed nothing"
    );
}

// SPEC-0030 Security Requirements "per human": another human's writes have a bucket of their
// own, on the same replica and the same moment (a small body, so the limiter decides).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_each_human_has_a_write_bucket_of_their_own() {
    let world = World::start(1).await;
    let alice = world.human("alice");
    let bob = world.human("bob");
    let alices = world.scope_of(&alice, "a").await;
    let bobs = world.scope_of(&bob, "b").await;
    for n in 0..10 {
        assert_eq!(world.put(0, &alice, &alices, n).await.status, 200);
    }
    assert!(world.put(0, &alice, &alices, 10).await.limited());
    for n in 0..10 {
        assert_eq!(world.put(0, &bob, &bobs, n).await.status, 200, "bob's write {n}");
    }
    assert!(world.put(0, &bob, &bobs, 10).await.limited());
}
