//! Push in memory (`engine/src/pg_store/push.rs`; `migrations/0008_push.sql`): MCP sessions and
//! the replica holding each one's stream, the work waiting for a push decision (`push_due`),
//! doorbells (`doorbell_rings`), the heartbeat's ring counts, and the reopen watch.
//!
//! Each push is decided once, in one transaction, as `PgStore` decides it: a `push_due` row is
//! consumed by the pass that takes it, a watched identity is rung once and unwatched. What must
//! never happen (SPEC-0030 REQ-8): a push for a todo whose queue identity is deferred, a ring to
//! an endpoint that is out. The rules are `models::push`'s and `models::presence`'s, and the
//! deferral is the `queue_admissions` status, the very functions `PgStore` calls.
//!
//! Beyond the tables, the model keeps a log of every reopen watch it inserted (`watch_log`), so
//! the simulation can judge "one reopen ring per reopening" from what happened, in order
//! (`journal.rs` reads it out).
//!
//! Governing: SPEC-0030 REQ-8; base system doorbells (SPEC-0011), presence (SPEC-0022).

use super::admission::Pending;
use super::hooks::Target;
use super::journal::{LoggedRing, WatchRecord};
use super::{EndpointRow, ModelStore, State};
use crate::error::{Error, Result};
use crate::identity::{Owner, QueueIdentity};
use crate::mutants;
use crate::presence::{Override, Presence};
use crate::push::{self, DigestReason, DueReason, PushReport, Ring, RingReason};
use crate::store::{OverrideBy, Push};
use crate::todo::{Todo, TodoState};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// A pending todo the heartbeat weighs: when it was last rung (or created), it, its rings.
type HeartbeatCandidate<'a> = (DateTime<Utc>, &'a Todo, i32);

/// A digest's content: pending todos, the queues they wait in, and why it rang.
pub(super) type Digest = (i64, Vec<String>, DigestReason);

/// One `mcp_sessions` row.
#[derive(Debug, Clone)]
pub(super) struct SessionRow {
    pub(super) endpoint_id: String,
    /// NULL while no stream is open.
    pub(super) stream_replica: Option<String>,
    pub(super) last_seen_at: DateTime<Utc>,
    pub(super) last_rung_at: Option<DateTime<Utc>>,
}

/// One `push_due` row.
#[derive(Debug, Clone)]
pub(super) struct DueRow {
    seq: u64,
    todo_id: String,
    reason: DueReason,
}

/// The presence columns of one `endpoints` row; an endpoint without an entry has the defaults.
#[derive(Debug, Clone)]
pub(super) struct PresenceColumns {
    /// As stored: the shift's canonical text, parsed again on every read.
    pub(super) shift: Option<String>,
    pub(super) override_: Option<Override>,
    pub(super) override_by: Option<OverrideBy>,
    /// The presence last acted on (the out→in digest is rung once, when it changes).
    pub(super) presence_seen: Presence,
    pub(super) last_digest_at: Option<DateTime<Utc>>,
}

impl Default for PresenceColumns {
    fn default() -> PresenceColumns {
        PresenceColumns {
            shift: None,
            override_: None,
            override_by: None,
            presence_seen: Presence::In,
            last_digest_at: None,
        }
    }
}

/// The push tables (`migrations/0008_push.sql`), one field of the model's `State`.
#[derive(Debug, Clone, Default)]
pub(super) struct PushTables {
    /// By id; ids are counters, so id order is creation order.
    pub(super) sessions: BTreeMap<String, SessionRow>,
    /// In `seq` order.
    due: Vec<DueRow>,
    /// In `seq` order.
    pub(super) rings: Vec<LoggedRing>,
    /// `todo_rings`: ring attempts and the last ring, by todo id.
    todo_rings: BTreeMap<String, (i32, DateTime<Utc>)>,
    /// `admission_reopen_watch`: since when each identity is watched.
    watch: BTreeMap<QueueIdentity, DateTime<Utc>>,
    pub(super) watch_log: Vec<WatchRecord>,
    /// By endpoint id.
    pub(super) presence: BTreeMap<String, PresenceColumns>,
    pub(super) hooks: Vec<super::hooks::HookRow>,
    /// In id order.
    pub(super) outbox: Vec<super::hooks::OutboxRow>,
}

