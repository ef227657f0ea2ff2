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
    /// Group admission (PgStore only; a model store claims alone and counts none): the groups
    /// of budgeted `claim_next` callers this process's leaders took to claim in turn (a group
    /// takes one transaction, or more when refusals or a short pick need further rounds), and
    /// the claimers they took. Their ratio is the mean group size.
    pub claim_groups: u64,
    pub claim_group_claimers: u64,
    /// Groups (PgStore only, as above) that read their queues' statuses before the first pick,
    /// because the last group on the same queues met a refusal (issue #15, the pre-skip read
    /// first), and how many of those reads stood for a refusal the pick would have met. The
    /// difference is reads that bought nothing: the oldest work's queue admitted again, was
    /// in_flight_full (left to the lock), had no policy, or nothing was claimable.
    pub claim_pre_reads_first: u64,
    pub claim_pre_reads_first_met: u64,
}

/// How many distinct label sets (keys) one counter map keeps (issue #14). Queue names come from
/// tenants, so without a bound every new name would grow the process's memory for good. Past
/// this many, a new queue's counts go to the `OTHER_QUEUE_LABEL` queue instead, which the scrape
/// labels `__other__` like any queue past its label cap.
pub const LABEL_SETS_MAX: usize = 1_000;

/// The queue name overflow counts are kept under: the scrape's overflow label, which no real
/// queue can take (queue names are `[a-z0-9._-]`).
pub const OTHER_QUEUE_LABEL: &str = "__other__";

/// A counter map key whose queue part can be folded into `OTHER_QUEUE_LABEL`.
trait QueueKey: Ord + Sized {
    fn into_other(self) -> Self;
}

impl QueueKey for String {
    fn into_other(self) -> Self {
        OTHER_QUEUE_LABEL.to_string()
    }
}

impl<T: Ord> QueueKey for (String, T) {
    fn into_other(self) -> Self {
        (OTHER_QUEUE_LABEL.to_string(), self.1)
    }
}

/// Adds `by` to `key`, or, when `key` is new and the map already holds `LABEL_SETS_MAX` keys, to
/// the key's overflow form. The overflow keys are the only ones admitted past the cap, and there
/// are at most as many as the fixed vocabulary of the key's second part (source, outcome, reason).
fn bump<K: QueueKey>(map: &mut BTreeMap<K, u64>, key: K, by: u64) {
    let key = if map.len() < LABEL_SETS_MAX || map.contains_key(&key) { key } else { key.into_other() };
    *map.entry(key).or_default() += by;
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
        self.with(|c| bump(&mut c.created, (queue.to_string(), source.to_string()), 1));
    }

    /// A committed claim; `charged` when it spent a window unit.
    pub fn claimed(&self, queue: &str, charged: bool) {
        self.with(|c| {
            bump(&mut c.claimed, queue.to_string(), 1);
            if charged {
                bump(&mut c.charged, queue.to_string(), 1);
            }
        });
    }

    pub fn completed(&self, queue: &str, outcome: &str) {
        self.with(|c| bump(&mut c.completed, (queue.to_string(), outcome.to_string()), 1));
    }

    pub fn refused(&self, queue: &str, reason: Reason) {
        self.with(|c| bump(&mut c.refusals, (queue.to_string(), reason), 1));
    }

    /// Refused claims of several queues under one lock: `claim_next`'s pre-skip counts up to
    /// every granted queue at once.
    pub fn refused_all(&self, refusals: &[(crate::identity::QueueIdentity, Reason)]) {
        if refusals.is_empty() {
            return;
        }
        self.with(|c| {
            for (identity, reason) in refusals {
                bump(&mut c.refusals, (identity.queue.clone(), *reason), 1);
            }
        });
    }

    pub fn intake_refused(&self, queue: &str, source: &str) {
        self.with(|c| bump(&mut c.intake_refusals, (queue.to_string(), source.to_string()), 1));
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
            self.with(|c| bump(&mut c.discarded, (queue.to_string(), action.to_string()), count));
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

    /// One group of `claimers` budgeted `claim_next` callers, taken to claim in turn.
    pub fn claim_group(&self, claimers: usize) {
        self.with(|c| {
            c.claim_groups += 1;
            c.claim_group_claimers += claimers as u64;
        });
    }

    /// One pre-skip read before a group's first pick; `met`: it stood for a refusal.
    pub fn claim_pre_read_first(&self, met: bool) {
        self.with(|c| {
            c.claim_pre_reads_first += 1;
            c.claim_pre_reads_first_met += u64::from(met);
        });
    }

    pub fn snapshot(&self) -> Snapshot {
        let guard = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        guard.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue #14 item 4: past LABEL_SETS_MAX queue names, a new name's counts go to `__other__`
    // before the map grows; names already kept go on counting under their own name.
    #[test]
    fn counter_maps_stop_growing_at_the_cap_and_count_the_rest_as_other() {
        let counters = Counters::default();
        for i in 0..LABEL_SETS_MAX {
            counters.claimed(&format!("q{i}"), false);
            counters.created(&format!("q{i}"), "human");
        }
        for i in 0..50 {
            counters.claimed(&format!("late{i}"), true);
            counters.created(&format!("late{i}"), "human");
            counters.created(&format!("late{i}"), "agent");
            counters.discarded(&format!("late{i}"), "clear", 2);
        }
        counters.claimed("q7", false);
        let snapshot = counters.snapshot();
        assert_eq!(snapshot.claimed.len(), LABEL_SETS_MAX + 1);
        assert_eq!(snapshot.claimed[OTHER_QUEUE_LABEL], 50);
        assert_eq!(snapshot.claimed["q7"], 2);
        assert!(!snapshot.claimed.contains_key("late0"));
        // The overflow keeps the fixed second part of the key.
        assert_eq!(snapshot.created.len(), LABEL_SETS_MAX + 2);
        assert_eq!(snapshot.created[&(OTHER_QUEUE_LABEL.to_string(), "human".to_string())], 50);
        assert_eq!(snapshot.created[&(OTHER_QUEUE_LABEL.to_string(), "agent".to_string())], 50);
        // A map below the cap is untouched by another map's overflow.
        assert_eq!(snapshot.charged.len(), 50);
        assert_eq!(snapshot.discarded.values().sum::<u64>(), 100);
    }

    // SPEC-0030 REQ-12: refusals counted together count as the same refusals one by one.
    #[test]
    fn refusals_counted_together_count_as_one_by_one() {
        use crate::identity::QueueIdentity;
        let (together, one_by_one) = (Counters::default(), Counters::default());
        let refusals = [
            (QueueIdentity::endpoint("ep_1", "a"), Reason::Paused),
            (QueueIdentity::team("tm_1", "a"), Reason::Paused),
            (QueueIdentity::endpoint("ep_1", "b"), Reason::WindowExhausted),
        ];
        together.refused_all(&refusals);
        together.refused_all(&[]);
        for (identity, reason) in &refusals {
            one_by_one.refused(&identity.queue, *reason);
        }
        assert_eq!(together.snapshot().refusals, one_by_one.snapshot().refusals);
        assert_eq!(together.snapshot().refusals[&("a".to_string(), Reason::Paused)], 2);
    }
}
