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
//!
//! Split by concept: `sessions` (MCP sessions and the doorbell replay), `ring` (how one push is
//! delivered: a doorbell to one session and a call per hook), `dispatch` (the passes over
//! `push_due`), `reopen` (deferred queues that admit claims again), `heartbeat` (re-rings of
//! waiting work), `presence` and `digest` (clock-in and reconnect), `pass` (a pass's transaction:
//! its doorbells numbered in each session's commit order, its rings failing one at a time). This
//! module holds what they share: the channel, ring targets, the push clock, and `push_pass!`, the
//! one-transaction wrapper every pass runs in.

/// One push pass as its own transaction: begins it, binds `$tx` to it (`&mut PushTx`), awaits
/// `$pass`, then seals the doorbells it decided into its report and commits, or rolls back when
/// the pass failed; evaluates to the pass's outcome. Every sweep and decision runs in one, so
/// whichever replica commits a decision first is the only one that made it. A macro, not a
/// function taking an async closure: rustc cannot yet prove such a closure's future `Send` for
/// every lifetime of the borrowed transaction.
macro_rules! push_pass {
    ($store:expr, |$tx:ident| $pass:expr) => {{
        let mut transaction = $store.begin_push().await?;
        let $tx = &mut transaction;
        let outcome = $pass.await;
        $crate::pg_store::push::pass::finish_pass(transaction, outcome).await
    }};
}

mod digest;
mod dispatch;
mod heartbeat;
pub(crate) mod pass;
mod presence;
mod reopen;
mod ring;
mod sessions;

use super::admission::Pending;
use super::{PgStore, db_error};
use chrono::{DateTime, Utc};
use models::error::Result;
use models::identity::{Owner, QueueIdentity};
use models::presence::{Override, Presence, Shift};
use models::push::{PushReport, Ring};
use models::store::Push;
use serde_json::Value;
use sqlx::PgConnection;

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

impl Target {
    /// Effective presence now. A stored shift that no longer parses counts as no shift (the
    /// endpoint is then in by default): a push is a hint, and withholding it forever would hide
    /// work, while the claim path never depends on presence.
    fn presence(&self, now: DateTime<Utc>) -> Presence {
        let shift = self.shift.as_deref().and_then(|text| Shift::parse(text).ok());
        let override_ = stored_override(self.presence_override.as_deref(), self.override_until);
        models::presence::effective(shift.as_ref(), override_.as_ref(), now).presence
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
    pub(super) async fn push_now(&self, conn: &mut PgConnection) -> Result<DateTime<Utc>> {
        sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
            .bind(self.now_param())
            .fetch_one(conn)
            .await
            .map_err(db_error)
    }

    /// Counts what a committed pass decided, and hands its report on.
    pub(super) fn counted(&self, report: PushReport) -> PushReport {
        for ring in &report.rings {
            self.counters.rung(ring.reason);
        }
        self.counters.reopened(report.reopens);
        self.counters.withheld("deferred", report.withheld_deferred);
        self.counters.withheld("out", report.withheld_out);
        report
    }

    /// The identities among `identities` whose policy admits no claim now (unlocked read).
    pub(super) async fn deferred_among<'a>(
        &self,
        identities: impl Iterator<Item = &'a QueueIdentity>,
    ) -> Result<Vec<QueueIdentity>> {
        let mut unique: Vec<QueueIdentity> = identities.cloned().collect();
        unique.sort();
        unique.dedup();
        let statuses = self.queue_admissions_tx(&unique, Pending::AnyAtAll).await?;
        Ok(statuses.into_iter().filter(|a| a.status.hint.is_deferred()).map(|a| a.identity).collect())
    }

    /// Endpoints that drain a queue identity: the endpoint itself for an endpoint queue (when
    /// granted it), every endpoint granted a team queue whose owner still reaches the team.
    pub(super) async fn targets(&self, conn: &mut PgConnection, identity: &QueueIdentity) -> Result<Vec<Target>> {
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
}

/// What `pg_notify` carries to the replicas: enough to deliver without another query.
pub fn ring_announcement(ring: &Ring) -> Value {
    serde_json::json!({
        "seq": ring.seq, "session_id": ring.session_id, "replica_id": ring.replica_id,
        "endpoint_id": ring.endpoint_id, "message": ring.message,
    })
}

/// The push role on PostgreSQL: each method is one pass of a module below (`sessions`,
/// `dispatch`, `reopen`, `heartbeat`).
impl Push for PgStore {
    async fn open_session(&self, endpoint_id: &str) -> Result<String> {
        self.open_session_tx(endpoint_id).await
    }

    async fn attach_session(&self, endpoint_id: &str, session_id: &str, replica_id: &str) -> Result<bool> {
        self.attach_session_tx(endpoint_id, session_id, replica_id).await
    }

    async fn detach_session(&self, session_id: &str, replica_id: &str) -> Result<()> {
        self.detach_session_tx(session_id, replica_id).await
    }

    async fn close_session(&self, endpoint_id: &str, session_id: &str) -> Result<bool> {
        let closed = sqlx::query("DELETE FROM mcp_sessions WHERE id = $1 AND endpoint_id = $2")
            .bind(session_id)
            .bind(endpoint_id)
            .execute(&self.pool)
            .await
            .map_err(db_error)?
            .rows_affected();
        Ok(closed == 1)
    }

    async fn refresh_sessions(&self, replica_id: &str, session_ids: &[String]) -> Result<Vec<String>> {
        self.refresh_sessions_tx(replica_id, session_ids).await
    }

    async fn rings_since(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>> {
        self.rings_since_tx(session_id, after_seq).await
    }

    async fn dispatch_pushes(&self) -> Result<PushReport> {
        self.dispatch_pushes_tx().await
    }

    async fn reopen_sweep(&self) -> Result<PushReport> {
        self.reopen_sweep_tx().await
    }

    async fn heartbeat_sweep(&self) -> Result<PushReport> {
        self.heartbeat_sweep_tx().await
    }
}
