//! `ci/bench-mcp`: claim latency through MCP (JSON-RPC over HTTP) at 1, 16 and 64 concurrent
//! agents, next to the same loop calling the engine directly, on a throwaway PostgreSQL (fsync off, or durable
//! with `SWITCHBOARD_TEST_DURABLE=1`, which `ci/bench-mcp --durable` sets).
//! Each agent loops `claim_next` then `complete` for a fixed time on issue #15's paths: (a) one
//! queue without a policy, (b) one with a budget that never binds, (c) 200 granted queues of which
//! 199 are exhausted with older work, seeded as `bench_admission` seeds them (`bench_paths`). A
//! benchmark: it prints, it asserts nothing.
//! Usage: cargo run --release -p server --example bench_mcp [-- SECONDS [AGENTS,... [ROUNDS]]]
//! With ROUNDS > 1 each path runs the pair that many times, the order flipped every round so a
//! machine that drifts slower or faster favours neither side, and the ratio printed is the median
//! of the rounds' ratios: on a shared 2-core machine one pair's ratio spreads by 0.2 or more.
//! `SWITCHBOARD_BENCH_UNCACHED_CREDENTIALS=1` serves MCP without the credential cache, so one
//! build measures what the cache is worth. MCP is served with the push loops running, as
//! `switchboard serve` runs them (a complete nudges the reopen sweep);
//! `SWITCHBOARD_BENCH_NO_PUSH=1` leaves them out, to measure what they cost.

#[path = "../../engine/examples/support/bench_endpoint.rs"]
mod bench_endpoint;
#[path = "../../engine/examples/support/bench_paths.rs"]
mod bench_paths;
#[path = "../../engine/examples/support/fake_data.rs"]
mod fake_data;

use bench_endpoint::BenchEndpoint;
use bench_paths::{ClaimPath, seed_path};
use engine::{PgStore, PoolSettings};
use models::limits::REAPER_INTERVAL_DEFAULT;
use models::store::prelude::*;
use models::store::{ClaimNext, SystemClock};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use server::app::router;
use server::hook_sender::AddressPolicy;
use server::push::{Hub, tasks};
use server::state::AppState;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The allocator `switchboard` runs on (`server/src/main.rs`), so the server measured is the one
/// shipped.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const AGENTS_DEFAULT: [usize; 3] = [1, 16, 64];
/// `switchboard serve`'s default deadline for a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Pending todos in the admitted queue: enough for the whole run.
const ADMITTED_TODOS: i64 = 40_000;

/// Issue #15's paths, as this benchmark labels them.
fn label(path: ClaimPath) -> &'static str {
    match path {
        ClaimPath::NoPolicy => "(a) no policy",
        ClaimPath::Budgeted => "(b) budgeted",
        ClaimPath::ManyExhausted => "(c) 200 queues",
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let counts: Vec<usize> = std::env::args()
        .nth(2)
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| AGENTS_DEFAULT.to_vec());
    let rounds: usize = std::env::args().nth(3).and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let durability = if engine::testing::durable_requested() { "durable" } else { "fsync off" };
    println!(
        "bench-mcp: agents {counts:?}, {seconds} s per run, {rounds} round(s), throwaway PostgreSQL ({durability})"
    );
    for &agents in &counts {
        let mut ratios = Vec::new();
        for path in [ClaimPath::NoPolicy, ClaimPath::Budgeted, ClaimPath::ManyExhausted] {
            let mut round_ratios = Vec::new();
            for round in 0..rounds {
                // [engine, MCP] claims/s; odd rounds run MCP first.
                let mut rates = [0.0; 2];
                let order = if round % 2 == 0 { [false, true] } else { [true, false] };
                for through_mcp in order {
                    let (claims, p50, p99, groups) = run(path, agents, through_mcp, Duration::from_secs(seconds)).await;
                    rates[usize::from(through_mcp)] = claims;
                    println!(
                        "agents={agents:<3} {:<15} {:<7} {claims:>7.0} claims/s   claim p50 {p50:>7.2} ms   p99 {p99:>7.2} ms{}",
                        label(path),
                        if through_mcp { "MCP" } else { "engine" },
                        groups.map_or(String::new(), |mean| format!("   groups of {mean:.1}")),
                    );
                }
                round_ratios.push(rates[1] / rates[0]);
            }
            ratios.push(summary(label(path), round_ratios));
        }
        println!("agents={agents:<3} MCP/engine: {}   (issue #31 target: >= 0.8 at 16 agents)\n", ratios.join("   "));
    }
}