impl PushTables {
    /// `ON DELETE CASCADE` from `todos`: their `push_due` and `todo_rings` rows.
    pub(super) fn forget_todos(&mut self, ids: &[String]) {
        self.due.retain(|d| !ids.contains(&d.todo_id));
        self.todo_rings.retain(|id, _| !ids.contains(id));
    }

    /// `ON DELETE CASCADE` from `endpoints`: sessions (and their doorbells), hooks (and their
    /// calls), and the presence columns that were part of the row.
    pub(super) fn forget_endpoint(&mut self, endpoint_id: &str) {
        self.sessions.retain(|_, s| s.endpoint_id != endpoint_id);
        let sessions = &self.sessions;
        self.rings.retain(|r| sessions.contains_key(&r.session_id));
        self.hooks.retain(|h| h.endpoint_id != endpoint_id);
        let hooks = &self.hooks;
        self.outbox.retain(|o| hooks.iter().any(|h| h.id == o.hook_id));
        self.presence.remove(endpoint_id);
    }

    pub(super) fn presence_of(&self, endpoint_id: &str, now: DateTime<Utc>) -> crate::presence::Effective {
        let columns = self.presence.get(endpoint_id).cloned().unwrap_or_default();
        push::presence_from_columns(columns.shift.as_deref(), columns.override_.as_ref(), now)
    }
}

impl ModelStore {
    /// Opens a session for an endpoint (its foreign key: a database error if there is none).
    pub(super) fn open_session_tx(&self, endpoint_id: &str) -> Result<String> {
        let mut state = self.lock();
        if !state.endpoints.iter().any(|e| e.id == endpoint_id) {
            return Err(super::database_error());
        }
        let now = self.clock.now();
        let id = state.next_id("ms");
        let row = SessionRow {
            endpoint_id: endpoint_id.to_string(),
            stream_replica: None,
            last_seen_at: now,
            last_rung_at: None,
        };
        state.push.sessions.insert(id.clone(), row);
        Ok(id)
    }

    /// A stream opened on `replica`: false when the session is not this endpoint's.
    pub(super) fn attach_session_tx(&self, endpoint_id: &str, session_id: &str, replica: &str) -> bool {
        let mut state = self.lock();
        let now = self.clock.now();
        match state.push.sessions.get_mut(session_id).filter(|s| s.endpoint_id == endpoint_id) {
            Some(session) => {
                session.stream_replica = Some(replica.to_string());
                session.last_seen_at = now;
                true
            }
            None => false,
        }
    }

    /// The stream closed, if `replica` still holds it.
    pub(super) fn detach_session_tx(&self, session_id: &str, replica: &str) {
        let mut state = self.lock();
        if let Some(session) =
            state.push.sessions.get_mut(session_id).filter(|s| s.stream_replica.as_deref() == Some(replica))
        {
            session.stream_replica = None;
        }
    }

    /// Ends a session: its row and (`ON DELETE CASCADE`) its doorbells go.
    pub(super) fn close_session_tx(&self, endpoint_id: &str, session_id: &str) -> bool {
        let mut state = self.lock();
        let push = &mut state.push;
        if push.sessions.get(session_id).is_none_or(|s| s.endpoint_id != endpoint_id) {
            return false;
        }
        push.sessions.remove(session_id);
        push.rings.retain(|r| r.session_id != session_id);
        true
    }

    /// Marks the listed sessions alive on `replica`; answers those that must close (gone, or
    /// their endpoint revoked), in the order given.
    pub(super) fn refresh_sessions_tx(&self, replica: &str, session_ids: &[String]) -> Vec<String> {
        let mut state = self.lock();
        let now = self.clock.now();
        let state = &mut *state;
        let mut alive: Vec<String> = Vec::new();
        for (id, session) in state.push.sessions.iter_mut().filter(|(id, _)| session_ids.contains(id)) {
            if state.endpoints.iter().any(|e| e.id == session.endpoint_id && !e.revoked) {
                session.last_seen_at = now;
                session.stream_replica = Some(replica.to_string());
                alive.push(id.clone());
            }
        }
        session_ids.iter().filter(|id| !alive.contains(id)).cloned().collect()
    }

