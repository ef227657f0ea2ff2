//! Creating many todos in one transaction (issue #15 item 2): a producer's batch or a fan-out
//! costs one commit instead of one per todo, and a queue without an intake capacity gets the
//! whole batch in one `INSERT`.
//!
//! Each todo is created or deduped exactly as `create_todo` would (`todos.rs`, `create_in`), at
//! the batch's one instant. Without a capacity the batch is inserted in one statement, in order,
//! so a later copy of a key loses to the earlier one; every todo the statement skipped (its key
//! is held by a live todo) then goes through `create_in`, which reads the holder. With a capacity,
//! the intake locks are taken in sorted order (as ingest does) and each todo is capped against
//! its own queue by `create_in`. Any refusal rolls the whole batch back.

use super::rows::TodoRow;
use super::sql::TODO_COLUMNS;
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Utc};
use models::error::Result;
use models::todo::{Created, NewTodo, validate_batch};
use sqlx::PgConnection;

/// One statement for the whole batch: `$1` the instant, `$2` the ids, `$3`..`$11` one array per
/// column (in the order of `NewTodo`), numbered by `WITH ORDINALITY` so the answer can be put
/// back in order.
const INSERT_BATCH: &str = "WITH batch AS ( \
       SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::text[], \
                            $9::int4[], $10::text[], $11::text[]) \
         WITH ORDINALITY AS b (id, endpoint_id, team_id, queue, title, payload, idempotency_key, max_attempts, \
                               created_by_kind, created_by_id, ordinal)), \
     inserted AS ( \
       INSERT INTO todos AS t (id, endpoint_id, team_id, queue, title, payload, idempotency_key, max_attempts, \
                               created_by_kind, created_by_id, created_at, updated_at) \
       SELECT id, endpoint_id, team_id, queue, title, payload, idempotency_key, max_attempts, \
              created_by_kind, created_by_id, $1, $1 \
       FROM batch ORDER BY ordinal \
       ON CONFLICT DO NOTHING \
       RETURNING {TODO_COLUMNS}), \
     push AS (INSERT INTO push_due (todo_id, reason, at) SELECT id, 'created', created_at FROM inserted) \
     SELECT batch.ordinal, inserted.* FROM inserted JOIN batch ON batch.id = inserted.id";

/// The ids of a batch of `count` (at most `TODOS_PER_BATCH_MAX`, under 16^4): shaped as every
/// todo id (`td_` and 32 hex digits), of which the first 28 are one random stem and the last 4
/// the todo's place, so they sort in batch order and todos of one instant are claimed, and
/// listed, in the order they were sent (claim order breaks a tie of `created_at` by id).
fn batch_ids(count: usize) -> Vec<String> {
    let stem = format!("td_{:028x}", rand::random::<u128>() >> 16);
    (1..=count).map(|place| format!("{stem}{place:04x}")).collect()
}

/// A row of `INSERT_BATCH`: the todo and its 1-based place in the batch.
#[derive(sqlx::FromRow)]
struct InsertedRow {
    ordinal: i64,
    #[sqlx(flatten)]
    todo: TodoRow,
}

impl PgStore {
    pub(crate) async fn create_todos_tx(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        validate_batch(&todos)?;
        let mut tx = self.begin().await?;
        let ids = batch_ids(todos.len());
        // Which todo a refusal was about, for the intake-refusal counter.
        let mut refused: Option<usize> = None;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let capacity = self.capacity_on(&mut tx).await?.effective;
            if capacity > 0 {
                self.lock_intakes_sorted(&mut tx, &todos).await?;
                let mut created = Vec::with_capacity(todos.len());
                for (index, (new, id)) in todos.iter().zip(&ids).enumerate() {
                    match self.create_in(&mut tx, new, Some(id), Some(now), capacity).await {
                        Ok(made) => created.push(made),
                        Err(error) => {
                            refused = Some(index);
                            return Err(error);
                        }
                    }
                }
                return Ok(created);
            }
            let mut answers = self.insert_batch(&mut tx, &todos, &ids, now).await?;
            // What the statement skipped holds a key a live todo holds: `create_in` reads it.
            for ((new, id), answer) in todos.iter().zip(&ids).zip(answers.iter_mut()) {
                if answer.is_none() {
                    *answer = Some(self.create_in(&mut tx, new, Some(id), Some(now), 0).await?);
                }
            }
            Ok(answers.into_iter().flatten().collect())
        }
        .await;
        let created = finish(tx, outcome).await;
        match &created {
            Ok(created) => {
                for (new, made) in todos.iter().zip(created) {
                    self.counters.create_answered(new, &Ok(made.clone()));
                }
            }
            Err(error) => {
                if let Some(new) = refused.and_then(|index| todos.get(index)) {
                    self.counters.create_answered(new, &Err(error.clone()));
                }
            }
        }
        created
    }

    /// Inserts the batch in one statement: each todo's answer in batch order, `None` where the
    /// insert skipped it.
    async fn insert_batch(
        &self,
        conn: &mut PgConnection,
        todos: &[NewTodo],
        ids: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<Option<Created>>> {
        let column = |pick: fn(&NewTodo) -> Option<String>| todos.iter().map(pick).collect::<Vec<_>>();
        let rows: Vec<InsertedRow> =
            sqlx::query_as(composed_sql!("{}", INSERT_BATCH.replace("{TODO_COLUMNS}", TODO_COLUMNS)))
                .bind(now)
                .bind(ids)
                .bind(column(|t| t.identity.endpoint_id().map(str::to_string)))
                .bind(column(|t| t.identity.team_id().map(str::to_string)))
                .bind(column(|t| Some(t.identity.queue.clone())))
                .bind(column(|t| Some(t.title.clone())))
                .bind(todos.iter().map(|t| t.payload.clone()).collect::<Vec<_>>())
                .bind(column(|t| t.idempotency_key.clone()))
                .bind(todos.iter().map(|t| t.max_attempts).collect::<Vec<_>>())
                .bind(column(|t| Some(t.created_by_kind.as_str().to_string())))
                .bind(column(|t| t.created_by_id.clone()))
                .fetch_all(&mut *conn)
                .await
                .map_err(db_error)?;
        let mut answers: Vec<Option<Created>> = vec![None; todos.len()];
        for row in rows {
            let place = usize::try_from(row.ordinal - 1).ok().filter(|place| *place < todos.len());
            let place = place.ok_or_else(|| models::error::Error::internal("a batch row came back out of range"))?;
            answers[place] = Some(Created { todo: row.todo.into_todo()?, deduped: false });
        }
        Ok(answers)
    }
}