/// A path's MCP/engine ratio: the one round's, or the median of the rounds' with each listed.
fn summary(label: &str, mut ratios: Vec<f64>) -> String {
    ratios.sort_by(f64::total_cmp);
    let middle = ratios.len() / 2;
    let median = if ratios.len() % 2 == 1 { ratios[middle] } else { (ratios[middle - 1] + ratios[middle]) / 2.0 };
    if ratios.len() == 1 {
        format!("{label} {median:.2}")
    } else {
        let each: Vec<String> = ratios.iter().map(|ratio| format!("{ratio:.2}")).collect();
        format!("{label} {median:.2} (median of {})", each.join(", "))
    }
}

/// One run: claims/s, the claim's p50 and p99 in ms, and for the budgeted paths the mean number
/// of claimers a group transaction took (fewer per group means more commits per claim).
async fn run(path: ClaimPath, agents: usize, through_mcp: bool, duration: Duration) -> (f64, f64, f64, Option<f64>) {
    let db = engine::testing::fresh_database().await;
    let settings = PoolSettings {
        connections_max: agents as u32 + 8,
        acquire_timeout: Duration::from_secs(30),
        ..PoolSettings::default()
    };
    let store = PgStore::connect(&db.url, settings, Arc::new(SystemClock)).await.expect("connect");
    let agent = seed_path(&store, path, ADMITTED_TODOS).await;
    // Served as `switchboard serve` serves: credentials answered from the replica's cache, under
    // the lease its keeper holds (issue #31 item 3).
    let cached = std::env::var_os("SWITCHBOARD_BENCH_UNCACHED_CREDENTIALS").is_none();
    let store = if through_mcp && cached { store.with_credential_cache("rp_bench") } else { store };
    let (stop_background, background_stop) = tokio::sync::watch::channel(false);
    let keeper = engine::pg_store::credential_cache::spawn_keeper(store.clone(), background_stop.clone());
    let pushing = through_mcp && std::env::var_os("SWITCHBOARD_BENCH_NO_PUSH").is_none();
    let hub = Arc::new(Hub::new("rp_bench"));
    let pushers = if pushing {
        tasks::spawn(
            store.clone(),
            hub.clone(),
            REAPER_INTERVAL_DEFAULT,
            AddressPolicy::PublicOnly,
            background_stop.clone(),
        )
    } else {
        Vec::new()
    };
    let base =
        if through_mcp { Some(serve_mcp(&store, hub, &agent.slug, background_stop.clone()).await) } else { None };
    let deadline = Instant::now() + duration;
    let loops: Vec<_> =
        (0..agents).map(|_| tokio::spawn(agent_loop(store.clone(), agent.clone(), base.clone(), deadline))).collect();
    let mut latencies: Vec<Duration> = Vec::new();
    for one in loops {
        latencies.extend(one.await.expect("join"));
    }
    let _ = stop_background.send(true);
    let _ = keeper.await;
    for pusher in pushers {
        let _ = pusher.await;
    }
    let counted = store.counters().snapshot();
    let groups = (counted.claim_groups > 0).then(|| counted.claim_group_claimers as f64 / counted.claim_groups as f64);
    store.pool().close().await;
    engine::testing::drop_database(&db).await;
    latencies.sort();
    let quantile = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    (latencies.len() as f64 / duration.as_secs_f64(), quantile(0.5), quantile(0.99), groups)
}