    /// A session's doorbells after `after_seq`, oldest first, at most `STREAM_REPLAY_MAX`; each
    /// names the replica holding the stream now.
    pub(super) fn rings_since_tx(&self, session_id: &str, after_seq: i64) -> Vec<Ring> {
        let state = self.lock();
        let Some(session) = state.push.sessions.get(session_id) else {
            return vec![];
        };
        let replica = session.stream_replica.clone().unwrap_or_default();
        state
            .push
            .rings
            .iter()
            .filter(|r| r.session_id == session_id && r.seq > after_seq)
            .take(push::STREAM_REPLAY_MAX as usize)
            .map(|r| r.to_ring(&replica))
            .collect()
    }

    /// REQ-8: decides the pushes of work that entered pending, in batches as `PgStore` does.
    pub(super) fn dispatch_pushes_tx(&self) -> Result<PushReport> {
        let mut state = self.lock();
        let consume = !mutants::hooks::rings_leave_push_due();
        let mut report = PushReport::default();
        loop {
            let (batch, taken) = self.dispatch_batch(&mut state, consume)?;
            report.absorb(batch);
            if taken < push::PUSH_BATCH_MAX || !consume {
                break;
            }
        }
        drop(state);
        self.count_report(&report);
        Ok(report)
    }

    fn dispatch_batch(&self, state: &mut State, consume: bool) -> Result<(PushReport, i64)> {
        let batch: Vec<DueRow> = state
            .push
            .due
            .iter()
            .filter(|d| state.todos.contains_key(&d.todo_id))
            .take(push::PUSH_BATCH_MAX as usize)
            .cloned()
            .collect();
        let taken = batch.len() as i64;
        if batch.is_empty() {
            return Ok((PushReport::default(), 0));
        }
        if consume {
            state.push.due.retain(|d| !batch.iter().any(|b| b.seq == d.seq));
        }
        let now = self.clock.now();
        // Only work still waiting is worth a push: a todo claimed meanwhile needs none.
        let work: Vec<(Todo, DueReason)> = batch
            .iter()
            .filter_map(|d| {
                state.todos.get(&d.todo_id).filter(|t| t.state == TodoState::Pending).map(|t| (t.clone(), d.reason))
            })
            .collect();
        let deferred = if mutants::hooks::pushes_ignore_deferral() {
            vec![]
        } else {
            self.deferred_among(state, work.iter().map(|(t, _)| &t.identity))
        };
        let mut report = PushReport::default();
        for (todo, reason) in work {
            if deferred.contains(&todo.identity) {
                state.watch_if_waiting(&todo.identity, now);
                report.withheld_deferred += 1;
                continue;
            }
            report.absorb(state.push_todo(&todo, reason.ring_reason(), Some(reason), now)?);
        }
        Ok((report, taken))
    }

