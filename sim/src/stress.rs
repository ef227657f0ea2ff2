//! The real-concurrency stress run (design.md "Real concurrency"; SPEC-0030 REQ-13's race gate):
//! several server replicas on ONE throwaway PostgreSQL, no turmoil, real sockets and real time,
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

use crate::sql_invariants::{self, InvariantReport};
use engine::{PgStore, PoolSettings};
use models::store::{Store, SystemClock};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use tokio::task::JoinHandle;

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
                    policy: Some(json!({"max_in_flight": 3, "max_claims_per_window": 30,
                        "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}})),
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
             unexpected {}",
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
            t.unexpected_count
        )?;
        writeln!(f, "  claims by queue {:?}; refusals by queue {:?}", t.claims_by_queue, t.refusals_by_queue)?;
        writeln!(
            f,
            "  replica counters: claimed {:?}, charged {:?}; claimed at end {}",
            self.metrics_claimed, self.metrics_charged, self.claimed_at_end
        )?;
        for line in &t.unexpected {
            writeln!(f, "  unexpected: {line}")?;
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

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut replicas: Vec<String> = Vec::new();
    let mut tasks: Vec<JoinHandle<()>> = Vec::new();
    let mut stores: Vec<H::Store> = Vec::new();
    for replica in 0..config.in_process_replicas {
        let store = in_process_store(database_url, config, replica, hook).await.unwrap_or_else(|e| panic!("{e}"));
        stores.push(store.clone());
        let (base, mut handles) = serve_in_process(store, config.reaper_interval, shutdown_rx.clone())
            .await
            .unwrap_or_else(|e| panic!("replica {replica}: {e}"));
        replicas.push(base);
        tasks.append(&mut handles);
    }
    let mut processes = Vec::new();
    for replica in 0..config.process_replicas {
        let process = ProcessReplica::start(&binary, database_url, config)
            .await
            .unwrap_or_else(|e| panic!("process replica {replica}: {e}"));
        replicas.push(process.base.clone());
        processes.push(process);
    }
    assert!(!replicas.is_empty(), "the stress needs at least one replica");

    let world = Arc::new(World::bootstrap(&binary, database_url, config, replicas).await);
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
    let mut workers = Vec::new();
    for claimer in 0..config.claimers {
        let (world, tally, stop, config) = (world.clone(), tally.clone(), stop.clone(), config.clone());
        workers.push(tokio::spawn(async move { claim_loop(claimer, &world, &config, &tally, &stop).await }));
    }
    {
        let (world, tally, config) = (world.clone(), tally.clone(), config.clone());
        let rest = targets[initial..].to_vec();
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
            lock(&tally).unexpected(format!("a stress task panicked: {error}"));
        }
    }

    // Quiescence: the abandoned claims lapse and the reapers return them.
    let deadline = Instant::now() + Duration::from_secs(config.lease_seconds.max(1) as u64 * 3 + 15);
    let mut claimed_at_end: i64 = -1;
    while Instant::now() < deadline {
        claimed_at_end = sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'")
            .fetch_one(&pool)
            .await
            .unwrap_or(-1);
        if claimed_at_end == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (metrics_claimed, metrics_charged) = replica_counters(&world, &stores, &processes).await;
    let _ = shutdown_tx.send(true);
    for task in tasks {
        if tokio::time::timeout(Duration::from_secs(10), task).await.is_err() {
            lock(&tally).unexpected("an in-process replica did not stop within 10 s".into());
        }
    }
    for process in processes {
        if let Err(error) = process.stop().await {
            lock(&tally).unexpected(error);
        }
    }
    let invariants = sql_invariants::check(&pool).await.unwrap_or_else(|e| panic!("invariant queries failed: {e}"));
    pool.close().await;
    let tally = lock(&tally).clone();
    StressReport { tally, invariants, claimed_at_end, metrics_claimed, metrics_charged, elapsed: started.elapsed() }
}

/// Claims and charges every replica counted since it started: the in-process stores' counters
/// and the processes' `/metrics`.
async fn replica_counters<S: Store>(
    world: &World,
    stores: &[S],
    processes: &[ProcessReplica],
) -> (Option<u64>, Option<u64>) {
    let (mut claimed, mut charged) = (Some(0), Some(0));
    for store in stores {
        let snapshot = store.counters().snapshot();
        claimed = claimed.map(|n| n + snapshot.claimed.values().sum::<u64>());
        charged = charged.map(|n| n + snapshot.charged.values().sum::<u64>());
    }
    for process in processes {
        let scraped = async {
            let response =
                world.http.get(format!("{}/metrics", process.base)).bearer_auth(METRICS_TOKEN).send().await.ok()?;
            response.status().is_success().then_some(())?;
            response.text().await.ok()
        }
        .await;
        let sum = |text: &Option<String>, series: &str| -> Option<u64> {
            let text = text.as_ref()?;
            let values = text.lines().filter(|line| line.starts_with(series) && line[series.len()..].starts_with('{'));
            values.map(|line| line.rsplit(' ').next()?.parse::<f64>().ok()).sum::<Option<f64>>().map(|v| v as u64)
        };
        claimed = claimed.zip(sum(&scraped, "switchboard_todos_claimed_total")).map(|(a, b)| a + b);
        charged = charged.zip(sum(&scraped, "switchboard_admission_charged_total")).map(|(a, b)| a + b);
    }
    (claimed, charged)
}

fn lock(tally: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    // A panicking claimer is reported through its join handle; its tally is still good.
    tally.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves the production router over `store` on 127.0.0.1:0 with the sweeps running, both
/// stopping when `shutdown` turns true.
async fn serve_in_process<S: Store>(
    store: S,
    reaper_interval: Duration,
    shutdown: watch::Receiver<bool>,
) -> Result<(String, Vec<JoinHandle<()>>), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let sweeps = engine::sweeps::spawn(store.clone(), reaper_interval, shutdown.clone());
    let app = server::app::router(server::app::AppState::new(store));
    let mut graceful = shutdown;
    let serving = tokio::spawn(async move {
        let served = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = graceful.wait_for(|stop| *stop).await;
        });
        if let Err(error) = served.await {
            tracing::warn!(%error, "in-process replica stopped with an error");
        }
    });
    Ok((format!("http://{address}"), vec![sweeps, serving]))
}

