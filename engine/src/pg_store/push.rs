//! Push decisions on PostgreSQL (SPEC-0030 REQ-8; `docs/push.md`): MCP sessions, doorbells,
//! the reopen, heartbeat and presence sweeps.
//!
//! Each push is decided once, in one transaction: the rows that call for it (`push_due`, a
//! reopen watch, a presence change) are taken with `SKIP LOCKED` or a conditional update, so
//! whichever replica gets there first decides and no other does. The decision writes the
//! doorbell (`doorbell_rings`) and the hook calls (`hook_outbox`) and announces the doorbell with
//! `pg_notify`, delivered at commit to every replica; the replica holding the session's stream
//! sends it. Nothing here takes the policy row lock claims take: status reads are unlocked, as
//! a push is a hint and the claim transaction re-checks everything.

use super::admission::Pending;
use super::{PgStore, TODO_COLUMNS, TodoRow, db_error, finish};
use chrono::{DateTime, Duration, Utc};
use models::error::{Error, Result};
use models::identity::{Owner, QueueIdentity};
use models::presence::{self, Override, Presence, Shift};
use models::push::{
    self, DigestReason, DueReason, PushReport, RECONNECT_DIGEST_COOLDOWN_MINUTES, Ring, RingReason,
    SESSION_STALE_SECONDS,
};
use models::store::{OverrideBy, PresenceView};
use models::todo::Todo;
use serde_json::Value;
use sqlx::{PgConnection, Postgres, Transaction};
use std::collections::BTreeMap;

/// The channel doorbells are announced on; every replica listens.
pub const PUSH_CHANNEL: &str = "switchboard_push";

/// An endpoint that may be rung for a queue identity, with what its presence needs.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Target {
    id: String,
    slug: String,
    shift: Option<String>,
    presence_override: Option<String>,
    override_until: Option<DateTime<Utc>>,
}

/// The endpoint a reconnect digest goes to, with the replica holding the session's stream.
#[derive(Debug, sqlx::FromRow)]
struct DigestTarget {
    #[sqlx(flatten)]
    target: Target,
    stream_replica: String,
}

impl Target {
    /// Effective presence now. A stored shift that no longer parses counts as no shift (the
    /// endpoint is then in by default): a push is a hint, and withholding it forever would hide
    /// work, while the claim path never depends on presence.
    fn presence(&self, now: DateTime<Utc>) -> Presence {
        let shift = self.shift.as_deref().and_then(|text| Shift::parse(text).ok());
        let override_ = stored_override(self.presence_override.as_deref(), self.override_until);
        presence::effective(shift.as_ref(), override_.as_ref(), now).presence
    }
}

fn stored_override(presence: Option<&str>, until: Option<DateTime<Utc>>) -> Option<Override> {
    let presence = match presence? {
        "in" => Presence::In,
        "out" => Presence::Out,
        _ => return None,
    };
    Some(Override { presence, until })
}

/// The identity key the reopen watch uses.
fn watch_key(identity: &QueueIdentity) -> (&'static str, &str) {
    match &identity.owner {
        Owner::Endpoint(id) => ("endpoint", id),
        Owner::Team(id) => ("team", id),
    }
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid_text())
}

