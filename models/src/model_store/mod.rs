//! `ModelStore`: the `Store` in memory, behaving exactly like the production `PgStore`.
//!
//! Why it exists: it is the simulation's database host (the simulation runs the production router over
//! it, deterministically, with no real I/O) and the executable specification of what each store
//! transaction does. A differential test (`engine/tests/model_store_differential.rs`) drives it
//! and `PgStore` with the same seeded operations and requires equal answers, so a reader can
//! learn the semantics of the SQL in `engine/src/pg_store/*.rs` here, one short function per
//! transaction, and trust that they match.
//!
//! What it mirrors, table by table: the migrations' rows (todos with their attempts, admission
//! policies stored raw as `PgStore` reads them back, usage per (policy, window_start), the audit,
//! webhooks and deliveries, settings, principals, and push: sessions, `push_due`, doorbells,
//! presence columns, notify hooks and their outbox), their constraints (a violated CHECK, UNIQUE or
//! foreign key is the same `internal` error `PgStore` reports), their cascades, and every ORDER BY
//! (the cluster uses `--no-locale`, so text orders bytewise, as `String` does; NULLs sort last
//! ascending). The admission decision, status and hints are `models::admission`'s functions, the
//! windows `models::window`'s, the lifecycle arithmetic `models::todo`'s: the very functions
//! `PgStore` calls, so the two cannot drift in them.
//!
//! Determinism: `BTreeMap`/`Vec` only, no randomness, and time only from the injected `Clock`,
//! read at the points where `PgStore` binds `$now` (so a simulation that moves the clock between
//! statements sees the same instants). Generated ids are counters in `PgStore`'s shapes
//! (`td_` + 32 hex digits, …), and slugs take a counter where `PgStore` takes random bits.
//!
//! Governing: SPEC-0030 REQ-1 … REQ-10 (cited per transition), base-system §2 (the lifecycle),
//! intake-capacity.md (capacity, cancellation). The state lives behind one std `Mutex`, held
//! for a whole transaction and never across an `.await` (no method awaits anything).

mod admission;
mod claim;
mod hooks;
mod intake;
mod journal;
mod lifecycle;
mod presence;
mod principals;
mod push;
mod shared_budgets;
mod todos;
mod webhooks;

/// The model as a whole `Store`: its counters, and a round trip that has nowhere to go.
impl Store for ModelStore {
    fn counters(&self) -> &crate::counters::Counters {
        &self.counters
    }

    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod push_tests;
#[cfg(test)]
mod tests;

pub use hooks::OutboxEntry;
pub use journal::{LoggedRing, PushJournal, WatchRecord};

use crate::admission::{Policy, Used, WindowSlot};
use crate::capacity::CapacityEnv;
use crate::counters::Counters;
use crate::error::{Error, Result};
use crate::identity::{Owner, QueueIdentity};
use crate::scope::{Human, Team, TeamRole};
use crate::store::{Clock, Store};
use crate::todo::Todo;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The in-memory store. Cheap to clone: clones share the state, the clock and the counters.
#[derive(Clone)]
pub struct ModelStore {
    state: Arc<Mutex<State>>,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
    /// The lease reaper's tick, for the in-flight hint of REQ-6.
    reaper_interval: Duration,
    /// What `SWITCHBOARD_QUEUE_MAX_PENDING` said at startup (intake capacity).
    intake_env: CapacityEnv,
}

impl std::fmt::Debug for ModelStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let todos = self.lock().todos.len();
        f.debug_struct("ModelStore").field("todos", &todos).finish()
    }
}

/// One attempt of a todo (SPEC-0034), as `todo_attempts` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub seq: i32,
    pub claimant: String,
    pub endpoint_id: Option<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// `completed`, `failed`, `released`, `lease_expired` or `reaped`; None while open.
    pub outcome: Option<&'static str>,
}

/// One remove, clear or purge, as `queue_cancellations` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancellation {
    pub identity: QueueIdentity,
    pub actor_human_id: Option<String>,
    pub actor_endpoint_id: Option<String>,
    pub action: &'static str,
    /// The exact count removed or purged.
    pub removed: u64,
    /// The smallest ids of those, at most `limits::CANCELLATION_AUDIT_IDS_MAX`, sorted.
    pub todo_ids: Vec<String>,
    /// True when `todo_ids` lists fewer ids than `removed`.
    pub truncated: bool,
    pub at: DateTime<Utc>,
}

