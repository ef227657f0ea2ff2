//! In-process counters of what the store committed or refused, counted after commit or
//! rollback: todos created, claimed, completed; units charged; claims refused by reason.
//! `/metrics` reads them; they are never a source of truth for admission (the database is,
//! under the policy lock). Every process counts its own; Prometheus sums the replicas.
//!
//! Governing: SPEC-0030 REQ-9 (count refusals), REQ-12 (charged rises as claimed on budgeted
//! queues); SPEC-0023 lifecycle counters.

use crate::admission::Reason;
use crate::error::{Code, Result};
use crate::todo::{Created, NewTodo};
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// By (queue, source), source being the creator's kind (`human`, `agent`, `ingest`, …).
    pub created: BTreeMap<(String, String), u64>,
    pub claimed: BTreeMap<String, u64>,
    /// By (queue, outcome), outcome `complete` or `fail`.
    pub completed: BTreeMap<(String, String), u64>,
    pub charged: BTreeMap<String, u64>,
    pub refusals: BTreeMap<(String, Reason), u64>,
    /// Intake refusals (`queue_full`) by (queue, source).
    pub intake_refusals: BTreeMap<(String, String), u64>,
    /// Owner cancellations by (queue, action), action `remove` or `clear`.
    pub discarded: BTreeMap<(String, String), u64>,
    /// Doorbells decided by this process, by reason (REQ-8).
    pub rings: BTreeMap<crate::push::RingReason, u64>,
    /// Notify hook calls sent by this process, by outcome.
    pub hook_calls: BTreeMap<&'static str, u64>,
    /// Deferred queue identities this process rang open again (REQ-8).
    pub reopens: u64,
    /// Pushes this process withheld, by why: `deferred` (the queue admitted no claim) or `out`
    /// (the endpoint was clocked out). Says why an agent heard nothing.
    pub withheld: BTreeMap<&'static str, u64>,
}

#[derive(Debug, Default)]
pub struct Counters {
    inner: Mutex<Snapshot>,
}

impl Counters {
    fn with(&self, update: impl FnOnce(&mut Snapshot)) {
        // A poisoned lock only means another thread panicked mid-increment; counts stay usable.
        let mut guard = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        update(&mut guard);
    }

    pub fn created(&self, queue: &str, source: &str) {
        self.with(|c| *c.created.entry((queue.to_string(), source.to_string())).or_default() += 1);
    }

    /// A committed claim; `charged` when it spent a window unit.
    pub fn claimed(&self, queue: &str, charged: bool) {
        self.with(|c| {
            *c.claimed.entry(queue.to_string()).or_default() += 1;
            if charged {
                *c.charged.entry(queue.to_string()).or_default() += 1;
            }
        });
    }

    pub fn completed(&self, queue: &str, outcome: &str) {
        self.with(|c| *c.completed.entry((queue.to_string(), outcome.to_string())).or_default() += 1);
    }

    pub fn refused(&self, queue: &str, reason: Reason) {
        self.with(|c| *c.refusals.entry((queue.to_string(), reason)).or_default() += 1);
    }

    pub fn intake_refused(&self, queue: &str, source: &str) {
        self.with(|c| *c.intake_refusals.entry((queue.to_string(), source.to_string())).or_default() += 1);
    }

    /// The outcome of one create: a new todo counts as created, a `queue_full` refusal as an
    /// intake refusal; a dedup hit and any other error count nothing.
    pub fn create_answered(&self, new: &NewTodo, answer: &Result<Created>) {
        match answer {
            Ok(created) if !created.deduped => {
                self.created(&created.todo.identity.queue, created.todo.created_by_kind.as_str())
            }
            Err(error) if error.code == Code::QueueFull => {
                self.intake_refused(&new.identity.queue, new.created_by_kind.as_str())
            }
            _ => {}
        }
    }

    pub fn discarded(&self, queue: &str, action: &str, count: u64) {
        if count > 0 {
            self.with(|c| *c.discarded.entry((queue.to_string(), action.to_string())).or_default() += count);
        }
    }

    pub fn rung(&self, reason: crate::push::RingReason) {
        self.with(|c| *c.rings.entry(reason).or_default() += 1);
    }

    pub fn hook_called(&self, outcome: &'static str) {
        self.with(|c| *c.hook_calls.entry(outcome).or_default() += 1);
    }

    pub fn reopened(&self, count: u64) {
        if count > 0 {
            self.with(|c| c.reopens += count);
        }
    }

    pub fn withheld(&self, why: &'static str, count: u64) {
        if count > 0 {
            self.with(|c| *c.withheld.entry(why).or_default() += count);
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let guard = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        guard.clone()
    }
}