/// A `switchboard serve` child process.
struct ProcessReplica {
    child: tokio::process::Child,
    base: String,
}

impl ProcessReplica {
    async fn start(binary: &Path, database_url: &str, config: &StressConfig) -> Result<ProcessReplica, String> {
        let reaper_seconds = config.reaper_interval.as_secs().max(1).to_string();
        let pool_size = config.pool_connections_max.max(2).to_string();
        let mut child = tokio::process::Command::new(binary)
            .args(["serve", "--database-url", database_url, "--listen", "127.0.0.1:0"])
            .args(["--reaper-interval", &reaper_seconds, "--pool-size", &pool_size])
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "warn")
            .env("SWITCHBOARD_METRICS_TOKEN", METRICS_TOKEN)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let listening = tokio::time::timeout(PROCESS_START_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(base) = line.strip_prefix("switchboard listening on ") {
                    return Some(base.to_string());
                }
            }
            None
        })
        .await;
        let Ok(Some(base)) = listening else {
            let _ = child.kill().await;
            return Err("switchboard serve did not print its listening line".into());
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(ProcessReplica { child, base })
    }

    /// SIGTERM (graceful stop), then SIGKILL if it takes longer than 20 s.
    async fn stop(mut self) -> Result<(), String> {
        let Some(pid) = self.child.id() else { return Ok(()) };
        let _ = tokio::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
        match tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("switchboard serve (pid {pid}) exited with {status}")),
            Ok(Err(error)) => Err(format!("waiting for pid {pid}: {error}")),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!("switchboard serve (pid {pid}) ignored SIGTERM for 20 s"))
            }
        }
    }
}

