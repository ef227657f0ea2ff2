//! The doorbell heartbeat: waiting, unclaimed work is rung again on a backoff (at most
//! `RINGS_PER_TODO_MAX` times), round-robin across owners, by one replica at a time.

use super::pass::PushTx;
use super::watch_key;
use crate::pg_store::rows::TodoRow;
use crate::pg_store::sql::TODO_COLUMNS;
use crate::pg_store::{PgStore, db_error};
use chrono::{DateTime, Duration, Utc};
use models::error::Result;
use models::identity::{Owner, QueueIdentity};
use models::push::{self, PushReport, RingReason, SESSION_STALE_SECONDS};
use models::todo::Todo;
use std::collections::BTreeMap;

impl PgStore {
    /// The doorbell heartbeat: a few due, unclaimed todos of endpoints with a live stream,
    /// round-robin across endpoints. One replica sweeps at a time (a transaction lock).
    pub(crate) async fn heartbeat_sweep_tx(&self) -> Result<PushReport> {
        Ok(self.counted(push_pass!(self, |tx| self.heartbeat_in(tx))?))
    }

    async fn heartbeat_in(&self, tx: &mut PushTx) -> Result<PushReport> {
        let mut report = PushReport::default();
        let won: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtext('switchboard_heartbeat_sweep'))")
            .fetch_one(&mut **tx)
            .await
            .map_err(db_error)?;
        if !won {
            return Ok(report);
        }
        let now = self.push_now(tx).await?;
        // The candidates are the longest unrung todos of identities that admit claims: a batch
        // that meets deferred identities is read again without them, so a backlog waiting in a
        // paused queue never fills the batch and hides every other queue's work.
        let mut excluded: Vec<QueueIdentity> = Vec::new();
        let due = loop {
            let candidates = self.heartbeat_candidates(tx, now, &excluded).await?;
            let mut not_yet_due: Vec<QueueIdentity> = Vec::new();
            let mut due: Vec<Todo> = Vec::new();
            for row in candidates {
                let todo = row.todo.into_todo()?;
                if push::heartbeat_due_at(row.rings, row.last_ringed_at).is_some_and(|at| at <= now) {
                    due.push(todo);
                } else {
                    not_yet_due.push(todo.identity);
                }
            }
            let deferred = self.deferred_among(due.iter().map(|t| &t.identity).chain(&not_yet_due)).await?;
            if deferred.is_empty() {
                break due;
            }
            // Issue #28: deferred work the heartbeat skips is watched, so its reopening rings.
            for identity in deferred.iter().filter(|identity| due.iter().any(|t| &t.identity == *identity)) {
                self.watch_if_waiting(tx, identity, now).await?;
            }
            excluded.extend(deferred);
        };
        // Round-robin: at most one todo per owner per round, in due order.
        let mut by_owner: BTreeMap<Owner, Vec<Todo>> = BTreeMap::new();
        for todo in due {
            by_owner.entry(todo.identity.owner.clone()).or_default().push(todo);
        }
        let mut chosen = Vec::new();
        while chosen.len() < push::HEARTBEAT_TODOS_PER_SWEEP_MAX && by_owner.values().any(|v| !v.is_empty()) {
            for todos in by_owner.values_mut() {
                if chosen.len() < push::HEARTBEAT_TODOS_PER_SWEEP_MAX && !todos.is_empty() {
                    chosen.push(todos.remove(0));
                }
            }
        }
        // Each re-ring is a step of its own: one that fails is simply rung by a later sweep.
        for todo in chosen {
            let step = tx.step().await?;
            let rung = self.push_todo(tx, &todo, RingReason::Heartbeat, None, now).await;
            report.absorb(tx.end_step(step, rung).await?.unwrap_or_default());
        }
        Ok(report)
    }
}

impl PgStore {
    /// The pending todos the heartbeat weighs: of endpoints with a live stream, rung fewer than
    /// `RINGS_PER_TODO_MAX` times, not of an `excluded` identity; longest unrung first, at most
    /// `HEARTBEAT_CANDIDATES_MAX`.
    async fn heartbeat_candidates(
        &self,
        tx: &mut PushTx,
        now: DateTime<Utc>,
        excluded: &[QueueIdentity],
    ) -> Result<Vec<HeartbeatRow>> {
        let (kinds, owners): (Vec<&str>, Vec<&str>) = excluded.iter().map(watch_key).unzip();
        let queues: Vec<&str> = excluded.iter().map(|identity| identity.queue.as_str()).collect();
        sqlx::query_as(composed_sql!(
            "SELECT coalesce(r.ring_attempts, 0) AS rings, coalesce(r.last_ringed_at, t.created_at) AS last_ringed_at, \
                    {TODO_COLUMNS} \
             FROM todos t LEFT JOIN todo_rings r ON r.todo_id = t.id \
             WHERE t.state = 'pending' AND coalesce(r.ring_attempts, 0) < $1 \
               AND EXISTS (SELECT 1 FROM endpoint_grants g JOIN mcp_sessions s ON s.endpoint_id = g.endpoint_id \
                           WHERE g.queue = t.queue AND (g.endpoint_id = t.endpoint_id OR g.team_id = t.team_id) \
                             AND s.stream_replica IS NOT NULL AND s.last_seen_at > $2) \
               AND NOT EXISTS (SELECT 1 FROM unnest($4::text[], $5::text[], $6::text[]) AS x (kind, owner, queue) \
                               WHERE (x.kind, x.owner, x.queue) = (CASE WHEN t.team_id IS NULL THEN 'endpoint' ELSE 'team' END, \
                                                                  coalesce(t.team_id, t.endpoint_id), t.queue)) \
             ORDER BY coalesce(r.last_ringed_at, t.created_at), t.id LIMIT $3"
        ))
        .bind(push::RINGS_PER_TODO_MAX)
        .bind(now - Duration::seconds(SESSION_STALE_SECONDS))
        .bind(push::HEARTBEAT_CANDIDATES_MAX)
        .bind(&kinds)
        .bind(&owners)
        .bind(&queues)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)
    }
}

#[derive(sqlx::FromRow)]
struct HeartbeatRow {
    rings: i32,
    last_ringed_at: DateTime<Utc>,
    #[sqlx(flatten)]
    todo: TodoRow,
}
