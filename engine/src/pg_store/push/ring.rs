//! How one push is delivered: a doorbell to the least recently rung live session of the
//! endpoints that may take the work (written and announced when its pass seals, `pass.rs`), and
//! one outbox row per enabled notify hook. Every pass (dispatch, reopen, heartbeat, digest)
//! delivers through here.

use super::pass::PushTx;
use super::{Target, new_id};
use crate::pg_store::{PgStore, db_error, mutant_hooks};
use chrono::{DateTime, Duration, Utc};
use models::error::{Error, Result};
use models::presence::Presence;
use models::push::{self, DigestReason, DueReason, PushReport, Ring, RingReason, SESSION_STALE_SECONDS};
use models::todo::Todo;

/// The least recently rung live session of the endpoints `$1`, kept from deletion, passing over
/// one another transaction holds exclusively (`pick_session`).
const PICK_SESSION: &str = "SELECT id, endpoint_id, stream_replica FROM mcp_sessions \
     WHERE endpoint_id = ANY($1) AND stream_replica IS NOT NULL AND last_seen_at > $2 \
     ORDER BY last_rung_at NULLS FIRST, id LIMIT 1 FOR KEY SHARE SKIP LOCKED";
/// Whether the endpoints `$1` have a live session at all: after `PICK_SESSION` found none, the
/// difference between nobody to ring and a session held just now.
const ANY_LIVE_SESSION: &str = "SELECT EXISTS (SELECT 1 FROM mcp_sessions \
     WHERE endpoint_id = ANY($1) AND stream_replica IS NOT NULL AND last_seen_at > $2)";
/// `PICK_SESSION` as it was before issue #51, skipping a held session: the seeded
/// `RingSkipsBusySession` bug only.
const PICK_SKIPPING_BUSY: &str = "SELECT id, endpoint_id, stream_replica FROM mcp_sessions \
     WHERE endpoint_id = ANY($1) AND stream_replica IS NOT NULL AND last_seen_at > $2 \
     ORDER BY last_rung_at NULLS FIRST, id LIMIT 1 FOR UPDATE SKIP LOCKED";

/// The session a ring goes to, or why there is none.
pub(super) enum Pick {
    /// Session id, its endpoint, and the replica holding its stream.
    Session(String, String, String),
    /// No live session: nobody to ring (hooks and the next attach's digest cover the work).
    Nobody,
    /// Every live session is held exclusively by another transaction (one being closed): the
    /// ring is owed and must stay recorded for a later pass.
    Busy,
}

impl PgStore {
    /// Rings one session for a todo (the least recently rung among the endpoints in presence
    /// that drain its queue) and, for creations and requeues, enqueues one call per hook. None
    /// when the session is busy: nothing was decided, and the caller keeps what called for it.
    pub(super) async fn push_todo(
        &self,
        tx: &mut PushTx,
        todo: &Todo,
        reason: RingReason,
        hooks: Option<DueReason>,
        now: DateTime<Utc>,
    ) -> Result<Option<PushReport>> {
        let mut report = PushReport::default();
        let targets = self.targets(tx, &todo.identity).await?;
        let present: Vec<&Target> = targets.iter().filter(|t| t.presence(now) == Presence::In).collect();
        if present.is_empty() && !targets.is_empty() {
            report.withheld_out += 1;
        }
        let endpoint_ids: Vec<String> = present.iter().map(|t| t.id.clone()).collect();
        let Some(rang) = self.ring_one(tx, &endpoint_ids, Some(todo), reason, None, now).await? else {
            return Ok(None);
        };
        if rang {
            sqlx::query(
                "INSERT INTO todo_rings (todo_id, ring_attempts, last_ringed_at) VALUES ($1, 1, $2) \
                 ON CONFLICT (todo_id) DO UPDATE SET ring_attempts = todo_rings.ring_attempts + 1, last_ringed_at = $2",
            )
            .bind(&todo.id)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        }
        if let Some(due) = hooks {
            report.hook_calls_enqueued += self.enqueue_hooks(tx, todo, due.as_str(), &targets, now).await?;
        }
        Ok(Some(report))
    }

    /// Picks the least recently rung live session of `endpoint_ids` and decides its doorbell
    /// (written and announced when the pass seals): Some(true) when rung, Some(false) when no
    /// such session has an open stream, None when every one is busy (`Pick::Busy`).
    pub(super) async fn ring_one(
        &self,
        tx: &mut PushTx,
        endpoint_ids: &[String],
        todo: Option<&Todo>,
        reason: RingReason,
        digest: Option<(i64, Vec<String>, DigestReason)>,
        now: DateTime<Utc>,
    ) -> Result<Option<bool>> {
        match self.pick_session(tx, endpoint_ids, now).await? {
            Pick::Session(session_id, endpoint_id, replica_id) => {
                self.record_ring(tx, &session_id, &endpoint_id, &replica_id, todo, reason, digest, now).await?;
                Ok(Some(true))
            }
            Pick::Nobody => Ok(Some(false)),
            Pick::Busy => Ok(None),
        }
    }

