//! The claim transaction (SPEC-0003 "Atomic Claim"; SPEC-0030 REQ-4 builds on it).
//!
//! One transaction per claim, read top to bottom:
//! 1. pick the candidate: `FOR UPDATE SKIP LOCKED` for `claim_next` (concurrent claimers get
//!    different rows), a blocking `FOR UPDATE` for `claim` of a named todo;
//! 2. read the clock after the lock (`clock_timestamp()`, not the stale transaction start);
//! 3. claim: state, owner, lease, attempt + 1, and one attempt row; a takeover closes the lapsed
//!    claimant's attempt;
//! 4. commit. Dropping the transaction on any early return rolls it back.

use super::{CLAIMABLE, PgStore, TODO_COLUMNS, TodoRow, db_error, identity_arrays, identity_filter};
use chrono::{DateTime, Duration, Utc};
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::ClaimNext;
use models::todo::Todo;
use sqlx::{Postgres, Transaction};

impl PgStore {
    pub(crate) async fn claim_next_tx(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<ClaimNext> {
        if queues.is_empty() {
            return Ok(ClaimNext::Empty);
        }
        let [endpoint_ids, endpoint_queues, team_ids, team_queues] = identity_arrays(queues);
        let mut tx = self.begin().await?;

        // 1. The oldest claimable todo across the caller's queues that nobody else holds.
        let candidate: Option<(String, DateTime<Utc>)> = sqlx::query_as(composed_sql!(
            "WITH clock AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now) \
             SELECT t.id, clock.now FROM todos t, clock \
             WHERE {} AND {CLAIMABLE} \
             ORDER BY t.created_at, t.id \
             FOR UPDATE OF t SKIP LOCKED LIMIT 1",
            identity_filter(2)
        ))
        .bind(self.now_param())
        .bind(&endpoint_ids)
        .bind(&endpoint_queues)
        .bind(&team_ids)
        .bind(&team_queues)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let Some((id, now)) = candidate else {
            return Ok(ClaimNext::Empty);
        };

        // 3. Claim it, 4. commit.
        let todo = claim_locked(&mut tx, actor, &id, now, lease_seconds).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(ClaimNext::Claimed(Box::new(todo)))
    }

    pub(crate) async fn claim_tx(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        let mut tx = self.begin().await?;

        // 1. Lock the named todo, waiting for any claimer that holds it.
        let todo = lock_todo(&mut tx, id).await?;
        actor.check_todo_access(&todo.identity)?;

        // 2. The clock after the lock: a wait on the row must not leave us judging a stale instant.
        let now = self.clock_after_lock(&mut tx).await?;
        if !todo.claimable_at(now) {
            return Err(Error::conflict_state("the todo is not claimable", todo.state.as_str()));
        }

        // 3. Claim, 4. commit.
        let todo = claim_locked(&mut tx, actor, &todo.id, now, lease_seconds).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(todo)
    }

    /// The instant of record inside a transaction, read after the locks it depends on.
    pub(crate) async fn clock_after_lock(&self, tx: &mut Transaction<'static, Postgres>) -> Result<DateTime<Utc>> {
        sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
            .bind(self.now_param())
            .fetch_one(&mut **tx)
            .await
            .map_err(db_error)
    }
}

/// Locks a todo row (blocking) and reads it; an absent id is `not_found`.
pub(crate) async fn lock_todo(tx: &mut Transaction<'static, Postgres>, id: &str) -> Result<Todo> {
    let row: Option<TodoRow> =
        sqlx::query_as(composed_sql!("SELECT {TODO_COLUMNS} FROM todos t WHERE t.id = $1 FOR UPDATE"))
            .bind(id)
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_error)?;
    row.ok_or_else(Error::not_found)?.into_todo()
}

/// Step 3 on a row this transaction already holds: the claim and its attempt row.
async fn claim_locked(
    tx: &mut Transaction<'static, Postgres>,
    actor: &Actor,
    id: &str,
    now: DateTime<Utc>,
    lease_seconds: i64,
) -> Result<Todo> {
    let lease_expires_at = now + Duration::seconds(lease_seconds);
    let row: TodoRow = sqlx::query_as(composed_sql!(
        "WITH closed AS ( \
           UPDATE todo_attempts SET ended_at = $2, outcome = 'lease_expired' WHERE todo_id = $1 AND ended_at IS NULL), \
         opened AS ( \
           INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at) \
           SELECT $1, coalesce(max(seq), 0) + 1, $3, $4, $2 FROM todo_attempts WHERE todo_id = $1) \
         UPDATE todos t SET state = 'claimed', owner = $3, claimed_by_endpoint_id = $4, lease_expires_at = $5, \
           attempt = t.attempt + 1, claimed_at = $2, next_retry_at = NULL, completed_at = NULL, updated_at = $2 \
         WHERE t.id = $1 RETURNING {TODO_COLUMNS}"
    ))
    .bind(id)
    .bind(now)
    .bind(actor.label())
    .bind(actor.endpoint_id())
    .bind(lease_expires_at)
    .fetch_one(&mut **tx)
    .await
    .map_err(db_error)?;
    let todo = row.into_todo()?;
    debug_assert!(todo.attempt <= todo.max_attempts, "a claim never exceeds max_attempts");
    Ok(todo)
}
