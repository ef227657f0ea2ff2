//! `ci/bench-intake`: what the intake lock costs on create throughput (intake-capacity.md), and
//! what batching creates gains (issue #15: batched create against single create).
//! 16 concurrent producers create todos into one queue for a fixed time, with capacity 0
//! (unlimited: no lock, no count) and with a capacity set that never binds (the per-identity
//! intake lock, a pending count and the insert in one transaction). Then, with capacity 0, 1 and
//! 16 producers call `create_todos` with batches of 100 and of 1000 (one transaction, one
//! `INSERT` per call), against `create_todo` one at a time by as many producers: todos created
//! per second over the run's wall time, and the ratio batched/single per producer count.
//! Throwaway PostgreSQL, fsync off unless `SWITCHBOARD_TEST_DURABLE=1` (as `ci/bench` sets), a
//! fresh database per run. Titles and payloads are `fake` text
//! from a fixed seed, generated before the clock starts.
//! A benchmark: it prints, it asserts nothing.
//! Usage: cargo run --release -p engine --example bench_intake [-- SECONDS]

#[path = "support/fake_data.rs"]
mod fake_data;

use engine::{PgStore, PoolSettings};
use models::identity::QueueIdentity;
use models::store::prelude::*;
use models::store::{NewEndpoint, SystemClock};
use models::todo::{CreatedByKind, NewTodo};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PRODUCERS: usize = 16;
/// The producer counts of the batched comparison.
const BATCH_PRODUCERS: [usize; 2] = [1, PRODUCERS];
/// The batch sizes of the batched comparison (at most `TODOS_PER_BATCH_MAX`).
const BATCH_SIZES: [usize; 2] = [100, models::limits::TODOS_PER_BATCH_MAX];
/// The seed of the todos' titles and payloads, and how many distinct ones the producers cycle.
const FAKE_SEED: u64 = 14_064;
const SAMPLES: usize = 1_024;

/// How a producer creates: one `create_todo` per todo, or `create_todos` with this many.
#[derive(Debug, Clone, Copy)]
enum Create {
    Single,
    Batched(usize),
}

/// A run's todos created per second (over its wall time) and the latency of one call, in ms.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    rate: f64,
    p50: f64,
    p99: f64,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let duration = Duration::from_secs(seconds);
    let storage = if engine::testing::durable_requested() { "durable: fsync on" } else { "fsync off" };
    println!("bench-intake: {PRODUCERS} concurrent producers, {seconds} s per run, throwaway PostgreSQL ({storage})");
    let mut singles = Vec::new();
    for capacity in [0, 1_000_000] {
        let Outcome { rate, p50, p99 } = run(capacity, PRODUCERS, Create::Single, duration).await;
        println!("capacity {capacity:>7}: {rate:>7.0} creates/s   p50 {p50:.2} ms   p99 {p99:.2} ms");
        singles.push(Outcome { rate, p50, p99 });
    }
    println!("capacity set / capacity 0: {:.3}", singles[1].rate / singles[0].rate);

    println!("batched creates: capacity 0, todos created/s, p50/p99 latency of one call");
    let mut ratios = Vec::new();
    for producers in BATCH_PRODUCERS {
        // The 16-producer single run with capacity 0 is the one above.
        let single = match producers {
            PRODUCERS => singles[0],
            _ => run(0, producers, Create::Single, duration).await,
        };
        print_outcome(producers, "single", &single);
        for size in BATCH_SIZES {
            let batched = run(0, producers, Create::Batched(size), duration).await;
            print_outcome(producers, &format!("batch {size:>4}"), &batched);
            ratios.push((producers, size, batched.rate / single.rate));
        }
    }
    for (producers, size, ratio) in ratios {
        println!("batched({size})/single creates/s, {producers:>2} producers: {ratio:.2}");
    }
}

fn print_outcome(producers: usize, label: &str, outcome: &Outcome) {
    let Outcome { rate, p50, p99 } = outcome;
    println!("{producers:>2} producers, {label:<10}: {rate:>7.0} todos/s   p50 {p50:.2} ms   p99 {p99:.2} ms");
}

fn new_todo(identity: &QueueIdentity, sample: &fake_data::Sample) -> NewTodo {
    NewTodo {
        identity: identity.clone(),
        title: sample.title.clone(),
        payload: Some(sample.payload.clone()),
        idempotency_key: None,
        max_attempts: 5,
        created_by_kind: CreatedByKind::System,
        created_by_id: None,
    }
}

async fn run(capacity: i64, producers: usize, create: Create, duration: Duration) -> Outcome {
    let db = engine::testing::fresh_database().await;
    let settings = PoolSettings {
        connections_max: producers as u32 + 4,
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
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..producers)
        .map(|producer| {
            let (store, identity, samples) = (store.clone(), identity.clone(), samples.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut created = 0;
                // Each producer starts at its own place in the samples, and cycles through them.
                let mut next = producer * SAMPLES / producers;
                while Instant::now() < deadline {
                    match create {
                        Create::Single => {
                            let todo = new_todo(&identity, &samples[next % SAMPLES]);
                            next += 1;
                            let call = Instant::now();
                            store.create_todo(todo).await.expect("create");
                            latencies.push(call.elapsed());
                            created += 1;
                        }
                        Create::Batched(size) => {
                            let batch: Vec<NewTodo> =
                                (next..next + size).map(|at| new_todo(&identity, &samples[at % SAMPLES])).collect();
                            next += size;
                            let call = Instant::now();
                            created += store.create_todos(batch).await.expect("create batch").len();
                            latencies.push(call.elapsed());
                        }
                    }
                }
                (created, latencies)
            })
        })
        .collect();
    let mut created = 0;
    let mut latencies: Vec<Duration> = Vec::new();
    for task in tasks {
        let (made, taken) = task.await.expect("join");
        created += made;
        latencies.extend(taken);
    }
    // The last call ends after the deadline (a batch of 1000 well after): count the time it took.
    let elapsed = started.elapsed();
    store.pool().close().await;
    engine::testing::drop_database(&db).await;
    latencies.sort();
    let quantile = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    Outcome { rate: created as f64 / elapsed.as_secs_f64(), p50: quantile(0.5), p99: quantile(0.99) }
}