    /// The session a ring to `endpoint_ids` goes to (issue #51). Other rings, the replica's
    /// refresh and a stream's attach hold a session's row all the time; the pick takes it `FOR
    /// KEY SHARE`, which none of them conflicts with and which keeps the session from being
    /// deleted before the ring references it. Only a transaction holding the row exclusively (a
    /// session being closed) makes the pick pass it over, and then, if no other live session is
    /// free, the answer is `Busy`, never "nobody": the caller keeps the watch or the due row for
    /// a later pass, so the ring is late but not lost, and no pass ever waits on a session.
    pub(super) async fn pick_session(
        &self,
        tx: &mut PushTx,
        endpoint_ids: &[String],
        now: DateTime<Utc>,
    ) -> Result<Pick> {
        if endpoint_ids.is_empty() {
            return Ok(Pick::Nobody);
        }
        let live_since = now - Duration::seconds(SESSION_STALE_SECONDS);
        // The seeded `RingSkipsBusySession` bug's variant: the code before #51, whose pick
        // skipped every held row and took finding none for nobody.
        let skipping = mutant_hooks::ring_skips_busy_session();
        let pick = if skipping { PICK_SKIPPING_BUSY } else { PICK_SESSION };
        let session: Option<(String, String, String)> = sqlx::query_as(pick)
            .bind(endpoint_ids)
            .bind(live_since)
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_error)?;
        if let Some((session_id, endpoint_id, replica_id)) = session {
            return Ok(Pick::Session(session_id, endpoint_id, replica_id));
        }
        if skipping {
            return Ok(Pick::Nobody);
        }
        let busy: bool = sqlx::query_scalar(ANY_LIVE_SESSION)
            .bind(endpoint_ids)
            .bind(live_since)
            .fetch_one(&mut **tx)
            .await
            .map_err(db_error)?;
        Ok(if busy { Pick::Busy } else { Pick::Nobody })
    }

    /// Decides a doorbell to `session_id` (the pass writes, numbers and announces it as it
    /// seals) and moves the session to the back of its endpoint's round robin.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record_ring(
        &self,
        tx: &mut PushTx,
        session_id: &str,
        endpoint_id: &str,
        replica_id: &str,
        todo: Option<&Todo>,
        reason: RingReason,
        digest: Option<(i64, Vec<String>, DigestReason)>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let ring_id = new_id("rg");
        let message = match (&digest, todo) {
            (Some((pending, queues, why)), _) => push::digest_message(&ring_id, *pending, queues, *why),
            (None, Some(todo)) => push::doorbell_message(todo, &ring_id, reason),
            (None, None) => return Err(Error::internal("a doorbell needs a todo or a digest")),
        };
        // Round robin only: a session another transaction holds is left as it is, never waited
        // for (two passes ringing each other's sessions in opposite order would deadlock).
        sqlx::query(
            "UPDATE mcp_sessions SET last_rung_at = $2 \
             WHERE id = (SELECT id FROM mcp_sessions WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED)",
        )
        .bind(session_id)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
        let ring = Ring {
            seq: 0,
            ring_id,
            session_id: session_id.to_string(),
            endpoint_id: endpoint_id.to_string(),
            replica_id: replica_id.to_string(),
            queue: todo.map(|t| t.identity.queue.clone()),
            todo_id: todo.map(|t| t.id.clone()),
            reason,
            message,
        };
        tx.decide(ring, now);
        Ok(())
    }

    /// One outbox row per enabled hook of the target endpoints (in presence, or ignoring it).
    pub(super) async fn enqueue_hooks(
        &self,
        tx: &mut PushTx,
        todo: &Todo,
        reason: &str,
        targets: &[Target],
        now: DateTime<Utc>,
    ) -> Result<u64> {
        let mut enqueued = 0;
        for target in targets {
            let present = target.presence(now) == Presence::In;
            let body = push::hook_body(todo, reason, &target.slug);
            enqueued += sqlx::query(
                "INSERT INTO hook_outbox (hook_id, msg_id, body, next_attempt_at, created_at) \
                 SELECT h.id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), $2, $3, $3 FROM notify_hooks h \
                 WHERE h.endpoint_id = $1 AND h.enabled AND ($4 OR h.ignore_presence)",
            )
            .bind(&target.id)
            .bind(&body)
            .bind(now)
            .bind(present)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?
            .rows_affected();
        }
        Ok(enqueued)
    }
}
