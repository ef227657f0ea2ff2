//! Everything after a claim: heartbeat, complete, fail, release, Retry now, and the two sweeps
//! that return work to the queue (the lease reaper and the retry scheduler).
//!
//! Only the lease holder may heartbeat, complete, fail or release (base-system §2); anyone else
//! in scope gets `conflict` with the todo's state. Each of those four first tries its one-statement
//! form (`held.rs`); the transactions below run when that changes nothing, and give the refusal.

use super::rows::{TodoRow, lock_todo};
use super::sql::TODO_COLUMNS;
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Duration, Utc};
use models::error::{Error, Result};
use models::scope::Actor;
use models::store::{Lifecycle, SweepReport};
use models::todo::{Todo, TodoState, retry_backoff};
use serde_json::Value;
use sqlx::{Postgres, Transaction};

/// Rows one sweep statement touches at most; a sweep repeats until a batch comes back short.
const SWEEP_BATCH_MAX: i64 = 500;

impl PgStore {
    /// Locks a todo the actor holds the lease on, and reads the clock after the lock.
    async fn lock_held(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        actor: &Actor,
        id: &str,
    ) -> Result<(Todo, DateTime<Utc>)> {
        let todo = lock_todo(tx, id, actor.reach()).await?;
        actor.check_todo_access(&todo.identity)?;
        if todo.state != TodoState::Claimed || todo.owner.as_deref() != Some(actor.label().as_str()) {
            return Err(Error::conflict_state("the caller does not hold this todo's lease", todo.state.as_str()));
        }
        let now = self.clock_after_lock(tx).await?;
        Ok((todo, now))
    }

    pub(crate) async fn heartbeat_tx(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        if let Some(todo) = self.heartbeat_held(actor, id, lease_seconds).await? {
            return Ok(todo);
        }
        let mut tx = self.begin().await?;
        let outcome = async {
            let (_, now) = self.lock_held(&mut tx, actor, id).await?;
            let row: TodoRow = sqlx::query_as(composed_sql!(
                "UPDATE todos t SET lease_expires_at = $2, updated_at = $3 WHERE t.id = $1 RETURNING {TODO_COLUMNS}"
            ))
            .bind(id)
            .bind(now + Duration::seconds(lease_seconds))
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            row.into_todo()
        }
        .await;
        finish(tx, outcome).await
    }

    pub(crate) async fn complete_tx(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        let todo = self.complete_in_tx(actor, id, result).await?;
        self.counters.completed(&todo.identity.queue, "complete");
        Ok(todo)
    }

    async fn complete_in_tx(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        if let Some(todo) = self.complete_held(actor, id, &result).await? {
            return Ok(todo);
        }
        let mut tx = self.begin().await?;
        let outcome = self.complete_locked(&mut tx, actor, id, &result).await;
        finish(tx, outcome).await
    }

    /// `complete {ids}` (issue #31 item 2): one statement when the caller holds every todo;
    /// otherwise one transaction that completes them one by one in `ids` order and rolls back
    /// at the first refusal, which names its `id` (the leases may have come back in between,
    /// and then it completes them all).
    pub(crate) async fn complete_many_tx(
        &self,
        actor: &Actor,
        ids: &[String],
        result: Option<Value>,
    ) -> Result<Vec<Todo>> {
        models::todo::validate_ids(ids)?;
        let mut todos = self.complete_many_held(actor, ids, &result).await?;
        if todos.is_empty() {
            let mut tx = self.begin().await?;
            let outcome = async {
                // Locked in id order first, as the one statement locks them, so two such calls
                // never wait on each other in a cycle; then checked in `ids` order, so the
                // refusal names the first id refused.
                sqlx::query("SELECT id FROM todos WHERE id = ANY($1) ORDER BY id FOR UPDATE")
                    .bind(ids)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                let mut todos = Vec::with_capacity(ids.len());
                for id in ids {
                    let todo = self.complete_locked(&mut tx, actor, id, &result).await;
                    todos.push(todo.map_err(|error| error.with("id", id.as_str()))?);
                }
                Ok(todos)
            }
            .await;
            todos = finish(tx, outcome).await?;
        }
        // Answered in `ids` order (the statement returns them in lock order).
        todos.sort_by_key(|todo| ids.iter().position(|id| *id == todo.id));
        for todo in &todos {
            self.counters.completed(&todo.identity.queue, "complete");
        }
        Ok(todos)
    }

