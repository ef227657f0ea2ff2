//! The `Store` and `Clock` traits: the seam between the surfaces and storage.
//!
//! Each `Store` method is one whole transaction, so the production `PgStore`, the reference
//! `ModelStore` and the simulation's bridge can stand in for each other, and a transaction is
//! never held open across an `.await` the caller controls.

use crate::admission::{Headroom, Policy, PolicyStatus, Reason};
use crate::error::{Error, Result};
use crate::identity::{QueueIdentity, ScopeRef};
use crate::scope::{Actor, AgentScope, Endpoint, HumanScope};
use crate::todo::{Created, NewTodo, Todo, TodoState};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Where time comes from. Passed in everywhere so a simulation or a test can move it.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;

    /// True when a database-backed store should read the database's own clock
    /// (`clock_timestamp()`, the clock of record for admission) instead of `now()`.
    fn defer_to_database(&self) -> bool {
        false
    }
}

/// Production time: the host's clock, and the database's inside transactions.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn defer_to_database(&self) -> bool {
        true
    }
}

/// A clock that only moves when told to: tests and the simulation drive leases, backoffs and
/// window boundaries with it instead of sleeping.
#[derive(Debug, Clone)]
pub struct ManualClock {
    micros_since_epoch: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn at(instant: DateTime<Utc>) -> Self {
        ManualClock { micros_since_epoch: Arc::new(AtomicI64::new(instant.timestamp_micros())) }
    }

    pub fn set(&self, instant: DateTime<Utc>) {
        self.micros_since_epoch.store(instant.timestamp_micros(), Ordering::SeqCst);
    }

    pub fn advance(&self, by: chrono::Duration) {
        let micros = by.num_microseconds().unwrap_or(i64::MAX);
        self.micros_since_epoch.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        let micros = self.micros_since_epoch.load(Ordering::SeqCst);
        // The value was stored from a valid DateTime, so it converts back.
        DateTime::from_timestamp_micros(micros).unwrap_or(DateTime::<Utc>::MIN_UTC)
    }
}

/// An operator API token as its owner may see it: never the secret or its digest.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiToken {
    pub id: String,
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// How an MCP bearer resolved against the endpoint named in the URL.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentLookup {
    /// No endpoint has this token, or it is revoked: 401.
    Unknown,
    /// A valid token for a different endpoint than the URL names: 403.
    OtherEndpoint,
    Found(Box<AgentScope>),
}

/// A vend request after validation and grant resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEndpoint {
    pub name: String,
    pub owner_human_id: Option<String>,
    pub owner_team_id: Option<String>,
    /// Endpoint queues by name; team queues already resolved to team ids.
    pub own_queues: Vec<String>,
    pub team_queues: Vec<(String, String)>,
    pub verbs: Vec<String>,
    pub token_hash: String,
    /// The human who vended it.
    pub created_by_human_id: Option<String>,
}

/// A committed claim, with the queue's headroom when it has a policy (REQ-7).
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub todo: Todo,
    pub admission: Option<Headroom>,
}

/// What verifying and routing a webhook delivery needs.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookRoute {
    pub name: String,
    pub secret: String,
    /// The secret the last rotation replaced, only while its grace runs (issue #14): a delivery
    /// the current secret does not verify is tried with it.
    pub previous_secret: Option<PreviousSecret>,
    pub targets: Vec<QueueIdentity>,
}

/// A replaced webhook secret that still verifies deliveries until `expires_at` (issue #14).
#[derive(Debug, Clone, PartialEq)]
pub struct PreviousSecret {
    pub secret: String,
    pub expires_at: DateTime<Utc>,
}

impl PreviousSecret {
    /// When a secret replaced at `rotated_at` stops verifying.
    pub fn grace_end(rotated_at: DateTime<Utc>) -> DateTime<Utc> {
        rotated_at + chrono::Duration::seconds(crate::limits::WEBHOOK_SECRET_GRACE_SECONDS)
    }

    /// The stored previous secret as ingest may use it at `now`: offered strictly before its
    /// expiry, never from the expiry on. Both stores apply this one rule to what they hold.
    pub fn offered_at(
        secret: Option<String>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<PreviousSecret> {
        match (secret, expires_at) {
            (Some(secret), Some(expires_at)) if now < expires_at => Some(PreviousSecret { secret, expires_at }),
            _ => None,
        }
    }
}

/// A webhook as its owner lists it: never the secret.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSummary {
    pub id: String,
    pub name: String,
    pub targets: Vec<QueueIdentity>,
}

