//! Load that cannot starve other tenants (issue #14, item 3), on the real binary: one tenant's
//! burst is bounded per credential and answered `429` with `Retry-After` before any database
//! work, while another tenant's claims keep succeeding; writes over a credential's rate are
//! refused and change nothing; a request stuck past the deadline is abandoned as `503` and, being
//! a claim that waited on the policy lock, charges nothing (REQ-13).

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::world::{Ep, World, claim_next};

fn daily(max: i64) -> Value {
    json!({"max_in_flight": null, "max_claims_per_window": max, "window": {"period": "day", "tz": "UTC", "start": "00:00"}})
}

/// One raw `tools/call claim_next`: the HTTP status, its `Retry-After`, and whether it claimed.
async fn raw_claim_next(http: &reqwest::Client, base: &str, ep: &Ep) -> (u16, Option<String>, bool) {
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "claim_next", "arguments": {}}});
    let response =
        http.post(format!("{base}/mcp/{}", ep.slug)).bearer_auth(&ep.key).json(&body).send().await.expect("POST");
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    (status, retry_after, answer["result"]["structuredContent"]["todo"]["id"].is_string())
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    sorted[((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len()) - 1]
}

// Issue #14: "About 100 concurrent claim_next calls on one budgeted queue each hold a pooled
// connection while they wait on the policy row, and every other tenant gets unavailable".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_200_claims_on_one_budgeted_queue_does_not_starve_another_tenant() {
    let world = World::start(&["--max-concurrent-per-credential", "16"], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let fleet = world.vend(&alice, json!({"name": "fleet", "queues": ["work"]})).await;
    let solo = world.vend(&bob, json!({"name": "solo", "queues": ["inbox"]})).await;
    let (status, body) = world.client.put_admission_policy(&alice, &fleet.scope, "work", daily(1_000_000)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = world.client.put_admission_policy(&bob, &solo.scope, "inbox", daily(1_000_000)).await;
    assert_eq!(status, 200, "{body}");
    for i in 0..250 {
        world.push(&alice, &fleet.scope, "work", &format!("w{i}")).await;
    }
    for i in 0..40 {
        world.push(&bob, &solo.scope, "inbox", &format!("b{i}")).await;
    }

    let http = reqwest::Client::new();
    let base = world.client.base.clone();
    let burst: Vec<_> = (0..200)
        .map(|_| {
            let (http, base, fleet) = (http.clone(), base.clone(), fleet.clone());
            tokio::spawn(async move { raw_claim_next(&http, &base, &fleet).await })
        })
        .collect();
    // Bob's agent works on, one claim and one completion at a time, while the burst runs.
    let mut latencies = vec![];
    for _ in 0..40 {
        let started = Instant::now();
        let id = claim_next(&world.client, &solo, json!({})).await.expect("bob's claim succeeds");
        latencies.push(started.elapsed());
        let (is_error, answer) = world.client.tool(&solo.slug, &solo.key, "complete", json!({"id": id})).await;
        assert!(!is_error, "bob's completion succeeds: {answer}");
    }

    let (mut claimed, mut refused) = (0, 0);
    for call in burst {
        let (status, retry_after, got_one) = call.await.expect("join");
        match status {
            200 => claimed += u32::from(got_one),
            429 => {
                refused += 1;
                assert!(retry_after.is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)), "429 says when");
            }
            other => panic!("a burst claim is answered {other}, neither served nor refused with a retry"),
        }
    }
    latencies.sort_unstable();
    println!(
        "burst: {claimed} claimed, {refused} refused (429); bob: p50 {:?} p99 {:?} max {:?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );
    assert!(claimed >= 1, "the burst is served up to its bound");
    assert!(refused >= 1, "a credential cannot have 200 requests in progress at once");
}