    /// The identities among `identities` that admit no claim now (REQ-6 status, unlocked read).
    pub(super) fn deferred_among<'a>(
        &self,
        state: &State,
        identities: impl Iterator<Item = &'a QueueIdentity>,
    ) -> Vec<QueueIdentity> {
        let mut unique: Vec<QueueIdentity> = identities.cloned().collect();
        unique.sort();
        unique.dedup();
        self.admissions_of(state, &unique, Pending::AnyAtAll)
            .into_iter()
            .filter(|a| a.status.hint.is_deferred())
            .map(|a| a.identity)
            .collect()
    }

    /// REQ-8's reopen sweep: each watched identity (oldest watch first, all of them, as
    /// `PgStore` takes them batch after batch) that admits claims again is unwatched and rung
    /// once per endpoint and queue.
    pub(super) fn reopen_sweep_tx(&self) -> Result<PushReport> {
        let mut state = self.lock();
        let mut watched: Vec<(DateTime<Utc>, QueueIdentity)> =
            state.push.watch.iter().map(|(identity, since)| (*since, identity.clone())).collect();
        watched.sort();
        let deferred = self.deferred_among(&state, watched.iter().map(|(_, identity)| identity));
        let now = self.clock.now();
        let mut report = PushReport::default();
        for (_, identity) in watched.iter().filter(|(_, identity)| !deferred.contains(identity)) {
            state.push.watch.remove(identity);
            report.absorb(state.reopen_identity(identity, now)?);
        }
        drop(state);
        self.count_report(&report);
        Ok(report)
    }

    /// The doorbell heartbeat: a few due, unclaimed todos of endpoints with a live stream,
    /// round-robin across owners.
    pub(super) fn heartbeat_sweep_tx(&self) -> Result<PushReport> {
        let mut state = self.lock();
        let now = self.clock.now();
        // Asked once per queue identity, not once per todo: the answer depends on the identity.
        let mut streamed: BTreeMap<&QueueIdentity, bool> = BTreeMap::new();
        let mut candidates: Vec<HeartbeatCandidate> = state
            .todos
            .values()
            .filter(|t| {
                t.state == TodoState::Pending
                    && *streamed.entry(&t.identity).or_insert_with(|| state.has_live_stream_for(t, now))
            })
            .map(|t| {
                let (rings, last) = state.push.todo_rings.get(&t.id).copied().unwrap_or((0, t.created_at));
                (last, t, rings)
            })
            .filter(|(_, _, rings)| *rings < push::RINGS_PER_TODO_MAX)
            .collect();
        candidates.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
        // The longest unrung todos of identities that admit claims, as `PgStore` reads them: a
        // batch that meets deferred identities is taken again without them.
        let mut excluded: Vec<QueueIdentity> = Vec::new();
        let mut watched: Vec<QueueIdentity> = Vec::new();
        let eligible: Vec<&Todo> = loop {
            let (due, not_yet_due): (Vec<&HeartbeatCandidate>, Vec<_>) = candidates
                .iter()
                .filter(|(_, todo, _)| !excluded.contains(&todo.identity))
                .take(push::HEARTBEAT_CANDIDATES_MAX as usize)
                .partition(|(last, _, rings)| push::heartbeat_due_at(*rings, *last).is_some_and(|at| at <= now));
            let due: Vec<&Todo> = due.into_iter().map(|entry| entry.1).collect();
            let deferred = self.deferred_among(
                &state,
                due.iter().map(|t| &t.identity).chain(not_yet_due.iter().map(|entry| &entry.1.identity)),
            );
            if deferred.is_empty() {
                break due;
            }
            watched.extend(deferred.iter().filter(|identity| due.iter().any(|t| &t.identity == *identity)).cloned());
            excluded.extend(deferred);
        };
        // Only the todos it rings are copied out: most due todos wait in deferred queues.
        let chosen: Vec<Todo> =
            push::round_robin(eligible, |t| t.identity.owner.clone(), push::HEARTBEAT_TODOS_PER_SWEEP_MAX)
                .into_iter()
                .cloned()
                .collect();
        for identity in watched.iter().filter(|_| !mutants::hooks::watch_on_refusal_only()) {
            state.watch_if_waiting(identity, now);
        }
        let mut report = PushReport::default();
        for todo in chosen {
            report.absorb(state.push_todo(&todo, RingReason::Heartbeat, None, now)?);
        }
        drop(state);
        self.count_report(&report);
        Ok(report)
    }

    /// The metrics of what a pass decided, counted after it committed.
    pub(super) fn count_report(&self, report: &PushReport) {
        for ring in &report.rings {
            self.counters.rung(ring.reason);
        }
        self.counters.reopened(report.reopens);
    }
}

impl State {
    /// Work entered pending (created, requeued): its push is decided by the next pass. Written
    /// in the transaction that made the change, as `PgStore`'s `push` CTEs do.
    pub(super) fn push_due(&mut self, todo_id: &str, reason: DueReason) {
        let seq = self.next_number("push_due");
        self.push.due.push(DueRow { seq, todo_id: todo_id.to_string(), reason });
    }

    /// How many push-due rows are written: the mark a rolled-back batch returns to.
    pub(super) fn push_due_mark(&self) -> usize {
        self.push.due.len()
    }

    /// Forgets the push-due rows written after `mark`: their transaction rolled back.
    pub(super) fn roll_back_push_due(&mut self, mark: usize) {
        self.push.due.truncate(mark);
    }

    /// Issue #28 (`PgStore::watch_if_waiting`): watches an identity that has pending work, when
    /// it became deferred (a claim filled it, a policy write or the heartbeat found it so) or a
    /// claim was refused.
    pub(super) fn watch_if_waiting(&mut self, identity: &QueueIdentity, now: DateTime<Utc>) {
        if self.todos.values().any(|t| t.state == TodoState::Pending && &t.identity == identity) {
            self.watch_in(identity, now);
        }
    }

