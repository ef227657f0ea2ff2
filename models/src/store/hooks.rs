//! Notify hooks (docs/push.md): an endpoint's HTTP hooks and the outbox of calls to them, leased
//! to one replica at a time for sending.

use crate::error::Result;
use std::future::Future;

/// The hooks role: an endpoint's hooks (add, list, read for a test call, remove) and the outbox
/// (take due calls, record how one went).
pub trait Hooks: Send + Sync {
    /// Adds a notify hook (at most `HOOKS_PER_ENDPOINT_MAX`; `conflict` past it).
    fn add_hook(
        &self,
        endpoint_id: &str,
        url: &str,
        secret: &str,
        ignore_presence: bool,
    ) -> impl Future<Output = Result<crate::push::NotifyHook>> + Send;
    /// An endpoint's notify hooks, without their secrets.
    fn list_hooks(&self, endpoint_id: &str) -> impl Future<Output = Result<Vec<crate::push::NotifyHook>>> + Send;
    /// A hook with its secret, for the owner's test call (`not_found` if not this endpoint's).
    fn hook_for_test(
        &self,
        endpoint_id: &str,
        hook_id: &str,
    ) -> impl Future<Output = Result<(crate::push::NotifyHook, String)>> + Send;
    /// Removes one of the endpoint's hooks; anything else is `not_found`.
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
