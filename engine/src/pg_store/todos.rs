//! Creating, listing and reading todos.
//!
//! Creation dedups on the idempotency key among live rows of the same queue identity: the
//! partial unique indexes decide under concurrency, and the loser reads the winner's row.

use super::rows::TodoRow;
use super::sql::{Binds, TODO_COLUMNS, identity_filter};
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Utc};
use models::error::{Error, Result};
use models::scope::Actor;
use models::scope::Reach;
use models::store::{TodoQuery, TodoSet};
use models::todo::{Created, NewTodo, Todo};
use sqlx::PgConnection;

/// How often a create retries when the live row it deduped onto finished in between.
const DEDUP_RETRIES_MAX: usize = 3;

impl PgStore {
    pub(crate) async fn create_todo_tx(&self, new: NewTodo) -> Result<Created> {
        new.validate()?;
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let capacity = self.capacity_on(&mut conn).await?.effective;
        let created = if capacity == 0 {
            // Unlimited: no intake lock, no count.
            self.create_in(&mut conn, &new, None, 0).await
        } else {
            drop(conn);
            let mut tx = self.begin().await?;
            let outcome = self.create_in(&mut tx, &new, None, capacity).await;
            finish(tx, outcome).await
        };
        self.counters.create_answered(&new, &created);
        created
    }

    /// Inserts a todo on `conn` (a pooled connection, or a transaction's), deduping on the
    /// idempotency key among live rows. `now` is the transaction's instant when the caller has
    /// one; otherwise the clock of record. With a `capacity` (> 0), `conn` must be inside a
    /// transaction: a dedup hit is answered first and never capped, then the intake lock and
    /// the count decide.
    pub(crate) async fn create_in(
        &self,
        conn: &mut PgConnection,
        new: &NewTodo,
        now: Option<DateTime<Utc>>,
        capacity: i64,
    ) -> Result<Created> {
        let now = now.or_else(|| self.now_param());
        if capacity > 0 {
            if let Some(existing) = self.live_duplicate(conn, new).await? {
                return Ok(Created { todo: existing, deduped: true });
            }
            self.check_intake(conn, &new.identity, capacity).await?;
        }
        for _ in 0..DEDUP_RETRIES_MAX {
            let inserted: Option<TodoRow> = sqlx::query_as(composed_sql!(
                "WITH clock AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now), \
                 inserted AS ( \
                   INSERT INTO todos AS t (id, endpoint_id, team_id, queue, title, payload, idempotency_key, max_attempts, \
                                           created_by_kind, created_by_id, created_at, updated_at) \
                   SELECT 'td_' || replace(gen_random_uuid()::text, '-', ''), $2, $3, $4, $5, $6, $7, $8, $9, $10, clock.now, clock.now \
                   FROM clock \
                   ON CONFLICT DO NOTHING \
                   RETURNING {TODO_COLUMNS}), \
                 push AS (INSERT INTO push_due (todo_id, reason, at) SELECT id, 'created', created_at FROM inserted) \
                 SELECT * FROM inserted"
            ))
            .bind(now)
            .bind(new.identity.endpoint_id())
            .bind(new.identity.team_id())
            .bind(&new.identity.queue)
            .bind(&new.title)
            .bind(&new.payload)
            .bind(&new.idempotency_key)
            .bind(new.max_attempts)
            .bind(new.created_by_kind.as_str())
            .bind(&new.created_by_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db_error)?;
            if let Some(row) = inserted {
                return Ok(Created { todo: row.into_todo()?, deduped: false });
            }
            if new.idempotency_key.is_none() {
                return Err(Error::internal("insert without an idempotency key conflicted"));
            }
            if let Some(existing) = self.live_duplicate(conn, new).await? {
                return Ok(Created { todo: existing, deduped: true });
            }
        }
        Err(Error::unavailable("the todo could not be created; try again"))
    }

    /// The live todo (not done, not dead-lettered; discarded ones keep their slot) holding
    /// `new`'s idempotency key in its queue identity, if any.
    async fn live_duplicate(&self, conn: &mut PgConnection, new: &NewTodo) -> Result<Option<Todo>> {
        let Some(key) = &new.idempotency_key else {
            return Ok(None);
        };
        let existing: Option<TodoRow> = sqlx::query_as(composed_sql!(
            "SELECT {TODO_COLUMNS} FROM todos t \
             WHERE t.endpoint_id IS NOT DISTINCT FROM $1 AND t.team_id IS NOT DISTINCT FROM $2 \
               AND t.queue = $3 AND t.idempotency_key = $4 \
               AND t.state <> 'done' AND (t.state <> 'failed' OR t.next_retry_at IS NOT NULL)"
        ))
        .bind(new.identity.endpoint_id())
        .bind(new.identity.team_id())
        .bind(&new.identity.queue)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
        existing.map(TodoRow::into_todo).transpose()
    }

    pub(crate) async fn list_todos_tx(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        let (identities, reach) = match query.set {
            TodoSet::Queues(identities) => (identities, Reach::default()),
            TodoSet::Owners(reach) => (Vec::new(), reach),
        };
        let mut binds = Binds::default();
        let identities = identity_filter(&mut binds, "t", &identities);
        let (endpoint_ids, team_ids) = (binds.push(&reach.endpoint_ids), binds.push(&reach.team_ids));
        let state = binds.push(query.state.map(|s| s.as_str()));
        let limit = binds.push(query.limit.clamp(1, 1000));
        let sql = composed_sql!(
            "SELECT {TODO_COLUMNS} FROM todos t \
             WHERE ({identities} OR t.endpoint_id = ANY({endpoint_ids}) OR t.team_id = ANY({team_ids})) \
               AND ({state}::text IS NULL OR t.state = {state}) \
             ORDER BY t.created_at DESC, t.id DESC LIMIT {limit}"
        );
        let rows: Vec<TodoRow> = sqlx::query_as_with(sql, binds.into_arguments().map_err(db_error)?)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        rows.into_iter().map(TodoRow::into_todo).collect()
    }

    pub(crate) async fn get_todo_tx(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let row: Option<TodoRow> = sqlx::query_as(composed_sql!("SELECT {TODO_COLUMNS} FROM todos t WHERE t.id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)?;
        let todo = row.ok_or_else(Error::not_found)?.into_todo()?;
        // get_todo on a foreign id, or on an own todo outside the grant, is not_found (base-system §3).
        actor.check_todo_access(&todo.identity).map_err(|_| Error::not_found())?;
        Ok(todo)
    }
}