    /// Watches an identity unless it already is (`ON CONFLICT DO NOTHING`).
    fn watch_in(&mut self, identity: &QueueIdentity, now: DateTime<Utc>) {
        if self.push.watch.contains_key(identity) {
            return;
        }
        self.push.watch.insert(identity.clone(), now);
        let after_ring_seq = self.sequences.get("doorbell_rings").copied().unwrap_or(0) as i64;
        self.push.watch_log.push(WatchRecord { identity: identity.clone(), at: now, after_ring_seq });
    }

    /// Rings one session for a todo (the least recently rung among the endpoints in presence
    /// that drain its queue) and, for creations and requeues, enqueues one call per hook.
    fn push_todo(
        &mut self,
        todo: &Todo,
        reason: RingReason,
        hooks: Option<DueReason>,
        now: DateTime<Utc>,
    ) -> Result<PushReport> {
        let mut report = PushReport::default();
        let targets = self.targets(&todo.identity, now);
        let present: Vec<String> =
            targets.iter().filter(|t| t.presence == Presence::In).map(|t| t.id.clone()).collect();
        if present.is_empty() && !targets.is_empty() {
            report.withheld_out += 1;
        }
        if let Some(ring) = self.ring_one(&present, Some(todo), reason, None, now)? {
            let counted = self.push.todo_rings.entry(todo.id.clone()).or_insert((0, now));
            *counted = (counted.0 + 1, now);
            report.rings.push(ring);
        }
        if let Some(due) = hooks {
            report.hook_calls_enqueued += self.enqueue_hooks(todo, due.as_str(), &targets, now);
        }
        Ok(report)
    }

    /// One doorbell per endpoint in presence that drains the identity, naming its oldest
    /// pending todo, and one call per hook; nothing when no todo waits.
    fn reopen_identity(&mut self, identity: &QueueIdentity, now: DateTime<Utc>) -> Result<PushReport> {
        let mut report = PushReport::default();
        let oldest = self
            .todos
            .values()
            .filter(|t| t.state == TodoState::Pending && &t.identity == identity)
            .min_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
            .cloned();
        let Some(todo) = oldest else {
            return Ok(report);
        };
        report.reopens = 1;
        let targets = self.targets(identity, now);
        for target in &targets {
            if target.presence == Presence::Out {
                // The clock-in digest covers this work (REQ-8 "Reopening while clocked out").
                report.withheld_out += 1;
                continue;
            }
            let endpoint = [target.id.clone()];
            if let Some(ring) = self.ring_one(&endpoint, Some(&todo), RingReason::Reopen, None, now)? {
                report.rings.push(ring);
            }
        }
        report.hook_calls_enqueued += self.enqueue_hooks(&todo, "reopened", &targets, now);
        Ok(report)
    }

    /// Endpoints that drain a queue identity, by id: the endpoint itself for an endpoint queue
    /// (when granted it), every endpoint granted a team queue whose owner still reaches the team.
    pub(super) fn targets(&self, identity: &QueueIdentity, now: DateTime<Utc>) -> Vec<Target> {
        let mut targets: Vec<Target> = self
            .endpoints
            .iter()
            .filter(|e| !e.revoked && self.drains(e, identity))
            .map(|e| Target {
                id: e.id.clone(),
                slug: e.slug.clone(),
                presence: self.push.presence_of(&e.id, now).presence,
            })
            .collect();
        targets.sort_by(|a, b| a.id.cmp(&b.id));
        targets
    }

    fn drains(&self, endpoint: &EndpointRow, identity: &QueueIdentity) -> bool {
        match &identity.owner {
            Owner::Endpoint(id) => &endpoint.id == id && endpoint.grants.contains(&(None, identity.queue.clone())),
            Owner::Team(team) => {
                endpoint.grants.contains(&(Some(team.clone()), identity.queue.clone()))
                    && (endpoint.owner_team_id.as_ref() == Some(team)
                        || endpoint
                            .owner_human_id
                            .as_ref()
                            .is_some_and(|human| self.members.contains_key(&(team.clone(), human.clone()))))
            }
        }
    }

