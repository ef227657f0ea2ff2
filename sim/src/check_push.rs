//! The push invariants (SPEC-0030 REQ-8 over doorbells, presence and notify hooks), judged from
//! the ledger's push passes and, at the end of a run, the store's hook outbox and (on the model)
//! its push journal.
//!
//! Exists apart from `check.rs`, which owns the admission state the ledger implies (policies,
//! in-flight holdings, window usage from the brute-force oracle): `check.rs` says whether a queue
//! identity was deferred at a ring's place in the ledger, this module keeps everything else a
//! push is judged by. The invariants, named as the violations name them:
//!
//! - (a) no doorbell (created, requeued, heartbeat, reopen) and no hook call for a todo whose
//!   queue identity was deferred when it was decided;
//! - (b) at most one reopen doorbell per (endpoint, queue) per reopening: between two, the
//!   identity was watched again (model runs: the journal records the watches; `check_reopen.rs`
//!   judges it again from the ledger alone, and derives the reopenings that must ring, (f));
//! - (c) no doorbell to an endpoint that was out when it rang;
//! - (d) no hook call lost: once the run has drained with faults off, every call decided long
//!   enough before the end was delivered, given up after its attempts, refused, or dropped;
//! - (e) each push decided once: a todo is rung `created` at most once and `requeued` at most
//!   once per claim, and each hook is called for it at most that often.

use chrono::{DateTime, Duration, Utc};
use models::identity::QueueIdentity;
use models::model_store::{OutboxEntry, PushJournal};
use models::presence::{self, Override, Presence, Shift};
use models::push::{HOOK_ATTEMPTS_MAX, Ring, RingReason};
use std::collections::{BTreeMap, BTreeSet};

/// A hook call decided this long before the end of a run must have reached its outcome: the
/// lease a crashed sender held (30 s), then three attempts with their backoff and sends, with
/// room to spare. The run drains longer than this with faults off (`world::DRAIN`).
pub const HOOK_SETTLE_SECONDS: i64 = 90;

/// Hook calls one push pass enqueued, and which identities were deferred when it decided.
struct HookBatch {
    count: u64,
    at: DateTime<Utc>,
    deferred: BTreeSet<QueueIdentity>,
}

/// The push half of the ledger's judge.
#[derive(Default)]
pub struct PushJudge {
    shifts: BTreeMap<String, Shift>,
    overrides: BTreeMap<String, Override>,
    /// Claims committed per todo: how often it can have come back to pending.
    claims: BTreeMap<String, u64>,
    /// Doorbells per (todo, reason) for (e).
    rung: BTreeMap<(String, RingReason), u64>,
    hook_batches: Vec<HookBatch>,
    pub violations: Vec<String>,
}

impl PushJudge {
    pub fn claimed(&mut self, todo_id: &str) {
        *self.claims.entry(todo_id.to_string()).or_default() += 1;
    }

    pub fn presence_set(&mut self, endpoint_id: &str, override_: Option<Override>) {
        match override_ {
            Some(set) => self.overrides.insert(endpoint_id.to_string(), set),
            None => self.overrides.remove(endpoint_id),
        };
    }

    pub fn shift_set(&mut self, endpoint_id: &str, shift: Option<Shift>) {
        match shift {
            Some(set) => self.shifts.insert(endpoint_id.to_string(), set),
            None => self.shifts.remove(endpoint_id),
        };
    }

    /// One doorbell of a pass: `deferred` is whether its todo's identity admitted no claim at
    /// that point of the ledger (None for a digest, which names no todo).
    pub fn ring(&mut self, pass: &str, ring: &Ring, at: DateTime<Utc>, deferred: Option<bool>) {
        let todo = ring.todo_id.as_deref().unwrap_or("-");
        let queue = ring.queue.as_deref().unwrap_or("-");
        if deferred == Some(true) {
            self.violations.push(format!(
                "(a) ring while deferred: {} doorbell for todo {todo} in {queue} at {at} ({pass} pass)",
                ring.reason.as_str()
            ));
        }
        let shift = self.shifts.get(&ring.endpoint_id);
        let override_ = self.overrides.get(&ring.endpoint_id);
        if presence::effective(shift, override_, at).presence == Presence::Out {
            self.violations.push(format!(
                "(c) ring while out: {} doorbell to endpoint {} (todo {todo} in {queue}) at {at}",
                ring.reason.as_str(),
                ring.endpoint_id
            ));
        }
        if let Some(todo_id) = &ring.todo_id
            && matches!(ring.reason, RingReason::Created | RingReason::Requeued)
        {
            let count = self.rung.entry((todo_id.clone(), ring.reason)).or_default();
            *count += 1;
            let count = *count;
            self.check_decided_once(todo_id, ring.reason.as_str(), count, "doorbells");
        }
    }