/// The `switchboard` binary: `SWITCHBOARD_BIN`, else in the profile directory of the running
/// executable: target/PROFILE/switchboard next to a test (target/PROFILE/deps/TEST) or next to
/// the `sim` CLI (target/PROFILE/sim). `cargo test --workspace` builds it; `cargo test -p sim`
/// does not, so when it is missing, or older than the sources it is built from, it is built here
/// with `$CARGO build -p server --bin switchboard` into the same target directory (cargo holds
/// no build lock while tests run).
pub fn switchboard_binary() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var("SWITCHBOARD_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let exe_dir = exe.parent().ok_or_else(|| format!("{} has no directory", exe.display()))?;
    let profile_dir = if exe_dir.file_name().is_some_and(|name| name == "deps") {
        exe_dir.parent().ok_or_else(|| format!("{} has no profile directory", exe.display()))?
    } else {
        exe_dir
    };
    let binary = profile_dir.join("switchboard");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("sim has no parent directory")?;
    let built_at = std::fs::metadata(&binary).and_then(|m| m.modified()).ok();
    // What the binary is compiled from (tests and benches are not).
    let sources = ["models/src", "engine/src", "server/src", "migrations"].map(|dir| workspace.join(dir));
    let newest_source = sources.iter().filter_map(|dir| newest_modification(dir, 0)).max();
    let why = match (built_at, newest_source) {
        (None, _) => "is missing",
        (Some(built), Some(source)) if source > built => "is older than its sources",
        _ => return Ok(binary),
    };
    let target_dir = profile_dir.parent().ok_or("the profile directory has no parent")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("stress: {} {why}; running `{cargo} build -p server --bin switchboard`", binary.display());
    let mut command = std::process::Command::new(&cargo);
    command
        .args(["build", "-p", "server", "--bin", "switchboard"])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(workspace);
    if profile_dir.file_name().is_some_and(|name| name == "release") {
        command.arg("--release");
    }
    let status = command.status().map_err(|e| format!("run {cargo}: {e}"))?;
    if !status.success() || !binary.is_file() {
        return Err(format!("`{cargo} build -p server --bin switchboard` failed ({status})"));
    }
    Ok(binary)
}

/// The latest modification time of any file under `path` (a few directory levels deep).
fn newest_modification(path: &Path, depth: usize) -> Option<std::time::SystemTime> {
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_dir() {
        return metadata.modified().ok();
    }
    if depth > 6 {
        return None;
    }
    std::fs::read_dir(path).ok()?.filter_map(Result::ok).filter_map(|e| newest_modification(&e.path(), depth + 1)).max()
}

struct Endpoint {
    slug: String,
    token: String,
}

/// Everything the agents, the producer and the owner share.
struct World {
    http: reqwest::Client,
    replicas: Vec<String>,
    owner_token: String,
    team_slug: String,
    endpoints: Vec<Endpoint>,
    /// The policies as last saved, by team queue name.
    policies: Mutex<BTreeMap<String, Value>>,
    policies_saved_at: Instant,
}

/// An MCP tool's answer.
enum Tool {
    Ok(Value),
    Refused { code: String, content: Value },
    Failed(String),
}

impl World {
    /// The owner (`switchboard admin human add`), the team (`admin team add`), the endpoints
    /// (vended over the API) and the policies (PUT over the API).
    async fn bootstrap(binary: &Path, database_url: &str, config: &StressConfig, replicas: Vec<String>) -> World {
        let human = admin(binary, &["human", "add", "stress-owner", "--database-url", database_url]).await;
        let team =
            admin(binary, &["team", "add", "pool", "--owner", "stress-owner", "--database-url", database_url]).await;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("reqwest client");
        let mut world = World {
            http,
            replicas,
            owner_token: human["token"].as_str().expect("token").to_string(),
            team_slug: team["slug"].as_str().expect("team slug").to_string(),
            endpoints: Vec::new(),
            policies: Mutex::new(BTreeMap::new()),
            policies_saved_at: Instant::now(),
        };
        for plan in &config.queues {
            if let Some(policy) = &plan.policy {
                let (status, body) = world.put_policy(0, &plan.name, policy).await;
                assert_eq!(status, 200, "PUT policy {}: {body}", plan.name);
                lock_policies(&world).insert(plan.name.clone(), policy.clone());
            }
        }
        world.policies_saved_at = Instant::now();
        for i in 0..config.endpoints.max(1) {
            let mut queues: Vec<String> =
                config.queues.iter().map(|q| format!("team:{}/{}", world.team_slug, q.name)).collect();
            if let Some((own, _)) = &config.own_queue {
                queues.push(own.clone());
            }
            let base = &world.replicas[i % world.replicas.len()];
            let (status, body) = world
                .send(
                    reqwest::Method::POST,
                    &format!("{base}/api/v1/endpoints"),
                    &world.owner_token,
                    Some(json!({"name": format!("worker-{i}"), "queues": queues})),
                )
                .await
                .unwrap_or_else(|e| panic!("vend: {e}"));
            assert_eq!(status, 201, "vend: {body}");
            world.endpoints.push(Endpoint {
                slug: body["slug"].as_str().expect("slug").to_string(),
                token: body["token"].as_str().expect("token").to_string(),
            });
        }
        world
    }

