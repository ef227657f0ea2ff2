//! In-process counters of what the claim path decided, counted after commit or rollback:
//! claims, charges and refusals by queue name. The metrics surface reads them; they are never
//! a source of truth for admission (that is the database, under the policy lock).
//!
//! Governing: SPEC-0030 REQ-9 (count refusals), REQ-12 (charged == claimed on budgeted queues).

use models::admission::Reason;
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub claimed: BTreeMap<String, u64>,
    pub charged: BTreeMap<String, u64>,
    pub refusals: BTreeMap<(String, Reason), u64>,
}

#[derive(Debug, Default)]
pub struct AdmissionCounters {
    inner: Mutex<Snapshot>,
}

impl AdmissionCounters {
    fn with(&self, update: impl FnOnce(&mut Snapshot)) {
        // A poisoned lock only means another thread panicked mid-increment; counts stay usable.
        let mut guard = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        update(&mut guard);
    }

    /// A committed claim; `charged` when it spent a window unit.
    pub fn claimed(&self, queue: &str, charged: bool) {
        self.with(|counts| {
            *counts.claimed.entry(queue.to_string()).or_default() += 1;
            if charged {
                *counts.charged.entry(queue.to_string()).or_default() += 1;
            }
        });
    }

    pub fn refused(&self, queue: &str, reason: Reason) {
        self.with(|counts| *counts.refusals.entry((queue.to_string(), reason)).or_default() += 1);
    }

    pub fn snapshot(&self) -> Snapshot {
        let guard = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        guard.clone()
    }
}
