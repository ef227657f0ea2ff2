//! `PgStore`: the `Store` on PostgreSQL, one transaction per method.
//!
//! Split by concept: `principals` (humans, teams, endpoints, tokens), `bootstrap` (the CLI's
//! first humans and teams), `todos` (create, list, read), `claim` (the claim transaction),
//! `lifecycle` (heartbeat, complete, fail, release, retry, and the sweeps), `admission`
//! (policies, their audit, derived status, usage pruning), `intake` (capacity, remove, clear,
//! edit, purge), `webhooks` (registration and ingest), `push` and `hooks` (push decisions and
//! the hook outbox), `mutant_hooks` (where the seeded bugs reach this store). Each concept's
//! module implements its role trait of `models::store` (`Claims` in `claim`, `Policies` in
//! `admission`, `Presence` in `push::presence`, …); this module implements `Store` itself.
//! Below them all: `rows` (the rows several transactions read, and the row locks) and `sql`
//! (shared SQL fragments and placeholder numbering); they import no transaction module, so
//! dependencies run one way. Every query is parameterised; every transaction is committed or
//! dropped (which rolls back) on every path, so a cancelled request changes nothing. The claim
//! transaction step by step: `docs/architecture.md`.

/// Builds SQL text from constant fragments (`sql::TODO_COLUMNS`, `sql::CLAIMABLE`, placeholders
/// numbered by `sql::Binds`). Values never go into the text: every one is a bind parameter (REQ-13).
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

mod additional_windows;
mod admission;
mod batch;
mod board_reads;
mod bootstrap;
mod claim;
mod claim_many;
mod claim_unbudgeted;
pub mod credential_cache;
mod groups;
mod held;
mod hooks;
mod intake;
mod lifecycle;
mod mutant_hooks;
mod principals;
mod push;
mod removal;
mod rows;
mod shared_budgets;
mod sql;
mod todos;
mod webhooks;
mod write_limits;

use chrono::{DateTime, Utc};
use models::counters::Counters;
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::store::{Clock, Store};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use board_reads::{QueueCounts, SessionSeen, TodoCursor};
pub use bootstrap::BootstrapError;
use credential_cache::CredentialCache;
pub use principals::{hash_token, new_token};
pub use push::{PUSH_CHANNEL, ring_announcement};
pub use removal::{HumanRemoval, MemberRemoval};

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
    /// The claim path's switches, all on in production; only the benchmark turns one off.
    tuning: ClaimTuning,
    /// Queue sets whose oldest candidate was budgeted last time: `claim_next` on them skips the
    /// one-statement path that would only find that out again (a hint for speed only: both paths
    /// give the same answer).
    budgeted_hint: Arc<QueueSetHint>,
    /// Queue sets whose last budgeted `claim_next` met a refusal for a reason that refuses every
    /// candidate: the next reads the queues' statuses before its first pick, so it skips the
    /// refused transaction it would otherwise take first (issue #15; `ClaimNextRounds::
    /// pre_read_first` keeps the answer and the counters those of the rounds without it).
    refused_hint: Arc<QueueSetHint>,
    /// Budgeted claimers of one queue set waiting to be claimed for together (group admission).
    claim_groups: Arc<groups::ClaimGroups>,
    /// This replica's cache of endpoint credentials (`credential_cache`); None: every look-up
    /// reads the database. Only a serving replica that keeps its lease turns it on.
    credentials: Option<Arc<CredentialCache>>,
}

/// The claim path's steps that only `ci/bench-admission` turns off, to measure what each costs:
/// in one place, so the claim code reads each as the production step it is.
#[derive(Clone, Copy, Debug)]
struct ClaimTuning {
    /// `claim_next` looks up the candidate's policy (off: every queue is treated as unbudgeted,
    /// which disables admission control).
    admission_lookup: bool,
    /// A budgeted `claim_next` whose queue set was last refused reads the statuses before its
    /// first pick (issue #15).
    pre_read_first: bool,
}

impl ClaimTuning {
    const PRODUCTION: ClaimTuning = ClaimTuning { admission_lookup: true, pre_read_first: true };
}

