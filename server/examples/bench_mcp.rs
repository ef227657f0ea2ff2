//! `ci/bench-mcp`: claim latency through MCP (JSON-RPC over HTTP) at 16 concurrent agents, next
//! to the same loop calling the engine directly, on a throwaway PostgreSQL (fsync off, or durable
//! with `SWITCHBOARD_TEST_DURABLE=1`, which `ci/bench-mcp --durable` sets).
//! Each agent loops `claim_next` then `complete` for a fixed time on one queue without a policy
//! and on one with a budget that never binds. A benchmark: it prints, it asserts nothing.
//! Usage: cargo run --release -p server --example bench_mcp [-- SECONDS]

#[path = "../../engine/examples/support/bench_endpoint.rs"]
mod bench_endpoint;

use bench_endpoint::{BenchEndpoint, bench_endpoint};
use engine::{PgStore, PoolSettings};
use models::store::{ClaimNext, Store, SystemClock};
use serde_json::{Value, json};
use server::app::router;
use server::state::AppState;
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENTS: usize = 16;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let durability = if engine::testing::durable_requested() { "durable" } else { "fsync off" };
    println!("bench-mcp: {AGENTS} concurrent agents, {seconds} s per run, throwaway PostgreSQL ({durability})");
    let mut ratios = Vec::new();
    for budgeted in [false, true] {
        let label = if budgeted { "budgeted" } else { "no policy" };
        let mut rates = [0.0; 2];
        for (rate, through_mcp) in rates.iter_mut().zip([false, true]) {
            let (claims, p50, p99) = run(budgeted, through_mcp, Duration::from_secs(seconds)).await;
            *rate = claims;
            println!(
                "{label:<10} {:<8} {claims:>7.0} claims/s   claim p50 {p50:>6.2} ms   p99 {p99:>7.2} ms",
                if through_mcp { "MCP" } else { "engine" },
            );
        }
        ratios.push(format!("{label} MCP/engine {:.2}", rates[1] / rates[0]));
    }
    println!("{}   (issue #15 target: MCP/engine >= 0.7 at 16 agents)", ratios.join("   "));
}

async fn run(budgeted: bool, through_mcp: bool, duration: Duration) -> (f64, f64, f64) {
    let db = engine::testing::fresh_database().await;
    let settings = PoolSettings {
        connections_max: AGENTS as u32 + 8,
        acquire_timeout: Duration::from_secs(30),
        ..PoolSettings::default()
    };
    let store = PgStore::connect(&db.url, settings, Arc::new(SystemClock)).await.expect("connect");
    let agent = seed(&store, budgeted).await;
    let base = if through_mcp { Some(serve_mcp(&store, &agent.slug).await) } else { None };
    let deadline = Instant::now() + duration;
    let agents: Vec<_> =
        (0..AGENTS).map(|_| tokio::spawn(agent_loop(store.clone(), agent.clone(), base.clone(), deadline))).collect();
    let mut latencies: Vec<Duration> = Vec::new();
    for agent in agents {
        latencies.extend(agent.await.expect("join"));
    }
    store.pool().close().await;
    engine::testing::drop_database(&db).await;
    latencies.sort();
    let quantile = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    (latencies.len() as f64 / duration.as_secs_f64(), quantile(0.5), quantile(0.99))
}

/// A human, an endpoint with one queue `work` (budgeted or not) and 40 000 pending todos in it.
async fn seed(store: &PgStore, budgeted: bool) -> BenchEndpoint {
    let endpoint = bench_endpoint(store, &["work".to_string()], budgeted.then_some("work")).await;
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, created_at, updated_at) \
         SELECT 'td_' || replace(gen_random_uuid()::text, '-', ''), $1, 'work', 'bench', 'system', \
                now() + make_interval(secs => n / 1000.0), now() FROM generate_series(1, 40000) AS n",
    )
    .bind(&endpoint.id)
    .execute(store.pool())
    .await
    .expect("todos");
    sqlx::query("ANALYZE").execute(store.pool()).await.expect("analyze");
    endpoint
}

/// Serves the app on a free local port; returns the endpoint's MCP URL.
async fn serve_mcp(store: &PgStore, slug: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let app = router(AppState::new(store.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/mcp/{slug}")
}

/// One agent: claim_next then complete until the deadline, through MCP when `base` is its URL,
/// else on the engine directly. Returns each claim's latency.
async fn agent_loop(store: PgStore, agent: BenchEndpoint, base: Option<String>, deadline: Instant) -> Vec<Duration> {
    let http = reqwest::Client::new();
    let BenchEndpoint { actor, granted, key, .. } = agent;
    let mut latencies = Vec::new();
    while Instant::now() < deadline {
        let started = Instant::now();
        let id = if let Some(base) = &base {
            let claimed = call_tool(&http, base, &key, "claim_next", json!({})).await;
            latencies.push(started.elapsed());
            claimed["todo"]["id"].as_str().expect("claimed").to_string()
        } else {
            let ClaimNext::Claimed(claimed) = store.claim_next(&actor, &granted, 300).await.expect("claim") else {
                panic!("ran dry")
            };
            latencies.push(started.elapsed());
            claimed.todo.id
        };
        if let Some(base) = &base {
            call_tool(&http, base, &key, "complete", json!({"id": id})).await;
        } else {
            store.complete(&actor, &id, None).await.expect("complete");
        }
    }
    latencies
}

/// One MCP `tools/call`; returns the result's `structuredContent`.
async fn call_tool(http: &reqwest::Client, base: &str, key: &str, name: &str, arguments: Value) -> Value {
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let answer: Value =
        http.post(base).bearer_auth(key).json(&body).send().await.expect("post").json().await.expect("json");
    answer["result"]["structuredContent"].clone()
}
