//! Presence (SPEC-0022): whether an endpoint is in to be told about work (its shift and
//! override), the sweep that acts on changes, and the digest rung when it comes in or reconnects.

use crate::error::Result;
use std::future::Future;

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

/// The presence role.
pub trait Presence: Send + Sync {
    /// Acts on presence changes (won once across replicas); out to in rings one digest.
    fn presence_sweep(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// A stream (re)attached: one reconnect digest if work waits (at most one per cooldown).
    fn reconnect_digest(
        &self,
        endpoint_id: &str,
        session_id: &str,
    ) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// An endpoint's presence: effective state, shift, override and pending work.
    fn presence(&self, endpoint_id: &str) -> impl Future<Output = Result<PresenceView>> + Send;
    /// Sets (Some) or clears (None) the presence override.
    fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<crate::presence::Override>,
        by: OverrideBy,
    ) -> impl Future<Output = Result<PresenceView>> + Send;
    /// Sets (Some) or clears (None) the endpoint's shift.
    fn set_shift(
        &self,
        endpoint_id: &str,
        shift: Option<crate::presence::Shift>,
    ) -> impl Future<Output = Result<PresenceView>> + Send;
}