    /// Whether `endpoint_id` was in presence on both sides of `at` (so no shift edge or
    /// override expiry near it can make the store read it out).
    pub fn surely_in(&self, endpoint_id: &str, at: DateTime<Utc>) -> bool {
        let shift = self.shifts.get(endpoint_id);
        let override_ = self.overrides.get(endpoint_id);
        [at - Duration::seconds(2), at, at + Duration::seconds(2)]
            .into_iter()
            .all(|instant| presence::effective(shift, override_, instant).presence == Presence::In)
    }

    /// A pass enqueued `count` hook calls while `deferred` identities admitted no claim.
    pub fn hook_batch(&mut self, count: u64, at: DateTime<Utc>, deferred: BTreeSet<QueueIdentity>) {
        self.hook_batches.push(HookBatch { count, at, deferred });
    }

    fn check_decided_once(&mut self, todo_id: &str, reason: &str, count: u64, what: &str) {
        let allowed = match reason {
            "created" => 1,
            "requeued" => self.claims.get(todo_id).copied().unwrap_or(0),
            _ => u64::MAX,
        };
        if count > allowed {
            self.violations.push(format!(
                "(e) decided twice: {count} {reason} {what} for todo {todo_id}, at most {allowed} allowed"
            ));
        }
    }

    /// The end of a run: the outbox against the passes that filled it, and (model runs) the
    /// reopen doorbells against the watches.
    pub fn finish(
        mut self,
        outbox: &[OutboxEntry],
        journal: Option<&PushJournal>,
        created: &BTreeMap<String, QueueIdentity>,
        end: DateTime<Utc>,
    ) -> Vec<String> {
        self.judge_outbox(outbox, created, end);
        if let Some(journal) = journal {
            self.judge_reopenings(journal, created);
        }
        self.violations
    }

    fn judge_outbox(&mut self, outbox: &[OutboxEntry], created: &BTreeMap<String, QueueIdentity>, end: DateTime<Utc>) {
        let decided: u64 = self.hook_batches.iter().map(|b| b.count).sum();
        if decided != outbox.len() as u64 {
            self.violations
                .push(format!("hook ledger: the passes enqueued {decided} calls, the outbox holds {}", outbox.len()));
            return;
        }
        let batches = std::mem::take(&mut self.hook_batches);
        let mut calls = outbox.iter();
        let mut per_hook: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        for batch in &batches {
            for call in calls.by_ref().take(batch.count as usize) {
                let todo_id = call.body["todo_id"].as_str().unwrap_or("-").to_string();
                let reason = call.body["reason"].as_str().unwrap_or("-").to_string();
                if created.get(&todo_id).is_some_and(|identity| batch.deferred.contains(identity)) {
                    self.violations.push(format!(
                        "(a) hook call while deferred: {reason} call {} for todo {todo_id} at {}",
                        call.id, batch.at
                    ));
                }
                let count = per_hook.entry((call.hook_id.clone(), todo_id.clone(), reason.clone())).or_default();
                *count += 1;
                let count = *count;
                self.check_decided_once(&todo_id, &reason, count, "calls of one hook");
            }
        }
        for call in outbox {
            let lost = call.outcome.is_none() && call.created_at <= end - Duration::seconds(HOOK_SETTLE_SECONDS);
            let cut_short = call.outcome.as_deref() == Some("failed") && call.attempts != HOOK_ATTEMPTS_MAX;
            if lost || cut_short {
                self.violations.push(format!(
                    "(d) hook call lost: call {} decided at {} ends {:?} after {} attempt(s), leased by {:?} until {:?} \
                     (run ended {end})",
                    call.id, call.created_at, call.outcome, call.attempts, call.leased_by, call.leased_until
                ));
            }
        }
    }

    fn judge_reopenings(&mut self, journal: &PushJournal, created: &BTreeMap<String, QueueIdentity>) {
        let mut last_reopen: BTreeMap<(String, QueueIdentity), i64> = BTreeMap::new();
        for ring in journal.rings.iter().filter(|r| r.reason == RingReason::Reopen) {
            let Some(identity) = ring.todo_id.as_ref().and_then(|id| created.get(id)) else {
                self.violations.push(format!("(b) reopen ring {} names no todo the run created", ring.seq));
                continue;
            };
            let key = (ring.endpoint_id.clone(), identity.clone());
            let previous = last_reopen.insert(key, ring.seq).unwrap_or(0);
            let watched_again = journal
                .watches
                .iter()
                .any(|w| &w.identity == identity && w.after_ring_seq >= previous && w.after_ring_seq < ring.seq);
            if !watched_again {
                self.violations.push(format!(
                    "(b) reopen rung twice: endpoint {} was rung for {identity} (ring {}) with no new watch since \
                     ring {previous}",
                    ring.endpoint_id, ring.seq
                ));
            }
        }
    }
}