/// Everything the database would hold. Private: every change goes through a transaction.
#[derive(Debug, Clone, Default)]
struct State {
    /// The last number handed out per id prefix (`td`, `ep`, …) and for slug suffixes.
    sequences: BTreeMap<&'static str, u64>,
    humans: Vec<Human>,
    /// API tokens by SHA-256 hex digest: the human they authenticate.
    api_tokens: BTreeMap<String, TokenRow>,
    teams: Vec<Team>,
    /// Memberships by (team_id, human_id).
    members: BTreeMap<(String, String), TeamRole>,
    /// In creation order, which is `created_at` order.
    endpoints: Vec<EndpointRow>,
    /// By id; ids are counters, so this is also creation order.
    todos: BTreeMap<String, Todo>,
    attempts: BTreeMap<String, Vec<Attempt>>,
    policies: Vec<PolicyRow>,
    /// Units charged per (queue identity, window slot, window start) (REQ-5, issue #52):
    /// `admission_windows`. Kept through every policy change (issue #28).
    usage: BTreeMap<(QueueIdentity, WindowSlot, DateTime<Utc>), i64>,
    /// The charge ledger, units per (queue identity, whole minute): `admission_charges`.
    charges: BTreeMap<(QueueIdentity, DateTime<Utc>), i64>,
    /// The write limiter's theoretical arrival time per key: `write_limits`.
    write_limits: BTreeMap<String, DateTime<Utc>>,
    /// Append-only, in insertion (identity column) order.
    audit: Vec<AuditRow>,
    webhooks: Vec<WebhookRow>,
    /// Deliveries by (webhook id, delivery id): the todos each created.
    deliveries: BTreeMap<(String, String), Vec<String>>,
    settings: BTreeMap<String, Value>,
    cancellations: Vec<Cancellation>,
    /// Sessions, doorbells, presence columns, hooks and their outbox (`0008_push.sql`).
    push: push::PushTables,
    /// Shared budgets, their members and audit (issue #52, `0024_shared_budgets.sql`).
    budgets: shared_budgets::BudgetTables,
}

/// An `api_tokens` row.
#[derive(Debug, Clone)]
struct TokenRow {
    id: String,
    human_id: String,
    label: Option<String>,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    revoked: bool,
}

#[derive(Debug, Clone)]
struct EndpointRow {
    id: String,
    slug: String,
    name: String,
    owner_human_id: Option<String>,
    owner_team_id: Option<String>,
    token_hash: String,
    verbs: Vec<String>,
    revoked: bool,
    created_by_human_id: Option<String>,
    /// (team_id, queue): a BTreeSet orders them as `ORDER BY team_id NULLS FIRST, queue`.
    grants: BTreeSet<(Option<String>, String)>,
}

/// A policy row in the raw form `PgStore` stores and reads back; evaluated on every read with
/// `Policy::from_stored`, so a corrupted row fails closed exactly as it does there (REQ-9).
#[derive(Debug, Clone)]
struct PolicyRow {
    id: String,
    identity: QueueIdentity,
    max_in_flight: Option<i32>,
    max_claims_per_window: Option<i32>,
    window_period: Option<String>,
    window_tz: Option<String>,
    window_start: Option<String>,
    window_weekday: Option<String>,
    /// Issue #52: the additional windows as the API writes them (`additional_windows` jsonb).
    additional_windows: Option<Value>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
struct AuditRow {
    identity: QueueIdentity,
    record: crate::store::AuditRecord,
}

#[derive(Debug, Clone)]
struct WebhookRow {
    id: String,
    name: String,
    owner_human_id: String,
    secret: String,
    /// The secret the last rotation replaced and when it stops verifying (issue #14).
    previous_secret: Option<String>,
    previous_secret_expires_at: Option<DateTime<Utc>>,
    /// In insertion order (`ORDER BY ctid`).
    targets: Vec<QueueIdentity>,
}

impl ModelStore {
    pub fn new(clock: Arc<dyn Clock>) -> ModelStore {
        ModelStore {
            state: Arc::default(),
            clock,
            counters: Arc::default(),
            reaper_interval: crate::limits::REAPER_INTERVAL_DEFAULT,
            intake_env: CapacityEnv::Unset,
        }
    }

