//! `PgStore`: the `Store` on PostgreSQL, one transaction per method.
//!
//! Split by concept: `principals` (humans, teams, endpoints, tokens), `todos` (create, list,
//! read), `claim` (the claim transaction), `lifecycle` (heartbeat, complete, fail, release,
//! retry, and the sweeps), `admission` (policies, their audit, derived status, usage pruning),
//! `intake` (capacity, remove, clear, edit, purge), `webhooks` (registration and ingest), `push`
//! and `hooks` (push decisions and the hook outbox), `store_impl` (the `Store` trait over these),
//! `mutant_hooks` (where the seeded bugs reach this store). Every query is parameterised; every
//! transaction is committed or dropped (which rolls back) on every path, so a cancelled request
//! changes nothing. The claim transaction step by step: `docs/architecture.md`.

/// Builds SQL text from this module's constant fragments (`TODO_COLUMNS`, `CLAIMABLE`, numbered
/// placeholders). Values never go into the text: every one is a bind parameter (REQ-13).
macro_rules! composed_sql {
    ($($fragment:tt)*) => { sqlx::AssertSqlSafe(format!($($fragment)*)) };
}

/// Unwraps a step's outcome inside a transaction, or ends the transaction with an explicit
/// rollback (see `finish`) and returns the error.
macro_rules! or_rollback {
    ($tx:ident, $outcome:expr) => {
        match $outcome {
            Ok(value) => value,
            Err(error) => return $crate::pg_store::finish($tx, Err(error)).await,
        }
    };
}

mod admission;
mod claim;
mod hooks;
mod intake;
mod lifecycle;
mod mutant_hooks;
mod principals;
mod push;
mod store_impl;
mod todos;
mod webhooks;

use chrono::{DateTime, Utc};
use models::counters::Counters;
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::store::Clock;
use models::todo::{CreatedByKind, Todo, TodoState};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use principals::{BootstrapError, hash_token, new_token};
pub use push::{PUSH_CHANNEL, ring_announcement};

/// The migrations in `migrations/`, compiled into the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// The production store. Cheap to clone: a pool and a clock.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
    /// The lease reaper's tick, for the in-flight hint of REQ-6.
    reaper_interval: Duration,
    /// What `SWITCHBOARD_QUEUE_MAX_PENDING` said at startup (intake capacity).
    intake_env: models::capacity::CapacityEnv,
    /// Always true in production. Only the benchmark turns it off, to measure the base claim
    /// path without the policy lookup against the same path with it.
    admission_lookup: bool,
    /// Queue sets whose oldest candidate was budgeted last time: `claim_next` on them skips the
    /// one-statement path that would only find that out again (a hint for speed only: both paths
    /// give the same answer).
    budgeted_hint: Arc<BudgetedHint>,
}

/// A bounded set of queue-set fingerprints (see `PgStore::budgeted_hint`).
#[derive(Default)]
pub(crate) struct BudgetedHint {
    sets: std::sync::Mutex<std::collections::HashSet<u64>>,
}

impl BudgetedHint {
    /// Forgets everything past this many queue sets, so the hint cannot grow without bound.
    const SETS_MAX: usize = 4096;

    pub(crate) fn fingerprint(queues: &[QueueIdentity]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        queues.hash(&mut hasher);
        hasher.finish()
    }

    pub(crate) fn contains(&self, set: u64) -> bool {
        self.sets.lock().unwrap_or_else(|p| p.into_inner()).contains(&set)
    }

    pub(crate) fn mark(&self, set: u64, budgeted: bool) {
        let mut sets = self.sets.lock().unwrap_or_else(|p| p.into_inner());
        if budgeted {
            if sets.len() >= Self::SETS_MAX {
                sets.clear();
            }
            sets.insert(set);
        } else {
            sets.remove(&set);
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("pool_size", &self.pool.size()).finish()
    }
}

/// Pool settings with a name, so the server's flags and the tests say the same thing.
#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    pub connections_max: u32,
    pub acquire_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings { connections_max: 32, acquire_timeout: Duration::from_secs(10) }
    }
}

impl PgStore {
    pub async fn connect(url: &str, settings: PoolSettings, clock: Arc<dyn Clock>) -> Result<PgStore, sqlx::Error> {
        let options = PgConnectOptions::from_str(url)?.application_name("switchboard");
        let pool = PgPoolOptions::new()
            .max_connections(settings.connections_max)
            .acquire_timeout(settings.acquire_timeout)
            .connect_with(options)
            .await?;
        Ok(PgStore::from_pool(pool, clock))
    }

    pub fn from_pool(pool: PgPool, clock: Arc<dyn Clock>) -> PgStore {
        PgStore {
            pool,
            clock,
            counters: Arc::default(),
            reaper_interval: models::limits::REAPER_INTERVAL_DEFAULT,
            admission_lookup: true,
            budgeted_hint: Arc::default(),
            intake_env: models::capacity::CapacityEnv::Unset,
        }
    }

