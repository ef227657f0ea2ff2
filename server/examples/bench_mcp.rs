//! `ci/bench-mcp`: claim latency through MCP (JSON-RPC over HTTP) at 1, 16 and 64 concurrent
//! agents, next to the same loop calling the engine directly, on a throwaway PostgreSQL (fsync off, or durable
//! with `SWITCHBOARD_TEST_DURABLE=1`, which `ci/bench-mcp --durable` sets).
//! Each agent loops `claim_next` then `complete` for a fixed time on issue #15's paths: (a) one
//! queue without a policy, (b) one with a budget that never binds, (c) 200 granted queues of which
//! 199 are exhausted with older work. A benchmark: it prints, it asserts nothing.
//! Usage: cargo run --release -p server --example bench_mcp [-- SECONDS [AGENTS,...]]

#[path = "../../engine/examples/support/bench_endpoint.rs"]
mod bench_endpoint;

use bench_endpoint::{BenchEndpoint, bench_endpoint, spend_budgets};
use engine::{PgStore, PoolSettings};
use models::store::{ClaimNext, Store, SystemClock};
use serde_json::{Value, json};
use server::app::router;
use server::state::AppState;
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENTS_DEFAULT: [usize; 3] = [1, 16, 64];
/// Path (c): granted queues whose budget is spent, beside the one that admits.
const EXHAUSTED_QUEUES: usize = 199;

/// What the agents claim from: issue #15's paths (a), (b) and (c).
#[derive(Clone, Copy, PartialEq)]
enum Path {
    NoPolicy,
    Budgeted,
    ManyExhausted,
}

impl Path {
    fn label(self) -> &'static str {
        match self {
            Path::NoPolicy => "(a) no policy",
            Path::Budgeted => "(b) budgeted",
            Path::ManyExhausted => "(c) 200 queues",
        }
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let counts: Vec<usize> = std::env::args()
        .nth(2)
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| AGENTS_DEFAULT.to_vec());
    let durability = if engine::testing::durable_requested() { "durable" } else { "fsync off" };
    println!("bench-mcp: agents {counts:?}, {seconds} s per run, throwaway PostgreSQL ({durability})");
    for &agents in &counts {
        let mut ratios = Vec::new();
        for path in [Path::NoPolicy, Path::Budgeted, Path::ManyExhausted] {
            let mut rates = [0.0; 2];
            for (rate, through_mcp) in rates.iter_mut().zip([false, true]) {
                let (claims, p50, p99) = run(path, agents, through_mcp, Duration::from_secs(seconds)).await;
                *rate = claims;
                println!(
                    "agents={agents:<3} {:<15} {:<7} {claims:>7.0} claims/s   claim p50 {p50:>7.2} ms   p99 {p99:>7.2} ms",
                    path.label(),
                    if through_mcp { "MCP" } else { "engine" },
                );
            }
            ratios.push(format!("{} {:.2}", path.label(), rates[1] / rates[0]));
        }
        println!("agents={agents:<3} MCP/engine: {}   (issue #15 target: >= 0.7 at 16 agents)\n", ratios.join("   "));
    }
}

async fn run(path: Path, agents: usize, through_mcp: bool, duration: Duration) -> (f64, f64, f64) {
    let db = engine::testing::fresh_database().await;
    let settings = PoolSettings {
        connections_max: agents as u32 + 8,
        acquire_timeout: Duration::from_secs(30),
        ..PoolSettings::default()
    };
    let store = PgStore::connect(&db.url, settings, Arc::new(SystemClock)).await.expect("connect");
    let agent = seed(&store, path).await;
    let base = if through_mcp { Some(serve_mcp(&store, &agent.slug).await) } else { None };
    let deadline = Instant::now() + duration;
    let loops: Vec<_> =
        (0..agents).map(|_| tokio::spawn(agent_loop(store.clone(), agent.clone(), base.clone(), deadline))).collect();
    let mut latencies: Vec<Duration> = Vec::new();
    for one in loops {
        latencies.extend(one.await.expect("join"));
    }
    store.pool().close().await;
    engine::testing::drop_database(&db).await;
    latencies.sort();
    let quantile = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    (latencies.len() as f64 / duration.as_secs_f64(), quantile(0.5), quantile(0.99))
}

/// A human and an endpoint over the path's queues: 40 000 pending todos in the one that admits
/// (budgeted for (b) and (c)), and for (c) 199 more queues with spent budgets and older work.
async fn seed(store: &PgStore, path: Path) -> BenchEndpoint {
    let queues: Vec<String> = match path {
        Path::ManyExhausted => (0..=EXHAUSTED_QUEUES).map(|i| format!("q{i:03}")).collect(),
        _ => vec!["work".to_string()],
    };
    let admitted = queues.last().cloned().expect("a queue");
    let budgeted = (path != Path::NoPolicy).then_some(admitted.as_str());
    let endpoint = bench_endpoint(store, &queues, budgeted).await;
    if path == Path::ManyExhausted {
        spend_budgets(store, &endpoint.id, &queues[..EXHAUSTED_QUEUES]).await;
        insert_todos(store, &endpoint.id, &queues[..EXHAUSTED_QUEUES], 5, "-1 hour").await;
    }
    insert_todos(store, &endpoint.id, std::slice::from_ref(&admitted), 40_000, "0 seconds").await;
    sqlx::query("ANALYZE").execute(store.pool()).await.expect("analyze");
    endpoint
}

/// `per_queue` pending todos in each of `queues`, created from `now() + offset` a millisecond apart.
async fn insert_todos(store: &PgStore, endpoint_id: &str, queues: &[String], per_queue: i64, offset: &str) {
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, created_at, updated_at) \
         SELECT 'td_' || replace(gen_random_uuid()::text, '-', ''), $1, q, 'bench', 'system', \
                now() + $2::interval + make_interval(secs => n / 1000.0), now() \
         FROM unnest($3::text[]) AS q, generate_series(1, $4) AS n",
    )
    .bind(endpoint_id)
    .bind(offset)
    .bind(queues)
    .bind(per_queue)
    .execute(store.pool())
    .await
    .expect("todos");
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
