//! `ci/bench-peer`: Switchboard's claim + complete loop against graphile-worker's, measured the
//! same way (issue #15 item 1 and its first target).
//!
//! For each worker count, on one throwaway PostgreSQL cluster (durable when
//! `SWITCHBOARD_TEST_DURABLE=1`, as `ci/bench-peer` runs it) and a fresh database per run:
//!   (a)  — N claimers drain JOBS pending todos from a queue without a policy, each looping
//!          `claim_next` then `complete` on the engine until the queue is empty;
//!   (b)  — the same on a queue whose budget never binds;
//!   (a10) — (a) in batches: `claim_next_many` of up to 10, then `complete_many` of them
//!          (issue #31 item 2);
//!   peer — graphile-worker drains JOBS no-op jobs at concurrency N (`ci/peer/graphile_worker_drain.js`,
//!          run with node when `--peer NODE_MODULES_DIR` names an install of graphile-worker);
//!   peer10 — graphile-worker's batched mode (a local queue of N + 1, completions flushed
//!          together), the peer of (a10).
//! The work is inserted before the clock starts, and the clock stops when the database says none
//! is left (asked every 10 ms, whether any is left, the same for both). It prints jobs/s, the ratios (a)/peer and
//! (b)/(a), and what bounds a durable drain: the cluster's WAL bytes, records and flushes per job
//! (`pg_stat_wal`, read once the set-up's connections and then the run's have closed). A benchmark: it prints, it
//! asserts nothing.
//! Usage: cargo run --release -p engine --example bench_peer [-- [--peer DIR] [JOBS [WORKERS,...]]]

#[path = "support/bench_endpoint.rs"]
mod bench_endpoint;

use bench_endpoint::bench_endpoint;
use engine::testing::{empty_database, fresh_database};
use engine::{PgStore, PoolSettings};
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::prelude::*;
use models::store::{ClaimNext, SystemClock};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const JOBS_DEFAULT: i64 = 20_000;
const WORKERS_DEFAULT: [usize; 3] = [1, 16, 64];
/// Todos one batched claim asks for in (a10).
const BATCH: usize = 10;
/// How often the clock asks the database whether the work is done.
const POLL: Duration = Duration::from_millis(10);
/// The node driver for graphile-worker, beside this repository's other benchmark scripts.
const PEER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/peer/graphile_worker_drain.js");

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let peer = match args.iter().position(|a| a == "--peer") {
        Some(at) if at + 1 < args.len() => {
            let dir = PathBuf::from(args.remove(at + 1));
            args.remove(at);
            Some(dir)
        }
        Some(_) => {
            eprintln!("--peer needs the node_modules directory that holds graphile-worker");
            std::process::exit(2);
        }
        None => None,
    };
    let jobs: i64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(JOBS_DEFAULT);
    let workers: Vec<usize> = args
        .get(1)
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| WORKERS_DEFAULT.to_vec());
    let durability = if engine::testing::durable_requested() { "durable" } else { "fsync off" };
    println!("bench-peer: drain {jobs} jobs, clock stops when the database says all are done ({durability})");
    println!(
        "{:>8} {:<6} {:>9} {:>11} {:>12} {:>12}",
        "workers", "loop", "jobs/s", "WAL B/job", "records/job", "flushes/job"
    );
    // A fresh cluster's first drain also pays for its first WAL segments and catalog vacuums:
    // one unreported drain first, so whichever loop runs first is not charged for them.
    drain_switchboard(workers.first().copied().unwrap_or(1), jobs, Loop::Single).await;
    for &n in &workers {
        let a = drain_switchboard(n, jobs, Loop::Single).await;
        let b = drain_switchboard(n, jobs, Loop::Budgeted).await;
        let a10 = drain_switchboard(n, jobs, Loop::Batched).await;
        let (p, p10) = match &peer {
            Some(dir) => (drain_peer(dir, n, jobs, false).await, drain_peer(dir, n, jobs, true).await),
            None => (None, None),
        };
        for (name, run) in [("(a)", Some(a)), ("(b)", Some(b)), ("(a10)", Some(a10)), ("peer", p), ("peer10", p10)] {
            if let Some(run) = run {
                println!(
                    "{n:>8} {name:<6} {:>9.0} {:>11.0} {:>12.1} {:>12.3}",
                    run.jobs_per_second, run.wal_bytes_per_job, run.wal_records_per_job, run.wal_flushes_per_job
                );
            }
        }
        let ratio = |x: Run, y: Run| format!("{:.2}", x.jobs_per_second / y.jobs_per_second);
        let over_peer = p.map_or_else(|| "-".to_string(), |p| ratio(a, p));
        let batched_over_peer = p10.map_or_else(|| "-".to_string(), |p10| ratio(a10, p10));
        let wal_over_peer =
            p.map_or_else(|| "-".to_string(), |p| format!("{:.2}", a.wal_records_per_job / p.wal_records_per_job));
        println!(
            "{n:>8} ratios: (a)/peer {over_peer} (target >= 1.5)   WAL records (a)/peer {wal_over_peer} (<= 1.0)   \
             (a10)/peer10 {batched_over_peer} (>= 1.0)   (b)/(a) {} (>= 0.9)",
            ratio(b, a)
        );
    }
}

