//! Intake capacity and owner cancellation (intake-capacity.md).
//!
//! Capacity: a create counts the queue identity's pending todos and inserts under one
//! per-identity intake lock (a transaction-scoped advisory lock, never the SPEC-0030 policy row),
//! so concurrent creates across replicas admit exactly up to the cap. With no cap (the default)
//! no lock is taken. The setting is read at each intake, so a change reaches every replica's next
//! create without a restart.
//!
//! Cancellation: one conditional UPDATE per remove or clear. Whichever of a claim and a removal
//! commits first wins completely; clear-all waits for rows a claim is holding (no SKIP LOCKED),
//! then re-checks that they are still pending.

use super::rows::{TodoRow, lock_todo};
use super::sql::TODO_COLUMNS;
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Utc};
use models::capacity::{self, Capacity, CapacityEnv};
use models::error::{Code, Error, Result};
use models::identity::{Owner, QueueIdentity, ScopeRef};
use models::scope::HumanScope;
use models::store::PolicyActor;
use models::todo::{CreatedByKind, Todo, TodoState, validate_title};
use serde_json::Value;
use sqlx::PgConnection;

impl PgStore {
    /// The effective capacity: the environment's value when it locks the setting, else the
    /// persisted setting read now (a corrupt value counts as unset), else the default.
    pub(crate) async fn capacity_on(&self, conn: &mut PgConnection) -> Result<Capacity> {
        let stored: Option<Value> = match self.intake_env {
            CapacityEnv::Locked(_) => None,
            CapacityEnv::Unset => sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
                .bind(capacity::CAPACITY_SETTING_KEY)
                .fetch_optional(&mut *conn)
                .await
                .map_err(db_error)?,
        };
        let setting = capacity::parse_setting(stored.as_ref());
        if stored.is_some() && setting.is_none() {
            tracing::warn!(
                "the stored queue capacity setting is not a valid integer; using the default until it is set again"
            );
        }
        Ok(capacity::effective(self.intake_env, setting))
    }

