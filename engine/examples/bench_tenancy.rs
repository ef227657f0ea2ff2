//! `ci/bench-tenancy`: does a tenant's listing cost grow with another tenant's data? (issue #14
//! item 4, target: ratio ≤ 1.5).
//!
//! On a throwaway PostgreSQL (fsync off), a small tenant with 10 todos lists its queue through
//! `Store::list_todos` (its granted queue, as MCP does, and all its queues, as the operator API and
//! the board do) while another tenant holds 1,000 done todos, then `--big` done todos (default
//! 1,000,000, inserted with `generate_series`). It prints p50/p99 listing latency for both sizes
//! and the big/small ratios. Titles and payloads are `fake` text from a fixed seed (the big
//! tenant's cycle through a generated set, so `generate_series` still inserts them). A benchmark:
//! it prints, it asserts nothing.
//! Usage: cargo run --release -p engine --example bench_tenancy [-- [--big N] [--listings N]]

#[path = "support/fake_data.rs"]
mod fake_data;

use engine::testing::{drop_database, fresh_database};
use engine::{PgStore, PoolSettings};
use models::identity::QueueIdentity;
use models::scope::Reach;
use models::store::prelude::*;
use models::store::{NewEndpoint, SystemClock, TodoQuery, TodoSet};
use models::todo::{CreatedByKind, NewTodo};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SMALL_TENANT_TODOS: usize = 10;
const SMALL_BIG_TENANT_TODOS: i64 = 1_000;
const BIG_TENANT_TODOS_DEFAULT: i64 = 1_000_000;
const LISTINGS_DEFAULT: usize = 2_000;
/// Listings run before measuring, so connections are open and statements prepared.
const WARM_UP_LISTINGS: usize = 100;
/// Rows per insert statement of the big tenant's todos (one progress line each).
const INSERT_BATCH_ROWS: i64 = 100_000;
/// What the listing asks for: the operator API's and MCP's default page.
const LISTING_LIMIT: i64 = 50;
/// The seeds of the tenants' titles and payloads, and how many distinct ones the big tenant's
/// done todos cycle through.
const SMALL_TENANT_SEED: u64 = 14_061;
const BIG_TENANT_SEED: u64 = 14_062;
const BIG_TENANT_SAMPLES: usize = 1_000;

/// p50 and p99 listing latency in milliseconds, per listing kind.
struct Latencies {
    queue: (f64, f64),
    owner: (f64, f64),
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let (big, listings) = arguments();
    println!(
        "bench-tenancy: a tenant with {SMALL_TENANT_TODOS} todos lists (limit {LISTING_LIMIT}) {listings} times per \
         kind beside a tenant with {SMALL_BIG_TENANT_TODOS}, then {big} done todos; throwaway PostgreSQL (fsync off)"
    );
    let db = fresh_database().await;
    let settings = PoolSettings { connections_max: 4, ..PoolSettings::default() };
    let store = PgStore::connect(&db.url, settings, Arc::new(SystemClock)).await.expect("connect");
    let (small_queue, small_reach) = small_tenant(&store).await;
    let big_endpoint_id = endpoint(&store, "big").await;
    insert_done(&store, &big_endpoint_id, 0, SMALL_BIG_TENANT_TODOS).await;
    let small = measure(&store, &small_queue, &small_reach, listings).await;
    report(SMALL_BIG_TENANT_TODOS, &small);
    insert_done(&store, &big_endpoint_id, SMALL_BIG_TENANT_TODOS, big.max(SMALL_BIG_TENANT_TODOS)).await;
    let large = measure(&store, &small_queue, &small_reach, listings).await;
    report(big, &large);
    let ratio = |large: f64, small: f64| large / small;
    println!(
        "ratio {big} / {SMALL_BIG_TENANT_TODOS}: queue listing p50 {:.2} p99 {:.2}; owner listing p50 {:.2} p99 {:.2} \
         (target <= 1.5)",
        ratio(large.queue.0, small.queue.0),
        ratio(large.queue.1, small.queue.1),
        ratio(large.owner.0, small.owner.0),
        ratio(large.owner.1, small.owner.1),
    );
    store.pool().close().await;
    drop_database(&db).await;
}

/// `--big N` and `--listings N`, each optional.
fn arguments() -> (i64, usize) {
    let (mut big, mut listings) = (BIG_TENANT_TODOS_DEFAULT, LISTINGS_DEFAULT);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a number"));
        match flag.as_str() {
            "--big" => big = value.parse().expect("--big: a number of todos"),
            "--listings" => listings = value.parse().expect("--listings: a number of listings"),
            _ => panic!("unknown argument {flag}; usage: [--big N] [--listings N]"),
        }
    }
    (big, listings)
}