    /// (scope, queue) of every todo to create, interleaved across queues.
    fn todo_targets(&self, config: &StressConfig) -> Vec<(String, String)> {
        let mut shares: Vec<((String, String), u32)> = config
            .queues
            .iter()
            .map(|q| ((format!("team:{}", self.team_slug), q.name.clone()), q.todo_share))
            .collect();
        if let Some((own, share)) = &config.own_queue {
            for endpoint in &self.endpoints {
                shares.push(((format!("endpoint:{}", endpoint.slug), own.clone()), *share));
            }
        }
        let total: u32 = shares.iter().map(|s| s.1).sum::<u32>().max(1);
        let mut per_target: Vec<(usize, (String, String))> = shares
            .into_iter()
            .map(|(target, share)| (config.todos * share as usize / total as usize, target))
            .collect();
        let mut targets = Vec::with_capacity(config.todos);
        while per_target.iter().any(|(left, _)| *left > 0) {
            for (left, target) in per_target.iter_mut().filter(|(left, _)| *left > 0) {
                *left -= 1;
                targets.push(target.clone());
            }
        }
        targets
    }

    async fn create_todos(&self, targets: &[(String, String)], tally: &Mutex<Tally>) {
        for (chunk_index, chunk) in targets.chunks(CREATE_CONCURRENCY).enumerate() {
            let creates = chunk
                .iter()
                .enumerate()
                .map(|(i, target)| self.create_todo(chunk_index * CREATE_CONCURRENCY + i, target, tally));
            futures::future::join_all(creates).await;
        }
    }

    async fn create_todo(&self, n: usize, (scope, queue): &(String, String), tally: &Mutex<Tally>) {
        let base = &self.replicas[n % self.replicas.len()];
        let body = json!({"scope": scope, "queue": queue, "title": format!("stress {n}"), "max_attempts": 4});
        match self.send(reqwest::Method::POST, &format!("{base}/api/v1/todos"), &self.owner_token, Some(body)).await {
            Ok((201, _)) => lock(tally).todos_created += 1,
            Ok((status, body)) => lock(tally).unexpected(format!("create todo: {status} {body}")),
            Err(_) => lock(tally).transport_errors += 1,
        }
    }

    async fn put_policy(&self, n: usize, queue: &str, policy: &Value) -> (u16, Value) {
        let base = &self.replicas[n % self.replicas.len()];
        let url = format!("{base}/api/v1/admission/team:{}/{queue}", self.team_slug);
        self.send(reqwest::Method::PUT, &url, &self.owner_token, Some(policy.clone()))
            .await
            .unwrap_or_else(|e| (0, json!(e)))
    }

    async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        token: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        let mut request = self.http.request(method, url).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// One `tools/call` on `base`'s `/mcp/{slug}`.
    async fn tool(&self, base: &str, endpoint: &Endpoint, name: &str, arguments: Value) -> Tool {
        let url = format!("{base}/mcp/{}", endpoint.slug);
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        match self.send(reqwest::Method::POST, &url, &endpoint.token, Some(call)).await {
            Err(error) => Tool::Failed(error),
            Ok((200, answer)) => {
                let result = &answer["result"];
                let content = result["structuredContent"].clone();
                match result["isError"].as_bool() {
                    Some(false) => Tool::Ok(content),
                    Some(true) => Tool::Refused { code: content["code"].as_str().unwrap_or("").to_string(), content },
                    None => Tool::Failed(format!("{name}: not a tool result: {answer}")),
                }
            }
            Ok((status, answer)) => Tool::Failed(format!("{name}: HTTP {status} {answer}")),
        }
    }
}