/// One drain: its rate and the WAL it wrote, per job.
#[derive(Clone, Copy)]
struct Run {
    jobs_per_second: f64,
    wal_bytes_per_job: f64,
    wal_records_per_job: f64,
    wal_flushes_per_job: f64,
}

/// The cluster's WAL counters (`pg_stat_wal`): bytes, records and flushes to disk.
async fn wal_now() -> (f64, f64, f64) {
    let url = engine::testing::cluster().tcp_url("postgres").expect("test clusters listen on TCP");
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await.expect("connect");
    // Backends report their WAL counters when they exit (and now and then while they run): the
    // readings come after the set-up's and the run's connections have closed, and a moment more.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    sqlx::query_as("SELECT wal_bytes::float8, wal_records::float8, wal_sync::float8 FROM pg_stat_wal")
        .fetch_one(&mut conn)
        .await
        .expect("pg_stat_wal")
}

impl Run {
    /// A drain of `jobs` that took `seconds`, between two WAL readings (bytes, records, flushes).
    fn of(jobs: i64, seconds: f64, before: (f64, f64, f64), after: (f64, f64, f64)) -> Run {
        let per_job = |x: f64, y: f64| (x - y) / jobs as f64;
        Run {
            jobs_per_second: jobs as f64 / seconds,
            wal_bytes_per_job: per_job(after.0, before.0),
            wal_records_per_job: per_job(after.1, before.1),
            wal_flushes_per_job: per_job(after.2, before.2),
        }
    }
}

/// How a drain's claimers claim: one at a time on a queue without a policy or with a budget that
/// never binds, or in batches of `BATCH` without a policy.
#[derive(Clone, Copy, PartialEq)]
enum Loop {
    Single,
    Budgeted,
    Batched,
}

