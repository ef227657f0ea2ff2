//! MCP sessions as push sees them: opened, attached to the replica holding their stream,
//! refreshed while the stream lives, and the doorbells a reconnecting stream replays.

use super::new_id;
use crate::pg_store::{PgStore, db_error};
use models::error::{Error, Result};
use models::push::{self, Ring, RingReason};
use serde_json::Value;

impl PgStore {
    pub(crate) async fn open_session_tx(&self, endpoint_id: &str) -> Result<String> {
        let id = new_id("ms");
        sqlx::query(
            "INSERT INTO mcp_sessions (id, endpoint_id, created_at, last_seen_at) \
             SELECT $1, $2, now, now FROM (SELECT coalesce($3::timestamptz, clock_timestamp()) AS now) clock",
        )
        .bind(&id)
        .bind(endpoint_id)
        .bind(self.now_param())
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(id)
    }

    pub(crate) async fn attach_session_tx(&self, endpoint_id: &str, session_id: &str, replica: &str) -> Result<bool> {
        let attached = sqlx::query(
            "UPDATE mcp_sessions SET stream_replica = $3, last_seen_at = coalesce($4::timestamptz, clock_timestamp()) \
             WHERE id = $1 AND endpoint_id = $2",
        )
        .bind(session_id)
        .bind(endpoint_id)
        .bind(replica)
        .bind(self.now_param())
        .execute(&self.pool)
        .await
        .map_err(db_error)?
        .rows_affected();
        Ok(attached == 1)
    }

    pub(crate) async fn detach_session_tx(&self, session_id: &str, replica: &str) -> Result<()> {
        sqlx::query("UPDATE mcp_sessions SET stream_replica = NULL WHERE id = $1 AND stream_replica = $2")
            .bind(session_id)
            .bind(replica)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    pub(crate) async fn refresh_sessions_tx(&self, replica: &str, session_ids: &[String]) -> Result<Vec<String>> {
        let alive: Vec<String> = sqlx::query_scalar(
            "UPDATE mcp_sessions s SET last_seen_at = coalesce($3::timestamptz, clock_timestamp()), stream_replica = $2 \
             FROM endpoints e WHERE s.id = ANY($1) AND e.id = s.endpoint_id AND NOT e.revoked RETURNING s.id",
        )
        .bind(session_ids)
        .bind(replica)
        .bind(self.now_param())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(session_ids.iter().filter(|id| !alive.contains(id)).cloned().collect())
    }

    pub(crate) async fn rings_since_tx(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>> {
        let rows: Vec<RingRow> = sqlx::query_as(
            "SELECT r.seq, r.ring_id, r.session_id, r.endpoint_id, coalesce(s.stream_replica, '') AS replica_id, \
                    r.queue, r.todo_id, r.reason, r.message \
             FROM doorbell_rings r JOIN mcp_sessions s ON s.id = r.session_id \
             WHERE r.session_id = $1 AND r.seq > $2 ORDER BY r.seq LIMIT $3",
        )
        .bind(session_id)
        .bind(after_seq)
        .bind(push::STREAM_REPLAY_MAX)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        rows.into_iter().map(RingRow::into_ring).collect()
    }
}

#[derive(sqlx::FromRow)]
struct RingRow {
    seq: i64,
    ring_id: String,
    session_id: String,
    endpoint_id: String,
    replica_id: String,
    queue: Option<String>,
    todo_id: Option<String>,
    reason: String,
    message: Value,
}

impl RingRow {
    fn into_ring(self) -> Result<Ring> {
        let reason = RingReason::parse(&self.reason)
            .ok_or_else(|| Error::internal(format!("doorbell {} has unknown reason {}", self.ring_id, self.reason)))?;
        Ok(Ring {
            seq: self.seq,
            ring_id: self.ring_id,
            session_id: self.session_id,
            endpoint_id: self.endpoint_id,
            replica_id: self.replica_id,
            queue: self.queue,
            todo_id: self.todo_id,
            reason,
            message: self.message,
        })
    }
}
