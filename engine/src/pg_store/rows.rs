//! Row types and row locks: the rows more than one transaction reads, decoded by column name,
//! and the statements that lock a todo or a policy row for a transaction.
//!
//! Exists so the transactions that share a row (the claim, admission status, lifecycle, intake,
//! push) depend on this module and never on each other. A row that does not decode into the
//! domain (no single queue owner, an unknown state) is `internal`, reported and never guessed at:
//! the schema's CHECK constraints make that unreachable for rows written by this code.
//!
//! Must never decide anything: what a row means for admission is `models::admission`'s to say.

use super::mutant_hooks::ClaimPlan;
use super::sql::TODO_COLUMNS;
use super::{PgStore, db_error};
use chrono::{DateTime, Utc};
use models::admission::Policy;
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::scope::Reach;
use models::store::AuditRecord;
use models::todo::{CreatedByKind, Todo, TodoState};
use serde_json::Value;
use sqlx::{Postgres, Transaction};

/// A queue identity from its stored columns: exactly one of `endpoint_id` and `team_id` is set
/// (the tables' `one_queue_owner` CHECKs). Anything else is `internal`, never a made-up owner.
pub(crate) fn identity_of(
    endpoint_id: Option<String>,
    team_id: Option<String>,
    queue: String,
) -> Result<QueueIdentity> {
    match (endpoint_id, team_id) {
        (Some(endpoint), None) => Ok(QueueIdentity::endpoint(endpoint, queue)),
        (None, Some(team)) => Ok(QueueIdentity::team(team, queue)),
        _ => Err(Error::internal(format!("a row of queue {queue} has no single queue owner"))),
    }
}

/// A todo as `TODO_COLUMNS` selects it.
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
    payload_size_bytes: i64,
}

impl TodoRow {
    /// The schema's CHECK constraints make every error below unreachable for rows written by
    /// this code; a row that still fails is reported, not guessed at.
    pub(crate) fn into_todo(self) -> Result<Todo> {
        let identity = identity_of(self.endpoint_id, self.team_id, self.queue)
            .map_err(|_| Error::internal(format!("todo {} has no single queue owner", self.id)))?;
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
            payload_size_bytes: self.payload_size_bytes,
        })
    }
}

/// A policy row's limit and window columns as stored. All nullable: in a row joined `LEFT`
/// (no policy) they are all NULL.
#[derive(sqlx::FromRow)]
pub(crate) struct PolicyLimitsRow {
    pub(crate) max_in_flight: Option<i32>,
    pub(crate) max_claims_per_window: Option<i32>,
    pub(crate) window_period: Option<String>,
    pub(crate) window_tz: Option<String>,
    pub(crate) window_start: Option<String>,
    pub(crate) window_weekday: Option<String>,
    /// Issue #52: the additional windows, as the API writes them.
    pub(crate) additional_windows: Option<serde_json::Value>,
}

impl PolicyLimitsRow {
    /// The row evaluated as every read evaluates it: a row that does not evaluate says why
    /// (REQ-9 refuses on it).
    pub(crate) fn evaluate(&self) -> std::result::Result<Policy, String> {
        Policy::from_stored(
            self.max_in_flight,
            self.max_claims_per_window,
            self.window_period.as_deref(),
            self.window_tz.as_deref(),
            self.window_start.as_deref(),
            self.window_weekday.as_deref(),
            self.additional_windows.as_ref(),
        )
    }
}

/// A policy row as the status reads select it (`admission::status_select`): the row, the
/// pending and in-flight counts of its queue identity, and the clock the read was taken at.
#[derive(sqlx::FromRow)]
pub(crate) struct PolicyRow {
    pub(crate) id: String,
    pub(crate) endpoint_id: Option<String>,
    pub(crate) team_id: Option<String>,
    pub(crate) queue: String,
    #[sqlx(flatten)]
    pub(crate) limits: PolicyLimitsRow,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) pending: i64,
    pub(crate) in_flight: i64,
    /// The earliest live lease among them (REQ-6's hint).
    pub(crate) earliest: Option<DateTime<Utc>>,
    /// Those whose lease has lapsed with attempts left: takeover candidates.
    pub(crate) lapsed: i64,
    pub(crate) now: DateTime<Utc>,
}