/// `workers` claimers draining `jobs` todos the way `how` says.
async fn drain_switchboard(workers: usize, jobs: i64, how: Loop) -> Run {
    let budgeted = how == Loop::Budgeted;
    let db = fresh_database().await;
    let settings = PoolSettings {
        connections_max: workers as u32 + 4,
        acquire_timeout: Duration::from_secs(60),
        ..PoolSettings::default()
    };
    // Seeded through a pool of its own, closed before the first WAL reading: a connection that
    // stays open may report its WAL counters seconds later, inside the drain.
    let seeding = PgStore::connect(&db.url, PoolSettings::default(), Arc::new(SystemClock)).await.expect("seed");
    let (actor, granted) = seed(&seeding, jobs, budgeted).await;
    seeding.pool().close().await;
    let endpoint_id = actor.endpoint_id().expect("an agent").to_string();
    let store = PgStore::connect(&db.url, settings, Arc::new(SystemClock)).await.expect("connect");
    let watcher = PgStore::connect(&db.url, PoolSettings::default(), Arc::new(SystemClock)).await.expect("watch");
    let before = wal_now().await;
    let started = Instant::now();
    let claimers: Vec<_> = (0..workers)
        .map(|_| {
            let (store, actor, granted) = (store.clone(), actor.clone(), granted.clone());
            tokio::spawn(async move {
                if how == Loop::Batched {
                    loop {
                        let many = store.claim_next_many(&actor, &granted, 300, BATCH).await.expect("claim many");
                        if many.claimed.is_empty() {
                            break;
                        }
                        let ids: Vec<String> = many.claimed.into_iter().map(|claimed| claimed.todo.id).collect();
                        store.complete_many(&actor, &ids, None).await.expect("complete many");
                    }
                    return;
                }
                while let ClaimNext::Claimed(claimed) = store.claim_next(&actor, &granted, 300).await.expect("claim") {
                    store.complete(&actor, &claimed.todo.id, None).await.expect("complete");
                }
            })
        })
        .collect();
    loop {
        // Asked through the claim scan's partial index (not done, this endpoint's queue), and
        // only whether one is left: the poll must not cost the drain it times.
        let left: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM todos WHERE endpoint_id = $1 AND queue = 'work' AND state <> 'done')",
        )
        .bind(&endpoint_id)
        .fetch_one(watcher.pool())
        .await
        .expect("count");
        if !left {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    for claimer in claimers {
        claimer.await.expect("claimer");
    }
    watcher.pool().close().await;
    store.pool().close().await;
    let after = wal_now().await;
    engine::testing::drop_database(&db).await;
    Run::of(jobs, seconds, before, after)
}

/// A human, an endpoint with one queue `work` (budgeted or not) and `jobs` pending todos.
async fn seed(store: &PgStore, jobs: i64, budgeted: bool) -> (Actor, Vec<QueueIdentity>) {
    let endpoint = bench_endpoint(store, &["work".to_string()], budgeted.then_some("work")).await;
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, created_at, updated_at) \
         SELECT 'td_' || replace(gen_random_uuid()::text, '-', ''), $1, 'work', 'noop', 'system', \
                now() - interval '1 hour' + make_interval(secs => n / 1000.0), now() \
         FROM generate_series(1, $2) AS n",
    )
    .bind(&endpoint.id)
    .bind(jobs)
    .execute(store.pool())
    .await
    .expect("todos");
    // The todos seeded, not `todo_attempts`: analysed while empty, it would get plans that scan it
    // whole on every claim and complete until autovacuum analyses it again, a state no deployment
    // reaches by itself (docs/benchmarks.md, "The attempts table's statistics").
    sqlx::query("ANALYZE todos").execute(store.pool()).await.expect("analyze");
    (endpoint.actor, endpoint.granted)
}

/// graphile-worker draining `jobs` (in its batched mode when `batched`) on an empty database of the same cluster (the driver reads the
/// WAL counters around its drain), or None, with the reason on stderr, when node or it fails.
async fn drain_peer(node_modules: &std::path::Path, workers: usize, jobs: i64, batched: bool) -> Option<Run> {
    let db = empty_database().await;
    let output = tokio::process::Command::new("node")
        .arg(PEER_SCRIPT)
        .arg(&db.url)
        .arg(workers.to_string())
        .arg(jobs.to_string())
        .args(batched.then_some("batched"))
        .env("NODE_PATH", node_modules)
        .output()
        .await;
    engine::testing::drop_database(&db).await;
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            eprintln!("graphile-worker drain failed: {}", String::from_utf8_lossy(&output.stderr));
            return None;
        }
        Err(error) => {
            eprintln!("cannot run node: {error}");
            return None;
        }
    };
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let reading = |key: &str| -> Option<(f64, f64, f64)> {
        let wal = &report[key];
        Some((wal["bytes"].as_f64()?, wal["records"].as_f64()?, wal["flushes"].as_f64()?))
    };
    Some(Run::of(jobs, report["seconds"].as_f64()?, reading("wal_before")?, reading("wal_after")?))
}
