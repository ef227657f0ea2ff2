//! Presence in memory (`engine/src/pg_store/push.rs`, its presence half): an endpoint's shift
//! and override, the sweep that acts on presence changes, and the digests they ring.
//!
//! A change of effective presence is acted on once: the sweep compares it with the presence last
//! acted on (`presence_seen`) and moves that over; out to in rings one digest of the work waiting
//! in the endpoint's admitted queues (counts only). A stream that reconnects gets one digest per
//! cooldown. Presence itself is `models::presence::effective` over the stored columns
//! (`models::push::presence_from_columns`), as in `PgStore`.
//!
//! Governing: SPEC-0022 (shift schedule, clock-in, the digest); SPEC-0030 REQ-8 ("Reopening while
//! clocked out": the clock-in digest covers work that reopened meanwhile).

use super::push::{Digest, PresenceColumns};
use super::{ModelStore, State, database_error};
use crate::error::{Error, Result};
use crate::identity::QueueIdentity;
use crate::presence::{Override, Presence, SHIFT_TEXT_BYTES_MAX, Shift};
use crate::push::{self, DigestReason, PushReport, RECONNECT_DIGEST_COOLDOWN_MINUTES, RingReason};
use crate::store::{OverrideBy, PresenceView};
use crate::todo::TodoState;
use chrono::{DateTime, Duration, Utc};

impl ModelStore {
    /// Acts on every endpoint whose effective presence differs from the one last acted on.
    pub(super) fn presence_sweep_tx(&self) -> Result<PushReport> {
        let mut state = self.lock();
        let now = self.clock.now();
        let rows: Vec<String> = state
            .endpoints
            .iter()
            .filter(|e| {
                let columns = state.push.presence.get(&e.id).cloned().unwrap_or_default();
                !e.revoked
                    && (columns.shift.is_some() || columns.override_.is_some() || columns.presence_seen != Presence::In)
            })
            .map(|e| e.id.clone())
            .collect();
        let mut report = PushReport::default();
        for endpoint_id in rows {
            report.absorb(self.presence_transition(&mut state, &endpoint_id, now)?);
        }
        drop(state);
        self.count_report(&report);
        Ok(report)
    }

    /// Moves `presence_seen` to the effective presence; out to in rings one digest.
    fn presence_transition(&self, state: &mut State, endpoint_id: &str, now: DateTime<Utc>) -> Result<PushReport> {
        let columns = state.push.presence.get(endpoint_id).cloned().unwrap_or_default();
        let effective = push::presence_from_columns(columns.shift.as_deref(), columns.override_.as_ref(), now);
        if effective.presence == columns.presence_seen {
            return Ok(PushReport::default());
        }
        state.push.presence.entry(endpoint_id.to_string()).or_default().presence_seen = effective.presence;
        if effective.presence == Presence::Out {
            return Ok(PushReport::default());
        }
        let by_operator = columns.override_by == Some(OverrideBy::Operator);
        let reason = push::digest_reason(effective.source, by_operator, columns.override_.is_some());
        self.digest(state, endpoint_id, None, reason, now)
    }

    /// One digest doorbell to the endpoint (to `session` when given) if work waits in its
    /// admitted queues. Sets no ring budget.
    fn digest(
        &self,
        state: &mut State,
        endpoint_id: &str,
        session: Option<(&str, &str)>,
        reason: DigestReason,
        now: DateTime<Utc>,
    ) -> Result<PushReport> {
        let (pending, queues) = self.admitted_pending(state, endpoint_id);
        let mut report = PushReport::default();
        if pending == 0 {
            return Ok(report);
        }
        let digest: Option<Digest> = Some((pending, queues, reason));
        let ring = match session {
            Some((session_id, replica)) => {
                Some(state.record_ring(session_id, endpoint_id, replica, None, RingReason::Digest, digest, now)?)
            }
            None => state.ring_one(&[endpoint_id.to_string()], None, RingReason::Digest, digest, now)?,
        };
        report.rings.extend(ring);
        Ok(report)
    }

    /// Pending todos in the endpoint's granted queues whose identity admits claims now, and the
    /// names of those queues in name order.
    fn admitted_pending(&self, state: &State, endpoint_id: &str) -> (i64, Vec<String>) {
        let Some(endpoint) = state.endpoints.iter().find(|e| e.id == endpoint_id) else {
            return (0, vec![]);
        };
        let mut counts: Vec<(QueueIdentity, i64)> = Vec::new();
        for (team, queue) in &endpoint.grants {
            let identity = match team {
                None => QueueIdentity::endpoint(endpoint.id.clone(), queue.clone()),
                Some(team) => QueueIdentity::team(team.clone(), queue.clone()),
            };
            let waiting =
                state.todos.values().filter(|t| t.state == TodoState::Pending && t.identity == identity).count();
            if waiting > 0 {
                counts.push((identity, waiting as i64));
            }
        }
        counts.sort_by(|a, b| a.0.queue.cmp(&b.0.queue));
        let deferred = self.deferred_among(state, counts.iter().map(|(identity, _)| identity));
        let mut pending = 0;
        let mut queues: Vec<String> = Vec::new();
        for (identity, waiting) in counts.into_iter().filter(|(identity, _)| !deferred.contains(identity)) {
            pending += waiting;
            if !queues.contains(&identity.queue) {
                queues.push(identity.queue);
            }
        }
        (pending, queues)
    }

