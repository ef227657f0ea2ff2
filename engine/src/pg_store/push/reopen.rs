//! REQ-8's reopen: a queue identity that was deferred when work arrived is watched, and once it
//! admits claims again (or lost its policy) one sweep rings its oldest waiting todo and unwatches
//! it. A watched row is taken with `SKIP LOCKED`, so one replica decides each reopening. Each
//! reopening is a step of its own, its unwatch and its rings together: one whose ring fails (its
//! session's row held past the ring's lock timeout) keeps its watch for the next pass, and the
//! others ring.

use super::pass::PushTx;
use super::watch_key;
use crate::pg_store::rows::TodoRow;
use crate::pg_store::sql::TODO_COLUMNS;
use crate::pg_store::{PgStore, db_error, mutant_hooks};
use chrono::{DateTime, Utc};
use models::error::Result;
use models::identity::QueueIdentity;
use models::presence::Presence;
use models::push::{self, PushReport, RingReason};
use sqlx::PgConnection;

/// A watch as the sweep reads it: since, owner kind, owner id, queue (its order and its key).
type WatchRow = (DateTime<Utc>, String, String, String);

fn watched_identity((_, kind, owner, queue): &WatchRow) -> QueueIdentity {
    match kind.as_str() {
        "team" => QueueIdentity::team(owner, queue),
        _ => QueueIdentity::endpoint(owner, queue),
    }
}

