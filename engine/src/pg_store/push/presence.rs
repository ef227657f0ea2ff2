//! Endpoint presence (shift and override): the view, the edits, and the sweep that acts on a
//! change once across replicas (a conditional update on `presence_seen`); out to in rings one
//! digest when work waits.

use super::stored_override;
use crate::pg_store::{PgStore, db_error, touched};
use chrono::{DateTime, Utc};
use models::error::{Error, Result};
use models::presence::{self, Override, Presence, Shift};
use models::push::{DigestReason, PushReport};
use models::store::{OverrideBy, PresenceView};

impl PgStore {
    /// Presence changes: each endpoint whose effective presence differs from the one last acted
    /// on is moved over with a conditional update (won once across replicas); out to in rings
    /// one digest if work waits.
    pub(crate) async fn presence_sweep_tx(&self) -> Result<PushReport> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let now = self.push_now(&mut conn).await?;
        let rows: Vec<PresenceRow> = sqlx::query_as(
            "SELECT id, shift, presence_override, override_until, override_by, presence_seen FROM endpoints \
             WHERE NOT revoked AND (shift IS NOT NULL OR presence_override IS NOT NULL OR presence_seen <> 'in')",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        drop(conn);
        let mut report = PushReport::default();
        for row in rows {
            report.absorb(self.presence_transition(&row, now).await?);
        }
        Ok(self.counted(report))
    }

    async fn presence_transition(&self, row: &PresenceRow, now: DateTime<Utc>) -> Result<PushReport> {
        let shift = row.shift.as_deref().and_then(|text| Shift::parse(text).ok());
        let override_ = stored_override(row.presence_override.as_deref(), row.override_until);
        let effective = presence::effective(shift.as_ref(), override_.as_ref(), now);
        let seen = if row.presence_seen == "out" { Presence::Out } else { Presence::In };
        if effective.presence == seen {
            return Ok(PushReport::default());
        }
        push_pass!(self, |tx| async move {
            let won = sqlx::query("UPDATE endpoints SET presence_seen = $2 WHERE id = $1 AND presence_seen = $3")
                .bind(&row.id)
                .bind(effective.presence.as_str())
                .bind(seen.as_str())
                .execute(&mut **tx)
                .await
                .map_err(db_error)?
                .rows_affected()
                == 1;
            if !won || effective.presence == Presence::Out {
                return Ok(PushReport::default());
            }
            let reason = match (effective.source, row.override_by.as_deref()) {
                (presence::PresenceSource::Override, Some("operator")) => DigestReason::Operator,
                (presence::PresenceSource::Override, _) => DigestReason::ClockIn,
                (presence::PresenceSource::Shift, _) if override_.is_none() => DigestReason::ShiftStart,
                _ => DigestReason::OverrideEnd,
            };
            self.digest(tx, &row.id, None, reason, now).await
        })
    }

    pub(crate) async fn presence_tx(&self, endpoint_id: &str) -> Result<PresenceView> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let now = self.push_now(&mut conn).await?;
        let row = presence_row(&mut conn, endpoint_id).await?;
        let row = row.ok_or_else(Error::not_found)?;
        let shift = row.shift.as_deref().and_then(|text| Shift::parse(text).ok());
        let override_ = stored_override(row.presence_override.as_deref(), row.override_until)
            .filter(|o| o.until.is_none_or(|until| until > now));
        let effective = presence::effective(shift.as_ref(), override_.as_ref(), now);
        let (pending, _) = self.admitted_pending(&mut conn, endpoint_id).await?;
        Ok(PresenceView { endpoint_id: row.id, effective, shift, override_, pending })
    }

    pub(crate) async fn set_presence_override_tx(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        touched(
            sqlx::query(
                "UPDATE endpoints SET presence_override = $2, override_until = $3, override_by = $4 WHERE id = $1",
            )
            .bind(endpoint_id)
            .bind(override_.as_ref().map(|o| o.presence.as_str()))
            .bind(override_.as_ref().and_then(|o| o.until))
            .bind(override_.as_ref().map(|_| by.as_str()))
            .execute(&self.pool)
            .await
            .map_err(db_error)?,
        )?;
        self.presence_changed(endpoint_id).await
    }

    pub(crate) async fn set_shift_tx(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        touched(
            sqlx::query("UPDATE endpoints SET shift = $2 WHERE id = $1")
                .bind(endpoint_id)
                .bind(shift.as_ref().map(|s| s.to_string()))
                .execute(&self.pool)
                .await
                .map_err(db_error)?,
        )?;
        self.presence_changed(endpoint_id).await
    }

    /// Acts on a presence change right away (the digest on clock-in), then reads it back.
    async fn presence_changed(&self, endpoint_id: &str) -> Result<PresenceView> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let now = self.push_now(&mut conn).await?;
        let row = presence_row(&mut conn, endpoint_id).await?;
        drop(conn);
        if let Some(row) = row {
            self.counted(self.presence_transition(&row, now).await?);
        }
        self.presence_tx(endpoint_id).await
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct PresenceRow {
    id: String,
    shift: Option<String>,
    presence_override: Option<String>,
    override_until: Option<DateTime<Utc>>,
    override_by: Option<String>,
    presence_seen: String,
}

/// An endpoint's presence columns, as every presence read and transition takes them.
async fn presence_row(conn: &mut sqlx::PgConnection, endpoint_id: &str) -> Result<Option<PresenceRow>> {
    sqlx::query_as(
        "SELECT id, shift, presence_override, override_until, override_by, presence_seen FROM endpoints WHERE id = $1",
    )
    .bind(endpoint_id)
    .fetch_optional(conn)
    .await
    .map_err(db_error)
}

/// The presence role on PostgreSQL: the transactions above, and `digest.rs`'s reconnect digest.
impl models::store::Presence for PgStore {
    async fn presence(&self, endpoint_id: &str) -> Result<PresenceView> {
        self.presence_tx(endpoint_id).await
    }

    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        self.set_presence_override_tx(endpoint_id, override_, by).await
    }

    async fn set_shift(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        self.set_shift_tx(endpoint_id, shift).await
    }

    async fn presence_sweep(&self) -> Result<PushReport> {
        self.presence_sweep_tx().await
    }

    async fn reconnect_digest(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        self.reconnect_digest_tx(endpoint_id, session_id).await
    }
}