/// The answer to one delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Ingested {
    pub todo_ids: Vec<String>,
    pub deduped: bool,
}

/// What `claim_next` found: a claim, or nothing, with the granted queues that hold pending work
/// but admit no claim right now (REQ-7). An empty `deferred` means no pending work anywhere.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimNext {
    Claimed(Box<Claimed>),
    Empty { deferred: Vec<DeferredQueue> },
}

/// What `claim_next_many` made: its claims, in the turn they were decided, and the deferred
/// queues (REQ-7) when it ended short of `max` with pending work that admits no claim now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClaimedMany {
    pub claimed: Vec<Claimed>,
    pub deferred: Vec<DeferredQueue>,
}

/// One deferred queue identity in an empty `claim_next` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredQueue {
    pub identity: QueueIdentity,
    pub reason: Reason,
    pub pending: i64,
    pub next_eligible_at: Option<DateTime<Utc>>,
    pub exact: Option<bool>,
}

/// A queue identity's policy and its status, derived when read (REQ-6). `policy` is None when the
/// stored row cannot be evaluated (REQ-9); the status then says `admission_unavailable`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueAdmission {
    pub identity: QueueIdentity,
    pub policy_id: String,
    pub policy: Option<Policy>,
    pub status: PolicyStatus,
    pub pending: i64,
    /// Claims counted in flight whose lease has lapsed with attempts left (not yet reaped): each
    /// is a takeover candidate, which REQ-4 admits without counting it against itself.
    pub lapsed: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Who changes a policy: a human, or an endpoint acting for its human (REQ-10 audit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyActor {
    pub human_id: Option<String>,
    pub endpoint_id: Option<String>,
}

/// One audit record (REQ-10).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub actor_human_id: Option<String>,
    pub actor_endpoint_id: Option<String>,
    pub at: DateTime<Utc>,
    pub action: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// A policy in full: status, recent windows' usage (newest first) and the audit tail.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDetail {
    pub admission: QueueAdmission,
    pub windows: Vec<(DateTime<Utc>, i64)>,
    pub audit: Vec<AuditRecord>,
}

/// Which todos a listing covers. The caller's scope has already been applied.
#[derive(Debug, Clone, PartialEq)]
pub enum TodoSet {
    /// These queue identities only.
    Queues(Vec<QueueIdentity>),
    /// Every queue of these endpoints and teams.
    Owners(crate::scope::Reach),
}

/// A listing: newest first, at most `limit` rows.
#[derive(Debug, Clone, PartialEq)]
pub struct TodoQuery {
    pub set: TodoSet,
    pub state: Option<TodoState>,
    pub limit: i64,
}

/// What one sweep did, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepReport {
    pub returned_to_pending: u64,
    pub dead_lettered: u64,
}

/// An endpoint's presence as the presence verbs and API show it (SPEC-0022).
#[derive(Debug, Clone, PartialEq)]
pub struct PresenceView {
    pub endpoint_id: String,
    pub effective: crate::presence::Effective,
    pub shift: Option<crate::presence::Shift>,
    pub override_: Option<crate::presence::Override>,
    /// Push-eligible pending todos in the endpoint's admitted queues.
    pub pending: i64,
}

/// Who set a presence override: the agent itself (`clock_in`/`clock_out`) or its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideBy {
    Agent,
    Operator,
}

impl OverrideBy {
    pub fn as_str(self) -> &'static str {
        match self {
            OverrideBy::Agent => "agent",
            OverrideBy::Operator => "operator",
        }
    }
}