    /// The reaper tick the in-flight hint adds to the earliest lease expiry.
    pub fn with_reaper_interval(mut self, interval: Duration) -> PgStore {
        self.reaper_interval = interval;
        self
    }

    /// The intake capacity the environment imposes (and locks), parsed once at startup.
    pub fn with_intake_env(mut self, env: models::capacity::CapacityEnv) -> PgStore {
        self.intake_env = env;
        self
    }

    /// For `ci/bench-admission` only: `claim_next` skips the policy lookup, so every queue is
    /// treated as unbudgeted. Never use this in a server: it disables admission control.
    #[doc(hidden)]
    pub fn benchmark_without_admission_lookup(mut self) -> PgStore {
        self.admission_lookup = false;
        self
    }

    /// The reaper tick as the status arithmetic takes it.
    pub(crate) fn reaper_interval_chrono(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.reaper_interval).unwrap_or(chrono::Duration::seconds(30))
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        MIGRATOR.run(&self.pool).await
    }

    /// The instant to bind as `$now`: None lets SQL use `clock_timestamp()`, the database's
    /// clock, which is the clock of record in production; a test or simulation clock is bound.
    fn now_param(&self) -> Option<DateTime<Utc>> {
        if self.clock.defer_to_database() { None } else { Some(self.clock.now()) }
    }

    async fn begin(&self) -> Result<Transaction<'static, Postgres>> {
        self.pool.begin().await.map_err(db_error)
    }
}

/// Ends a transaction: commit on Ok; on Err an explicit ROLLBACK before returning. A dropped
/// transaction would also roll back, but only once its connection is next tested on release,
/// and until then its row locks would make `SKIP LOCKED` claimers pass over work (REQ-13).
pub(crate) async fn finish<T>(tx: Transaction<'static, Postgres>, outcome: Result<T>) -> Result<T> {
    match outcome {
        Ok(value) => {
            tx.commit().await.map_err(db_error)?;
            Ok(value)
        }
        Err(error) => {
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(%rollback, "rollback failed; the connection is discarded");
            }
            Err(error)
        }
    }
}

/// Maps a database failure to what a caller may see: storage trouble is `unavailable`, and the
/// details go to the log, not the wire.
pub(crate) fn db_error(error: sqlx::Error) -> Error {
    match &error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            tracing::warn!(%error, "database unavailable");
            Error::unavailable("the database is unavailable")
        }
        // Class 22, data exception: the database refused a value the edge let through (text it
        // cannot encode, a number out of range). The caller's input, not a fault of ours.
        sqlx::Error::Database(database) if database.code().is_some_and(|code| code.starts_with("22")) => {
            tracing::info!(%error, "database refused a value");
            Error::invalid("request", "a value in the request cannot be stored (the database refused it)")
        }
        _ => {
            tracing::error!(%error, "database error");
            Error::internal("internal database error")
        }
    }
}

/// An UPDATE or DELETE that must have touched a row of the caller's: none is `not_found` (absent
/// and foreign read the same).
pub(crate) fn touched(done: sqlx::postgres::PgQueryResult) -> Result<()> {
    if done.rows_affected() == 0 { Err(Error::not_found()) } else { Ok(()) }
}

/// The todo columns every query returns, in `TodoRow` order. `t` is the todos alias.
pub(crate) const TODO_COLUMNS: &str = "t.id, t.endpoint_id, t.team_id, t.queue, t.title, t.payload, t.idempotency_key, \
     t.state, t.owner, t.claimed_by_endpoint_id, t.lease_expires_at, t.attempt, t.max_attempts, t.result, \
     t.created_at, t.updated_at, t.claimed_at, t.completed_at, t.next_retry_at, t.created_by_kind, t.created_by_id";

/// The claimable predicate of base-system §2 over alias `t` at instant `clock.now`.
pub(crate) const CLAIMABLE: &str = "(t.state = 'pending' \
     OR (t.state = 'claimed' AND t.lease_expires_at < clock.now AND t.attempt < t.max_attempts) \
     OR (t.state = 'failed' AND t.next_retry_at <= clock.now AND t.attempt < t.max_attempts))";

#[derive(sqlx::FromRow)]
pub(crate) struct TodoRow {
    id: String,
    endpoint_id: Option<String>,
    team_id: Option<String>,
    queue: String,
    title: String,
    payload: Option<serde_json::Value>,
    idempotency_key: Option<String>,
    state: String,
    owner: Option<String>,
    claimed_by_endpoint_id: Option<String>,
    lease_expires_at: Option<DateTime<Utc>>,
    attempt: i32,
    max_attempts: i32,
    result: Option<serde_json::Value>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    claimed_at: Option<DateTime<Utc>>,
    completed_at: Option<DateTime<Utc>>,
    next_retry_at: Option<DateTime<Utc>>,
    created_by_kind: String,
    created_by_id: Option<String>,
}

