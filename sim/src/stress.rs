//! The real-concurrency stress run (design.md "Real concurrency"; SPEC-0030 REQ-13's race gate):
//! several server replicas on ONE throwaway PostgreSQL, no simulated world, real sockets and real time,
//! which is what catches read-then-write races in the database protocol.
//!
//! Replicas: `in_process_replicas` tokio tasks, each its own `PgStore` (own pool, `SystemClock`)
//! serving the production router with the sweeps running, and `process_replicas` separate
//! `switchboard serve` processes. Agents: `claimers` tasks speaking MCP over HTTP to the replicas
//! round-robin, through several endpoints that drain one team's queues (so the holders differ) and
//! each endpoint's own unbudgeted queue of the same name as a budgeted team queue (REQ-2). They
//! claim (`claim_next`, and `claim` of a named todo, often a lapsed one), then complete, fail,
//! release, abandon (the lease lapses, the reapers or another claim take over) or finish too
//! late. An owner raises or re-saves the team's policies meanwhile, and a producer keeps adding
//! todos. Afterwards the run waits for quiescence and `sql_invariants::check` judges what the
//! database holds.
//!
//! Policy edits only ever raise or keep limits and never change a window's definition, so the
//! window limit "as it stood" is never below an earlier one and every claim's window is the same
//! under every version (the checker still allows for either; see `sql_invariants`).
//!
//! The in-process replicas' store is built in one place, `in_process_store`, and handed through
//! a `StoreHook`, so a caller can run the same stress against a deliberately broken engine.

mod agents;
mod injected;
mod push;
mod replicas;

pub use injected::FaultPlan;
pub use push::{PushPlan, PushVerdict};
pub use replicas::switchboard_binary;

use crate::sql_invariants::{self, InvariantReport};
use agents::{World, claim_loop, edit_policies, produce};
use engine::{PgStore, PoolSettings};
use models::store::{Store, SystemClock};
use replicas::Replicas;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Unexpected errors kept verbatim in the report; the rest are counted.
const UNEXPECTED_KEPT_MAX: usize = 50;
/// Concurrent requests while creating the initial todos.
const CREATE_CONCURRENCY: usize = 8;
/// The `/metrics` bearer the process replicas are started with (at least 32 bytes).
const METRICS_TOKEN: &str = "stress-metrics-token-0123456789abcdef";
/// How long a process replica may take to print its listening line.
const PROCESS_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Retries of a rate-limited policy edit.
const EDIT_RETRIES_MAX: usize = 5;

/// One team queue of the mix: its name, its policy (None: no policy) and its share of the todos.
#[derive(Debug, Clone)]
pub struct QueuePlan {
    pub name: String,
    pub policy: Option<Value>,
    pub todo_share: u32,
}

#[derive(Debug, Clone)]
pub struct StressConfig {
    pub claimers: usize,
    /// Todos created in all (60 % before the claimers start, the rest while they work).
    pub todos: usize,
    /// The team queues.
    pub queues: Vec<QueuePlan>,
    /// Each endpoint's own queue (no policy), named like a budgeted team queue, and its share of
    /// the todos (per endpoint).
    pub own_queue: Option<(String, u32)>,
    /// Endpoints draining the team queues; claimer i works as endpoint i % endpoints.
    pub endpoints: usize,
    pub in_process_replicas: usize,
    pub process_replicas: usize,
    /// Policy saves by the owner during the run (raise or keep; never lower, never a new window).
    pub policy_edits: usize,
    /// How long the claimers work.
    pub run_for: Duration,
    pub lease_seconds: i64,
    /// Every replica's sweep tick (processes take whole seconds, at least 1).
    pub reaper_interval: Duration,
    pub pool_connections_max: u32,
    pub seed: u64,
    /// Listeners whose doorbells are judged (issue #51); None: push is not judged.
    pub push: Option<PushPlan>,
    /// Faults injected while the agents work (issue #51); None: none.
    pub faults: Option<FaultPlan>,
}