/// The policy row as a claim locks it (step 3), evaluated.
#[derive(Clone)]
pub(crate) struct LockedPolicy {
    pub(crate) id: String,
    pub(crate) evaluated: std::result::Result<Policy, String>,
}

impl LockedPolicy {
    pub(crate) fn new(id: String, limits: &PolicyLimitsRow) -> LockedPolicy {
        LockedPolicy { id, evaluated: limits.evaluate() }
    }
}

#[derive(sqlx::FromRow)]
struct LockedPolicyRow {
    id: String,
    #[sqlx(flatten)]
    limits: PolicyLimitsRow,
}

/// Steps 2–3 of a claim: the identity's policy, looked up by index and locked `FOR UPDATE`
/// (blocking) in one statement. No policy → no row is locked or waited on. The database error is
/// returned as it is: the claim refuses on it (REQ-9) rather than failing.
pub(crate) async fn lock_policy(
    tx: &mut Transaction<'static, Postgres>,
    identity: &QueueIdentity,
    plan: ClaimPlan,
) -> std::result::Result<Option<LockedPolicy>, sqlx::Error> {
    // The seeded `CheckOutsideLock` bug's plan reads the row unlocked.
    macro_rules! lock_policy_sql {
        ($lock:literal) => {
            concat!(
                "SELECT id, max_in_flight, max_claims_per_window, window_period, window_tz, window_start, \
                 window_weekday, additional_windows FROM admission_policies WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) ",
                $lock
            )
        };
    }
    let sql = if plan.policy_unlocked { lock_policy_sql!("") } else { lock_policy_sql!("FOR UPDATE") };
    let row: Option<LockedPolicyRow> = sqlx::query_as(sql)
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.map(|row| LockedPolicy::new(row.id, &row.limits)))
}

/// Locks a todo row within `within` (blocking) and reads it; an absent or foreign id is `not_found`.
pub(crate) async fn lock_todo(tx: &mut Transaction<'static, Postgres>, id: &str, within: &Reach) -> Result<Todo> {
    // The reach is part of the lock's predicate: a row outside it is never locked, so a caller
    // naming another tenant's todo gets `not_found` at once instead of waiting on its lock.
    let row: Option<TodoRow> = sqlx::query_as(composed_sql!(
        "SELECT {TODO_COLUMNS} FROM todos t WHERE t.id = $1 \
           AND (t.endpoint_id = ANY($2) OR t.team_id = ANY($3)) FOR UPDATE"
    ))
    .bind(id)
    .bind(&within.endpoint_ids)
    .bind(&within.team_ids)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db_error)?;
    row.ok_or_else(Error::not_found)?.into_todo()
}

impl PgStore {
    /// The instant of record inside a transaction, read after the locks it depends on.
    pub(crate) async fn clock_after_lock(&self, tx: &mut Transaction<'static, Postgres>) -> Result<DateTime<Utc>> {
        sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
            .bind(self.now_param())
            .fetch_one(&mut **tx)
            .await
            .map_err(db_error)
    }
}

/// One audit record as a policy's or a shared budget's audit is selected.
#[derive(sqlx::FromRow)]
pub(crate) struct AuditRow {
    actor_human_id: Option<String>,
    actor_endpoint_id: Option<String>,
    at: DateTime<Utc>,
    action: String,
    before: Option<Value>,
    after: Option<Value>,
}

impl AuditRow {
    pub(crate) fn into_record(self) -> AuditRecord {
        AuditRecord {
            actor_human_id: self.actor_human_id,
            actor_endpoint_id: self.actor_endpoint_id,
            at: self.at,
            action: self.action,
            before: self.before,
            after: self.after,
        }
    }
}
