//! Claims (SPEC-0003 "Atomic Claim", amended by SPEC-0030 REQ-4): taking a todo under a lease,
//! admitted and charged in the same transaction, and the answer's headroom and deferred queues
//! (REQ-7).

use crate::admission::{Headroom, Reason};
use crate::error::Result;
use crate::identity::QueueIdentity;
use crate::scope::Actor;
use crate::todo::Todo;
use chrono::{DateTime, Utc};
use std::future::Future;

/// A committed claim, with the queue's headroom when it has a policy (REQ-7).
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub todo: Todo,
    pub admission: Option<Headroom>,
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
    /// Issue #52: the window that defers it, for `window_exhausted`.
    pub window: Option<crate::window::WindowSpec>,
    /// Issue #52: the shared budget that defers it, for `shared_budget_exhausted`.
    pub shared_budget: Option<crate::shared_budget::BudgetName>,
}

/// The claims role: `claim_next`, its batch form, and the claim of a named todo. Each claim is
/// decided under the policy lock and charged before its transaction commits.
pub trait Claims: Send + Sync {
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
}