/// A bounded set of queue-set fingerprints (`PgStore::budgeted_hint`, `PgStore::refused_hint`).
#[derive(Default)]
pub(crate) struct QueueSetHint {
    sets: std::sync::Mutex<std::collections::HashSet<u64>>,
}

impl QueueSetHint {
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

    pub(crate) fn mark(&self, set: u64, marked: bool) {
        let mut sets = self.sets.lock().unwrap_or_else(|p| p.into_inner());
        if marked {
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
    /// PostgreSQL's `statement_timeout` on every pooled connection: no statement holds a
    /// connection longer (issue #14: load that cannot starve other tenants).
    pub statement_timeout: Duration,
    /// PostgreSQL's `lock_timeout`: a claim that cannot get its policy row lock in time fails
    /// closed (`unavailable`, charged nothing) instead of holding a connection without bound.
    pub lock_timeout: Duration,
    /// Budgeted `claim_next` calls of one queue set that one transaction on this replica serves
    /// at most (group admission, `groups.rs`); the rest wait without a connection for the next,
    /// each for at most `lock_timeout`.
    pub claimers_per_queue_set: usize,
}

/// A pooled connection idle this long is pinged before it is handed out, so a server restart or
/// a dropped link shows there, not in the caller's statement. One used more recently is not:
/// sqlx pinged it when it was returned, and a ping per use costs a round trip on every path. So
/// within 5 s of a restart each pooled connection fails one request (`unavailable`) and is then
/// closed by the ping on its return.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(5);

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            connections_max: 32,
            acquire_timeout: Duration::from_secs(10),
            statement_timeout: Duration::from_secs(30),
            lock_timeout: Duration::from_secs(5),
            claimers_per_queue_set: 16,
        }
    }
}

