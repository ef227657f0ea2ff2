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

/// The least recently rung live session of the endpoints `$1`, kept from deletion (`ring_one`).
const PICK_SESSION: &str = "SELECT id, endpoint_id, stream_replica FROM mcp_sessions \
     WHERE endpoint_id = ANY($1) AND stream_replica IS NOT NULL AND last_seen_at > $2 \
     ORDER BY last_rung_at NULLS FIRST, id LIMIT 1 FOR KEY SHARE";
/// `PICK_SESSION` as it was before issue #51, skipping a held session: the seeded
/// `RingSkipsBusySession` bug only.
const PICK_SKIPPING_BUSY: &str = "SELECT id, endpoint_id, stream_replica FROM mcp_sessions \
     WHERE endpoint_id = ANY($1) AND stream_replica IS NOT NULL AND last_seen_at > $2 \
     ORDER BY last_rung_at NULLS FIRST, id LIMIT 1 FOR UPDATE SKIP LOCKED";

impl PgStore {
    /// Rings one session for a todo (the least recently rung among the endpoints in presence
    /// that drain its queue) and, for creations and requeues, enqueues one call per hook.
    pub(super) async fn push_todo(
        &self,
        tx: &mut PushTx,
        todo: &Todo,
        reason: RingReason,
        hooks: Option<DueReason>,
        now: DateTime<Utc>,
    ) -> Result<PushReport> {
        let mut report = PushReport::default();
        let targets = self.targets(tx, &todo.identity).await?;
        let present: Vec<&Target> = targets.iter().filter(|t| t.presence(now) == Presence::In).collect();
        if present.is_empty() && !targets.is_empty() {
            report.withheld_out += 1;
        }
        let endpoint_ids: Vec<String> = present.iter().map(|t| t.id.clone()).collect();
        if self.ring_one(tx, &endpoint_ids, Some(todo), reason, None, now).await? {
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
        Ok(report)
    }

    /// Picks the least recently rung live session of `endpoint_ids` and decides its doorbell
    /// (written and announced when the pass seals). False only when no such session has an open
    /// stream.
    ///
    /// The pick never skips a busy session (issue #51): another ring, a session refresh or the
    /// stream's attach may hold the session's row at that moment, and a ring that skipped it
    /// found nobody, so a reopening whose watch this transaction deletes rang nothing. The row is
    /// taken `FOR KEY SHARE`, which no ring, refresh or attach conflicts with and which keeps
    /// it from being deleted before the ring references it; only the round-robin bookkeeping
    /// (`last_rung_at`) is skipped while another transaction holds the row.
    pub(super) async fn ring_one(
        &self,
        tx: &mut PushTx,
        endpoint_ids: &[String],
        todo: Option<&Todo>,
        reason: RingReason,
        digest: Option<(i64, Vec<String>, DigestReason)>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        if endpoint_ids.is_empty() {
            return Ok(false);
        }
        // The seeded `RingSkipsBusySession` bug's variant skips a held row (the code before #51).
        let pick = if mutant_hooks::ring_skips_busy_session() { PICK_SKIPPING_BUSY } else { PICK_SESSION };
        let session: Option<(String, String, String)> = sqlx::query_as(pick)
            .bind(endpoint_ids)
            .bind(now - Duration::seconds(SESSION_STALE_SECONDS))
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_error)?;
        let Some((session_id, endpoint_id, replica_id)) = session else {
            return Ok(false);
        };
        self.record_ring(tx, &session_id, &endpoint_id, &replica_id, todo, reason, digest, now).await?;
        Ok(true)
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