impl StressConfig {
    /// The mix the brief asks for, at a scale that runs in seconds on two cores in debug.
    pub fn small() -> StressConfig {
        StressConfig {
            claimers: 16,
            todos: 300,
            queues: vec![
                QueuePlan {
                    name: "metered".into(),
                    // Asia/Kolkata is UTC+05:30, so its local hours start at :30 UTC.
                    policy: Some(json!({"max_in_flight": null, "max_claims_per_window": 10,
                        "window": {"period": "hour", "tz": "Asia/Kolkata", "start": "00:00"}})),
                    todo_share: 2,
                },
                QueuePlan { name: "capped".into(), policy: Some(json!({"max_in_flight": 2})), todo_share: 2 },
                QueuePlan {
                    name: "both".into(),
                    // Issue #52: a per-minute limit beside the day, judged per window.
                    policy: Some(json!({"max_in_flight": 3, "max_claims_per_window": 30,
                        "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"},
                        "additional_windows": [{"max_claims": 8, "window": {"period": "minute"}}]})),
                    todo_share: 2,
                },
                QueuePlan { name: "free".into(), policy: None, todo_share: 3 },
            ],
            own_queue: Some(("metered".into(), 1)),
            endpoints: 4,
            in_process_replicas: 2,
            process_replicas: 2,
            policy_edits: 6,
            run_for: Duration::from_secs(8),
            lease_seconds: 1,
            reaper_interval: Duration::from_secs(1),
            pool_connections_max: 8,
            seed: 30,
            push: None,
            faults: None,
        }
    }

    /// The push stress the mutant hunt runs: listeners and the mix, no faults, every replica in
    /// process (so every push pass runs the seeded bug, which the processes' binary cannot).
    pub fn push_hunt() -> StressConfig {
        StressConfig {
            run_for: Duration::from_secs(14),
            in_process_replicas: 3,
            process_replicas: 0,
            // The rollover round waits for a minute's turn: the hunt's runs stay short without it.
            push: Some(PushPlan { rollover: false, ..PushPlan::small() }),
            faults: None,
            seed: 51,
            ..StressConfig::small()
        }
    }

    /// The push stress (issue #51): the small mix with listeners whose doorbells are judged, a
    /// replica process killed and started again, the database crashed and restarted, and
    /// clients that hang up mid-request. Longer, so each listener sees several reopenings.
    pub fn push_and_faults() -> StressConfig {
        StressConfig {
            run_for: Duration::from_secs(24),
            policy_edits: 8,
            push: Some(PushPlan::small()),
            faults: Some(FaultPlan::small()),
            seed: 51,
            ..StressConfig::small()
        }
    }
}

/// What the agents saw, and what the database holds afterwards.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Claims answered with a todo (claim_next and named claims).
    pub claims: u64,
    pub named_claims: u64,
    pub completes: u64,
    pub fails: u64,
    pub releases: u64,
    /// Claims left to lapse on purpose.
    pub abandoned: u64,
    /// complete/fail after the lease lapsed that the server refused (the todo had moved on).
    pub stale_refused: u64,
    /// Named claims that lost the todo to another claimer (`conflict`).
    pub claim_conflicts: u64,
    /// Refusals seen: each `deferred` entry of an empty claim_next, each `deferred` error.
    pub refusals: u64,
    pub refusals_by_reason: BTreeMap<String, u64>,
    pub refusals_by_queue: BTreeMap<String, u64>,
    /// Keyed `team/QUEUE` or `own/QUEUE`.
    pub claims_by_queue: BTreeMap<String, u64>,
    pub policy_edits: u64,
    pub todos_created: u64,
    /// Requests that got no HTTP answer at all.
    pub transport_errors: u64,
    /// Answers no agent should get (internal, unavailable, a malformed answer …).
    pub unexpected: Vec<String>,
    pub unexpected_count: u64,
    /// The push part (`PushPlan`): todos its bursts created, creates a fault refused (503, so
    /// never acknowledged), and the gates' acknowledged policy changes.
    pub push_todos_created: u64,
    pub push_refused_by_faults: u64,
    pub push_gate_changes: u64,
    /// Gate reopenings made while the listener's session row was held past the lock timeout.
    pub push_sessions_blocked: u64,
    /// Requests a client gave up on mid-flight (`FaultPlan::aborted_requests`).
    pub aborted_requests: u64,
    /// Answers `unavailable` (503, REQ-9: fail closed): expected only while a fault keeps the
    /// database away, so a run without faults requires none.
    pub unavailable: u64,
}

