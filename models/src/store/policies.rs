//! Admission policies (SPEC-0030): a queue identity's budget, its status derived when read
//! (REQ-6), its audit (REQ-10), the usage kept for it (REQ-1), and the cluster-wide write limiter
//! that guards changes to it.
//!
//! Identities are already authorised by the caller.

use crate::admission::{Policy, PolicyStatus};
use crate::error::Result;
use crate::identity::QueueIdentity;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::future::Future;

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

/// The policies role: reading admissions (by identity, by reach, all of them for the metrics),
/// setting and clearing a policy with its audit, pruning old usage, and taking a write token.
pub trait Policies: Send + Sync {
    /// Every policy of every owner, for the metrics gauges only (system read: exempt from
    /// scoping, and nothing of it reaches a tenant).
    fn all_admissions_unscoped(&self) -> impl Future<Output = Result<Vec<QueueAdmission>>> + Send;

    /// Policy and status of each identity that has a policy; identities without one are left out.
    fn queue_admissions(
        &self,
        identities: &[QueueIdentity],
    ) -> impl Future<Output = Result<Vec<QueueAdmission>>> + Send;
    /// Every policy on the endpoints and teams of a reach.
    fn reach_admissions(&self, reach: &crate::scope::Reach)
    -> impl Future<Output = Result<Vec<QueueAdmission>>> + Send;
    /// A policy in full: its status, recent windows' usage and the audit tail.
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
    /// The newest `limit` audit records of an identity's policy, kept after the policy is gone.
    fn policy_audit(
        &self,
        identity: &QueueIdentity,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<AuditRecord>>> + Send;
    /// Drops usage rows older than the retention (35 days, REQ-1).
    fn prune_usage(&self) -> impl Future<Output = Result<u64>> + Send;
    /// One write against `key`'s cluster-wide limiter (`models::rate`; SPEC-0030 Security
    /// Requirements), decided and recorded in one statement shared by every replica.
    fn take_write_token(
        &self,
        key: &str,
        quota: crate::rate::Quota,
    ) -> impl Future<Output = Result<crate::rate::Verdict>> + Send;
}
