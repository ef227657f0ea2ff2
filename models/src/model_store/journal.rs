//! The push journal: what the model decided about push, in decision order, as the simulation's
//! checks and the model's own tests read it. Every doorbell (`doorbell_rings`, with the instant it
//! was decided), every hook call with its fate (`hook_outbox`), and every reopen watch inserted,
//! placed against the ring log, so "one reopen ring per reopening" can be judged from history.
//!
//! A read of the model's tables and nothing more: no `Store` caller sees it, and it changes
//! nothing.

use super::ModelStore;
use crate::identity::QueueIdentity;
use crate::push::{Ring, RingReason};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// One doorbell as `doorbell_rings` keeps it, with the instant it was decided.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedRing {
    pub seq: i64,
    pub ring_id: String,
    pub session_id: String,
    pub endpoint_id: String,
    pub queue: Option<String>,
    pub todo_id: Option<String>,
    pub reason: RingReason,
    pub message: Value,
    pub at: DateTime<Utc>,
}

/// A reopen watch the model inserted: the identity, when, and the last ring `seq` decided before
/// it (so it orders against the ring log).
#[derive(Debug, Clone, PartialEq)]
pub struct WatchRecord {
    pub identity: QueueIdentity,
    pub at: DateTime<Utc>,
    pub after_ring_seq: i64,
}

impl LoggedRing {
    pub(super) fn to_ring(&self, replica_id: &str) -> Ring {
        Ring {
            seq: self.seq,
            ring_id: self.ring_id.clone(),
            session_id: self.session_id.clone(),
            endpoint_id: self.endpoint_id.clone(),
            replica_id: replica_id.to_string(),
            queue: self.queue.clone(),
            todo_id: self.todo_id.clone(),
            reason: self.reason,
            message: self.message.clone(),
        }
    }
}

/// What the model decided about push, in order, for the simulation's checks and the model's
/// own tests: every doorbell, every hook call with its fate, and every reopen watch inserted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PushJournal {
    pub rings: Vec<LoggedRing>,
    pub outbox: Vec<super::hooks::OutboxEntry>,
    pub watches: Vec<WatchRecord>,
}

impl ModelStore {
    /// The push journal so far (a read of the model's tables; nothing a `Store` caller sees).
    pub fn push_journal(&self) -> PushJournal {
        let state = self.lock();
        PushJournal {
            rings: state.push.rings.clone(),
            outbox: state.push.outbox.iter().map(super::hooks::OutboxRow::entry).collect(),
            watches: state.push.watch_log.clone(),
        }
    }
}