/// A human and their endpoint with one queue: the endpoint's id.
async fn endpoint(store: &PgStore, name: &str) -> String {
    let (human, _) = store.bootstrap_human(name, false).await.expect("human");
    let endpoint = store
        .vend_endpoint(NewEndpoint {
            name: name.into(),
            owner_human_id: Some(human.id.clone()),
            owner_team_id: None,
            own_queues: vec!["inbox".into()],
            team_queues: vec![],
            verbs: vec![],
            token_hash: format!("bench-{name}"),
            created_by_human_id: None,
        })
        .await
        .expect("vend");
    endpoint.id
}

/// The small tenant's queue and reach, with its 10 pending todos.
async fn small_tenant(store: &PgStore) -> (QueueIdentity, Reach) {
    let endpoint_id = endpoint(store, "small").await;
    let queue = QueueIdentity::endpoint(&endpoint_id, "inbox");
    for sample in fake_data::samples(SMALL_TENANT_SEED, SMALL_TENANT_TODOS) {
        store
            .create_todo(NewTodo {
                identity: queue.clone(),
                title: sample.title,
                payload: Some(sample.payload),
                idempotency_key: None,
                max_attempts: 5,
                created_by_kind: CreatedByKind::System,
                created_by_id: None,
            })
            .await
            .expect("create");
    }
    (queue, Reach { endpoint_ids: vec![endpoint_id], team_ids: vec![] })
}

/// Inserts the big tenant's done todos numbered `from + 1 ..= to` (older than the small
/// tenant's), printing progress, then analyses the table as autovacuum eventually would.
async fn insert_done(store: &PgStore, endpoint_id: &str, from: i64, to: i64) {
    let samples = fake_data::samples(BIG_TENANT_SEED, BIG_TENANT_SAMPLES);
    let titles: Vec<&str> = samples.iter().map(|sample| sample.title.as_str()).collect();
    let payloads: Vec<String> = samples.iter().map(|sample| sample.payload.to_string()).collect();
    let started = Instant::now();
    let mut done = from;
    while done < to {
        let until = (done + INSERT_BATCH_ROWS).min(to);
        // Todo i takes sample i mod the number of samples (arrays count from 1).
        sqlx::query(
            "INSERT INTO todos (id, endpoint_id, queue, title, payload, state, attempt, created_at, updated_at, \
                                completed_at, created_by_kind) \
             SELECT 'td_big_' || i, $1, 'inbox', ($4::text[])[1 + i % cardinality($4::text[])], \
                    ($5::text[])[1 + i % cardinality($5::text[])]::jsonb, 'done', 1, \
                    now() - make_interval(secs => i), now() - make_interval(secs => i), now() - make_interval(secs => i), \
                    'system' \
             FROM generate_series($2::bigint, $3::bigint) AS i",
        )
        .bind(endpoint_id)
        .bind(done + 1)
        .bind(until)
        .bind(&titles)
        .bind(&payloads)
        .execute(store.pool())
        .await
        .expect("insert the big tenant's todos");
        done = until;
        println!("  big tenant: {done} / {to} done todos ({:.1} s)", started.elapsed().as_secs_f64());
    }
    sqlx::query("ANALYZE todos").execute(store.pool()).await.expect("analyze");
}

async fn measure(store: &PgStore, queue: &QueueIdentity, reach: &Reach, listings: usize) -> Latencies {
    let by_queue = TodoQuery { set: TodoSet::Queues(vec![queue.clone()]), state: None, limit: LISTING_LIMIT };
    let by_owner = TodoQuery { set: TodoSet::Owners(reach.clone()), state: None, limit: LISTING_LIMIT };
    Latencies { queue: quantiles(store, &by_queue, listings).await, owner: quantiles(store, &by_owner, listings).await }
}

/// p50 and p99 of `listings` sequential listings, in milliseconds.
async fn quantiles(store: &PgStore, query: &TodoQuery, listings: usize) -> (f64, f64) {
    let mut latencies: Vec<Duration> = Vec::with_capacity(listings);
    for i in 0..WARM_UP_LISTINGS + listings {
        let started = Instant::now();
        store.list_todos(query.clone()).await.expect("list");
        if i >= WARM_UP_LISTINGS {
            latencies.push(started.elapsed());
        }
    }
    latencies.sort();
    let quantile = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    (quantile(0.5), quantile(0.99))
}

fn report(big: i64, latencies: &Latencies) {
    println!(
        "beside {big:>9} done todos: queue listing p50 {:.3} ms p99 {:.3} ms; owner listing p50 {:.3} ms p99 {:.3} ms",
        latencies.queue.0, latencies.queue.1, latencies.owner.0, latencies.owner.1
    );
}
