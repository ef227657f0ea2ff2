//! Issue #15's claim paths and the world each claims from, shared by `bench_admission` and the
//! server's `bench_mcp` so their engine figures are of the same work: (a) one queue without a
//! policy, (b) one with a budget that never binds, (c) 200 granted queues of which 199 have a
//! spent budget and older pending work. The pending todos carry `fake` titles and payloads from
//! a fixed seed, generated and inserted before any clock starts.
//!
//! Included after `bench_endpoint` and `fake_data`, with `#[path = "support/bench_paths.rs"] mod
//! bench_paths;` (from the server, `#[path = "../../engine/examples/support/bench_paths.rs"]`).

use super::bench_endpoint::{BenchEndpoint, bench_endpoint, spend_budgets};
use super::fake_data;
use engine::PgStore;

/// Path (c): granted queues whose budget is spent, beside the one that admits.
pub const EXHAUSTED_QUEUES: usize = 199;
/// The seed of the pending todos' titles and payloads, and how many distinct ones they cycle.
const FAKE_SEED: u64 = 14_063;
const SAMPLES: usize = 1_000;

/// What the claimers claim from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ClaimPath {
    NoPolicy,
    Budgeted,
    ManyExhausted,
}

/// A human and an endpoint over the path's queues, with `admitted_todos` pending in the queue
/// that admits (budgeted for (b) and (c)), and for (c) five older todos in each exhausted queue.
pub async fn seed_path(store: &PgStore, path: ClaimPath, admitted_todos: i64) -> BenchEndpoint {
    let queues: Vec<String> = match path {
        ClaimPath::ManyExhausted => (0..=EXHAUSTED_QUEUES).map(|i| format!("q{i:03}")).collect(),
        _ => vec!["work".to_string()],
    };
    let admitted = queues.last().cloned().expect("a queue");
    let budgeted = (path != ClaimPath::NoPolicy).then_some(admitted.as_str());
    let endpoint = bench_endpoint(store, &queues, budgeted).await;
    if path == ClaimPath::ManyExhausted {
        spend_budgets(store, &endpoint.id, &queues[..EXHAUSTED_QUEUES]).await;
        insert_todos(store, &endpoint.id, &queues[..EXHAUSTED_QUEUES], 5, "1 hour").await;
    }
    insert_todos(store, &endpoint.id, std::slice::from_ref(&admitted), admitted_todos, "0 seconds").await;
    // The tables seeded, not `todo_attempts`: analysed while empty, it would get plans that scan
    // it whole on every claim and complete until autovacuum analyses it again, a state no
    // deployment reaches by itself (docs/benchmarks.md, "The attempts table's statistics").
    sqlx::query("ANALYZE todos, admission_policies, admission_windows").execute(store.pool()).await.expect("analyze");
    endpoint
}

/// Bulk setup in SQL: `per_queue` pending todos in each queue, created `age` ago a millisecond
/// apart; todo n takes sample n mod the number of samples (arrays count from 1).
async fn insert_todos(store: &PgStore, endpoint_id: &str, queues: &[String], per_queue: i64, age: &str) {
    let samples = fake_data::samples(FAKE_SEED, SAMPLES);
    let titles: Vec<&str> = samples.iter().map(|sample| sample.title.as_str()).collect();
    let payloads: Vec<String> = samples.iter().map(|sample| sample.payload.to_string()).collect();
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, queue, title, payload, created_by_kind, created_at, updated_at) \
         SELECT 'td_' || replace(gen_random_uuid()::text, '-', ''), $1, q, \
                ($5::text[])[1 + n % cardinality($5::text[])], ($6::text[])[1 + n % cardinality($6::text[])]::jsonb, \
                'system', now() - $3::interval + make_interval(secs => n / 1000.0), now() \
         FROM unnest($2::text[]) AS q, generate_series(1, $4) AS n",
    )
    .bind(endpoint_id)
    .bind(queues)
    .bind(age)
    .bind(per_queue)
    .bind(&titles)
    .bind(&payloads)
    .execute(store.pool())
    .await
    .expect("insert todos");
}