pub trait Store: Clone + Send + Sync + 'static {
    /// What this process's store committed and refused, for `/metrics`.
    fn counters(&self) -> &crate::counters::Counters;

    /// Every policy of every owner, for the metrics gauges only (system read: exempt from
    /// scoping, and nothing of it reaches a tenant).
    fn all_admissions_unscoped(&self) -> impl Future<Output = Result<Vec<QueueAdmission>>> + Send;

    /// A round trip to storage, for `/healthz`.
    fn ping(&self) -> impl Future<Output = Result<()>> + Send;

    // Principals. Token arguments are SHA-256 hex digests; raw tokens never reach the store.
    fn human_by_token(&self, token_hash: &str) -> impl Future<Output = Result<Option<HumanScope>>> + Send;
    fn agent_by_token(&self, slug: &str, token_hash: &str) -> impl Future<Output = Result<AgentLookup>> + Send;
    /// Resolves `endpoint:<ref>`/`team:<ref>` within a reach (what a human reaches, or what they
    /// manage); outside it, `not_found`, the same as for something that does not exist.
    fn resolve_scope(
        &self,
        reach: &crate::scope::Reach,
        scope: &ScopeRef,
    ) -> impl Future<Output = Result<crate::identity::Owner>> + Send;
    /// Resolves many `team:<ref>` at once within a reach, answering their ids in the order
    /// given; any one outside it is `not_found`, as `resolve_scope` answers. `PgStore` answers
    /// in one statement; this default asks `resolve_scope` once per reference.
    fn resolve_teams(
        &self,
        reach: &crate::scope::Reach,
        references: &[String],
    ) -> impl Future<Output = Result<Vec<String>>> + Send {
        async move {
            let mut ids = Vec::with_capacity(references.len());
            for reference in references {
                match self.resolve_scope(reach, &ScopeRef::Team(reference.clone())).await? {
                    crate::identity::Owner::Team(id) => ids.push(id),
                    crate::identity::Owner::Endpoint(_) => {
                        return Err(Error::internal("team scope resolved to an endpoint"));
                    }
                }
            }
            Ok(ids)
        }
    }
    /// Vends an endpoint. Refused with `conflict` when its owner (a human or a team) already
    /// owns `limits::ENDPOINTS_PER_OWNER_MAX` endpoints.
    fn vend_endpoint(&self, endpoint: NewEndpoint) -> impl Future<Output = Result<Endpoint>> + Send;
    fn list_endpoints(&self, human: &HumanScope) -> impl Future<Output = Result<Vec<Endpoint>>> + Send;

    /// Mints another operator API token for a human (`POST /api/v1/tokens`), expiring
    /// `expires_in_seconds` from now when given.
    fn mint_token(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// A human's unrevoked operator tokens (expired ones included), oldest first.
    fn list_tokens(&self, human_id: &str) -> impl Future<Output = Result<Vec<ApiToken>>> + Send;
    /// Revokes one of the human's own unrevoked tokens; anything else is `not_found`.
    fn revoke_token(&self, human_id: &str, token_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Revokes an endpoint's MCP credential, keeping the endpoint and its work. The caller has
    /// already checked the human manages it; unknown is `not_found`.
    fn revoke_endpoint(&self, endpoint_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Replaces an endpoint's MCP credential (un-revoking it); the old one stops working at once.
    fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> impl Future<Output = Result<()>> + Send;
    /// The teams a human belongs to, with their role.
    fn list_teams(
        &self,
        human: &HumanScope,
    ) -> impl Future<Output = Result<Vec<(crate::scope::Team, crate::scope::TeamRole)>>> + Send;

    // Webhooks (contract §4).
    /// Registers a webhook owned by a human, fanning out to `targets` (already authorised).
    fn create_webhook(
        &self,
        owner_human_id: &str,
        name: &str,
        secret: &str,
        targets: &[QueueIdentity],
    ) -> impl Future<Output = Result<String>> + Send;
    /// The webhooks a human owns, oldest first.
    fn list_webhooks(&self, owner_human_id: &str) -> impl Future<Output = Result<Vec<WebhookSummary>>> + Send;
    /// Deletes one of the human's webhooks with its delivery records; anything else `not_found`.
    fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Replaces one of the human's webhooks' signing secret; anything else `not_found`.
    fn rotate_webhook_secret(
        &self,
        owner_human_id: &str,
        webhook_id: &str,
        secret: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// A webhook's signing secret, name and targets, for verifying a delivery: a system read
    /// keyed by the webhook id in the ingest URL.
    fn webhook_for_ingest_unscoped(
        &self,
        webhook_id: &str,
    ) -> impl Future<Output = Result<Option<WebhookRoute>>> + Send;
    /// One delivery, one transaction: records the delivery id and creates one todo per target;
    /// a delivery id seen before creates nothing and answers the todos it created (deduped).
    fn ingest(
        &self,
        webhook_id: &str,
        delivery_id: &str,
        todos: Vec<NewTodo>,
    ) -> impl Future<Output = Result<Ingested>> + Send;

    // The queue. Each is one transaction.
    fn create_todo(&self, todo: NewTodo) -> impl Future<Output = Result<Created>> + Send;
    /// Several todos in one transaction and at one instant, answered in order: each is created or
    /// deduped as `create_todo` would (a later copy of a key in the batch dedups onto the
    /// earlier). If any is refused (invalid, `queue_full`), none is created. Empty or longer than
    /// `TODOS_PER_BATCH_MAX` is `invalid_argument` (`todos`).
    fn create_todos(&self, todos: Vec<NewTodo>) -> impl Future<Output = Result<Vec<Created>>> + Send;
    fn list_todos(&self, query: TodoQuery) -> impl Future<Output = Result<Vec<Todo>>> + Send;
    fn get_todo(&self, actor: &Actor, id: &str) -> impl Future<Output = Result<Todo>> + Send;
    /// Oldest claimable todo across `queues` (already narrowed and checked against the grant).
    fn claim_next(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> impl Future<Output = Result<ClaimNext>> + Send;
    /// Up to `max` (1..=`CLAIMS_PER_CALL_MAX`) claims across `queues`, each decided and charged
    /// in turn exactly as that many `claim_next` calls one after the other would be; it stops at
    /// the first that finds nothing to claim, whose deferred list it answers (issue #31 item 2).
    fn claim_next_many(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> impl Future<Output = Result<ClaimedMany>> + Send;
    /// Claims a named todo; in a deferred queue it fails with `deferred` and changes nothing.
    fn claim(&self, actor: &Actor, id: &str, lease_seconds: i64) -> impl Future<Output = Result<Claimed>> + Send;
    fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> impl Future<Output = Result<Todo>> + Send;
    fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> impl Future<Output = Result<Todo>> + Send;
    /// Completes several todos the caller holds, all in one transaction, answered in `ids`
    /// order: if any is refused (as `complete` would refuse it), none is completed. `ids` is
    /// 1..=`CLAIMS_PER_CALL_MAX` distinct ids (`validate_ids`).
    fn complete_many(
        &self,
        actor: &Actor,
        ids: &[String],
        result: Option<Value>,
    ) -> impl Future<Output = Result<Vec<Todo>>> + Send;
    fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> impl Future<Output = Result<Todo>> + Send;
    fn release(&self, actor: &Actor, id: &str) -> impl Future<Output = Result<Todo>> + Send;
    /// "Retry now": a failed todo back to pending with a fresh attempt budget (owner scope only).
    fn retry_now(&self, actor: &Actor, id: &str) -> impl Future<Output = Result<Todo>> + Send;

    // Admission (SPEC-0030). Identities are already authorised by the caller.
    /// Policy and status of each identity that has a policy; identities without one are left out.
    fn queue_admissions(
        &self,
        identities: &[QueueIdentity],
    ) -> impl Future<Output = Result<Vec<QueueAdmission>>> + Send;
    /// Every policy on the endpoints and teams of a reach.
    fn reach_admissions(&self, reach: &crate::scope::Reach)
    -> impl Future<Output = Result<Vec<QueueAdmission>>> + Send;
    fn policy_detail(&self, identity: &QueueIdentity) -> impl Future<Output = Result<PolicyDetail>> + Send;
    /// Creates or fully replaces a policy, with an audit record, in one transaction.
    fn set_policy(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> impl Future<Output = Result<QueueAdmission>> + Send;
    /// Deletes a policy (`not_found` if none), keeping its audit history.
    fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> impl Future<Output = Result<()>> + Send;
    fn policy_audit(
        &self,
        identity: &QueueIdentity,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<AuditRecord>>> + Send;

    // Intake capacity and owner cancellation (intake-capacity.md).
    /// The effective intake capacity and its source.
    fn queue_capacity(&self) -> impl Future<Output = Result<crate::capacity::Capacity>> + Send;
    /// Persists the install setting (`conflict` while the environment locks it).
    fn set_queue_capacity(
        &self,
        max_pending: i64,
        by_human_id: &str,
    ) -> impl Future<Output = Result<crate::capacity::Capacity>> + Send;
    /// Removes one pending todo of `identity` (any provenance): `not_found` if it is not a todo of
    /// that identity, `not_pending` with its state otherwise.
    fn discard_todo(
        &self,
        identity: &QueueIdentity,
        id: &str,
        by: &PolicyActor,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Removes every pending todo of `identity`, deferred ones included; the exact count.
    fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> impl Future<Output = Result<u64>> + Send;
    /// Edits a pending todo's title/payload: only the human who created it.
    fn edit_todo(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> impl Future<Output = Result<Todo>> + Send;
    /// Deletes a queue identity (purge): every todo of it, pending and claimed, and its policy
    /// (the audit stays). A stale claimant's later complete or fail finds nothing.
    fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> impl Future<Output = Result<u64>> + Send;
    /// Deletes an endpoint the human manages, with its todos, pending and claimed (purge).
    fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> impl Future<Output = Result<()>> + Send;

    // Background sweeps: system work, exempt from scoping, reading nothing out to anyone.
    fn reap_lapsed_leases(&self) -> impl Future<Output = Result<SweepReport>> + Send;
    fn requeue_due_retries(&self) -> impl Future<Output = Result<u64>> + Send;
    /// Drops usage rows older than the retention (35 days, REQ-1).
    fn prune_usage(&self) -> impl Future<Output = Result<u64>> + Send;
    /// One write against `key`'s cluster-wide limiter (`models::rate`; SPEC-0030 Security
    /// Requirements), decided and recorded in one statement shared by every replica.
    fn take_write_token(
        &self,
        key: &str,
        quota: crate::rate::Quota,
    ) -> impl Future<Output = Result<crate::rate::Verdict>> + Send;

    // Push (SPEC-0030 REQ-8; docs/push.md). Every push is decided here, once, in a transaction;
    // replicas only deliver what was decided.
    /// Opens an MCP session for an endpoint (`initialize`) and answers its id.
    fn open_session(&self, endpoint_id: &str) -> impl Future<Output = Result<String>> + Send;
    /// A stream opened on `replica_id` for a session: false when the session is not this
    /// endpoint's (or is gone).
    fn attach_session(
        &self,
        endpoint_id: &str,
        session_id: &str,
        replica_id: &str,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// The stream closed (only if `replica_id` still holds it).
    fn detach_session(&self, session_id: &str, replica_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Marks the sessions whose streams a replica holds as alive, and answers those of them that
    /// must close (the session or its endpoint is gone or revoked).
    fn refresh_sessions(
        &self,
        replica_id: &str,
        session_ids: &[String],
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// Doorbells of a session after stream event `after_seq`, oldest first (`Last-Event-ID`).
    fn rings_since(
        &self,
        session_id: &str,
        after_seq: i64,
    ) -> impl Future<Output = Result<Vec<crate::push::Ring>>> + Send;
    /// Decides the pushes of work that entered pending (created, requeued) and was not yet
    /// decided: a doorbell to one session and a call per hook, or nothing while the queue
    /// identity is deferred (then the reopen sweep watches it) or the endpoint is out.
    fn dispatch_pushes(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// The reopen sweep (REQ-8): each watched identity that admits claims again is rung once per
    /// endpoint and queue with pending work (presence permitting), and no longer watched.
    fn reopen_sweep(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// The doorbell heartbeat: re-rings a few unclaimed todos on their schedule.
    fn heartbeat_sweep(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// Acts on presence changes (won once across replicas); out to in rings one digest.
    fn presence_sweep(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// A stream (re)attached: one reconnect digest if work waits (at most one per cooldown).
    fn reconnect_digest(
        &self,
        endpoint_id: &str,
        session_id: &str,
    ) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    fn presence(&self, endpoint_id: &str) -> impl Future<Output = Result<PresenceView>> + Send;
    /// Sets (Some) or clears (None) the presence override.
    fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<crate::presence::Override>,
        by: OverrideBy,
    ) -> impl Future<Output = Result<PresenceView>> + Send;
    fn set_shift(
        &self,
        endpoint_id: &str,
        shift: Option<crate::presence::Shift>,
    ) -> impl Future<Output = Result<PresenceView>> + Send;
    /// Adds a notify hook (at most `HOOKS_PER_ENDPOINT_MAX`; `conflict` past it).
    fn add_hook(
        &self,
        endpoint_id: &str,
        url: &str,
        secret: &str,
        ignore_presence: bool,
    ) -> impl Future<Output = Result<crate::push::NotifyHook>> + Send;
    fn list_hooks(&self, endpoint_id: &str) -> impl Future<Output = Result<Vec<crate::push::NotifyHook>>> + Send;
    /// A hook with its secret, for the owner's test call (`not_found` if not this endpoint's).
    fn hook_for_test(
        &self,
        endpoint_id: &str,
        hook_id: &str,
    ) -> impl Future<Output = Result<(crate::push::NotifyHook, String)>> + Send;
    fn remove_hook(&self, endpoint_id: &str, hook_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Leases due hook calls to a replica for sending (rate limit per hook applied).
    fn take_hook_calls(&self, replica_id: &str) -> impl Future<Output = Result<Vec<crate::push::HookCall>>> + Send;
    /// Records how a leased call went (ignored if the lease was lost).
    fn finish_hook_call(
        &self,
        call_id: i64,
        replica_id: &str,
        outcome: &crate::push::HookOutcome,
    ) -> impl Future<Output = Result<()>> + Send;
}
