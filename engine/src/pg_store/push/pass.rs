//! A push pass's transaction (`PushTx`): the doorbells it decides are written, numbered and
//! announced only as it ends, and each ring it tries can fail on its own (a savepoint), so one
//! busy session neither loses a ring nor holds up the others (issue #51).
//!
//! Why the numbers wait for the end: a doorbell's `seq` is its stream event id, and a stream that
//! reconnects asks for the rings after the last id it had (`Last-Event-ID`). Were the id taken
//! when the ring is decided, a pass that then waited on a lock could commit ring 100 after ring
//! 101 had been sent, and a stream resuming from 101 would never see 100. So a pass takes a
//! transaction lock per session it rings (sorted, so two passes cannot deadlock) and only then
//! takes the ids; the locks are held until commit, so a session's ids follow its commit order.
//! Nothing waits between the ids and the commit.

use crate::pg_store::{PgStore, db_error};
use chrono::{DateTime, Utc};
use models::error::Result;
use models::push::{PushReport, Ring};
use sqlx::{PgConnection, Postgres, Transaction};

use super::{PUSH_CHANNEL, ring_announcement};

/// A push pass's `BEGIN`, with how long one ring waits for a session's row that another
/// transaction holds exclusively (a session being closed) before its step is rolled back and
/// left for the next pass: 1 s, short, as the rest of the pass waits with it.
const BEGIN_PUSH: &str = "BEGIN; SET LOCAL lock_timeout = '1s'";
/// The advisory-lock class of a session's ring numbering (`pg_advisory_xact_lock(class, key)`).
const RING_ORDER_LOCK_CLASS: i32 = 0x5342_5253;

/// A doorbell decided in a pass, written when the pass seals (`PushTx::seal`).
struct DecidedRing {
    ring: Ring,
    at: DateTime<Utc>,
}

/// A push pass's transaction and the doorbells decided in it so far.
pub(crate) struct PushTx {
    tx: Transaction<'static, Postgres>,
    decided: Vec<DecidedRing>,
}

/// Where a step began: what a failed step rolls back to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepMark {
    decided: usize,
}

impl std::ops::Deref for PushTx {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        &self.tx
    }
}

impl std::ops::DerefMut for PushTx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}

/// What a pass answers, with the report its sealed doorbells go into.
pub(crate) trait PassOutcome {
    fn report_mut(&mut self) -> &mut PushReport;
}

impl PassOutcome for PushReport {
    fn report_mut(&mut self) -> &mut PushReport {
        self
    }
}

impl<T> PassOutcome for (PushReport, T) {
    fn report_mut(&mut self) -> &mut PushReport {
        &mut self.0
    }
}

impl PgStore {
    /// Begins a push pass, its ring waits bounded (`BEGIN_PUSH`, one round trip).
    pub(super) async fn begin_push(&self) -> Result<PushTx> {
        let tx = self.pool.begin_with(BEGIN_PUSH).await.map_err(db_error)?;
        Ok(PushTx { tx, decided: Vec::new() })
    }
}

impl PushTx {
    /// Records a doorbell decided in this pass; it is written and announced at `seal`.
    pub(super) fn decide(&mut self, ring: Ring, at: DateTime<Utc>) {
        debug_assert_eq!(ring.seq, 0, "a ring is numbered when its pass seals");
        self.decided.push(DecidedRing { ring, at });
    }

    /// Opens a step that can fail alone (a savepoint).
    pub(super) async fn step(&mut self) -> Result<StepMark> {
        sqlx::query("SAVEPOINT push_step").execute(&mut *self.tx).await.map_err(db_error)?;
        Ok(StepMark { decided: self.decided.len() })
    }

    /// Ends a step: kept when `outcome` is Ok, rolled back (with the doorbells it decided) when
    /// not. Err only when the rollback itself fails, which ends the pass.
    pub(super) async fn end_step<T>(&mut self, mark: StepMark, outcome: Result<T>) -> Result<Option<T>> {
        match outcome {
            Ok(value) => {
                sqlx::query("RELEASE SAVEPOINT push_step").execute(&mut *self.tx).await.map_err(db_error)?;
                Ok(Some(value))
            }
            Err(error) => {
                tracing::info!(%error, "a push step failed; it is left for the next pass");
                sqlx::query("ROLLBACK TO SAVEPOINT push_step").execute(&mut *self.tx).await.map_err(db_error)?;
                self.decided.truncate(mark.decided);
                Ok(None)
            }
        }
    }