    /// Complete's step-by-step form inside `tx`: the lease checked under the row lock, then the
    /// todo done and its attempt closed in one statement (one round trip fewer, issue #15).
    async fn complete_locked(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        actor: &Actor,
        id: &str,
        result: &Option<Value>,
    ) -> Result<Todo> {
        let (_, now) = self.lock_held(tx, actor, id).await?;
        let row: TodoRow = sqlx::query_as(composed_sql!(
            "WITH closed AS (UPDATE todo_attempts SET ended_at = $3, outcome = 'completed' \
                              WHERE todo_id = $1 AND ended_at IS NULL) \
             UPDATE todos t SET state = 'done', result = $2, completed_at = $3, lease_expires_at = NULL, updated_at = $3 \
             WHERE t.id = $1 RETURNING {TODO_COLUMNS}"
        ))
        .bind(id)
        .bind(result)
        .bind(now)
        .fetch_one(&mut **tx)
        .await
        .map_err(db_error)?;
        row.into_todo()
    }

    /// Below `max_attempts` the todo parks with a backoff; at it, it is dead-lettered.
    pub(crate) async fn fail_tx(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        let todo = self.fail_in_tx(actor, id, result).await?;
        self.counters.completed(&todo.identity.queue, "fail");
        Ok(todo)
    }

    async fn fail_in_tx(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        if let Some(todo) = self.fail_held(actor, id, &result).await? {
            return Ok(todo);
        }
        let mut tx = self.begin().await?;
        let outcome = async {
            let (todo, now) = self.lock_held(&mut tx, actor, id).await?;
            let next_retry_at = (todo.attempt < todo.max_attempts).then(|| now + retry_backoff(todo.attempt));
            // The attempt is closed in the same statement (one round trip fewer, issue #15).
            let row: TodoRow = sqlx::query_as(composed_sql!(
                "WITH closed AS (UPDATE todo_attempts SET ended_at = $4, outcome = 'failed' \
                                  WHERE todo_id = $1 AND ended_at IS NULL) \
                 UPDATE todos t SET state = 'failed', result = $2, next_retry_at = $3, lease_expires_at = NULL, updated_at = $4 \
                 WHERE t.id = $1 RETURNING {TODO_COLUMNS}"
            ))
            .bind(id)
            .bind(&result)
            .bind(next_retry_at)
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            row.into_todo()
        }
        .await;
        finish(tx, outcome).await
    }

    /// Back to pending with the attempt unchanged: a release is not a failure.
    pub(crate) async fn release_tx(&self, actor: &Actor, id: &str) -> Result<Todo> {
        if let Some(todo) = self.release_held(actor, id).await? {
            super::mutant_hooks::after_release(&self.pool, id).await?;
            return Ok(todo);
        }
        let mut tx = self.begin().await?;
        let outcome = async {
            let (_, now) = self.lock_held(&mut tx, actor, id).await?;
            let row: TodoRow = sqlx::query_as(composed_sql!(
                "UPDATE todos t SET state = 'pending', owner = NULL, claimed_by_endpoint_id = NULL, lease_expires_at = NULL, \
                   updated_at = $2 WHERE t.id = $1 RETURNING {TODO_COLUMNS}"
            ))
            .bind(id)
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            close_attempt(&mut tx, id, now, "released").await?;
            super::mutant_hooks::after_release(&mut *tx, id).await?;
            row.into_todo()
        }
        .await;
        finish(tx, outcome).await
    }