    /// The reaper tick the in-flight hint adds to the earliest lease expiry.
    pub fn with_reaper_interval(mut self, interval: Duration) -> ModelStore {
        self.reaper_interval = interval;
        self
    }

    /// The intake capacity the environment imposes (and locks).
    pub fn with_intake_env(mut self, env: CapacityEnv) -> ModelStore {
        self.intake_env = env;
        self
    }

    /// REQ-9 fault injection: overwrites the stored zone of `identity`'s policy with any string,
    /// as `UPDATE admission_policies SET window_tz = $1 WHERE …` would. False if it has none.
    pub fn corrupt_policy_zone(&self, identity: &QueueIdentity, tz: &str) -> bool {
        let mut state = self.lock();
        let Some(row) = state.policies.iter_mut().find(|p| &p.identity == identity) else {
            return false;
        };
        row.window_tz = Some(tz.to_string());
        true
    }

    #[cfg(test)]
    /// A todo's attempt history, oldest first (the model's own tests read it).
    pub(crate) fn attempts(&self, todo_id: &str) -> Vec<Attempt> {
        self.lock().attempts.get(todo_id).cloned().unwrap_or_default()
    }

    #[cfg(test)]
    /// Every remove, clear and purge so far, oldest first (the model's own tests read it).
    pub(crate) fn cancellations(&self) -> Vec<Cancellation> {
        self.lock().cancellations.clone()
    }

    #[cfg(test)]
    /// Units charged per (queue identity, window start) (the model's own tests read it).
    pub(crate) fn window_usage(&self) -> Vec<(QueueIdentity, DateTime<Utc>, i64)> {
        let state = self.lock();
        let mut usage = Vec::new();
        for ((identity, _, window_start), used) in state.usage.iter().filter(|((_, slot, _), _)| *slot == 0) {
            usage.push((identity.clone(), *window_start, *used));
        }
        usage
    }

    /// A poisoned lock only means a panicking thread held it; the state is still consistent
    /// because every transaction validates before it writes.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn reaper_interval_chrono(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.reaper_interval).unwrap_or(chrono::Duration::seconds(30))
    }
}

impl State {
    /// The next id of a kind, shaped as `PgStore`'s `'td_' || replace(gen_random_uuid(), '-', '')`.
    fn next_id(&mut self, prefix: &'static str) -> String {
        format!("{prefix}_{:032x}", self.next_number(prefix))
    }

    /// What `PgStore` draws 32 random bits for (slug suffixes): a counter, 8 hex digits.
    fn next_suffix(&mut self) -> String {
        format!("{:08x}", self.next_number("slug"))
    }

    fn next_number(&mut self, kind: &'static str) -> u64 {
        let counter = self.sequences.entry(kind).or_default();
        *counter += 1;
        *counter
    }

    fn human_exists(&self, id: &str) -> bool {
        self.humans.iter().any(|h| h.id == id)
    }

    /// The foreign keys of a queue identity's owner column.
    fn owner_exists(&self, identity: &QueueIdentity) -> bool {
        match &identity.owner {
            Owner::Endpoint(id) => self.endpoints.iter().any(|e| &e.id == id),
            Owner::Team(id) => self.teams.iter().any(|t| &t.id == id),
        }
    }

    fn policy_of(&self, identity: &QueueIdentity) -> Option<&PolicyRow> {
        self.policies.iter().find(|p| &p.identity == identity)
    }

    /// Every window's usage at `now` under `policy`, the primary's first (issue #52).
    fn used(&self, identity: &QueueIdentity, policy: &Policy, now: DateTime<Utc>) -> Used {
        let mut used = Used::default();
        for (slot, _, window) in policy.windows() {
            let units = self.usage.get(&(identity.clone(), slot, window.window_start(now))).copied().unwrap_or(0);
            if slot == 0 {
                used.primary = units;
            } else {
                used.additional[slot - 1] = units;
            }
        }
        used
    }