    /// Writes the decided doorbells with their event ids, in each session's commit order, and
    /// announces them (delivered at commit). The sealed rings, in the order decided.
    async fn seal(&mut self) -> Result<Vec<Ring>> {
        if self.decided.is_empty() {
            return Ok(Vec::new());
        }
        let sessions: Vec<&str> = self.decided.iter().map(|d| d.ring.session_id.as_str()).collect();
        // In the order of the lock keys themselves: sorted by session id, two sessions whose
        // keys collide could be locked in opposite orders by two passes, and deadlock.
        sqlx::query(
            "SELECT count(pg_advisory_xact_lock($1, k)) \
             FROM (SELECT DISTINCT hashtext(s) AS k FROM unnest($2::text[]) AS s ORDER BY k) AS sorted",
        )
        .bind(RING_ORDER_LOCK_CLASS)
        .bind(&sessions)
        .execute(&mut *self.tx)
        .await
        .map_err(db_error)?;

        let rings: Vec<&Ring> = self.decided.iter().map(|d| &d.ring).collect();
        let messages: Vec<String> = rings.iter().map(|r| r.message.to_string()).collect();
        let seqs: Vec<(String, i64)> = sqlx::query_as(
            "INSERT INTO doorbell_rings (ring_id, session_id, endpoint_id, queue, todo_id, reason, message, at) \
             SELECT r.ring_id, r.session_id, r.endpoint_id, r.queue, r.todo_id, r.reason, r.message::jsonb, r.at \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], \
                         $8::timestamptz[]) WITH ORDINALITY \
                  AS r (ring_id, session_id, endpoint_id, queue, todo_id, reason, message, at, n) \
             ORDER BY r.n RETURNING ring_id, seq",
        )
        .bind(rings.iter().map(|r| r.ring_id.as_str()).collect::<Vec<_>>())
        .bind(rings.iter().map(|r| r.session_id.as_str()).collect::<Vec<_>>())
        .bind(rings.iter().map(|r| r.endpoint_id.as_str()).collect::<Vec<_>>())
        .bind(rings.iter().map(|r| r.queue.as_deref()).collect::<Vec<_>>())
        .bind(rings.iter().map(|r| r.todo_id.as_deref()).collect::<Vec<_>>())
        .bind(rings.iter().map(|r| r.reason.as_str()).collect::<Vec<_>>())
        .bind(&messages)
        .bind(self.decided.iter().map(|d| d.at).collect::<Vec<_>>())
        .fetch_all(&mut *self.tx)
        .await
        .map_err(db_error)?;

        let mut sealed: Vec<Ring> = std::mem::take(&mut self.decided).into_iter().map(|d| d.ring).collect();
        for ring in &mut sealed {
            let seq = seqs.iter().find(|(id, _)| id == &ring.ring_id).map(|(_, seq)| *seq);
            ring.seq = seq.ok_or_else(|| models::error::Error::internal("a sealed doorbell has no event id"))?;
        }
        let announcements: Vec<String> = sealed.iter().map(|ring| ring_announcement(ring).to_string()).collect();
        sqlx::query(
            "SELECT count(pg_notify($1, a)) \
             FROM (SELECT a FROM unnest($2::text[]) WITH ORDINALITY AS u (a, n) ORDER BY n) AS sorted",
        )
        .bind(PUSH_CHANNEL)
        .bind(&announcements)
        .execute(&mut *self.tx)
        .await
        .map_err(db_error)?;
        Ok(sealed)
    }
}

/// Ends a pass: on Ok its doorbells are sealed into the outcome's report and the transaction
/// commits; on Err (or a failed seal) it rolls back and nothing it decided happened.
pub(crate) async fn finish_pass<T: PassOutcome>(mut pass: PushTx, outcome: Result<T>) -> Result<T> {
    let outcome = match outcome {
        Ok(mut value) => match pass.seal().await {
            Ok(sealed) => {
                value.report_mut().rings.extend(sealed);
                Ok(value)
            }
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    crate::pg_store::finish(pass.tx, outcome).await
}