impl Tally {
    fn unexpected(&mut self, what: String) {
        self.unexpected_count += 1;
        if self.unexpected.len() < UNEXPECTED_KEPT_MAX {
            self.unexpected.push(what);
        }
    }

    fn refused(&mut self, queue: &str, reason: &str) {
        self.refusals += 1;
        *self.refusals_by_reason.entry(reason.to_string()).or_default() += 1;
        *self.refusals_by_queue.entry(queue.to_string()).or_default() += 1;
    }
}

#[derive(Debug, Clone)]
pub struct StressReport {
    pub tally: Tally,
    /// `sql_invariants::check` after quiescence; its `violations` are the verdict.
    pub invariants: InvariantReport,
    /// Todos still claimed when quiescence gave up waiting (0 when the reapers caught up).
    pub claimed_at_end: i64,
    /// The replicas' own counters after quiescence, summed: `switchboard_todos_claimed_total`
    /// and `switchboard_admission_charged_total` (scraped from the processes, read from the
    /// in-process stores). None when a scrape failed.
    pub metrics_claimed: Option<u64>,
    pub metrics_charged: Option<u64>,
    /// The group claims the replicas' budgeted `claim_next` calls joined (issue #15, group
    /// admission), and the claimers in them, summed the same way: more claimers than groups
    /// means some transaction claimed for several.
    pub metrics_groups: Option<(u64, u64)>,
    /// The push judge's verdict (None without a `PushPlan`).
    pub push: Option<PushVerdict>,
    /// The faults injected, in the order they were, in words.
    pub faults_injected: Vec<String>,
    pub elapsed: Duration,
}

impl StressReport {
    pub fn takeovers(&self) -> i64 {
        self.invariants.takeovers
    }
}

impl std::fmt::Display for StressReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.tally;
        writeln!(
            f,
            "stress: {:.1?}; claims {} (named {}), completes {}, fails {}, releases {}, abandoned {}, stale refused {}, \
             claim conflicts {}, refusals {} {:?}, takeovers {}, policy edits {}, todos {}, transport errors {}, \
             unavailable {}, unexpected {}",
            self.elapsed,
            t.claims,
            t.named_claims,
            t.completes,
            t.fails,
            t.releases,
            t.abandoned,
            t.stale_refused,
            t.claim_conflicts,
            t.refusals,
            t.refusals_by_reason,
            self.invariants.takeovers,
            t.policy_edits,
            t.todos_created,
            t.transport_errors,
            t.unavailable,
            t.unexpected_count
        )?;
        writeln!(f, "  claims by queue {:?}; refusals by queue {:?}", t.claims_by_queue, t.refusals_by_queue)?;
        writeln!(
            f,
            "  replica counters: claimed {:?}, charged {:?}, (group claims, claimers in them) {:?}; claimed at end {}",
            self.metrics_claimed, self.metrics_charged, self.metrics_groups, self.claimed_at_end
        )?;
        for line in &t.unexpected {
            writeln!(f, "  unexpected: {line}")?;
        }
        if !self.faults_injected.is_empty() || t.aborted_requests > 0 {
            writeln!(
                f,
                "  faults: {}; requests abandoned mid-flight {}",
                self.faults_injected.join("; "),
                t.aborted_requests
            )?;
        }
        if let Some(push) = &self.push {
            writeln!(
                f,
                "  {push}\n  push load: {} burst todos, {} refused by faults, {} gate changes, {} with the session \
                 row held past the lock timeout",
                t.push_todos_created, t.push_refused_by_faults, t.push_gate_changes, t.push_sessions_blocked
            )?;
        }
        write!(f, "  {}", self.invariants)
    }
}

/// Turns each in-process replica's `PgStore` into the store it serves. `Unhooked` serves the
/// production engine as is; a seeded-bug run wraps it.
pub trait StoreHook: Send + Sync + 'static {
    type Store: Store;
    fn wrap(&self, replica: usize, store: PgStore) -> Self::Store;
}

pub struct Unhooked;

impl StoreHook for Unhooked {
    type Store = PgStore;
    fn wrap(&self, _replica: usize, store: PgStore) -> PgStore {
        store
    }
}