fn uuid_text() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl PgStore {
    async fn push_now(&self, conn: &mut PgConnection) -> Result<DateTime<Utc>> {
        sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
            .bind(self.now_param())
            .fetch_one(conn)
            .await
            .map_err(db_error)
    }

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

    /// Takes the pending push decisions in batches; each batch is one transaction.
    pub(crate) async fn dispatch_pushes_tx(&self) -> Result<PushReport> {
        let mut report = PushReport::default();
        loop {
            let mut tx = self.begin().await?;
            let outcome = self.dispatch_batch(&mut tx).await;
            let (batch, taken) = finish(tx, outcome).await?;
            report.absorb(batch);
            if taken < push::PUSH_BATCH_MAX {
                break;
            }
        }
        self.count_report(&report);
        Ok(report)
    }

    async fn dispatch_batch(&self, tx: &mut Transaction<'static, Postgres>) -> Result<(PushReport, i64)> {
        let due: Vec<DueRow> = sqlx::query_as(composed_sql!(
            "SELECT d.seq AS due_seq, d.reason AS due_reason, {TODO_COLUMNS} \
             FROM push_due d JOIN todos t ON t.id = d.todo_id ORDER BY d.seq LIMIT $1 FOR UPDATE OF d SKIP LOCKED"
        ))
        .bind(push::PUSH_BATCH_MAX)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
        let taken = due.len() as i64;
        if due.is_empty() {
            return Ok((PushReport::default(), 0));
        }
        let seqs: Vec<i64> = due.iter().map(|d| d.due_seq).collect();
        sqlx::query("DELETE FROM push_due WHERE seq = ANY($1)")
            .bind(&seqs)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        let now = self.push_now(tx).await?;
        let mut work: Vec<(Todo, DueReason)> = Vec::new();
        for row in due {
            let reason = DueReason::parse(&row.due_reason).unwrap_or(DueReason::Created);
            let todo = row.todo.into_todo()?;
            // Only work still waiting is worth a push: a todo claimed meanwhile needs none.
            if todo.state == models::todo::TodoState::Pending {
                work.push((todo, reason));
            }
        }
        let mut report = PushReport::default();
        let deferred = self.deferred_among(work.iter().map(|(t, _)| &t.identity)).await?;
        for (todo, reason) in work {
            if deferred.contains(&todo.identity) {
                self.watch_in(tx, &todo.identity, now).await?;
                report.withheld_deferred += 1;
                continue;
            }
            report.absorb(self.push_todo(tx, &todo, reason.ring_reason(), Some(reason), now).await?);
        }
        Ok((report, taken))
    }

    /// The identities among `identities` whose policy admits no claim now (unlocked read).
    async fn deferred_among<'a>(
        &self,
        identities: impl Iterator<Item = &'a QueueIdentity>,
    ) -> Result<Vec<QueueIdentity>> {
        let mut unique: Vec<QueueIdentity> = identities.cloned().collect();
        unique.sort();
        unique.dedup();
        let statuses = self.queue_admissions_tx(&unique, Pending::AnyAtAll).await?;
        Ok(statuses.into_iter().filter(|a| a.status.hint.is_deferred()).map(|a| a.identity).collect())
    }

    /// Rings one session for a todo (the least recently rung among the endpoints in presence
    /// that drain its queue) and, for creations and requeues, enqueues one call per hook.
    async fn push_todo(
        &self,
        tx: &mut Transaction<'static, Postgres>,
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
        if let Some(ring) = self.ring_one(tx, &endpoint_ids, Some(todo), reason, None, now).await? {
            sqlx::query(
                "INSERT INTO todo_rings (todo_id, ring_attempts, last_ringed_at) VALUES ($1, 1, $2) \
                 ON CONFLICT (todo_id) DO UPDATE SET ring_attempts = todo_rings.ring_attempts + 1, last_ringed_at = $2",
            )
            .bind(&todo.id)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
            report.rings.push(ring);
        }
        if let Some(due) = hooks {
            report.hook_calls_enqueued += self.enqueue_hooks(tx, todo, due.as_str(), &targets, now).await?;
        }
        Ok(report)
    }

    /// Endpoints that drain a queue identity: the endpoint itself for an endpoint queue (when
    /// granted it), every endpoint granted a team queue whose owner still reaches the team.
    async fn targets(&self, conn: &mut PgConnection, identity: &QueueIdentity) -> Result<Vec<Target>> {
        sqlx::query_as(
            "SELECT e.id, e.slug, e.shift, e.presence_override, e.override_until FROM endpoint_grants g \
             JOIN endpoints e ON e.id = g.endpoint_id \
             WHERE NOT e.revoked AND g.queue = $3 AND ( \
               ($1::text IS NOT NULL AND g.team_id IS NULL AND g.endpoint_id = $1) \
               OR ($2::text IS NOT NULL AND g.team_id = $2 AND (e.owner_team_id = $2 OR EXISTS ( \
                    SELECT 1 FROM team_members m WHERE m.team_id = $2 AND m.human_id = e.owner_human_id)))) \
             ORDER BY e.id",
        )
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .fetch_all(conn)
        .await
        .map_err(db_error)
    }

    /// Picks the least recently rung live session of `endpoint_ids`, records the doorbell and
    /// announces it. None when no such session has an open stream.
    async fn ring_one(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        endpoint_ids: &[String],
        todo: Option<&Todo>,
        reason: RingReason,
        digest: Option<(i64, Vec<String>, DigestReason)>,
        now: DateTime<Utc>,
    ) -> Result<Option<Ring>> {
        if endpoint_ids.is_empty() {
            return Ok(None);
        }
        let session: Option<(String, String, String)> = sqlx::query_as(
            "SELECT id, endpoint_id, stream_replica FROM mcp_sessions \
             WHERE endpoint_id = ANY($1) AND stream_replica IS NOT NULL AND last_seen_at > $2 \
             ORDER BY last_rung_at NULLS FIRST, id LIMIT 1 FOR UPDATE SKIP LOCKED",
        )
        .bind(endpoint_ids)
        .bind(now - Duration::seconds(SESSION_STALE_SECONDS))
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?;
        let Some((session_id, endpoint_id, replica_id)) = session else {
            return Ok(None);
        };
        self.record_ring(tx, &session_id, &endpoint_id, &replica_id, todo, reason, digest, now).await.map(Some)
    }

    #[allow(clippy::too_many_arguments)]
    async fn record_ring(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        session_id: &str,
        endpoint_id: &str,
        replica_id: &str,
        todo: Option<&Todo>,
        reason: RingReason,
        digest: Option<(i64, Vec<String>, DigestReason)>,
        now: DateTime<Utc>,
    ) -> Result<Ring> {
        let ring_id = new_id("rg");
        let message = match (&digest, todo) {
            (Some((pending, queues, why)), _) => push::digest_message(&ring_id, *pending, queues, *why),
            (None, Some(todo)) => push::doorbell_message(todo, &ring_id, reason),
            (None, None) => return Err(Error::internal("a doorbell needs a todo or a digest")),
        };
        let queue = todo.map(|t| t.identity.queue.clone());
        let todo_id = todo.map(|t| t.id.clone());
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO doorbell_rings (ring_id, session_id, endpoint_id, queue, todo_id, reason, message, at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq",
        )
        .bind(&ring_id)
        .bind(session_id)
        .bind(endpoint_id)
        .bind(&queue)
        .bind(&todo_id)
        .bind(reason.as_str())
        .bind(&message)
        .bind(now)
        .fetch_one(&mut **tx)
        .await
        .map_err(db_error)?;
        sqlx::query("UPDATE mcp_sessions SET last_rung_at = $2 WHERE id = $1")
            .bind(session_id)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        let ring = Ring {
            seq,
            ring_id,
            session_id: session_id.to_string(),
            endpoint_id: endpoint_id.to_string(),
            replica_id: replica_id.to_string(),
            queue,
            todo_id,
            reason,
            message,
        };
        // Delivered at commit to every replica; the one holding the stream sends it.
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(PUSH_CHANNEL)
            .bind(ring_announcement(&ring).to_string())
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        Ok(ring)
    }

    /// One outbox row per enabled hook of the target endpoints (in presence, or ignoring it).
    async fn enqueue_hooks(
        &self,
        tx: &mut Transaction<'static, Postgres>,
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

    async fn watch_in(&self, conn: &mut PgConnection, identity: &QueueIdentity, now: DateTime<Utc>) -> Result<()> {
        let (kind, owner) = watch_key(identity);
        sqlx::query(
            "INSERT INTO admission_reopen_watch (owner_kind, owner_id, queue, since) VALUES ($1, $2, $3, $4) \
             ON CONFLICT DO NOTHING",
        )
        .bind(kind)
        .bind(owner)
        .bind(&identity.queue)
        .bind(now)
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    pub(crate) async fn watch_reopen_tx(&self, identities: &[QueueIdentity]) -> Result<()> {
        if identities.is_empty() {
            return Ok(());
        }
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let now = self.push_now(&mut conn).await?;
        for identity in identities {
            self.watch_in(&mut conn, identity, now).await?;
        }
        Ok(())
    }

    /// REQ-8's reopen sweep. A watched identity is taken with `SKIP LOCKED`, so one replica
    /// decides it; it is rung and unwatched only once it admits claims (or has no policy).
    pub(crate) async fn reopen_sweep_tx(&self) -> Result<PushReport> {
        let mut tx = self.begin().await?;
        let outcome = self.reopen_in(&mut tx).await;
        let report = finish(tx, outcome).await?;
        self.count_report(&report);
        Ok(report)
    }

    async fn reopen_in(&self, tx: &mut Transaction<'static, Postgres>) -> Result<PushReport> {
        let watched: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT owner_kind, owner_id, queue FROM admission_reopen_watch ORDER BY since LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(push::PUSH_BATCH_MAX)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
        let identities: Vec<QueueIdentity> = watched
            .into_iter()
            .map(|(kind, owner, queue)| match kind.as_str() {
                "team" => QueueIdentity::team(owner, queue),
                _ => QueueIdentity::endpoint(owner, queue),
            })
            .collect();
        let deferred = self.deferred_among(identities.iter()).await?;
        let now = self.push_now(tx).await?;
        let mut report = PushReport::default();
        for identity in identities.iter().filter(|i| !deferred.contains(i)) {
            let (kind, owner) = watch_key(identity);
            sqlx::query("DELETE FROM admission_reopen_watch WHERE owner_kind = $1 AND owner_id = $2 AND queue = $3")
                .bind(kind)
                .bind(owner)
                .bind(&identity.queue)
                .execute(&mut **tx)
                .await
                .map_err(db_error)?;
            report.absorb(self.reopen_identity(tx, identity, now).await?);
        }
        Ok(report)
    }

    /// One doorbell per endpoint (in presence) that drains the identity, naming its oldest
    /// pending todo, and one hook call per hook; nothing when no todo waits.
    async fn reopen_identity(
        &self,
        tx: &mut Transaction<'static, Postgres>,
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
            if let Some(ring) = self.ring_one(tx, &endpoint, Some(&todo), RingReason::Reopen, None, now).await? {
                report.rings.push(ring);
            }
        }
        report.hook_calls_enqueued += self.enqueue_hooks(tx, &todo, "reopened", &targets, now).await?;
        Ok(report)
    }

    /// The doorbell heartbeat: a few due, unclaimed todos of endpoints with a live stream,
    /// round-robin across endpoints. One replica sweeps at a time (a transaction lock).
    pub(crate) async fn heartbeat_sweep_tx(&self) -> Result<PushReport> {
        let mut tx = self.begin().await?;
        let outcome = self.heartbeat_in(&mut tx).await;
        let report = finish(tx, outcome).await?;
        self.count_report(&report);
        Ok(report)
    }

    async fn heartbeat_in(&self, tx: &mut Transaction<'static, Postgres>) -> Result<PushReport> {
        let mut report = PushReport::default();
        let won: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtext('switchboard_heartbeat_sweep'))")
            .fetch_one(&mut **tx)
            .await
            .map_err(db_error)?;
        if !won {
            return Ok(report);
        }
        let now = self.push_now(tx).await?;
        let candidates: Vec<HeartbeatRow> = sqlx::query_as(composed_sql!(
            "SELECT coalesce(r.ring_attempts, 0) AS rings, coalesce(r.last_ringed_at, t.created_at) AS last_ringed_at, \
                    {TODO_COLUMNS} \
             FROM todos t LEFT JOIN todo_rings r ON r.todo_id = t.id \
             WHERE t.state = 'pending' AND coalesce(r.ring_attempts, 0) < $1 \
               AND EXISTS (SELECT 1 FROM endpoint_grants g JOIN mcp_sessions s ON s.endpoint_id = g.endpoint_id \
                           WHERE g.queue = t.queue AND (g.endpoint_id = t.endpoint_id OR g.team_id = t.team_id) \
                             AND s.stream_replica IS NOT NULL AND s.last_seen_at > $2) \
             ORDER BY coalesce(r.last_ringed_at, t.created_at), t.id LIMIT 200"
        ))
        .bind(push::RINGS_PER_TODO_MAX)
        .bind(now - Duration::seconds(SESSION_STALE_SECONDS))
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
        let mut due: Vec<Todo> = Vec::new();
        for row in candidates {
            if push::heartbeat_due_at(row.rings, row.last_ringed_at).is_some_and(|at| at <= now) {
                due.push(row.todo.into_todo()?);
            }
        }
        let deferred = self.deferred_among(due.iter().map(|t| &t.identity)).await?;
        // Round-robin: at most one todo per owner per round, in due order.
        let mut by_owner: BTreeMap<Owner, Vec<Todo>> = BTreeMap::new();
        for todo in due.into_iter().filter(|t| !deferred.contains(&t.identity)) {
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
        for todo in chosen {
            report.absorb(self.push_todo(tx, &todo, RingReason::Heartbeat, None, now).await?);
        }
        Ok(report)
    }

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
        self.count_report(&report);
        Ok(report)
    }

    async fn presence_transition(&self, row: &PresenceRow, now: DateTime<Utc>) -> Result<PushReport> {
        let shift = row.shift.as_deref().and_then(|text| Shift::parse(text).ok());
        let override_ = stored_override(row.presence_override.as_deref(), row.override_until);
        let effective = presence::effective(shift.as_ref(), override_.as_ref(), now);
        let seen = if row.presence_seen == "out" { Presence::Out } else { Presence::In };
        if effective.presence == seen {
            return Ok(PushReport::default());
        }
        let mut tx = self.begin().await?;
        let outcome = async {
            let won = sqlx::query("UPDATE endpoints SET presence_seen = $2 WHERE id = $1 AND presence_seen = $3")
                .bind(&row.id)
                .bind(effective.presence.as_str())
                .bind(seen.as_str())
                .execute(&mut *tx)
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
            self.digest(&mut tx, &row.id, None, reason, now).await
        }
        .await;
        finish(tx, outcome).await
    }

    /// One digest doorbell to the endpoint (to `session` when given) if push-eligible work
    /// waits in its admitted queues. Sets no ring budget.
    async fn digest(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        endpoint_id: &str,
        session: Option<(&str, &str)>,
        reason: DigestReason,
        now: DateTime<Utc>,
    ) -> Result<PushReport> {
        let (pending, queues) = self.admitted_pending(tx, endpoint_id).await?;
        let mut report = PushReport::default();
        if pending == 0 {
            return Ok(report);
        }
        let digest = Some((pending, queues, reason));
        let ring = match session {
            Some((session_id, replica)) => Some(
                self.record_ring(tx, session_id, endpoint_id, replica, None, RingReason::Digest, digest, now).await?,
            ),
            None => self.ring_one(tx, &[endpoint_id.to_string()], None, RingReason::Digest, digest, now).await?,
        };
        report.rings.extend(ring);
        Ok(report)
    }

    /// Pending todos in the endpoint's granted queues whose identity admits claims now, and
    /// the names of those queues.
    async fn admitted_pending(&self, conn: &mut PgConnection, endpoint_id: &str) -> Result<(i64, Vec<String>)> {
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
            .map(|(endpoint, team, queue, n)| (super::claim::identity_of(endpoint, team, queue), n))
            .collect();
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
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.push_now(&mut tx).await?;
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
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            let Some(DigestTarget { target, stream_replica }) = row else {
                return Ok(PushReport::default());
            };
            if target.presence(now) == Presence::Out {
                return Ok(PushReport::default());
            }
            self.digest(&mut tx, endpoint_id, Some((session_id, &stream_replica)), DigestReason::Reconnect, now).await
        }
        .await;
        let report = finish(tx, outcome).await?;
        self.count_report(&report);
        Ok(report)
    }

    pub(crate) async fn presence_tx(&self, endpoint_id: &str) -> Result<PresenceView> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let now = self.push_now(&mut conn).await?;
        let row: Option<PresenceRow> = sqlx::query_as(
            "SELECT id, shift, presence_override, override_until, override_by, presence_seen FROM endpoints WHERE id = $1",
        )
        .bind(endpoint_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
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
        let changed = sqlx::query(
            "UPDATE endpoints SET presence_override = $2, override_until = $3, override_by = $4 WHERE id = $1",
        )
        .bind(endpoint_id)
        .bind(override_.as_ref().map(|o| o.presence.as_str()))
        .bind(override_.as_ref().and_then(|o| o.until))
        .bind(override_.as_ref().map(|_| by.as_str()))
        .execute(&self.pool)
        .await
        .map_err(db_error)?
        .rows_affected();
        if changed == 0 {
            return Err(Error::not_found());
        }
        self.presence_changed(endpoint_id).await
    }

    pub(crate) async fn set_shift_tx(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        let changed = sqlx::query("UPDATE endpoints SET shift = $2 WHERE id = $1")
            .bind(endpoint_id)
            .bind(shift.as_ref().map(|s| s.to_string()))
            .execute(&self.pool)
            .await
            .map_err(db_error)?
            .rows_affected();
        if changed == 0 {
            return Err(Error::not_found());
        }
        self.presence_changed(endpoint_id).await
    }

    /// Acts on a presence change right away (the digest on clock-in), then reads it back.
    async fn presence_changed(&self, endpoint_id: &str) -> Result<PresenceView> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let now = self.push_now(&mut conn).await?;
        let row: Option<PresenceRow> = sqlx::query_as(
            "SELECT id, shift, presence_override, override_until, override_by, presence_seen FROM endpoints WHERE id = $1",
        )
        .bind(endpoint_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
        drop(conn);
        if let Some(row) = row {
            let report = self.presence_transition(&row, now).await?;
            self.count_report(&report);
        }
        self.presence_tx(endpoint_id).await
    }

    fn count_report(&self, report: &PushReport) {
        for ring in &report.rings {
            self.counters.rung(ring.reason);
        }
        self.counters.reopened(report.reopens);
        self.counters.withheld("deferred", report.withheld_deferred);
        self.counters.withheld("out", report.withheld_out);
    }
}

/// What `pg_notify` carries to the replicas: enough to deliver without another query.
pub fn ring_announcement(ring: &Ring) -> Value {
    serde_json::json!({
        "seq": ring.seq, "session_id": ring.session_id, "replica_id": ring.replica_id,
        "endpoint_id": ring.endpoint_id, "message": ring.message,
    })
}

#[derive(sqlx::FromRow)]
struct DueRow {
    due_seq: i64,
    due_reason: String,
    #[sqlx(flatten)]
    todo: TodoRow,
}

#[derive(sqlx::FromRow)]
struct HeartbeatRow {
    rings: i32,
    last_ringed_at: DateTime<Utc>,
    #[sqlx(flatten)]
    todo: TodoRow,
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