impl PgStore {
    pub async fn connect(url: &str, settings: PoolSettings, clock: Arc<dyn Clock>) -> Result<PgStore, sqlx::Error> {
        let milliseconds = |duration: Duration| duration.as_millis().max(1).to_string();
        let options = PgConnectOptions::from_str(url)?.application_name("switchboard").options([
            ("statement_timeout", milliseconds(settings.statement_timeout)),
            ("lock_timeout", milliseconds(settings.lock_timeout)),
        ]);
        let pool = PgPoolOptions::new()
            .max_connections(settings.connections_max)
            .acquire_timeout(settings.acquire_timeout)
            // sqlx pings every connection it hands out: one more round trip per statement or
            // transaction. It also pings each connection as it comes back, so one handed out
            // soon after was alive a moment ago; only one idle for a while is pinged first.
            .test_before_acquire(false)
            .before_acquire(|connection, meta| {
                Box::pin(async move {
                    if meta.idle_for >= IDLE_BEFORE_PING {
                        sqlx::Connection::ping(connection).await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(options)
            .await?;
        let groups = groups::ClaimGroups::new(settings.claimers_per_queue_set, settings.lock_timeout);
        Ok(PgStore::with_groups(pool, clock, groups))
    }

    /// A store on a pool made elsewhere, its claim groups sized by the default settings.
    pub fn from_pool(pool: PgPool, clock: Arc<dyn Clock>) -> PgStore {
        let defaults = PoolSettings::default();
        let groups = groups::ClaimGroups::new(defaults.claimers_per_queue_set, defaults.lock_timeout);
        PgStore::with_groups(pool, clock, groups)
    }

    fn with_groups(pool: PgPool, clock: Arc<dyn Clock>, groups: groups::ClaimGroups) -> PgStore {
        PgStore {
            pool,
            clock,
            counters: Arc::default(),
            reaper_interval: models::limits::REAPER_INTERVAL_DEFAULT,
            tuning: ClaimTuning::PRODUCTION,
            budgeted_hint: Arc::default(),
            refused_hint: Arc::default(),
            claim_groups: Arc::new(groups),
            intake_env: models::capacity::CapacityEnv::Unset,
            credentials: None,
        }
    }

    /// Answers endpoint credentials from a cache kept under a lease (`credential_cache`); the
    /// caller runs `credential_cache::spawn_keeper`, without which no lease is held and every
    /// look-up still reads the database.
    pub fn with_credential_cache(mut self, replica_id: impl Into<String>) -> PgStore {
        self.credentials = Some(Arc::new(CredentialCache::new(replica_id.into())));
        self
    }

    /// This replica's credential cache, if it has one (tests give up its lease through it).
    pub fn credential_cache(&self) -> Option<&CredentialCache> {
        self.credentials.as_deref()
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
        self.tuning.admission_lookup = false;
        self
    }

    /// For `ci/bench-admission` only: `claim_next` never reads statuses before its first pick,
    /// so the benchmark can set the refused transaction it saves against the read (the answers
    /// and the refusal counters of sequential claims are the same either way).
    #[doc(hidden)]
    pub fn benchmark_without_pre_read_first(mut self) -> PgStore {
        self.tuning.pre_read_first = false;
        self
    }

    /// The reaper tick as the status arithmetic takes it.
    pub(crate) fn reaper_interval_chrono(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.reaper_interval).unwrap_or(chrono::Duration::seconds(30))
    }

    /// Now on the store's clock (the host's in production, a test's or the simulation's
    /// otherwise), for reads that show spans of time, such as the board's usage charts.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
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

    /// A transaction of `claim_next`'s budgeted path (`claim.rs`), whose statements run on
    /// generic plans. The pick is composed of many CTEs: planned anew for its values it costs
    /// about 1.4 ms to plan and 0.1 ms to run, and PostgreSQL never settles on its generic plan
    /// by itself, which reads the same claim indexes (`tests/claim_plans.rs`). The setting goes
    /// with the `BEGIN` in one round trip and ends with the transaction, committed or rolled
    /// back. (Were the `SET` itself to fail after the `BEGIN`, sqlx would hand the connection
    /// back inside the aborted transaction, as it does for a `BEGIN` whose caller went away;
    /// a valid setting set locally does not fail.)
    async fn begin_claim(&self) -> Result<Transaction<'static, Postgres>> {
        self.pool.begin_with("BEGIN; SET LOCAL plan_cache_mode = force_generic_plan").await.map_err(db_error)
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
        sqlx::Error::Database(database) if database.code().as_deref().is_some_and(connection_lost) => {
            tracing::warn!(%error, "database connection lost");
            Error::unavailable("the database is unavailable")
        }
        // 55P03 lock_not_available (`lock_timeout`), 57014 query_canceled (`statement_timeout`):
        // the bounds on waiting did their job; the transaction rolled back and may be retried.
        sqlx::Error::Database(database) if matches!(database.code().as_deref(), Some("55P03" | "57014")) => {
            tracing::warn!(%error, "database wait bound reached");
            Error::unavailable("the database was too busy to answer in time; retry shortly")
                .with("retry_after_seconds", 1)
        }
        // 40P01 deadlock detected, 40001 serialization failure: the database chose this
        // transaction as the one to roll back; the same request can succeed when retried.
        sqlx::Error::Database(database) if database.code().is_some_and(|code| code == "40P01" || code == "40001") => {
            tracing::warn!(%error, "transaction rolled back by the database; retryable");
            Error::unavailable("the database rolled this request back under contention; retry it")
                .with("retry_after_seconds", 1)
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

/// SQLSTATEs with which the server ends or refuses a connection, whatever the request was: the
/// server shutting down or restarting (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
/// cannot_connect_now), an administrator ending the session (also 57P01), the idle session
/// timeout (57P05), too many connections (53300), and the connection exceptions of class 08 but
/// a protocol violation (08P01), which is a fault of ours. The request may be retried as it is.
fn connection_lost(code: &str) -> bool {
    matches!(code, "57P01" | "57P02" | "57P03" | "57P05" | "53300") || (code.starts_with("08") && code != "08P01")
}

/// An UPDATE or DELETE that must have touched a row of the caller's: none is `not_found` (absent
/// and foreign read the same).
pub(crate) fn touched(done: sqlx::postgres::PgQueryResult) -> Result<()> {
    if done.rows_affected() == 0 { Err(Error::not_found()) } else { Ok(()) }
}

/// `PgStore` as a whole `Store`: its counters, and a round trip to the database.
impl Store for PgStore {
    fn counters(&self) -> &models::counters::Counters {
        &self.counters
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(db_error)?;
        Ok(())
    }
}