/// Runs `switchboard admin ARGS` and returns its JSON answer.
async fn admin(binary: &Path, args: &[&str]) -> Value {
    let output = tokio::process::Command::new(binary)
        .arg("admin")
        .args(args)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap_or_else(|e| panic!("run switchboard admin {args:?}: {e}"));
    assert!(output.status.success(), "switchboard admin {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("switchboard admin {args:?} printed no JSON: {e}"))
}

/// `team/QUEUE` or `own/QUEUE` for a todo or a deferred entry.
fn queue_key(item: &Value) -> String {
    let kind = if item["scope"].as_str().is_some_and(|s| s.starts_with("team:")) { "team" } else { "own" };
    format!("{kind}/{}", item["queue"].as_str().unwrap_or("?"))
}

/// One agent: claim, then do something with the claim, until `stop`.
async fn claim_loop(claimer: usize, world: &World, config: &StressConfig, tally: &Mutex<Tally>, stop: &AtomicBool) {
    // The agents' choices are seeded (the run itself is not deterministic: real threads, real time).
    let mut choices = crate::faults::Rng::new(config.seed.wrapping_mul(1_000_003).wrapping_add(claimer as u64));
    let endpoint = &world.endpoints[claimer % world.endpoints.len()];
    let lease = config.lease_seconds;
    let mut step = claimer;
    while !stop.load(Ordering::SeqCst) {
        step += 1;
        let base = &world.replicas[step % world.replicas.len()];
        let claimed = if choices.below(100) < 15 {
            named_claim(world, base, endpoint, lease, &mut choices, tally).await
        } else {
            match world.tool(base, endpoint, "claim_next", json!({"lease_ttl_seconds": lease})).await {
                Tool::Ok(answer) if answer["empty"] == json!(false) => Some(answer["todo"].clone()),
                Tool::Ok(answer) => {
                    let mut tally = lock(tally);
                    for entry in answer["deferred"].as_array().into_iter().flatten() {
                        tally.refused(&queue_key(entry), entry["reason"].as_str().unwrap_or("?"));
                    }
                    None
                }
                outcome => {
                    unexpected(tally, "claim_next", outcome);
                    None
                }
            }
        };
        let Some(todo) = claimed else {
            tokio::time::sleep(Duration::from_millis(40 + choices.below(80))).await;
            continue;
        };
        {
            let mut tally = lock(tally);
            tally.claims += 1;
            *tally.claims_by_queue.entry(queue_key(&todo)).or_default() += 1;
        }
        let id = todo["id"].as_str().unwrap_or_default().to_string();
        tokio::time::sleep(Duration::from_millis(choices.below(20))).await;
        let base = &world.replicas[(step + 1) % world.replicas.len()];
        let verb = match choices.below(100) {
            0..68 => "complete",
            68..75 => "fail",
            75..83 => "release",
            83..93 => {
                lock(tally).abandoned += 1;
                continue;
            }
            _ => {
                // A worker too slow for its lease: by now the reaper or another claimer may
                // have taken the todo, and finishing it must then be refused.
                tokio::time::sleep(Duration::from_millis(lease.max(0) as u64 * 1000 + 400)).await;
                "complete"
            }
        };
        match world.tool(base, endpoint, verb, json!({"id": id})).await {
            Tool::Ok(_) => {
                let mut tally = lock(tally);
                match verb {
                    "complete" => tally.completes += 1,
                    "fail" => tally.fails += 1,
                    _ => tally.releases += 1,
                }
            }
            // The lease lapsed before the call: the todo was reaped or taken over meanwhile.
            Tool::Refused { code, .. } if code == "conflict" => lock(tally).stale_refused += 1,
            outcome => unexpected(tally, verb, outcome),
        }
    }
}

/// `claim` of a named todo: a lapsed claim when the listing shows one (a takeover through the
/// blocking path), else a pending todo (which a deferred queue refuses).
async fn named_claim(
    world: &World,
    base: &str,
    endpoint: &Endpoint,
    lease: i64,
    choices: &mut crate::faults::Rng,
    tally: &Mutex<Tally>,
) -> Option<Value> {
    let now = chrono::Utc::now();
    let mut candidates = Vec::new();
    for state in ["claimed", "pending"] {
        match world.tool(base, endpoint, "list_todos", json!({"state": state, "limit": 50})).await {
            Tool::Ok(answer) => {
                candidates = answer["todos"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| {
                        state == "pending"
                            || t["lease_expires_at"]
                                .as_str()
                                .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                                .is_some_and(|at| at < now)
                    })
                    .filter_map(|t| Some((t["id"].as_str()?.to_string(), queue_key(t))))
                    .collect();
            }
            outcome => unexpected(tally, "list_todos", outcome),
        }
        if !candidates.is_empty() {
            break;
        }
    }
    if candidates.is_empty() {
        return None;
    }
    let (id, key) = &candidates[choices.below(candidates.len() as u64) as usize];
    match world.tool(base, endpoint, "claim", json!({"id": id, "lease_ttl_seconds": lease})).await {
        Tool::Ok(answer) => {
            lock(tally).named_claims += 1;
            Some(answer["todo"].clone())
        }
        Tool::Refused { code, content } if code == "deferred" => {
            // The error names the queue but not its scope; the listing had both.
            lock(tally).refused(key, content["reason"].as_str().unwrap_or("?"));
            None
        }
        Tool::Refused { code, .. } if code == "conflict" => {
            lock(tally).claim_conflicts += 1;
            None
        }
        outcome => {
            unexpected(tally, "claim", outcome);
            None
        }
    }
}

fn unexpected(tally: &Mutex<Tally>, verb: &str, outcome: Tool) {
    let mut tally = lock(tally);
    match outcome {
        Tool::Ok(answer) => tally.unexpected(format!("{verb}: unexpected answer {answer}")),
        Tool::Refused { content, .. } => tally.unexpected(format!("{verb}: {content}")),
        Tool::Failed(error) if error.contains("HTTP") || error.contains("not a tool result") => {
            tally.unexpected(format!("{verb}: {error}"))
        }
        Tool::Failed(_) => tally.transport_errors += 1,
    }
}

/// Creates the remaining todos evenly over `spread`.
async fn produce(world: &World, targets: &[(String, String)], spread: Duration, tally: &Mutex<Tally>) {
    let pause = spread.checked_div(targets.len().max(1) as u32).unwrap_or_default();
    for (i, target) in targets.iter().enumerate() {
        world.create_todo(10_000 + i, target, tally).await;
        tokio::time::sleep(pause).await;
    }
}

/// The owner's edits, spread over the run: raise the window limit by 2, raise the in-flight cap
/// by 1 (at most once per queue), or save the policy unchanged. Never lower, never a new window.
async fn edit_policies(world: &World, config: &StressConfig, tally: &Mutex<Tally>) {
    let budgeted: Vec<String> = lock_policies(world).keys().cloned().collect();
    if budgeted.is_empty() || config.policy_edits == 0 {
        return;
    }
    let pause = config.run_for.checked_div(config.policy_edits as u32 + 1).unwrap_or_default();
    let mut raised_in_flight: Vec<String> = Vec::new();
    for edit in 0..config.policy_edits {
        tokio::time::sleep(pause).await;
        let queue = &budgeted[edit % budgeted.len()];
        let mut policy = lock_policies(world)[queue].clone();
        if edit % 4 != 3 {
            if let Some(max) = policy["max_claims_per_window"].as_i64() {
                policy["max_claims_per_window"] = json!(max + 2);
            } else if let Some(max) = policy["max_in_flight"].as_i64()
                && !raised_in_flight.contains(queue)
            {
                policy["max_in_flight"] = json!(max + 1);
                raised_in_flight.push(queue.clone());
            }
        }
        for attempt in 0..=EDIT_RETRIES_MAX {
            let (status, body) = world.put_policy(edit + attempt, queue, &policy).await;
            match status {
                200 => {
                    lock(tally).policy_edits += 1;
                    lock_policies(world).insert(queue.clone(), policy.clone());
                    break;
                }
                429 => tokio::time::sleep(Duration::from_millis(1100)).await,
                _ => {
                    lock(tally).unexpected(format!("PUT policy {queue}: {status} {body}"));
                    break;
                }
            }
        }
    }
}

fn lock_policies(world: &World) -> std::sync::MutexGuard<'_, BTreeMap<String, Value>> {
    world.policies.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