/// The one place an in-process replica's store is built: its own pool, the system clock, the
/// sweep tick, then the hook.
pub async fn in_process_store<H: StoreHook>(
    database_url: &str,
    config: &StressConfig,
    replica: usize,
    hook: &H,
) -> Result<H::Store, String> {
    let settings = PoolSettings { connections_max: config.pool_connections_max, ..PoolSettings::default() };
    let store = PgStore::connect(database_url, settings, Arc::new(SystemClock))
        .await
        .map_err(|e| format!("replica {replica}: connect: {e}"))?
        .with_reaper_interval(config.reaper_interval);
    Ok(hook.wrap(replica, store))
}

/// Runs the stress against the production engine. Panics only on setup failures (no database,
/// no binary); everything the run observes is in the report.
pub async fn run(database_url: &str, config: &StressConfig) -> StressReport {
    run_with(database_url, config, &Unhooked).await
}

pub async fn run_with<H: StoreHook>(database_url: &str, config: &StressConfig, hook: &H) -> StressReport {
    let started = Instant::now();
    let binary = tokio::task::spawn_blocking(switchboard_binary)
        .await
        .unwrap_or_else(|e| panic!("locating switchboard: {e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let pool = sqlx::PgPool::connect(database_url).await.unwrap_or_else(|e| panic!("connect {database_url}: {e}"));
    engine::pg_store::MIGRATOR.run(&pool).await.unwrap_or_else(|e| panic!("migrate: {e}"));
    if config.faults.as_ref().is_some_and(|plan| !plan.crash_database_at.is_empty()) {
        injected::durable_commits(&pool).await.unwrap_or_else(|e| panic!("durable commits: {e}"));
    }

    let mut replicas = Replicas::start(&binary, database_url, config, hook).await;
    let world = Arc::new(World::bootstrap(&binary, database_url, config, replicas.bases.clone()).await);
    let listeners = match &config.push {
        Some(plan) => {
            Some(Arc::new(push::Listeners::bootstrap(&binary, database_url, replicas.bases.clone(), plan).await))
        }
        None => None,
    };
    let tally = Arc::new(Mutex::new(Tally::default()));
    let targets = world.todo_targets(config);
    let initial = targets.len() * 6 / 10;
    world.create_todos(&targets[..initial], &tally).await;
    // The checker allows a claim near a policy's creation to have run either way; start the
    // claimers past that, so every claim is checked against an exact count.
    let creation_grace = sql_invariants::CheckOptions::default().policy_creation_grace;
    let since_policies = world.policies_saved_at.elapsed();
    let wait = creation_grace.to_std().unwrap_or_default() + Duration::from_millis(300);
    tokio::time::sleep(wait.saturating_sub(since_policies)).await;

    let stop = Arc::new(AtomicBool::new(false));
    let faults = injected::inject(&binary, database_url, config, &mut replicas, listeners.as_deref(), &world, &tally);
    let ((), faults_injected) =
        tokio::join!(run_agents(&world, config, &targets[initial..], &tally, listeners.as_ref(), &stop), faults);
    let claimed_at_end = wait_for_quiescence(&pool, config).await;
    let ReplicaCounters { claimed: metrics_claimed, charged: metrics_charged, groups: metrics_groups } =
        replica_counters(&world, &replicas).await;
    replicas.stop(&tally).await;
    let invariants = sql_invariants::check(&pool).await.unwrap_or_else(|e| panic!("invariant queries failed: {e}"));
    let push = match &listeners {
        Some(listeners) => {
            Some(listeners.judge(&pool).await.unwrap_or_else(|e| panic!("push judge queries failed: {e}")))
        }
        None => None,
    };
    pool.close().await;
    let tally = lock(&tally).clone();
    StressReport {
        tally,
        invariants,
        claimed_at_end,
        metrics_claimed,
        metrics_charged,
        metrics_groups,
        push,
        faults_injected,
        elapsed: started.elapsed(),
    }
}

/// The claimers, the producer (the rest of `targets`, over the first half of the run), the
/// owner's policy edits and the listeners, if any, for `config.run_for`; then `stop` is set and
/// they are joined.
async fn run_agents(
    world: &Arc<World>,
    config: &StressConfig,
    rest: &[(String, String)],
    tally: &Arc<Mutex<Tally>>,
    listeners: Option<&Arc<push::Listeners>>,
    stop: &Arc<AtomicBool>,
) {
    let mut workers = Vec::new();
    if let (Some(listeners), Some(plan)) = (listeners, &config.push) {
        workers.extend(listeners.spawn(plan, config, tally, stop));
    }
    for claimer in 0..config.claimers {
        let (world, tally, stop, config) = (world.clone(), tally.clone(), stop.clone(), config.clone());
        workers.push(tokio::spawn(async move { claim_loop(claimer, &world, &config, &tally, &stop).await }));
    }
    {
        let (world, tally, config) = (world.clone(), tally.clone(), config.clone());
        let rest = rest.to_vec();
        workers.push(tokio::spawn(async move { produce(&world, &rest, config.run_for / 2, &tally).await }));
    }
    {
        let (world, tally, config) = (world.clone(), tally.clone(), config.clone());
        workers.push(tokio::spawn(async move { edit_policies(&world, &config, &tally).await }));
    }
    tokio::time::sleep(config.run_for).await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        if let Err(error) = worker.await {
            lock(tally).unexpected(format!("a stress task panicked: {error}"));
        }
    }
}

/// Quiescence: the abandoned claims lapse and the reapers return them. Returns how many todos
/// are still claimed at the end (0 when quiet; -1 when the count could not be read).
async fn wait_for_quiescence(pool: &sqlx::PgPool, config: &StressConfig) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(config.lease_seconds.max(1) as u64 * 3 + 15);
    let mut claimed_at_end: i64 = -1;
    while Instant::now() < deadline {
        claimed_at_end = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
            .fetch_one(pool)
            .await
            .unwrap_or(-1);
        if claimed_at_end == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    claimed_at_end
}

/// The replicas' counters summed (`StressReport`); each None when a scrape failed.
struct ReplicaCounters {
    claimed: Option<u64>,
    charged: Option<u64>,
    groups: Option<(u64, u64)>,
}

/// Claims, charges and group claims every replica counted since it started: the in-process
/// stores' counters and the processes' `/metrics`.
async fn replica_counters<S: Store>(world: &World, replicas: &Replicas<S>) -> ReplicaCounters {
    let (mut claimed, mut charged, mut groups) = (Some(0), Some(0), Some((0, 0)));
    for store in &replicas.stores {
        let snapshot = store.counters().snapshot();
        claimed = claimed.map(|n| n + snapshot.claimed.values().sum::<u64>());
        charged = charged.map(|n| n + snapshot.charged.values().sum::<u64>());
        groups = groups.map(|(g, c)| (g + snapshot.claim_groups, c + snapshot.claim_group_claimers));
    }
    for process in &replicas.processes {
        let scraped = async {
            let response =
                world.http.get(format!("{}/metrics", process.base)).bearer_auth(METRICS_TOKEN).send().await.ok()?;
            response.status().is_success().then_some(())?;
            response.text().await.ok()
        }
        .await;
        let sum = |series: &str| scraped_sum(scraped.as_deref(), series);
        claimed = claimed.zip(sum("switchboard_todos_claimed_total")).map(|(a, b)| a + b);
        charged = charged.zip(sum("switchboard_admission_charged_total")).map(|(a, b)| a + b);
        let scraped_groups = sum("switchboard_claim_groups_total").zip(sum("switchboard_claim_group_claimers_total"));
        groups = groups.zip(scraped_groups).map(|((g, c), (more_g, more_c))| (g + more_g, c + more_c));
    }
    ReplicaCounters { claimed, charged, groups }
}

/// A series of a scraped `/metrics` text summed over its samples, labelled or not; None when the
/// scrape failed or a value does not parse.
fn scraped_sum(text: Option<&str>, series: &str) -> Option<u64> {
    let samples = text?
        .lines()
        .filter(|line| line.strip_prefix(series).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')));
    samples.map(|line| line.rsplit(' ').next()?.parse::<f64>().ok()).sum::<Option<f64>>().map(|v| v as u64)
}

fn lock(tally: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    // A panicking claimer is reported through its join handle; its tally is still good.
    tally.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
