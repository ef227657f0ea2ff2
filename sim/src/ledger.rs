//! The ground-truth ledger: what committed, in commit order, as the fault wrapper (`faults.rs`)
//! records it right after each store call returns (before a lost acknowledgement hides it from
//! the caller). The invariant checks (`check.rs`, `check_push.rs`) read this, never the clients'
//! view.

use models::admission::{Headroom, Policy};
use models::identity::QueueIdentity;
use models::presence::{Override, Shift};
use models::push::Ring;

/// One thing that committed, in commit order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Created {
        id: String,
        identity: QueueIdentity,
        deduped: bool,
    },
    Claimed {
        id: String,
        identity: QueueIdentity,
        holder: String,
        at: chrono::DateTime<chrono::Utc>,
        lease_expires_at: Option<chrono::DateTime<chrono::Utc>>,
        attempt: i32,
        admission: Option<Headroom>,
    },
    /// complete, fail or release by the holder.
    Ended {
        id: String,
        how: &'static str,
    },
    Heartbeat {
        id: String,
        lease_expires_at: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// A policy write that committed at `at` (the store's clock).
    PolicySet {
        identity: QueueIdentity,
        policy: Policy,
        at: chrono::DateTime<chrono::Utc>,
    },
    PolicyCleared {
        identity: QueueIdentity,
    },
    /// The stored policy row was damaged by the simulation (REQ-9 fault).
    PolicyCorrupted {
        identity: QueueIdentity,
    },
    /// A sweep returned (or dead-lettered) every claim whose lease had lapsed at `at`.
    Reaped {
        returned: u64,
        dead_lettered: u64,
        at: chrono::DateTime<chrono::Utc>,
    },
    Requeued {
        count: u64,
    },
    /// A push pass decided these doorbells and enqueued this many hook calls (in `hook_outbox`
    /// id order, right after those of earlier passes), at `at` (REQ-8). Every reopen pass is
    /// recorded, rings or not: each is a moment the reopenings owed by then must be answered.
    Pushed {
        pass: &'static str,
        rings: Vec<Ring>,
        hook_calls: u64,
        at: chrono::DateTime<chrono::Utc>,
    },
    /// An endpoint's presence override was set or cleared (SPEC-0022).
    PresenceSet {
        endpoint_id: String,
        override_: Option<Override>,
    },
    /// An endpoint's shift was set or cleared (SPEC-0022).
    ShiftSet {
        endpoint_id: String,
        shift: Option<Shift>,
    },
    /// An MCP session's stream attached on `replica` (the session's row now names it, seen `at`).
    SessionAttached {
        session_id: String,
        endpoint_id: String,
        replica: String,
        at: chrono::DateTime<chrono::Utc>,
    },
    /// The stream closed, if `replica` still held it.
    SessionDetached {
        session_id: String,
        replica: String,
    },
    /// The session ended (`DELETE /mcp/{slug}`): it can carry no doorbell again.
    SessionClosed {
        session_id: String,
    },
    /// `replica` refreshed the streams it holds: these stay attached there, seen `at`.
    SessionsRefreshed {
        replica: String,
        alive: Vec<String>,
        at: chrono::DateTime<chrono::Utc>,
    },
}