    /// A stream (re)attached: one digest if work waits, at most one per cooldown per endpoint
    /// (the cooldown is taken even when the endpoint is out or nothing waits).
    pub(super) fn reconnect_digest_tx(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        let mut state = self.lock();
        let now = self.clock.now();
        let replica = state
            .push
            .sessions
            .get(session_id)
            .filter(|s| s.endpoint_id == endpoint_id)
            .and_then(|s| s.stream_replica.clone());
        let columns = state.push.presence.get(endpoint_id).cloned().unwrap_or_default();
        let cooled =
            columns.last_digest_at.is_none_or(|at| at <= now - Duration::minutes(RECONNECT_DIGEST_COOLDOWN_MINUTES));
        let endpoint_exists = state.endpoints.iter().any(|e| e.id == endpoint_id);
        let Some(replica) = replica.filter(|_| cooled && endpoint_exists) else {
            return Ok(PushReport::default());
        };
        state.push.presence.entry(endpoint_id.to_string()).or_default().last_digest_at = Some(now);
        if state.push.presence_of(endpoint_id, now).presence == Presence::Out {
            return Ok(PushReport::default());
        }
        let report =
            self.digest(&mut state, endpoint_id, Some((session_id, &replica)), DigestReason::Reconnect, now)?;
        drop(state);
        self.count_report(&report);
        Ok(report)
    }

    /// The presence view: effective presence, shift, the live override, and pending work.
    pub(super) fn presence_tx(&self, endpoint_id: &str) -> Result<PresenceView> {
        let state = self.lock();
        self.presence_view(&state, endpoint_id)
    }

    fn presence_view(&self, state: &State, endpoint_id: &str) -> Result<PresenceView> {
        if !state.endpoints.iter().any(|e| e.id == endpoint_id) {
            return Err(Error::not_found());
        }
        let now = self.clock.now();
        let columns = state.push.presence.get(endpoint_id).cloned().unwrap_or_default();
        let shift = columns.shift.as_deref().and_then(|text| Shift::parse(text).ok());
        let override_ = columns.override_.filter(|o| o.is_live(now));
        let effective = crate::presence::effective(shift.as_ref(), override_.as_ref(), now);
        let (pending, _) = self.admitted_pending(state, endpoint_id);
        Ok(PresenceView { endpoint_id: endpoint_id.to_string(), effective, shift, override_, pending })
    }

    /// Sets or clears the override, acts on the change at once (the clock-in digest), reads back.
    pub(super) fn set_presence_override_tx(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        self.change_presence(endpoint_id, |columns| {
            columns.override_ = override_;
            columns.override_by = override_.map(|_| by);
            Ok(())
        })
    }

    /// Sets or clears the shift (stored as its canonical text), acts on the change, reads back.
    pub(super) fn set_shift_tx(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        let text = shift.map(|s| s.to_string());
        self.change_presence(endpoint_id, |columns| {
            // The column's CHECK.
            if text.as_ref().is_some_and(|t| t.len() > SHIFT_TEXT_BYTES_MAX) {
                return Err(database_error());
            }
            columns.shift = text;
            Ok(())
        })
    }

    fn change_presence(
        &self,
        endpoint_id: &str,
        change: impl FnOnce(&mut PresenceColumns) -> Result<()>,
    ) -> Result<PresenceView> {
        let mut state = self.lock();
        if !state.endpoints.iter().any(|e| e.id == endpoint_id) {
            return Err(Error::not_found());
        }
        change(state.push.presence.entry(endpoint_id.to_string()).or_default())?;
        let now = self.clock.now();
        let report = self.presence_transition(&mut state, endpoint_id, now)?;
        let view = self.presence_view(&state, endpoint_id);
        drop(state);
        self.count_report(&report);
        view
    }
}

/// The presence role on the model: each method is one of the transactions above, run under the
/// state lock.
impl crate::store::Presence for ModelStore {
    async fn presence(&self, endpoint_id: &str) -> Result<PresenceView> {
        self.presence_tx(endpoint_id)
    }

    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        self.set_presence_override_tx(endpoint_id, override_, by)
    }

    async fn set_shift(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        self.set_shift_tx(endpoint_id, shift)
    }

    async fn presence_sweep(&self) -> Result<PushReport> {
        self.presence_sweep_tx()
    }

    async fn reconnect_digest(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        self.reconnect_digest_tx(endpoint_id, session_id)
    }
}