impl TodoRow {
    /// The schema's CHECK constraints make every branch below unreachable for rows written by
    /// this code; a row that still fails is reported, not guessed at.
    pub(crate) fn into_todo(self) -> Result<Todo> {
        let identity = match (self.endpoint_id, self.team_id) {
            (Some(endpoint), None) => QueueIdentity::endpoint(endpoint, self.queue),
            (None, Some(team)) => QueueIdentity::team(team, self.queue),
            _ => return Err(Error::internal(format!("todo {} has no single queue owner", self.id))),
        };
        let state = TodoState::parse("state", &self.state)
            .map_err(|_| Error::internal(format!("todo {} has unknown state {}", self.id, self.state)))?;
        let created_by_kind = CreatedByKind::parse(&self.created_by_kind)
            .ok_or_else(|| Error::internal(format!("todo {} has unknown provenance", self.id)))?;
        Ok(Todo {
            id: self.id,
            identity,
            title: self.title,
            payload: self.payload,
            idempotency_key: self.idempotency_key,
            state,
            owner: self.owner,
            claimed_by_endpoint_id: self.claimed_by_endpoint_id,
            lease_expires_at: self.lease_expires_at,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            result: self.result,
            created_at: self.created_at,
            updated_at: self.updated_at,
            claimed_at: self.claimed_at,
            completed_at: self.completed_at,
            next_retry_at: self.next_retry_at,
            created_by_kind,
            created_by_id: self.created_by_id,
        })
    }
}

/// The claimable predicate restated in the claim-order indexes' own terms, so the planner can
/// match the index predicate (what `CLAIMABLE` implies, spelled the index's way).
pub(crate) const CLAIM_ORDER_ROWS: &str =
    "(t.state IN ('pending', 'claimed') OR (t.state = 'failed' AND t.next_retry_at IS NOT NULL))";

/// Identities grouped by owner: (owner is a team, owner id, queue names). Most callers drain
/// one endpoint's queues, which makes a single group.
pub(crate) fn owner_groups(identities: &[QueueIdentity]) -> Vec<(bool, String, Vec<String>)> {
    let mut groups: Vec<(bool, String, Vec<String>)> = Vec::new();
    for identity in identities {
        let (team, owner) = match &identity.owner {
            models::identity::Owner::Endpoint(id) => (false, id),
            models::identity::Owner::Team(id) => (true, id),
        };
        match groups.iter_mut().find(|g| g.0 == team && &g.1 == owner) {
            Some(group) => group.2.push(identity.queue.clone()),
            None => groups.push((team, owner.clone(), vec![identity.queue.clone()])),
        }
    }
    groups
}

/// `(t.endpoint_id = $k AND t.queue = ANY($k+1)) OR …`, two placeholders per group from `first`:
/// the shape the claim-order indexes serve in `created_at` order.
pub(crate) fn owner_groups_filter(groups: &[(bool, String, Vec<String>)], first: usize) -> String {
    if groups.is_empty() {
        return "false".to_string();
    }
    let clauses: Vec<String> = groups
        .iter()
        .enumerate()
        .map(|(i, (team, _, _))| {
            let column = if *team { "t.team_id" } else { "t.endpoint_id" };
            format!("({column} = ${} AND t.queue = ANY(${}::text[]))", first + 2 * i, first + 2 * i + 1)
        })
        .collect();
    format!("({})", clauses.join(" OR "))
}

/// Splits identities into the parallel arrays SQL takes: endpoint (ids, queues), team (ids, queues).
pub(crate) fn identity_arrays(identities: &[QueueIdentity]) -> [Vec<String>; 4] {
    let mut arrays: [Vec<String>; 4] = Default::default();
    for identity in identities {
        let offset = if identity.endpoint_id().is_some() { 0 } else { 2 };
        let owner = identity.endpoint_id().or(identity.team_id()).unwrap_or_default();
        arrays[offset].push(owner.to_string());
        arrays[offset + 1].push(identity.queue.clone());
    }
    arrays
}

/// Matches alias `t` against identity arrays bound at `$first..$first+3`.
pub(crate) fn identity_filter(first: usize) -> String {
    identity_filter_on("t", first)
}

/// Matches a table alias's (endpoint_id | team_id, queue) against identity arrays.
pub(crate) fn identity_filter_on(alias: &str, first: usize) -> String {
    format!(
        "(({alias}.endpoint_id, {alias}.queue) IN (SELECT * FROM unnest(${a}::text[], ${b}::text[])) \
          OR ({alias}.team_id, {alias}.queue) IN (SELECT * FROM unnest(${c}::text[], ${d}::text[])))",
        a = first,
        b = first + 1,
        c = first + 2,
        d = first + 3
    )
}