impl PgStore {
    /// The reopen watch of `identity`, when it has pending work to ring for (`ON CONFLICT DO
    /// NOTHING`: watched once). Issue #28: the store records it whenever an identity becomes
    /// deferred, in the transaction that made it so (a claim that fills it, a policy write that
    /// defers it, a push withheld, the heartbeat skipping it), and when a claim is refused.
    pub(crate) async fn watch_if_waiting(
        &self,
        conn: &mut PgConnection,
        identity: &QueueIdentity,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let (kind, owner) = watch_key(identity);
        sqlx::query(
            "INSERT INTO admission_reopen_watch (owner_kind, owner_id, queue, since) \
             SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM todos t WHERE t.state = 'pending' \
               AND t.queue = $3 AND (t.endpoint_id = $5 OR t.team_id = $6)) \
             ON CONFLICT DO NOTHING",
        )
        .bind(kind)
        .bind(owner)
        .bind(&identity.queue)
        .bind(now)
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// Claimers of these identities were refused: watch those with pending work, after the
    /// refused transaction rolled back, in one statement however many queues an empty
    /// `claim_next` lists. Best effort (the refusal is the answer either way).
    pub(crate) async fn watch_refused(&self, identities: &[QueueIdentity]) {
        if identities.is_empty() {
            return;
        }
        let (kinds, owners): (Vec<&str>, Vec<&str>) = identities.iter().map(watch_key).unzip();
        let queues: Vec<&str> = identities.iter().map(|identity| identity.queue.as_str()).collect();
        let watched = sqlx::query(
            "INSERT INTO admission_reopen_watch (owner_kind, owner_id, queue, since) \
             SELECT k.kind, k.owner, k.queue, coalesce($4::timestamptz, clock_timestamp()) \
             FROM unnest($1::text[], $2::text[], $3::text[]) AS k (kind, owner, queue) \
             WHERE (k.kind = 'endpoint' AND EXISTS (SELECT 1 FROM todos t WHERE t.state = 'pending' \
                      AND t.endpoint_id = k.owner AND t.queue = k.queue)) \
                OR (k.kind = 'team' AND EXISTS (SELECT 1 FROM todos t WHERE t.state = 'pending' \
                      AND t.team_id = k.owner AND t.queue = k.queue)) \
             ON CONFLICT DO NOTHING",
        )
        .bind(&kinds)
        .bind(&owners)
        .bind(&queues)
        .bind(self.now_param())
        .execute(&self.pool)
        .await;
        if let Err(error) = watched {
            tracing::warn!(%error, "could not record the reopen watch of a refused claim");
        }
    }

    /// REQ-8's reopen sweep over every watched identity, oldest watch first, a batch of
    /// `PUSH_BATCH_MAX` at a time, each batch starting after the last watch of the one before, so
    /// identities that stay deferred (a budget spent for the day) never keep the sweep from
    /// looking at those watched after them.
    ///
    /// A batch is read without locks, and its statuses with it; only the identities that admit
    /// claims are then taken, with `SKIP LOCKED` so one replica decides each, and read again
    /// under that lock before they are rung and unwatched. Most watches stay deferred pass after
    /// pass, and locking each of them wrote a WAL record per watch on every pass.
    pub(crate) async fn reopen_sweep_tx(&self) -> Result<PushReport> {
        let mut report = PushReport::default();
        let mut after: Option<WatchRow> = None;
        loop {
            let watched: Vec<WatchRow> = sqlx::query_as(
                "SELECT since, owner_kind, owner_id, queue FROM admission_reopen_watch \
                 WHERE $1::timestamptz IS NULL OR (since, owner_kind, owner_id, queue) > ($1, $2, $3, $4) \
                 ORDER BY since, owner_kind, owner_id, queue LIMIT $5",
            )
            .bind(after.as_ref().map(|row| row.0))
            .bind(after.as_ref().map(|row| row.1.as_str()))
            .bind(after.as_ref().map(|row| row.2.as_str()))
            .bind(after.as_ref().map(|row| row.3.as_str()))
            .bind(push::PUSH_BATCH_MAX)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
            let identities: Vec<QueueIdentity> = watched.iter().map(watched_identity).collect();
            let deferred = self.deferred_among(identities.iter()).await?;
            let admitting: Vec<QueueIdentity> = identities.into_iter().filter(|i| !deferred.contains(i)).collect();
            if !admitting.is_empty() {
                report.absorb(push_pass!(self, |tx| self.reopen_in(tx, &admitting))?);
            }
            if (watched.len() as i64) < push::PUSH_BATCH_MAX {
                break;
            }
            after = watched.into_iter().last();
        }
        Ok(self.counted(report))
    }

    /// Takes the watches of `admitting` that no other replica holds, reads their statuses again
    /// under that lock, and rings and unwatches each that still admits claims, in one step: a
    /// watch never goes without its ring.
    async fn reopen_in(&self, tx: &mut PushTx, admitting: &[QueueIdentity]) -> Result<PushReport> {
        let reopened = if mutant_hooks::reopen_drops_the_watch_first() {
            self.unwatched_first(admitting).await?
        } else {
            self.take_reopened(tx, admitting).await?
        };
        let now = self.push_now(tx).await?;
        let mut report = PushReport::default();
        for identity in &reopened {
            let step = tx.step().await?;
            let rung = self.unwatch_and_ring(tx, identity, now).await;
            report.absorb(tx.end_step(step, rung).await?.unwrap_or_default());
        }
        Ok(report)
    }

    /// The seeded `WatchDroppedBeforeItsRing` bug only: the reopened identities taken and
    /// unwatched in a transaction of their own, committed before their rings are tried.
    async fn unwatched_first(&self, admitting: &[QueueIdentity]) -> Result<Vec<QueueIdentity>> {
        let mut own = self.begin().await?;
        let reopened = self.take_reopened(&mut own, admitting).await?;
        for identity in &reopened {
            self.unwatch(&mut own, identity).await?;
        }
        own.commit().await.map_err(db_error)?;
        Ok(reopened)
    }

    /// The watches of `admitting` that no other replica holds and that still admit claims under
    /// their lock (held until the pass ends).
    async fn take_reopened(&self, conn: &mut PgConnection, admitting: &[QueueIdentity]) -> Result<Vec<QueueIdentity>> {
        let (kinds, owners): (Vec<&str>, Vec<&str>) = admitting.iter().map(watch_key).unzip();
        let queues: Vec<&str> = admitting.iter().map(|identity| identity.queue.as_str()).collect();
        let taken: Vec<WatchRow> = sqlx::query_as(
            "SELECT w.since, w.owner_kind, w.owner_id, w.queue FROM admission_reopen_watch w \
             JOIN unnest($1::text[], $2::text[], $3::text[]) AS k (kind, owner, queue) \
               ON w.owner_kind = k.kind AND w.owner_id = k.owner AND w.queue = k.queue \
             ORDER BY w.since, w.owner_kind, w.owner_id, w.queue FOR UPDATE OF w SKIP LOCKED",
        )
        .bind(&kinds)
        .bind(&owners)
        .bind(&queues)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        let identities: Vec<QueueIdentity> = taken.iter().map(watched_identity).collect();
        let deferred = self.deferred_among(identities.iter()).await?;
        Ok(identities.into_iter().filter(|i| !deferred.contains(i)).collect())
    }

    /// Unwatches a reopened identity and rings it (`reopen_identity`); one step of the pass.
    async fn unwatch_and_ring(
        &self,
        tx: &mut PushTx,
        identity: &QueueIdentity,
        now: DateTime<Utc>,
    ) -> Result<PushReport> {
        if !mutant_hooks::reopen_keeps_the_watch() && !mutant_hooks::reopen_drops_the_watch_first() {
            self.unwatch(tx, identity).await?;
        }
        self.reopen_identity(tx, identity, now).await
    }

    async fn unwatch(&self, conn: &mut PgConnection, identity: &QueueIdentity) -> Result<()> {
        let (kind, owner) = watch_key(identity);
        sqlx::query("DELETE FROM admission_reopen_watch WHERE owner_kind = $1 AND owner_id = $2 AND queue = $3")
            .bind(kind)
            .bind(owner)
            .bind(&identity.queue)
            .execute(conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// One doorbell per endpoint (in presence) that drains the identity, naming its oldest
    /// pending todo, and one hook call per hook; nothing when no todo waits.
    async fn reopen_identity(
        &self,
        tx: &mut PushTx,
        identity: &QueueIdentity,
        now: DateTime<Utc>,
    ) -> Result<PushReport> {
        let oldest: Option<TodoRow> = sqlx::query_as(composed_sql!(
            "SELECT {TODO_COLUMNS} FROM todos t WHERE t.state = 'pending' AND t.queue = $3 \
               AND t.endpoint_id IS NOT DISTINCT FROM $1 AND t.team_id IS NOT DISTINCT FROM $2 \
             ORDER BY t.created_at, t.id LIMIT 1"
        ))
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?;
        let mut report = PushReport::default();
        let Some(oldest) = oldest else {
            return Ok(report);
        };
        let todo = oldest.into_todo()?;
        report.reopens = 1;
        let targets = self.targets(tx, identity).await?;
        for target in &targets {
            if target.presence(now) == Presence::Out {
                // The clock-in digest covers this work (REQ-8 "Reopening while clocked out").
                report.withheld_out += 1;
                continue;
            }
            let endpoint = [target.id.clone()];
            self.ring_one(tx, &endpoint, Some(&todo), RingReason::Reopen, None, now).await?;
        }
        report.hook_calls_enqueued += self.enqueue_hooks(tx, &todo, "reopened", &targets, now).await?;
        Ok(report)
    }
}