// Issue #14: "no rate limit outside the policy writes". A credential's writes beyond its burst are
// refused with Retry-After before they change anything; reads and other credentials go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_over_a_credentials_rate_are_refused_and_change_nothing() {
    let world = World::start(&["--max-writes-per-second", "1", "--write-burst", "3"], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&bob, json!({"name": "w", "queues": ["inbox"]})).await; // bob's write 1
    let body = |title: &str| json!({"scope": ep.scope, "queue": "inbox", "title": title});
    for title in ["one", "two"] {
        let (status, answer) = world.client.post("/api/v1/todos", &bob, body(title)).await;
        assert_eq!(status, 201, "{answer}");
    }
    let refused = reqwest::Client::new()
        .post(format!("{}/api/v1/todos", world.client.base))
        .bearer_auth(&bob)
        .json(&body("three"))
        .send()
        .await
        .expect("POST");
    assert_eq!(refused.status().as_u16(), 429);
    assert!(refused.headers().get("retry-after").is_some(), "429 says when");
    let answer: Value = refused.json().await.expect("json");
    assert_eq!(answer["code"], json!("rate_limited"), "{answer}");

    assert_eq!(world.pending(&bob, &ep.scope, "inbox").await.len(), 2, "the refused write changed nothing");
    let (status, _) = world.client.get("/api/v1/todos", &bob).await;
    assert_eq!(status, 200, "reads are not rate limited");
    let (status, answer) = world.client.post("/api/v1/tokens", &alice, json!({"label": "x"})).await;
    assert_eq!(status, 201, "another credential has its own bucket: {answer}");
}

// Issue #14: "no request timeout". A claim stuck behind a held policy lock is abandoned at the
// deadline with 503 and Retry-After; its transaction rolls back, so it charged nothing (REQ-13).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_deadline_is_abandoned_and_charges_nothing() {
    let world = World::start(&["--request-timeout-seconds", "1"], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let (status, body) = world.client.put_admission_policy(&alice, &ep.scope, "inbox", daily(5)).await;
    assert_eq!(status, 200, "{body}");
    world.push(&alice, &ep.scope, "inbox", "t").await;

    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("connect");
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("SELECT id FROM admission_policies FOR UPDATE").execute(&mut *holder).await.expect("hold lock");
    let started = Instant::now();
    let (status, retry_after, claimed) = raw_claim_next(&reqwest::Client::new(), &world.client.base, &ep).await;
    assert_eq!((status, claimed), (503, false), "abandoned at the deadline");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited for the deadline");
    holder.rollback().await.expect("release");

    let used: i64 = sqlx::query_scalar("SELECT COALESCE(SUM(used), 0)::bigint FROM admission_windows")
        .fetch_one(&pool)
        .await
        .expect("usage");
    assert_eq!(used, 0, "the abandoned claim charged nothing");
    let id = claim_next(&world.client, &ep, json!({})).await;
    assert!(id.is_some(), "the todo is still there to claim");
}

// Issue #14: "no header-read timeout (slow-header connections are unbounded)". A client that
// starts a request head and never finishes it is disconnected at the deadline; others are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_finishes_its_headers_is_closed_at_the_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let world = World::start(&["--header-read-timeout-seconds", "1"], &[]).await;
    let address = world.client.base.trim_start_matches("http://").to_string();
    let mut slow = tokio::net::TcpStream::connect(&address).await.expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.expect("partial head");
    let started = Instant::now();
    let mut buffer = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(20), slow.read(&mut buffer)).await;
    let waited = started.elapsed();
    match read {
        Ok(Ok(n)) => {
            // Closed (0 bytes), or closed after an error status; never a served request.
            let text = String::from_utf8_lossy(&buffer[..n]);
            assert!(n == 0 || text.starts_with("HTTP/1.1 408"), "unexpected answer: {text}");
        }
        Ok(Err(_reset)) => {}
        Err(_) => panic!("the half-sent request was still open after 20 s"),
    }
    assert!(waited >= Duration::from_millis(900), "closed at the deadline, not before: {waited:?}");
    let (status, _) = world.client.get("/healthz", "none").await;
    assert_eq!(status, 200, "other connections are served");
}