    /// REQ-3: one claim's charge, in the ledger and in the counter of each window in `windows`
    /// (slot, window start); the counters after it.
    fn charge(
        &mut self,
        identity: &QueueIdentity,
        windows: &[(WindowSlot, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> Used {
        *self.charges.entry((identity.clone(), crate::charges::charge_minute(now))).or_default() += 1;
        let mut after = Used::default();
        for &(slot, window_start) in windows {
            let used = self.usage.entry((identity.clone(), slot, window_start)).or_default();
            *used += 1;
            if slot == 0 {
                after.primary = *used;
            } else {
                after.additional[slot - 1] = *used;
            }
        }
        after
    }

    /// Issue #52: the ledger's recent minutes of `identity`, for the status's forecast.
    fn recent_charges(&self, identity: &QueueIdentity, now: DateTime<Utc>) -> crate::forecast::RecentCharges {
        let oldest = crate::forecast::RecentCharges::oldest_minute(now);
        let ledger = self
            .charges
            .range((identity.clone(), oldest)..)
            .take_while(|((charged, _), _)| charged == identity)
            .map(|((_, minute), units)| (*minute, *units));
        crate::forecast::RecentCharges::from_ledger(now, ledger)
    }

    /// Issue #28: the counter of `window` in `slot` rebuilt from the ledger (the charges
    /// committed in its span, under whatever definition charged them). Written only when there
    /// is a charge, as `PgStore`'s rebuild inserts no empty row.
    fn recount_window(
        &mut self,
        identity: &QueueIdentity,
        slot: WindowSlot,
        (start, end): (DateTime<Utc>, DateTime<Utc>),
    ) {
        let ledger = self
            .charges
            .range((identity.clone(), start)..(identity.clone(), end))
            .map(|((_, minute), units)| (*minute, *units));
        let units = crate::charges::units_within(ledger, start, end);
        if units > 0 {
            self.usage.insert((identity.clone(), slot, start), units);
        }
    }

    /// The usage and ledger of identities whose owner is deleted (the foreign keys' cascade).
    fn forget_charges(&mut self, gone: impl Fn(&QueueIdentity) -> bool) {
        self.usage.retain(|(identity, _, _), _| !gone(identity));
        self.charges.retain(|(identity, _), _| !gone(identity));
    }

    fn todo_mut(&mut self, id: &str) -> Result<&mut Todo> {
        // Callers looked the todo up under the same lock; absent here would be a model bug.
        self.todos.get_mut(id).ok_or_else(|| Error::internal(format!("todo {id} vanished inside a transaction")))
    }

    /// Ends the open attempt of a todo (`close_attempt` in `PgStore`).
    fn close_attempt(&mut self, id: &str, now: DateTime<Utc>, outcome: &'static str) {
        for attempt in self.attempts.entry(id.to_string()).or_default().iter_mut().filter(|a| a.ended_at.is_none()) {
            attempt.ended_at = Some(now);
            attempt.outcome = Some(outcome);
        }
    }

    /// Deletes todos (with their attempts) matching `doomed`; their ids, in id order.
    fn delete_todos(&mut self, doomed: impl Fn(&Todo) -> bool) -> Vec<String> {
        let ids: Vec<String> = self.todos.values().filter(|t| doomed(t)).map(|t| t.id.clone()).collect();
        for id in &ids {
            self.todos.remove(id);
            self.attempts.remove(id);
        }
        self.push.forget_todos(&ids);
        ids
    }

    /// Deletes policies matching `doomed`. Their identities' charges stay (issue #28).
    fn delete_policies(&mut self, doomed: impl Fn(&PolicyRow) -> bool) {
        self.policies.retain(|p| !doomed(p));
    }
}

/// What `PgStore`'s `db_error` answers for a violated constraint: details stay in the log.
fn database_error() -> Error {
    Error::internal("internal database error")
}

/// The `queue ~ '^[a-z0-9._-]{1,64}$'` CHECK every queue column carries.
fn queue_name_ok(queue: &str) -> bool {
    crate::identity::validate_queue_name("queue", queue).is_ok()
}
