//! Creating, listing and reading todos.
//!
//! Creation dedups on the idempotency key among live rows of the same queue identity: the
//! partial unique indexes decide under concurrency, and the loser reads the winner's row.
//! A listing reads only the caller's own rows, through an index, however many rows other
//! tenants hold (issue #14 item 4; `engine/tests/tenancy_plans.rs` checks the plans).

use super::rows::TodoRow;
use super::sql::{LISTED_TODO_COLUMNS, TODO_COLUMNS};
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Utc};
use models::error::{Error, Result};
use models::identity::Owner;
use models::scope::Actor;
use models::store::{TodoQuery, TodoSet, Todos};
use models::todo::{Created, NewTodo, Todo};
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, PgConnection};

/// How often a create retries when the live row it deduped onto finished in between.
const DEDUP_RETRIES_MAX: usize = 3;

impl PgStore {
    pub(crate) async fn create_todo_tx(&self, new: NewTodo) -> Result<Created> {
        new.validate()?;
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let capacity = self.capacity_on(&mut conn).await?.effective;
        let created = if capacity == 0 {
            // Unlimited: no intake lock, no count.
            self.create_in(&mut conn, &new, None, None, 0).await
        } else {
            drop(conn);
            let mut tx = self.begin().await?;
            let outcome = self.create_in(&mut tx, &new, None, None, capacity).await;
            finish(tx, outcome).await
        };
        self.counters.create_answered(&new, &created);
        created
    }