    pub(crate) async fn queue_capacity_tx(&self) -> Result<Capacity> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut capacity = self.capacity_on(&mut conn).await?;
        if capacity.locked {
            // Show the persisted value too, even though the environment overrides it.
            let stored: Option<Value> = sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
                .bind(capacity::CAPACITY_SETTING_KEY)
                .fetch_optional(&mut *conn)
                .await
                .map_err(db_error)?;
            capacity.setting = capacity::parse_setting(stored.as_ref());
        }
        Ok(capacity)
    }

    /// Persists the setting, then the next intake anywhere applies it. Refused while the
    /// environment locks it; lowering it never removes pending work.
    pub(crate) async fn set_queue_capacity_tx(&self, max_pending: i64, by_human_id: &str) -> Result<Capacity> {
        capacity::check_settable(self.intake_env, max_pending)?;
        sqlx::query(
            "INSERT INTO settings (key, value, updated_at, updated_by_human_id) VALUES ($1, $2, coalesce($4::timestamptz, clock_timestamp()), $3) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at, \
               updated_by_human_id = EXCLUDED.updated_by_human_id",
        )
        .bind(capacity::CAPACITY_SETTING_KEY)
        .bind(Value::from(max_pending))
        .bind(by_human_id)
        .bind(self.now_param())
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        tracing::info!(max_pending, human = by_human_id, "queue capacity setting changed");
        self.queue_capacity_tx().await
    }

    /// Inside a transaction: take the identity's intake lock and refuse with `queue_full` when it
    /// already holds `max` pending todos. The caller has checked dedup first: a dedup hit is
    /// never capped.
    pub(crate) async fn check_intake(&self, conn: &mut PgConnection, identity: &QueueIdentity, max: i64) -> Result<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("intake:{identity}"))
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM todos WHERE state = 'pending' AND queue = $3 AND (endpoint_id = $1 OR team_id = $2)",
        )
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
        models::capacity::check_room(identity, pending, max)
    }

    /// Removes one pending todo of `identity`, whatever created it.
    pub(crate) async fn discard_todo_tx(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let removed: Vec<String> = sqlx::query_scalar(
                "UPDATE todos SET state = 'discarded', discarded_at = $5, discarded_by = $6, updated_at = $5 \
                 WHERE id = $4 AND queue = $3 AND (endpoint_id = $1 OR team_id = $2) AND state = 'pending' RETURNING id",
            )
            .bind(identity.endpoint_id())
            .bind(identity.team_id())
            .bind(&identity.queue)
            .bind(id)
            .bind(now)
            .bind(actor_label(by))
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            if removed.is_empty() {
                let state: Option<String> =
                    sqlx::query_scalar("SELECT state FROM todos WHERE id = $4 AND queue = $3 AND (endpoint_id = $1 OR team_id = $2)")
                        .bind(identity.endpoint_id())
                        .bind(identity.team_id())
                        .bind(&identity.queue)
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error)?;
                return Err(match state {
                    None => Error::not_found(),
                    Some(state) => Error::new(Code::NotPending, "only a pending todo can be removed").with("state", state),
                });
            }
            record_cancellation(&mut tx, identity, by, "remove", &removed, now).await
        }
        .await;
        finish(tx, outcome).await?;
        self.counters.discarded(&identity.queue, "remove", 1);
        Ok(())
    }

    /// Removes every pending todo of `identity`, deferred ones included: the exact count.
    pub(crate) async fn clear_queue_tx(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let removed: Vec<String> = sqlx::query_scalar(
                "UPDATE todos SET state = 'discarded', discarded_at = $4, discarded_by = $5, updated_at = $4 \
                 WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) AND state = 'pending' RETURNING id",
            )
            .bind(identity.endpoint_id())
            .bind(identity.team_id())
            .bind(&identity.queue)
            .bind(now)
            .bind(actor_label(by))
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            record_cancellation(&mut tx, identity, by, "clear", &removed, now).await?;
            Ok(removed.len() as u64)
        }
        .await;
        let removed = finish(tx, outcome).await?;
        self.counters.discarded(&identity.queue, "clear", removed);
        Ok(removed)
    }

    /// Provenance governs editing: only the human who created a pending todo may edit it.
    pub(crate) async fn edit_todo_tx(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> Result<Todo> {
        if let Some(title) = &title {
            validate_title(title)?;
        }
        let mut tx = self.begin().await?;
        let outcome = async {
            let todo = lock_todo(&mut tx, id).await?;
            if !human.reach.contains(&todo.identity) {
                return Err(Error::not_found());
            }
            if todo.state != TodoState::Pending {
                return Err(Error::conflict_state("only a pending todo can be edited", todo.state.as_str()));
            }
            if todo.created_by_kind != CreatedByKind::Human
                || todo.created_by_id.as_deref() != Some(human.human.id.as_str())
            {
                return Err(Error::conflict_state(
                    "only the human who created this todo may edit it",
                    todo.state.as_str(),
                )
                .with("created_by_kind", todo.created_by_kind.as_str()));
            }
            let row: TodoRow = sqlx::query_as(composed_sql!(
                "UPDATE todos t SET title = coalesce($2, t.title), payload = CASE WHEN $4 THEN $3 ELSE t.payload END, \
                   updated_at = coalesce($5::timestamptz, clock_timestamp()) WHERE t.id = $1 RETURNING {TODO_COLUMNS}"
            ))
            .bind(id)
            .bind(&title)
            .bind(&payload)
            .bind(payload.is_some())
            .bind(self.now_param())
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            row.into_todo()
        }
        .await;
        finish(tx, outcome).await
    }

    /// Purge of one queue identity: its todos (any state) and its policy go in one transaction.
    pub(crate) async fn purge_queue_tx(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let purged: Vec<String> = sqlx::query_scalar(
                "DELETE FROM todos WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) RETURNING id",
            )
            .bind(identity.endpoint_id())
            .bind(identity.team_id())
            .bind(&identity.queue)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            sqlx::query("DELETE FROM admission_policies WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2)")
                .bind(identity.endpoint_id())
                .bind(identity.team_id())
                .bind(&identity.queue)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            record_cancellation(&mut tx, identity, by, "purge", &purged, now).await?;
            Ok(purged.len() as u64)
        }
        .await;
        let purged = finish(tx, outcome).await?;
        tracing::info!(queue = %identity, purged, "queue deleted with its todos");
        Ok(purged)
    }

    /// Purge: an endpoint the human manages goes, with every todo of its queues, pending and
    /// claimed. A stale claimant's later complete or fail finds nothing (`not_found`).
    pub(crate) async fn delete_endpoint_tx(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()> {
        let Owner::Endpoint(id) = self.resolve_scope_tx(&human.manages, endpoint).await? else {
            return Err(Error::not_found());
        };
        let deleted = sqlx::query("DELETE FROM endpoints WHERE id = $1")
            .bind(&id)
            .execute(&self.pool)
            .await
            .map_err(db_error)?
            .rows_affected();
        if deleted == 0 {
            return Err(Error::not_found());
        }
        tracing::info!(endpoint = %id, human = %human.human.id, "endpoint deleted with its todos");
        Ok(())
    }
}

fn actor_label(by: &PolicyActor) -> String {
    match (&by.endpoint_id, &by.human_id) {
        (Some(endpoint), _) => format!("endpoint:{endpoint}"),
        (None, Some(human)) => format!("human:{human}"),
        (None, None) => "system".to_string(),
    }
}

async fn record_cancellation(
    tx: &mut PgConnection,
    identity: &QueueIdentity,
    by: &PolicyActor,
    action: &str,
    removed: &[String],
    at: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO queue_cancellations (endpoint_id, team_id, queue, actor_human_id, actor_endpoint_id, action, removed, todo_ids, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(identity.endpoint_id())
    .bind(identity.team_id())
    .bind(&identity.queue)
    .bind(&by.human_id)
    .bind(&by.endpoint_id)
    .bind(action)
    .bind(removed.len() as i32)
    .bind(removed)
    .bind(at)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    Ok(())
}
