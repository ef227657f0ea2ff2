//! `ci/bench-intake`: what the intake lock costs on create throughput (intake-capacity.md).
//! 16 concurrent producers create todos into one queue for a fixed time, with capacity 0
//! (unlimited: no lock, no count) and with a capacity set that never binds (the per-identity
//! intake lock, a pending count and the insert in one transaction). Throwaway PostgreSQL, fsync
//! off. Titles and payloads are `fake` text from a fixed seed, generated before the clock starts.
//! A benchmark: it prints, it asserts nothing.
//! Usage: cargo run --release -p engine --example bench_intake [-- SECONDS]

#[path = "support/fake_data.rs"]
mod fake_data;

use engine::{PgStore, PoolSettings};
use models::identity::QueueIdentity;
use models::store::{NewEndpoint, Store, SystemClock};
use models::todo::{CreatedByKind, NewTodo};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PRODUCERS: usize = 16;
/// The seed of the todos' titles and payloads, and how many distinct ones the producers cycle.
const FAKE_SEED: u64 = 14_064;
const SAMPLES: usize = 1_024;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    println!("bench-intake: {PRODUCERS} concurrent producers, {seconds} s per run, throwaway PostgreSQL (fsync off)");
    let mut rates = Vec::new();
    for capacity in [0, 1_000_000] {
        let (rate, p50, p99) = run(capacity, Duration::from_secs(seconds)).await;
        println!("capacity {capacity:>7}: {rate:>7.0} creates/s   p50 {p50:.2} ms   p99 {p99:.2} ms");
        rates.push(rate);
    }
    println!("capacity set / capacity 0: {:.3}", rates[1] / rates[0]);
}

async fn run(capacity: i64, duration: Duration) -> (f64, f64, f64) {
    let db = engine::testing::fresh_database().await;
    let settings = PoolSettings {
        connections_max: PRODUCERS as u32 + 4,
        acquire_timeout: Duration::from_secs(30),
        ..PoolSettings::default()
    };
    let store = PgStore::connect(&db.url, settings, Arc::new(SystemClock)).await.expect("connect");
    let (human, _) = store.bootstrap_human("bench", true).await.expect("human");
    let endpoint = store
        .vend_endpoint(NewEndpoint {
            name: "bench".into(),
            owner_human_id: Some(human.id.clone()),
            owner_team_id: None,
            own_queues: vec!["work".into()],
            team_queues: vec![],
            verbs: vec![],
            token_hash: "bench".into(),
            created_by_human_id: None,
        })
        .await
        .expect("vend");
    if capacity > 0 {
        store.set_queue_capacity(capacity, &human.id).await.expect("capacity");
    }
    let identity = QueueIdentity::endpoint(&endpoint.id, "work");
    let samples = Arc::new(fake_data::samples(FAKE_SEED, SAMPLES));
    let deadline = Instant::now() + duration;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| {
            let (store, identity, samples) = (store.clone(), identity.clone(), samples.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                // Each producer starts at its own place in the samples, and cycles through them.
                let mut next = producer * SAMPLES / PRODUCERS;
                while Instant::now() < deadline {
                    let sample = &samples[next % SAMPLES];
                    next += 1;
                    let todo = NewTodo {
                        identity: identity.clone(),
                        title: sample.title.clone(),
                        payload: Some(sample.payload.clone()),
                        idempotency_key: None,
                        max_attempts: 5,
                        created_by_kind: CreatedByKind::System,
                        created_by_id: None,
                    };
                    let started = Instant::now();
                    store.create_todo(todo).await.expect("create");
                    latencies.push(started.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = Vec::new();
    for producer in producers {
        latencies.extend(producer.await.expect("join"));
    }
    store.pool().close().await;
    engine::testing::drop_database(&db).await;
    latencies.sort();
    let quantile = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    (latencies.len() as f64 / duration.as_secs_f64(), quantile(0.5), quantile(0.99))
}
