//! The passes over `push_due`: each batch of due rows is taken (`SKIP LOCKED`), deleted and
//! decided in one transaction, so every creation or requeue is pushed once across replicas. Work
//! in a deferred queue is not rung but watched for its reopening. Each todo's push is a step of
//! its own: one that fails (its session's row held past the ring's lock timeout) is due again
//! for the next pass, and the rest of the batch rings.

use super::pass::PushTx;
use crate::pg_store::rows::TodoRow;
use crate::pg_store::sql::TODO_COLUMNS;
use crate::pg_store::{PgStore, db_error};
use chrono::{DateTime, Utc};
use models::error::Result;
use models::push::{self, DueReason, PushReport};
use models::todo::Todo;

impl PgStore {
    /// Takes the pending push decisions in batches; each batch is one transaction.
    pub(crate) async fn dispatch_pushes_tx(&self) -> Result<PushReport> {
        let mut report = PushReport::default();
        loop {
            let (batch, taken) = push_pass!(self, |tx| self.dispatch_batch(tx))?;
            report.absorb(batch);
            if taken < push::PUSH_BATCH_MAX {
                break;
            }
        }
        Ok(self.counted(report))
    }

    async fn dispatch_batch(&self, tx: &mut PushTx) -> Result<(PushReport, i64)> {
        let due: Vec<DueRow> = sqlx::query_as(composed_sql!(
            "SELECT d.seq AS due_seq, d.reason AS due_reason, {TODO_COLUMNS} \
             FROM push_due d JOIN todos t ON t.id = d.todo_id ORDER BY d.seq LIMIT $1 FOR UPDATE OF d SKIP LOCKED"
        ))
        .bind(push::PUSH_BATCH_MAX)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
        let taken = due.len() as i64;
        if due.is_empty() {
            return Ok((PushReport::default(), 0));
        }
        let seqs: Vec<i64> = due.iter().map(|d| d.due_seq).collect();
        sqlx::query("DELETE FROM push_due WHERE seq = ANY($1)")
            .bind(&seqs)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        let now = self.push_now(tx).await?;
        let mut work: Vec<(Todo, DueReason)> = Vec::new();
        for row in due {
            let reason = DueReason::parse(&row.due_reason).unwrap_or(DueReason::Created);
            let todo = row.todo.into_todo()?;
            // Only work still waiting is worth a push: a todo claimed meanwhile needs none.
            if todo.state == models::todo::TodoState::Pending {
                work.push((todo, reason));
            }
        }
        let mut report = PushReport::default();
        let deferred = self.deferred_among(work.iter().map(|(t, _)| &t.identity)).await?;
        for (todo, reason) in work {
            if deferred.contains(&todo.identity) {
                self.watch_if_waiting(tx, &todo.identity, now).await?;
                report.withheld_deferred += 1;
                continue;
            }
            let step = tx.step().await?;
            let pushed = self.push_todo(tx, &todo, reason.ring_reason(), Some(reason), now).await;
            match tx.end_step(step, pushed).await? {
                Some(pushed) => report.absorb(pushed),
                None => self.due_again(tx, &todo, reason, now).await?,
            }
        }
        Ok((report, taken))
    }
}

impl PgStore {
    /// A push that failed in its step is due again, for the next pass (nothing accepted is lost).
    async fn due_again(&self, tx: &mut PushTx, todo: &Todo, reason: DueReason, now: DateTime<Utc>) -> Result<()> {
        sqlx::query("INSERT INTO push_due (todo_id, reason, at) VALUES ($1, $2, $3)")
            .bind(&todo.id)
            .bind(reason.as_str())
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

#[derive(sqlx::FromRow)]
struct DueRow {
    due_seq: i64,
    due_reason: String,
    #[sqlx(flatten)]
    todo: TodoRow,
}
