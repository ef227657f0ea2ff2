//! A claimed todo's life after the claim (base-system §2): the holder's heartbeat, complete, fail
//! and release, the owner's Retry now, and the background sweeps that end lapsed leases and
//! requeue due retries.

use crate::error::Result;
use crate::scope::Actor;
use crate::todo::Todo;
use serde_json::Value;
use std::future::Future;

/// What one sweep did, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepReport {
    pub returned_to_pending: u64,
    pub dead_lettered: u64,
}

/// The lifecycle role. The sweeps are system work, exempt from scoping, reading nothing out to
/// anyone.
pub trait Lifecycle: Send + Sync {
    /// Extends the caller's lease by `lease_seconds` from now.
    fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> impl Future<Output = Result<Todo>> + Send;
    /// Finishes a todo the caller holds as done, with an optional result.
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
    /// Finishes the caller's attempt as failed: retried after a backoff, or dead once out of attempts.
    fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> impl Future<Output = Result<Todo>> + Send;
    /// Gives a held todo back to pending without spending an attempt.
    fn release(&self, actor: &Actor, id: &str) -> impl Future<Output = Result<Todo>> + Send;
    /// "Retry now": a failed todo back to pending with a fresh attempt budget (owner scope only).
    fn retry_now(&self, actor: &Actor, id: &str) -> impl Future<Output = Result<Todo>> + Send;
    /// The reaper: claims whose lease lapsed go back to pending, or dead when out of attempts.
    fn reap_lapsed_leases(&self) -> impl Future<Output = Result<SweepReport>> + Send;
    /// The retry scheduler: failed todos whose backoff is over go back to pending.
    fn requeue_due_retries(&self) -> impl Future<Output = Result<u64>> + Send;
}
