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
use models::limits::{CANCELLATION_AUDIT_IDS_MAX, CANCELLATION_BATCH_MAX};
use models::scope::HumanScope;
use models::store::{Intake, PolicyActor};
use models::todo::{CreatedByKind, NewTodo, Todo, TodoState, validate_title};
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

    /// Inside a transaction: take the intake lock of every identity `todos` target, in one
    /// sorted order of their lock keys. Two deliveries fanning out to the same identities in
    /// opposite orders would otherwise each hold one lock and wait for the other (40P01).
    /// `check_intake` later takes the same locks again, which an advisory lock allows.
    pub(crate) async fn lock_intakes_sorted(&self, conn: &mut PgConnection, todos: &[NewTodo]) -> Result<()> {
        let mut keys: Vec<String> = todos.iter().map(|todo| intake_lock_key(&todo.identity)).collect();
        keys.sort_unstable();
        keys.dedup();
        // One statement per lock, so the order is the loop's and not a plan's.
        for key in &keys {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                .bind(key)
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
        }
        Ok(())
    }

    /// Inside a transaction: take the identity's intake lock and refuse with `queue_full` when it
    /// already holds `max` pending todos. The caller has checked dedup first: a dedup hit is
    /// never capped.
    pub(crate) async fn check_intake(&self, conn: &mut PgConnection, identity: &QueueIdentity, max: i64) -> Result<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(intake_lock_key(identity))
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
            let tally = Tally { count: removed.len() as u64, sample: removed, cursor: String::new() };
            record_cancellation(&mut tx, identity, by, "remove", &tally, now).await
        }
        .await;
        finish(tx, outcome).await?;
        self.counters.discarded(&identity.queue, "remove", 1);
        Ok(())
    }

    /// Removes every pending todo of `identity`, deferred ones included: the exact count.
    ///
    /// One transaction, in batches of `CANCELLATION_BATCH_MAX` walked in id order. Each batch
    /// is one conditional UPDATE that waits for rows a claim holds (no SKIP LOCKED) and
    /// re-checks `state = 'pending'` once it gets them, so claimed work is never removed.
    pub(crate) async fn clear_queue_tx(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let mut tally = Tally::default();
            loop {
                let batch: Batch = sqlx::query_as(
                    "WITH candidates AS MATERIALIZED ( \
                       SELECT id FROM todos WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) AND state = 'pending' \
                         AND id > $6 ORDER BY id LIMIT $7), \
                     removed AS ( \
                       UPDATE todos t SET state = 'discarded', discarded_at = $4, discarded_by = $5, updated_at = $4 \
                       FROM candidates c WHERE t.id = c.id AND t.state = 'pending' RETURNING t.id) \
                     SELECT (SELECT max(id) FROM candidates) AS last_id, \
                       ARRAY(SELECT id FROM removed ORDER BY id LIMIT $8) AS ids, (SELECT count(*) FROM removed) AS count",
                )
                .bind(identity.endpoint_id())
                .bind(identity.team_id())
                .bind(&identity.queue)
                .bind(now)
                .bind(actor_label(by))
                .bind(&tally.cursor)
                .bind(CANCELLATION_BATCH_MAX)
                .bind(CANCELLATION_AUDIT_IDS_MAX as i64)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
                if !tally.add(batch) {
                    break;
                }
            }
            record_cancellation(&mut tx, identity, by, "clear", &tally, now).await?;
            Ok(tally.count)
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
            let todo = lock_todo(&mut tx, id, &human.reach).await?;
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

    /// Purge of one queue identity: its todos (any state) and its policy go in one transaction,
    /// the todos in batches of `CANCELLATION_BATCH_MAX` walked in id order.
    pub(crate) async fn purge_queue_tx(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let mut tally = Tally::default();
            loop {
                let batch: Batch = sqlx::query_as(
                    "WITH candidates AS MATERIALIZED ( \
                       SELECT id FROM todos WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) \
                         AND id > $4 ORDER BY id LIMIT $5), \
                     purged AS (DELETE FROM todos t USING candidates c WHERE t.id = c.id RETURNING t.id) \
                     SELECT (SELECT max(id) FROM candidates) AS last_id, \
                       ARRAY(SELECT id FROM purged ORDER BY id LIMIT $6) AS ids, (SELECT count(*) FROM purged) AS count",
                )
                .bind(identity.endpoint_id())
                .bind(identity.team_id())
                .bind(&identity.queue)
                .bind(&tally.cursor)
                .bind(CANCELLATION_BATCH_MAX)
                .bind(CANCELLATION_AUDIT_IDS_MAX as i64)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
                if !tally.add(batch) {
                    break;
                }
            }
            // The policy goes with its queue, and its removal is audited like any other (REQ-10,
            // issue #51): the trail stays readable after the queue is gone.
            if let Some(before) = super::admission::locked_policy_json(&mut tx, identity).await? {
                let policy_id: String = sqlx::query_scalar(
                    "DELETE FROM admission_policies WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) RETURNING id",
                )
                .bind(identity.endpoint_id())
                .bind(identity.team_id())
                .bind(&identity.queue)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
                super::admission::audit(&mut tx, &policy_id, identity, by, "delete", Some(before), None, now).await?;
            }
            record_cancellation(&mut tx, identity, by, "purge", &tally, now).await?;
            Ok(tally.count)
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
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            // Its policies go with it (`ON DELETE CASCADE`); each removal is audited first, as
            // a policy delete is (REQ-10, issue #51). The audit has no foreign keys.
            sqlx::query(
                "INSERT INTO admission_audit (policy_id, endpoint_id, team_id, queue, actor_human_id, \
                   actor_endpoint_id, action, before, after, at) \
                 SELECT p.id, p.endpoint_id, p.team_id, p.queue, $2, NULL, 'delete', \
                   jsonb_build_object('max_in_flight', p.max_in_flight, \
                     'max_claims_per_window', p.max_claims_per_window, \
                     'window', CASE WHEN p.window_period IS NULL THEN NULL ELSE jsonb_build_object( \
                       'period', p.window_period, 'tz', p.window_tz, 'start', p.window_start, \
                       'weekday', p.window_weekday) END) \
                   || CASE WHEN p.additional_windows IS NULL THEN '{}'::jsonb \
                      ELSE jsonb_build_object('additional_windows', p.additional_windows) END, \
                   NULL, $3 \
                 FROM (SELECT * FROM admission_policies WHERE endpoint_id = $1 ORDER BY queue FOR UPDATE) p",
            )
            .bind(&id)
            .bind(&human.human.id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            let deleted = sqlx::query("DELETE FROM endpoints WHERE id = $1")
                .bind(&id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected();
            if deleted == 0 { Err(Error::not_found()) } else { Ok(()) }
        }
        .await;
        finish(tx, outcome).await?;
        tracing::info!(endpoint = %id, human = %human.human.id, "endpoint deleted with its todos");
        self.await_credential_change().await
    }
}

/// The text whose hash names an identity's intake lock.
fn intake_lock_key(identity: &QueueIdentity) -> String {
    format!("intake:{identity}")
}

fn actor_label(by: &PolicyActor) -> String {
    match (&by.endpoint_id, &by.human_id) {
        (Some(endpoint), _) => format!("endpoint:{endpoint}"),
        (None, Some(human)) => format!("human:{human}"),
        (None, None) => "system".to_string(),
    }
}

/// One batch of a clear or purge: the last candidate id it walked (None when none was left),
/// the smallest ids it changed, and how many it changed.
#[derive(sqlx::FromRow)]
struct Batch {
    last_id: Option<String>,
    ids: Vec<String>,
    count: i64,
}

/// What a clear or purge has changed so far: the exact count, the audit's id sample, and the
/// cursor past which the next batch looks.
#[derive(Default)]
struct Tally {
    count: u64,
    sample: Vec<String>,
    cursor: String,
}

impl Tally {
    /// Adds a batch; false once the walk is over.
    fn add(&mut self, batch: Batch) -> bool {
        let Some(last_id) = batch.last_id else { return false };
        // The database orders ids by its collation, so only "not the same place" is checked here.
        assert_ne!(last_id, self.cursor, "the walk moves forward");
        self.cursor = last_id;
        self.count += u64::try_from(batch.count).unwrap_or(0);
        models::limits::keep_audit_sample(&mut self.sample, batch.ids);
        true
    }
}

async fn record_cancellation(
    tx: &mut PgConnection,
    identity: &QueueIdentity,
    by: &PolicyActor,
    action: &str,
    tally: &Tally,
    at: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO queue_cancellations (endpoint_id, team_id, queue, actor_human_id, actor_endpoint_id, action, removed, todo_ids, truncated, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(identity.endpoint_id())
    .bind(identity.team_id())
    .bind(&identity.queue)
    .bind(&by.human_id)
    .bind(&by.endpoint_id)
    .bind(action)
    .bind(i32::try_from(tally.count).unwrap_or(i32::MAX))
    .bind(&tally.sample)
    .bind((tally.sample.len() as u64) < tally.count)
    .bind(at)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The intake role on PostgreSQL: each method is one of the transactions above.
impl Intake for PgStore {
    async fn queue_capacity(&self) -> Result<models::capacity::Capacity> {
        self.queue_capacity_tx().await
    }

    async fn set_queue_capacity(&self, max_pending: i64, by_human_id: &str) -> Result<models::capacity::Capacity> {
        self.set_queue_capacity_tx(max_pending, by_human_id).await
    }

    async fn discard_todo(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()> {
        self.discard_todo_tx(identity, id, by).await
    }

    async fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        self.clear_queue_tx(identity, by).await
    }

    async fn edit_todo(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> Result<Todo> {
        self.edit_todo_tx(human, id, title, payload).await
    }

    async fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        self.purge_queue_tx(identity, by).await
    }

    async fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()> {
        self.delete_endpoint_tx(human, endpoint).await
    }
}