/// Serves the app on a free local port through `switchboard serve`'s HTTP/1 loop (no delay on
/// the socket, a header-read deadline) until `stop`, its verbs nudging the push loops through
/// `hub`; returns the endpoint's MCP URL. Not behind `serve`'s load guard: its default of 100
/// writes a second per credential would measure the guard, not the server.
async fn serve_mcp(store: &PgStore, hub: Arc<Hub>, slug: &str, stop: tokio::sync::watch::Receiver<bool>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let app = router(AppState { push: hub, ..AppState::new(store.clone()) });
    tokio::spawn(server::http_server::serve(listener, app, HEADER_READ_TIMEOUT, stop));
    format!("http://{address}/mcp/{slug}")
}

/// One agent: claim_next then complete until the deadline, through MCP when `base` is its URL,
/// else on the engine directly. Returns each claim's latency.
async fn agent_loop(store: PgStore, agent: BenchEndpoint, base: Option<String>, deadline: Instant) -> Vec<Duration> {
    let BenchEndpoint { actor, granted, key, .. } = agent;
    let client = base.map(|base| McpClient::new(&base, &key));
    let mut latencies = Vec::new();
    while Instant::now() < deadline {
        let started = Instant::now();
        let id = if let Some(client) = &client {
            let claimed: Claimed = client.call(CLAIM_NEXT).await;
            latencies.push(started.elapsed());
            claimed.todo.id
        } else {
            let ClaimNext::Claimed(claimed) = store.claim_next(&actor, &granted, 300).await.expect("claim") else {
                panic!("ran dry")
            };
            latencies.push(started.elapsed());
            claimed.todo.id
        };
        if let Some(client) = &client {
            let _: IgnoredAny = client.call(complete_call(&id)).await;
        } else {
            store.complete(&actor, &id, None).await.expect("complete");
        }
    }
    latencies
}

/// The `tools/call` of `claim_next` with no arguments, as every agent sends it.
const CLAIM_NEXT: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"claim_next","arguments":{}}}"#;

/// The `tools/call` of `complete` for one todo.
fn complete_call(id: &str) -> String {
    let id = serde_json::to_string(id).expect("a string serialises");
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"complete","arguments":{{"id":{id}}}}}}}"#
    )
}

/// One agent's MCP client. The benchmark's client shares the two cores with the server and
/// PostgreSQL, so what it spends per call is taken from the server: it parses the URL and builds
/// the credential's header once, sends bodies written as text, and decodes of each answer only
/// what it checks.
struct McpClient {
    http: reqwest::Client,
    url: reqwest::Url,
    authorization: HeaderValue,
}

impl McpClient {
    fn new(base: &str, key: &str) -> Self {
        McpClient {
            http: reqwest::Client::new(),
            url: base.parse().expect("the MCP URL"),
            authorization: HeaderValue::from_str(&format!("Bearer {key}")).expect("a header value"),
        }
    }

    /// Sends one `tools/call` request; panics unless the tool answered without `isError`.
    /// Returns the result's `structuredContent`.
    async fn call<T: DeserializeOwned>(&self, body: impl Into<reqwest::Body>) -> T {
        let answer = self
            .http
            .post(self.url.clone())
            .header(AUTHORIZATION, self.authorization.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .expect("post")
            .bytes()
            .await
            .expect("the answer's body");
        match serde_json::from_slice::<RpcAnswer<T>>(&answer) {
            Ok(RpcAnswer { result: ToolAnswer { structured, is_error: false } }) => structured,
            _ => panic!("the tool refused or answered unexpectedly: {}", String::from_utf8_lossy(&answer)),
        }
    }
}

/// The parts of a JSON-RPC answer to `tools/call` the benchmark reads.
#[derive(Deserialize)]
struct RpcAnswer<T> {
    result: ToolAnswer<T>,
}

#[derive(Deserialize)]
struct ToolAnswer<T> {
    #[serde(rename = "structuredContent")]
    structured: T,
    #[serde(rename = "isError")]
    is_error: bool,
}

/// `claim_next`'s structured content, down to the claimed todo's id.
#[derive(Deserialize)]
struct Claimed {
    todo: TodoId,
}

#[derive(Deserialize)]
struct TodoId {
    id: String,
}
