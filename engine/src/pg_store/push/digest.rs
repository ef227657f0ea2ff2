//! Digest doorbells: one ring that sums up the waiting work of an endpoint's admitted queues,
//! sent on clock-in and on a stream's reconnect (rate-limited by `last_digest_at`).

use super::Target;
use super::pass::PushTx;
use crate::pg_store::rows::identity_of;
use crate::pg_store::{PgStore, db_error};
use chrono::{DateTime, Duration, Utc};
use models::error::Result;
use models::identity::QueueIdentity;
use models::presence::Presence;
use models::push::{DigestReason, PushReport, RECONNECT_DIGEST_COOLDOWN_MINUTES, RingReason};
use sqlx::PgConnection;

/// The endpoint a reconnect digest goes to, with the replica holding the session's stream.
#[derive(Debug, sqlx::FromRow)]
struct DigestTarget {
    #[sqlx(flatten)]
    target: Target,
    stream_replica: String,
}

impl PgStore {
    /// One digest doorbell to the endpoint (to `session` when given) if push-eligible work
    /// waits in its admitted queues. Sets no ring budget.
    pub(super) async fn digest(
        &self,
        tx: &mut PushTx,
        endpoint_id: &str,
        session: Option<(&str, &str)>,
        reason: DigestReason,
        now: DateTime<Utc>,
    ) -> Result<PushReport> {
        let (pending, queues) = self.admitted_pending(tx, endpoint_id).await?;
        if pending == 0 {
            return Ok(PushReport::default());
        }
        let digest = Some((pending, queues, reason));
        match session {
            Some((session_id, replica)) => {
                self.record_ring(tx, session_id, endpoint_id, replica, None, RingReason::Digest, digest, now).await?
            }
            None => {
                self.ring_one(tx, &[endpoint_id.to_string()], None, RingReason::Digest, digest, now).await?;
            }
        }
        Ok(PushReport::default())
    }

    /// Pending todos in the endpoint's granted queues whose identity admits claims now, and
    /// the names of those queues.
    pub(super) async fn admitted_pending(
        &self,
        conn: &mut PgConnection,
        endpoint_id: &str,
    ) -> Result<(i64, Vec<String>)> {
        let counts: Vec<(Option<String>, Option<String>, String, i64)> = sqlx::query_as(
            "SELECT CASE WHEN g.team_id IS NULL THEN g.endpoint_id END, g.team_id, g.queue, count(t.id) \
             FROM endpoint_grants g JOIN todos t ON t.state = 'pending' AND t.queue = g.queue \
               AND ((g.team_id IS NULL AND t.endpoint_id = g.endpoint_id) OR t.team_id = g.team_id) \
             WHERE g.endpoint_id = $1 GROUP BY 1, 2, 3 ORDER BY 3",
        )
        .bind(endpoint_id)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        let identities: Vec<(QueueIdentity, i64)> = counts
            .into_iter()
            .map(|(endpoint, team, queue, n)| Ok((identity_of(endpoint, team, queue)?, n)))
            .collect::<Result<_>>()?;
        let deferred = self.deferred_among(identities.iter().map(|(i, _)| i)).await?;
        let mut pending = 0;
        let mut queues = Vec::new();
        for (identity, n) in identities.into_iter().filter(|(i, _)| !deferred.contains(i)) {
            pending += n;
            if !queues.contains(&identity.queue) {
                queues.push(identity.queue);
            }
        }
        Ok((pending, queues))
    }

    pub(crate) async fn reconnect_digest_tx(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        let report = push_pass!(self, |tx| async move {
            let now = self.push_now(tx).await?;
            let row: Option<DigestTarget> = sqlx::query_as(
                "UPDATE endpoints e SET last_digest_at = $3 FROM mcp_sessions s \
                 WHERE e.id = $1 AND s.id = $2 AND s.endpoint_id = e.id AND s.stream_replica IS NOT NULL \
                   AND (e.last_digest_at IS NULL OR e.last_digest_at <= $4) \
                 RETURNING e.id, '' AS slug, e.shift, e.presence_override, e.override_until, s.stream_replica",
            )
            .bind(endpoint_id)
            .bind(session_id)
            .bind(now)
            .bind(now - Duration::minutes(RECONNECT_DIGEST_COOLDOWN_MINUTES))
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_error)?;
            let Some(DigestTarget { target, stream_replica }) = row else {
                return Ok(PushReport::default());
            };
            if target.presence(now) == Presence::Out {
                return Ok(PushReport::default());
            }
            self.digest(tx, endpoint_id, Some((session_id, &stream_replica)), DigestReason::Reconnect, now).await
        })?;
        Ok(self.counted(report))
    }
}