    /// Inserts a todo on `conn` (a pooled connection, or a transaction's), deduping on the
    /// idempotency key among live rows. `id` is the new todo's id when the caller chose one (a
    /// batch, so its todos sort in batch order); otherwise a random one. `now` is the
    /// transaction's instant when the caller has one; otherwise the clock of record. With a `capacity` (> 0), `conn` must be inside a
    /// transaction: a dedup hit is answered first and never capped, then the intake lock and
    /// the count decide.
    pub(crate) async fn create_in(
        &self,
        conn: &mut PgConnection,
        new: &NewTodo,
        id: Option<&str>,
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
                   SELECT coalesce($11, 'td_' || replace(gen_random_uuid()::text, '-', '')), $2, $3, $4, $5, $6, $7, $8, $9, $10, \
                          clock.now, clock.now \
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
            .bind(id)
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

    /// REQ-6's listing, newest first, read only from the caller's own rows: see
    /// [`LIST_BY_OWNERS_SQL`] and [`LIST_BY_QUEUES_SQL`] for why the statement has this shape.
    pub(crate) async fn list_todos_tx(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        let sql = sqlx::AssertSqlSafe(listing_sql(&query.set));
        let rows: Vec<TodoRow> =
            sqlx::query_as_with(sql, listing_binds(query)?).fetch_all(&self.pool).await.map_err(db_error)?;
        rows.into_iter().map(TodoRow::into_todo).collect()
    }

    /// `EXPLAIN (FORMAT JSON)` of the very statement and values `list_todos` runs for `query`:
    /// the plan tests (`engine/tests/tenancy_plans.rs`) check it reads only the caller's rows,
    /// through an index. Not part of the store's API.
    #[doc(hidden)]
    pub async fn explain_listing(&self, query: TodoQuery) -> Result<serde_json::Value> {
        let explain = composed_sql!("EXPLAIN (FORMAT JSON) {}", listing_sql(&query.set));
        sqlx::query_scalar_with(explain, listing_binds(query)?).fetch_one(&self.pool).await.map_err(db_error)
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

/// Every listing of a set of owners (`TodoSet::Owners`): for each distinct endpoint and each
/// distinct team, its newest `$4` rows (of state `$3`, when given) read backwards from
/// `todos_list_endpoint` / `todos_list_team`; then the newest `$4` of those. Issue #14 item 4:
/// an `OR` of owner filters, or indexes partial on `state`, would let the planner walk every
/// tenant's rows; per-owner lateral branches cannot reach a row of another owner, and read at
/// most `$4` index entries per owner when no state filter is given. Distinct owners, because a
/// repeated id would list its rows twice; the two branches are disjoint, since a row has exactly
/// one owner (`todos_one_queue_owner`).
/// `$1` endpoint ids, `$2` team ids, `$3` state or NULL, `$4` limit.
const LIST_BY_OWNERS_SQL: &str = "SELECT listed.* FROM ( \
       SELECT newest.* FROM (SELECT DISTINCT id FROM unnest($1::text[]) AS owner (id)) owner \
         CROSS JOIN LATERAL (SELECT {LISTED_TODO_COLUMNS} FROM todos t \
           WHERE t.endpoint_id = owner.id AND ($3::text IS NULL OR t.state = $3) \
           ORDER BY t.created_at DESC, t.id DESC LIMIT $4) newest \
       UNION ALL \
       SELECT newest.* FROM (SELECT DISTINCT id FROM unnest($2::text[]) AS owner (id)) owner \
         CROSS JOIN LATERAL (SELECT {LISTED_TODO_COLUMNS} FROM todos t \
           WHERE t.team_id = owner.id AND ($3::text IS NULL OR t.state = $3) \
           ORDER BY t.created_at DESC, t.id DESC LIMIT $4) newest \
     ) listed ORDER BY listed.created_at DESC, listed.id DESC LIMIT $4";

/// Every listing of a set of queue identities (`TodoSet::Queues`): the same shape as
/// [`LIST_BY_OWNERS_SQL`], one branch per distinct (owner, queue), read backwards from the
/// owner's `todos_list_endpoint` / `todos_list_team` rows, filtered to the queue.
/// `$1`/`$2` endpoint ids and their queues, `$3`/`$4` team ids and their queues (parallel arrays),
/// `$5` state or NULL, `$6` limit.
const LIST_BY_QUEUES_SQL: &str = "SELECT listed.* FROM ( \
       SELECT newest.* FROM (SELECT DISTINCT id, queue FROM unnest($1::text[], $2::text[]) AS owner (id, queue)) owner \
         CROSS JOIN LATERAL (SELECT {LISTED_TODO_COLUMNS} FROM todos t \
           WHERE t.endpoint_id = owner.id AND t.queue = owner.queue AND ($5::text IS NULL OR t.state = $5) \
           ORDER BY t.created_at DESC, t.id DESC LIMIT $6) newest \
       UNION ALL \
       SELECT newest.* FROM (SELECT DISTINCT id, queue FROM unnest($3::text[], $4::text[]) AS owner (id, queue)) owner \
         CROSS JOIN LATERAL (SELECT {LISTED_TODO_COLUMNS} FROM todos t \
           WHERE t.team_id = owner.id AND t.queue = owner.queue AND ($5::text IS NULL OR t.state = $5) \
           ORDER BY t.created_at DESC, t.id DESC LIMIT $6) newest \
     ) listed ORDER BY listed.created_at DESC, listed.id DESC LIMIT $6";

/// The listing statement for `set`'s kind, with the todo columns spelled out.
/// Constant text only: a template and the column list (REQ-13).
fn listing_sql(set: &TodoSet) -> String {
    let template = match set {
        TodoSet::Owners(_) => LIST_BY_OWNERS_SQL,
        TodoSet::Queues(_) => LIST_BY_QUEUES_SQL,
    };
    template.replace("{LISTED_TODO_COLUMNS}", LISTED_TODO_COLUMNS)
}

/// The values of [`listing_sql`]'s statement, in its placeholder order.
fn listing_binds(query: TodoQuery) -> Result<PgArguments> {
    let mut arguments = PgArguments::default();
    let add = |outcome: std::result::Result<(), sqlx::error::BoxDynError>| {
        outcome.map_err(|error| db_error(sqlx::Error::Encode(error)))
    };
    match query.set {
        TodoSet::Owners(reach) => {
            add(arguments.add(reach.endpoint_ids))?;
            add(arguments.add(reach.team_ids))?;
        }
        TodoSet::Queues(identities) => {
            let mut columns: [Vec<String>; 4] = Default::default();
            for identity in identities {
                let (offset, owner_id) = match identity.owner {
                    Owner::Endpoint(id) => (0, id),
                    Owner::Team(id) => (2, id),
                };
                columns[offset].push(owner_id);
                columns[offset + 1].push(identity.queue);
            }
            for column in columns {
                add(arguments.add(column))?;
            }
        }
    }
    add(arguments.add(query.state.map(|state| state.as_str())))?;
    add(arguments.add(query.limit.clamp(1, 1000)))?;
    Ok(arguments)
}

/// The todos role on PostgreSQL: the transactions above, and `batch.rs`'s for `create_todos`.
impl Todos for PgStore {
    async fn create_todo(&self, todo: NewTodo) -> Result<Created> {
        self.create_todo_tx(todo).await
    }

    async fn create_todos(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        self.create_todos_tx(todos).await
    }

    async fn list_todos(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        self.list_todos_tx(query).await
    }

    async fn get_todo(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.get_todo_tx(actor, id).await
    }
}