    /// "Retry now": a failed todo (parked or dead-lettered) back to pending with a fresh attempt
    /// budget; the attempt history stays.
    pub(crate) async fn retry_now_tx(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let todo = lock_todo(&mut tx, id, actor.reach()).await?;
            actor.check_todo_access(&todo.identity)?;
            if todo.state != TodoState::Failed {
                return Err(Error::conflict_state("only a failed todo can be retried", todo.state.as_str()));
            }
            let now = self.clock_after_lock(&mut tx).await?;
            let row: TodoRow = sqlx::query_as(composed_sql!(
                "UPDATE todos t SET state = 'pending', attempt = 0, result = NULL, claimed_at = NULL, completed_at = NULL, \
                   next_retry_at = NULL, owner = NULL, claimed_by_endpoint_id = NULL, updated_at = $2 \
                 WHERE t.id = $1 RETURNING {TODO_COLUMNS}"
            ))
            .bind(id)
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(|error| match error.as_database_error() {
                // A dead letter's key is free for new work; if a newer live todo holds it, the
                // old one cannot come back to life under the same key.
                Some(database) if database.is_unique_violation() => models::todo::retry_slot_taken(),
                _ => db_error(error),
            })?;
            row.into_todo()
        }
        .await;
        finish(tx, outcome).await
    }

    /// The lease reaper: lapsed claims return to pending, or are dead-lettered at `max_attempts`.
    /// Rows a claim transaction holds are skipped, not waited on; the next tick gets them. The
    /// leases are read from the in-flight indexes (migration 0020), one branch per owner kind
    /// (each branch is one index's predicate) rather than an OR, which PostgreSQL reads as two
    /// bitmap scans that never mark a finished claim's entry dead (`status_select`). The clock
    /// is a sub-select, so the lease bound is a condition of the index scans, not a filter on
    /// every claimed row. A batch takes up to `SWEEP_BATCH_MAX` of each kind, in no particular
    /// order (the loop reaps them all): sorted by lease, each batch would read every lapsed row
    /// to keep 500, and a mass lapse would cost its square. The update finds them by key.
    pub(crate) async fn reap_tx(&self) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        loop {
            let (pending, dead): (i64, i64) = sqlx::query_as(
                "WITH clock AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now), \
                 lapsed_endpoint AS ( \
                   SELECT t.id FROM todos t \
                   WHERE t.state = 'claimed' AND t.endpoint_id IS NOT NULL AND t.lease_expires_at < (SELECT now FROM clock) \
                   LIMIT $2 FOR UPDATE OF t SKIP LOCKED), \
                 lapsed_team AS ( \
                   SELECT t.id FROM todos t \
                   WHERE t.state = 'claimed' AND t.team_id IS NOT NULL AND t.lease_expires_at < (SELECT now FROM clock) \
                   LIMIT $2 FOR UPDATE OF t SKIP LOCKED), \
                 reaped AS ( \
                   UPDATE todos t SET state = CASE WHEN t.attempt >= t.max_attempts THEN 'failed' ELSE 'pending' END, \
                     owner = NULL, claimed_by_endpoint_id = NULL, lease_expires_at = NULL, next_retry_at = NULL, \
                     updated_at = clock.now \
                   FROM clock WHERE t.id = ANY (ARRAY(SELECT id FROM lapsed_endpoint UNION ALL SELECT id FROM lapsed_team)) \
                   RETURNING t.id, t.state), \
                 closed AS ( \
                   UPDATE todo_attempts a SET ended_at = clock.now, outcome = 'reaped' FROM reaped, clock \
                   WHERE a.todo_id = reaped.id AND a.ended_at IS NULL), \
                 push AS ( \
                   INSERT INTO push_due (todo_id, reason, at) \
                   SELECT reaped.id, 'requeued', clock.now FROM reaped, clock WHERE reaped.state = 'pending') \
                 SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'failed') FROM reaped",
            )
            .bind(self.now_param())
            .bind(SWEEP_BATCH_MAX)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
            report.returned_to_pending += pending as u64;
            report.dead_lettered += dead as u64;
            if pending + dead < SWEEP_BATCH_MAX {
                return Ok(report);
            }
        }
    }

    /// The retry scheduler: parked retries whose backoff has elapsed return to pending, attempt kept.
    pub(crate) async fn requeue_due_retries_tx(&self) -> Result<u64> {
        let mut requeued = 0;
        loop {
            let batch: i64 = sqlx::query_scalar(
                "WITH clock AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now), \
                 due AS ( \
                   SELECT t.id FROM todos t, clock WHERE t.state = 'failed' AND t.next_retry_at <= clock.now \
                     AND t.attempt < t.max_attempts ORDER BY t.next_retry_at LIMIT $2 FOR UPDATE OF t SKIP LOCKED), \
                 requeued AS ( \
                   UPDATE todos t SET state = 'pending', owner = NULL, claimed_by_endpoint_id = NULL, next_retry_at = NULL, \
                     updated_at = clock.now FROM due, clock WHERE t.id = due.id RETURNING t.id), \
                 push AS ( \
                   INSERT INTO push_due (todo_id, reason, at) SELECT requeued.id, 'requeued', clock.now FROM requeued, clock) \
                 SELECT count(*) FROM requeued",
            )
            .bind(self.now_param())
            .bind(SWEEP_BATCH_MAX)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
            let batch = batch as u64;
            requeued += batch;
            if (batch as i64) < SWEEP_BATCH_MAX {
                return Ok(requeued);
            }
        }
    }
}

async fn close_attempt(
    tx: &mut Transaction<'static, Postgres>,
    id: &str,
    now: DateTime<Utc>,
    outcome: &str,
) -> Result<()> {
    sqlx::query("UPDATE todo_attempts SET ended_at = $2, outcome = $3 WHERE todo_id = $1 AND ended_at IS NULL")
        .bind(id)
        .bind(now)
        .bind(outcome)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The lifecycle role on PostgreSQL: each method is one of the transactions above.
impl Lifecycle for PgStore {
    async fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        self.heartbeat_tx(actor, id, lease_seconds).await
    }

    async fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.complete_tx(actor, id, result).await
    }

    async fn complete_many(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>> {
        self.complete_many_tx(actor, ids, result).await
    }

    async fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.fail_tx(actor, id, result).await
    }

    async fn release(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.release_tx(actor, id).await
    }

    async fn retry_now(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.retry_now_tx(actor, id).await
    }

    async fn reap_lapsed_leases(&self) -> Result<SweepReport> {
        self.reap_tx().await
    }

    async fn requeue_due_retries(&self) -> Result<u64> {
        self.requeue_due_retries_tx().await
    }
}