    /// Whether an endpoint granted the todo's queue has a live stream (the heartbeat's
    /// `EXISTS`, which matches grants by queue and owner column only).
    fn has_live_stream_for(&self, todo: &Todo, now: DateTime<Utc>) -> bool {
        let granted = |e: &EndpointRow| match &todo.identity.owner {
            Owner::Endpoint(id) => &e.id == id && e.grants.iter().any(|(_, queue)| queue == &todo.identity.queue),
            Owner::Team(team) => e.grants.contains(&(Some(team.clone()), todo.identity.queue.clone())),
        };
        self.endpoints.iter().filter(|e| granted(e)).any(|e| {
            self.push.sessions.values().any(|s| {
                s.endpoint_id == e.id && push::session_is_live(s.stream_replica.is_some(), s.last_seen_at, now)
            })
        })
    }

    /// Rings the least recently rung live session of `endpoint_ids` (ties by id). None when no
    /// such session has an open stream.
    pub(super) fn ring_one(
        &mut self,
        endpoint_ids: &[String],
        todo: Option<&Todo>,
        reason: RingReason,
        digest: Option<Digest>,
        now: DateTime<Utc>,
    ) -> Result<Option<Ring>> {
        let chosen = self
            .push
            .sessions
            .iter()
            .filter(|(_, s)| {
                endpoint_ids.contains(&s.endpoint_id)
                    && push::session_is_live(s.stream_replica.is_some(), s.last_seen_at, now)
            })
            .min_by(|a, b| (a.1.last_rung_at, a.0).cmp(&(b.1.last_rung_at, b.0)))
            .map(|(id, s)| (id.clone(), s.endpoint_id.clone(), s.stream_replica.clone().unwrap_or_default()));
        let Some((session_id, endpoint_id, replica_id)) = chosen else {
            return Ok(None);
        };
        self.record_ring(&session_id, &endpoint_id, &replica_id, todo, reason, digest, now).map(Some)
    }

    /// Records a doorbell for a session and marks the session rung.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_ring(
        &mut self,
        session_id: &str,
        endpoint_id: &str,
        replica_id: &str,
        todo: Option<&Todo>,
        reason: RingReason,
        digest: Option<Digest>,
        now: DateTime<Utc>,
    ) -> Result<Ring> {
        let ring_id = self.next_id("rg");
        let message = match (&digest, todo) {
            (Some((pending, queues, why)), _) => push::digest_message(&ring_id, *pending, queues, *why),
            (None, Some(todo)) => push::doorbell_message(todo, &ring_id, reason),
            (None, None) => return Err(Error::internal("a doorbell needs a todo or a digest")),
        };
        let seq = self.next_number("doorbell_rings") as i64;
        let logged = LoggedRing {
            seq,
            ring_id,
            session_id: session_id.to_string(),
            endpoint_id: endpoint_id.to_string(),
            queue: todo.map(|t| t.identity.queue.clone()),
            todo_id: todo.map(|t| t.id.clone()),
            reason,
            message,
            at: now,
        };
        let ring = logged.to_ring(replica_id);
        self.push.rings.push(logged);
        if let Some(session) = self.push.sessions.get_mut(session_id) {
            session.last_rung_at = Some(now);
        }
        Ok(ring)
    }
}

/// The push role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Push for ModelStore {
    async fn open_session(&self, endpoint_id: &str) -> Result<String> {
        self.open_session_tx(endpoint_id)
    }

    async fn attach_session(&self, endpoint_id: &str, session_id: &str, replica_id: &str) -> Result<bool> {
        Ok(self.attach_session_tx(endpoint_id, session_id, replica_id))
    }

    async fn detach_session(&self, session_id: &str, replica_id: &str) -> Result<()> {
        self.detach_session_tx(session_id, replica_id);
        Ok(())
    }

    async fn close_session(&self, endpoint_id: &str, session_id: &str) -> Result<bool> {
        Ok(self.close_session_tx(endpoint_id, session_id))
    }

    async fn refresh_sessions(&self, replica_id: &str, session_ids: &[String]) -> Result<Vec<String>> {
        Ok(self.refresh_sessions_tx(replica_id, session_ids))
    }

    async fn rings_since(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>> {
        Ok(self.rings_since_tx(session_id, after_seq))
    }

    async fn dispatch_pushes(&self) -> Result<PushReport> {
        self.dispatch_pushes_tx()
    }

    async fn reopen_sweep(&self) -> Result<PushReport> {
        self.reopen_sweep_tx()
    }

    async fn heartbeat_sweep(&self) -> Result<PushReport> {
        self.heartbeat_sweep_tx()
    }
}
