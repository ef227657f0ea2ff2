//! The rules of a claim's answer that both stores apply around their own I/O: `claim_next`'s
//! bookkeeping across refused queues and the deferred list it ends with (SPEC-0030 REQ-4, REQ-7),
//! and the `deferred` error of a refused `claim` (REQ-7).
//!
//! Pure: the stores pick candidates, lock, read and claim; this module only decides what a
//! refusal means for the next candidate and what the client is told. It must never read a store.

use crate::admission::{AdmissionHint, Reason, unavailable_status};
use crate::error::{Code, Error};
use crate::identity::QueueIdentity;
use crate::store::{ClaimNext, DeferredQueue, QueueAdmission};
use chrono::{DateTime, Utc};
use std::collections::HashSet;

/// `claim_next`'s budgeted path, between candidates: the queues refused so far (excluded from the
/// next pick), which of them the lock refused as `admission_unavailable`, whether the permitted
/// pre-skip has run, and whether the one extra round for reopened queues has been spent.
///
/// A store runs at most `ROUNDS_MAX` rounds of at most `queues.len() + 1` picks that claim nothing
/// (a group's picks that claim are bounded by its claimers): every refusal excludes one more
/// queue, so a round ends when the pick finds nothing, and then
/// [`ClaimNextRounds::exhausted`] says whether to go round once more or what to answer.
#[derive(Debug)]
pub struct ClaimNextRounds {
    queues_total: usize,
    excluded: Vec<QueueIdentity>,
    /// Refused as `admission_unavailable` under the lock (most often a lock timeout or a read
    /// error, which an unlocked status read cannot see: it shows the queue admitting). Not what
    /// the read first shows unavailable (a row that cannot be evaluated): the read before the
    /// answer (`exhausted`) sees such a row as it is then, unavailable still or repaired since.
    unavailable: Vec<QueueIdentity>,
    /// Excluded queues refused once as `in_flight_full`, whose lapsed claims the next pick may
    /// still take over: a takeover does not add to in-flight, so the cap that refused a pending
    /// todo can admit it (REQ-4: `claim_next` never answers empty while an admitted claim is
    /// there to make; issue #51). A second `in_flight_full` refusal excludes the queue wholly.
    takeovers_only: Vec<QueueIdentity>,
    /// Queues that have had their takeover-only pick.
    takeovers_tried: Vec<QueueIdentity>,
    pre_read: bool,
    reopened: bool,
}

/// What `claim_next` does once nothing claimable is left outside the excluded queues.
#[derive(Debug, PartialEq)]
pub enum Exhausted {
    /// A refused queue has reopened since (a window turned): it is no longer excluded; pick again.
    PickAgain,
    /// The answer: empty, with the excluded queues that hold pending work as the deferred list.
    Answer(ClaimNext),
}

impl ClaimNextRounds {
    /// One round, then one more if a refused queue reopened meanwhile, so the answer is never
    /// empty while an admitted queue has claimable work; never a third (the loop is bounded).
    pub const ROUNDS_MAX: usize = 2;

    pub fn new(queues: &[QueueIdentity]) -> ClaimNextRounds {
        ClaimNextRounds {
            queues_total: queues.len(),
            excluded: Vec::new(),
            unavailable: Vec::new(),
            takeovers_only: Vec::new(),
            takeovers_tried: Vec::new(),
            pre_read: false,
            reopened: false,
        }
    }

    /// The queues the next pick must skip, but for `takeovers_only`.
    pub fn excluded(&self) -> &[QueueIdentity] {
        &self.excluded
    }

    /// Excluded queues whose lapsed claims the next pick may still take over (and nothing else
    /// of them): each queue once, after its first `in_flight_full` refusal.
    pub fn takeovers_only(&self) -> &[QueueIdentity] {
        &self.takeovers_only
    }

    /// Records a refused candidate's queue and the reason it was refused for. True when the store
    /// should now run the pre-skip (an unlocked read of which other queues are deferred, then
    /// [`Self::exclude_deferred`]): once, after the first refusal, and only while some queue is
    /// left to try. An optimisation only: every claim is re-checked under the lock.
    pub fn refused(&mut self, identity: QueueIdentity, reason: Reason) -> bool {
        if reason == Reason::AdmissionUnavailable {
            self.unavailable.push(identity.clone());
        }
        let first_in_flight_refusal = reason == Reason::InFlightFull && !self.takeovers_tried.contains(&identity);
        self.takeovers_only.retain(|queue| queue != &identity);
        if first_in_flight_refusal {
            self.takeovers_tried.push(identity.clone());
            self.takeovers_only.push(identity.clone());
        }
        self.exclude(identity)
    }

    /// Excludes a refused queue; true when the pre-skip should run now (see `refused`).
    fn exclude(&mut self, identity: QueueIdentity) -> bool {
        if !self.excluded.contains(&identity) {
            self.excluded.push(identity);
        }
        if !self.pre_read && self.queues_total > self.excluded.len() {
            self.pre_read = true;
            return true;
        }
        false
    }

    /// The pre-skip (REQ-4): excludes every queue the unlocked read shows deferred. Returns those
    /// with pending work with their reason: each counts as a refused claim (REQ-12 counters).
    ///
    /// A queue at its in-flight cap with a lapsed lease among its claims is not skipped: the
    /// lapsed claim is a takeover candidate the cap admits (REQ-4), not a slot.
    ///
    /// Read by reference, so one read serves several groups of claimers (issue #31 item 4), and
    /// the excluded queues looked up in a set: a pre-skip over 200 queues that excludes 199
    /// would otherwise compare every pair.
    pub fn exclude_deferred(&mut self, statuses: &[QueueAdmission]) -> Vec<(QueueIdentity, Reason)> {
        let mut refused = Vec::new();
        let mut excluded: HashSet<&QueueIdentity> = self.excluded.iter().collect();
        let mut newly = Vec::new();
        for queue in statuses {
            if let Some(reason) = queue.status.hint.reason
                && !excluded.contains(&queue.identity)
                && !(reason == Reason::InFlightFull && queue.lapsed > 0)
            {
                if queue.pending > 0 {
                    refused.push((queue.identity.clone(), reason));
                }
                excluded.insert(&queue.identity);
                newly.push(queue.identity.clone());
            }
        }
        self.excluded.extend(newly);
        refused
    }

    /// The pre-skip run before the first pick (issue #15), for a queue set whose last claim met a
    /// refusal. `statuses` is the unlocked read of every queue (as `refused` asks for), `oldest`
    /// the queue of the oldest claimable todo across them, also read unlocked. When that queue is
    /// deferred for a reason that refuses every candidate (paused, window_exhausted,
    /// admission_unavailable), the first pick would have met its refusal: this records it and runs
    /// the pre-skip now, and returns what that refusal and the pre-skip after it would have counted
    /// (REQ-12), so the answer and the counters are those of the rounds without the pre-read.
    /// Otherwise (the oldest queue admits, or is in_flight_full, where the takeover of a lapsed
    /// claim may still be admitted) it records nothing and returns None: the rounds go on as if
    /// there had been no pre-read.
    pub fn pre_read_first(
        &mut self,
        statuses: &[QueueAdmission],
        oldest: Option<&QueueIdentity>,
    ) -> Option<Vec<(QueueIdentity, Reason)>> {
        let oldest = oldest?;
        let reason = statuses.iter().find(|queue| &queue.identity == oldest)?.status.hint.reason?;
        if reason == Reason::InFlightFull || !self.excluded.is_empty() {
            return None;
        }
        let mut refused = vec![(oldest.clone(), reason)];
        // Excluded as the lock's refusal would have, but not held unavailable: the read may be
        // older than the row it read (a read begun ahead), and `exhausted` reads it anew.
        if self.exclude(oldest.clone()) {
            refused.extend(self.exclude_deferred(statuses));
        }
        Some(refused)
    }

    /// Nothing claimable is left outside the excluded queues; `statuses` are the excluded queues'
    /// statuses with their pending counts, one for each that still has a policy. A queue that has
    /// reopened since gets one more round, and so does one whose policy was removed since (it has
    /// no status, and its work is claimable now); otherwise the excluded queues holding pending
    /// work are the deferred list (REQ-7).
    ///
    /// A queue the lock refused as `admission_unavailable` stays unavailable whatever the unlocked
    /// read shows: it has not reopened (a second round would only wait on its lock again), and it
    /// is listed, so an empty answer never hides its pending work.
    pub fn exhausted(&mut self, mut statuses: Vec<QueueAdmission>) -> Exhausted {
        for queue in &mut statuses {
            if !queue.status.hint.is_deferred() && self.unavailable.contains(&queue.identity) {
                queue.status.hint = unavailable_status().hint;
            }
        }
        let unbudgeted = self.excluded.iter().filter(|q| !statuses.iter().any(|status| &status.identity == *q));
        let reopened: Vec<QueueIdentity> = statuses
            .iter()
            .filter(|q| !q.status.hint.is_deferred() && q.pending > 0)
            .map(|q| &q.identity)
            .chain(unbudgeted)
            .cloned()
            .collect();
        if !self.reopened && !reopened.is_empty() {
            self.reopened = true;
            self.excluded.retain(|q| !reopened.contains(q));
            self.takeovers_only.retain(|q| !reopened.contains(q));
            return Exhausted::PickAgain;
        }
        let deferred = statuses
            .into_iter()
            .filter(|q| q.pending > 0)
            .filter_map(|q| {
                let hint = q.status.hint;
                hint.reason.map(|reason| DeferredQueue {
                    identity: q.identity,
                    reason,
                    pending: q.pending,
                    next_eligible_at: hint.next_eligible_at,
                    exact: hint.exact,
                    window: hint.window,
                    shared_budget: hint.shared_budget,
                })
            })
            .collect();
        Exhausted::Answer(ClaimNext::Empty { deferred })
    }
}

/// The `deferred` error of REQ-7 for a refused `claim` of a named todo: queue, reason,
/// next_eligible_at and exact, and `retry_after_seconds` (at least 1) when a next eligible time
/// and the clock reading it was derived from are both known. Nothing was changed.
pub fn deferred_error(
    identity: &QueueIdentity,
    reason: Reason,
    hint: AdmissionHint,
    now: Option<DateTime<Utc>>,
) -> Error {
    let retry_after_seconds = hint.next_eligible_at.zip(now).map(|(t, now)| (t - now).num_seconds().max(1));
    let mut error =
        Error::new(Code::Deferred, format!("queue {} admits no claim now: {}", identity.queue, reason.as_str()))
            .with("queue", identity.queue.clone())
            .with("reason", reason.as_str())
            .with("next_eligible_at", hint.next_eligible_at.map(crate::window::wire_instant))
            .with("exact", hint.exact);
    // Issue #52: a refusal by a window names the window.
    if let Some(window) = hint.window {
        error = error.with("window", window.to_json());
    }
    // A refusal by a shared budget names the budget.
    if let Some(budget) = hint.shared_budget {
        error = error.with("shared_budget", budget.as_str());
    }
    if let Some(seconds) = retry_after_seconds {
        error = error.with("retry_after_seconds", seconds);
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{PolicyStatus, QueueStatus, unavailable_status};
    use chrono::TimeZone;

    fn queue(name: &str) -> QueueIdentity {
        QueueIdentity::endpoint("ep_1", name)
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + seconds, 0).single().unwrap_or_default()
    }

    fn status_of(identity: QueueIdentity, deferred: bool, pending: i64) -> QueueAdmission {
        let status = if deferred {
            unavailable_status()
        } else {
            PolicyStatus { status: QueueStatus::Admitted, hint: AdmissionHint::ADMITTED, ..unavailable_status() }
        };
        QueueAdmission {
            identity,
            policy_id: "ap_1".into(),
            policy: None,
            status,
            pending,
            lapsed: 0,
            created_at: at(0),
            updated_at: at(0),
        }
    }

    // SPEC-0030 REQ-4: the pre-skip runs once, after the first refusal, while a queue is left.
    #[test]
    fn req4_the_pre_skip_runs_once_after_the_first_refusal() {
        let queues = [queue("a"), queue("b"), queue("c")];
        let mut rounds = ClaimNextRounds::new(&queues);
        assert!(rounds.refused(queue("a"), Reason::Paused));
        assert!(!rounds.refused(queue("b"), Reason::Paused));
        assert_eq!(rounds.excluded(), &[queue("a"), queue("b")]);

        let mut single = ClaimNextRounds::new(&queues[..1]);
        assert!(!single.refused(queue("a"), Reason::Paused), "no queue is left to skip");
    }

    // SPEC-0030 REQ-4, REQ-12: queues the unlocked read shows deferred are excluded; those with
    // pending work count as refusals; an already excluded queue is not counted twice.
    #[test]
    fn req4_the_pre_skip_excludes_deferred_queues_and_counts_those_with_work() {
        let queues = [queue("a"), queue("b"), queue("c"), queue("d")];
        let mut rounds = ClaimNextRounds::new(&queues);
        rounds.refused(queue("a"), Reason::Paused);
        let refused = rounds.exclude_deferred(&[
            status_of(queue("a"), true, 3),
            status_of(queue("b"), true, 2),
            status_of(queue("c"), true, 0),
            status_of(queue("d"), false, 5),
        ]);
        assert_eq!(refused, vec![(queue("b"), Reason::AdmissionUnavailable)]);
        assert_eq!(rounds.excluded(), &[queue("a"), queue("b"), queue("c")]);
    }

    // SPEC-0030 REQ-4 (issue #28): a queue at its in-flight cap whose in-flight count holds a
    // lapsed lease is not skipped, since the takeover of that lease is admitted; at the cap
    // with live leases only, it is.
    #[test]
    fn req4_the_pre_skip_treats_a_lapsed_lease_as_a_takeover_candidate_not_a_slot() {
        let queues = [queue("a"), queue("full"), queue("lapsed")];
        let mut rounds = ClaimNextRounds::new(&queues);
        rounds.refused(queue("a"), Reason::Paused);
        let in_flight_full = |identity: QueueIdentity, lapsed: i64| QueueAdmission {
            status: PolicyStatus {
                status: QueueStatus::InFlightFull,
                hint: AdmissionHint {
                    reason: Some(Reason::InFlightFull),
                    next_eligible_at: None,
                    exact: Some(false),
                    window: None,
                    shared_budget: None,
                },
                ..unavailable_status()
            },
            lapsed,
            ..status_of(identity, true, 1)
        };
        let refused = rounds.exclude_deferred(&[in_flight_full(queue("full"), 0), in_flight_full(queue("lapsed"), 1)]);
        assert_eq!(refused, vec![(queue("full"), Reason::InFlightFull)]);
        assert_eq!(rounds.excluded(), &[queue("a"), queue("full")]);
    }

    // SPEC-0030 REQ-4, REQ-12 (issue #15): the pre-skip read before the first pick counts and
    // excludes exactly what the first refusal and the pre-skip after it would have.
    #[test]
    fn req4_the_pre_skip_read_first_counts_as_the_refusal_it_stands_for() {
        let queues = [queue("a"), queue("b"), queue("c"), queue("d")];
        let statuses = || {
            vec![
                status_of(queue("a"), true, 3),
                status_of(queue("b"), true, 2),
                status_of(queue("c"), true, 0),
                status_of(queue("d"), false, 5),
            ]
        };
        let mut without = ClaimNextRounds::new(&queues);
        let mut counted = vec![(queue("a"), Reason::AdmissionUnavailable)];
        assert!(without.refused(queue("a"), Reason::AdmissionUnavailable));
        counted.extend(without.exclude_deferred(&statuses()));

        let mut first = ClaimNextRounds::new(&queues);
        assert_eq!(first.pre_read_first(&statuses(), Some(&queue("a"))), Some(counted));
        assert_eq!(first.excluded(), without.excluded());
        assert!(!first.refused(queue("d"), Reason::Paused), "the pre-skip has run");

        let mut single = ClaimNextRounds::new(&queues[..1]);
        assert_eq!(
            single.pre_read_first(&statuses(), Some(&queue("a"))),
            Some(vec![(queue("a"), Reason::AdmissionUnavailable)])
        );
        assert_eq!(single.excluded(), &[queue("a")]);
    }

    // SPEC-0030 REQ-4 (issue #15): when the oldest work is in an admitted queue, in a queue
    // without a policy, nowhere, or in an in_flight_full queue (a takeover may still be admitted),
    // the read first stands for no refusal and changes nothing.
    #[test]
    fn req4_the_pre_skip_read_first_records_nothing_unless_the_oldest_queue_refuses_all() {
        let queues = [queue("a"), queue("b"), queue("c")];
        let mut full = status_of(queue("c"), false, 1);
        full.status.hint = AdmissionHint { reason: Some(Reason::InFlightFull), ..unavailable_status().hint };
        let statuses = || vec![status_of(queue("a"), true, 3), status_of(queue("b"), false, 2), full.clone()];
        for oldest in [Some(queue("b")), Some(queue("c")), Some(queue("unbudgeted")), None] {
            let mut rounds = ClaimNextRounds::new(&queues);
            assert_eq!(rounds.pre_read_first(&statuses(), oldest.as_ref()), None, "{oldest:?}");
            assert!(rounds.excluded().is_empty());
            assert!(rounds.refused(queue("a"), Reason::Paused), "the pre-skip is still to run");
        }
    }

    // SPEC-0030 REQ-4: a queue the read first showed unavailable (a policy row that could not be
    // evaluated) and that the read before the answer shows admitting (repaired since; a read
    // begun ahead can be that old) gets one more round: no empty answer while it has work.
    #[test]
    fn req4_a_queue_the_read_first_showed_unavailable_is_read_anew_before_an_empty_answer() {
        let queues = [queue("a"), queue("b")];
        let mut rounds = ClaimNextRounds::new(&queues);
        let read = vec![status_of(queue("a"), true, 2), status_of(queue("b"), true, 1)];
        assert!(rounds.pre_read_first(&read, Some(&queue("a"))).is_some(), "stands for a's refusal");
        let repaired = vec![status_of(queue("a"), false, 2), status_of(queue("b"), true, 1)];
        assert_eq!(rounds.exhausted(repaired), Exhausted::PickAgain);
        assert_eq!(rounds.excluded(), &[queue("b")], "a is tried again");
    }

    // SPEC-0030 REQ-4: the pre-skip excludes a queue listed twice once, counts it once, and keeps
    // the order in which the read listed the queues it excludes.
    #[test]
    fn req4_the_pre_skip_excludes_a_queue_listed_twice_once() {
        let queues = [queue("a"), queue("b"), queue("c")];
        let mut rounds = ClaimNextRounds::new(&queues);
        rounds.refused(queue("a"), Reason::Paused);
        let refused = rounds.exclude_deferred(&[
            status_of(queue("c"), true, 1),
            status_of(queue("a"), true, 1),
            status_of(queue("b"), true, 1),
            status_of(queue("c"), true, 1),
        ]);
        assert_eq!(
            refused,
            vec![(queue("c"), Reason::AdmissionUnavailable), (queue("b"), Reason::AdmissionUnavailable)]
        );
        assert_eq!(rounds.excluded(), &[queue("a"), queue("c"), queue("b")]);
    }

    // SPEC-0030 REQ-7: a queue that reopened gets one more round, never two; then the deferred
    // list holds the excluded queues with pending work.
    #[test]
    fn req7_a_reopened_queue_gets_one_more_round_then_the_deferred_list() {
        let queues = [queue("a"), queue("b")];
        let mut rounds = ClaimNextRounds::new(&queues);
        rounds.refused(queue("a"), Reason::Paused);
        rounds.exclude_deferred(&[status_of(queue("b"), true, 1)]);
        let reopened = vec![status_of(queue("a"), false, 1), status_of(queue("b"), true, 1)];
        assert_eq!(rounds.exhausted(reopened.clone()), Exhausted::PickAgain);
        assert_eq!(rounds.excluded(), &[queue("b")]);

        let Exhausted::Answer(ClaimNext::Empty { deferred }) = rounds.exhausted(reopened) else {
            panic!("the second exhaustion answers");
        };
        let listed: Vec<&QueueIdentity> = deferred.iter().map(|d| &d.identity).collect();
        assert_eq!(listed, vec![&queue("b")]);
        assert_eq!(deferred[0].reason, Reason::AdmissionUnavailable);
    }

    // SPEC-0030 REQ-4, REQ-7: a refused queue whose policy was removed since has no status in the
    // final read, and its work is claimable now: it gets one more round like a reopened queue,
    // rather than an empty answer that neither claims its work nor lists it.
    #[test]
    fn req4_a_refused_queue_whose_policy_was_removed_gets_one_more_round() {
        let queues = [queue("a"), queue("b")];
        let mut rounds = ClaimNextRounds::new(&queues);
        rounds.refused(queue("a"), Reason::Paused);
        rounds.exclude_deferred(&[status_of(queue("b"), true, 1)]);
        // Only b still has a policy.
        let after = vec![status_of(queue("b"), true, 1)];
        assert_eq!(rounds.exhausted(after.clone()), Exhausted::PickAgain);
        assert_eq!(rounds.excluded(), &[queue("b")], "a is tried again, b stays excluded");

        let Exhausted::Answer(ClaimNext::Empty { deferred }) = rounds.exhausted(after) else {
            panic!("the second exhaustion answers");
        };
        let listed: Vec<&QueueIdentity> = deferred.iter().map(|d| &d.identity).collect();
        assert_eq!(listed, vec![&queue("b")]);
    }

    // SPEC-0030 REQ-7, REQ-9: a queue the lock refused as admission_unavailable (a lock timeout)
    // reads as admitting without the lock. It has not reopened: no second round waits on its lock
    // again, and the empty answer lists it, so its pending work is not hidden.
    #[test]
    fn req7_a_queue_unavailable_under_the_lock_is_deferred_though_the_read_shows_it_admitting() {
        let queues = [queue("a"), queue("b")];
        let mut rounds = ClaimNextRounds::new(&queues);
        rounds.refused(queue("a"), Reason::AdmissionUnavailable);
        rounds.refused(queue("b"), Reason::Paused);
        let read = vec![status_of(queue("a"), false, 2), status_of(queue("b"), false, 1)];
        assert_eq!(rounds.exhausted(read.clone()), Exhausted::PickAgain, "b reopened");
        assert_eq!(rounds.excluded(), &[queue("a")], "a stays excluded");

        let Exhausted::Answer(ClaimNext::Empty { deferred }) = rounds.exhausted(read[..1].to_vec()) else {
            panic!("the second exhaustion answers");
        };
        let listed: Vec<_> = deferred.iter().map(|d| (&d.identity, d.reason, d.pending)).collect();
        assert_eq!(listed, vec![(&queue("a"), Reason::AdmissionUnavailable, 2)]);

        let mut alone = ClaimNextRounds::new(&queues[..1]);
        alone.refused(queue("a"), Reason::AdmissionUnavailable);
        assert!(
            matches!(alone.exhausted(read[..1].to_vec()), Exhausted::Answer(ClaimNext::Empty { deferred }) if deferred.len() == 1),
            "answered at once, without a second round"
        );
    }

    // SPEC-0030 REQ-4, issue #51: a queue refused at its in-flight cap stays open to one pick of
    // its lapsed claims (a takeover the cap may admit); a second in_flight_full refusal, or any
    // other reason, excludes it wholly.
    #[test]
    fn req4_an_in_flight_refusal_leaves_the_queue_open_to_one_takeover_pick() {
        let (a, b) = (queue("a"), queue("b"));
        let mut rounds = ClaimNextRounds::new(&[a.clone(), b.clone()]);
        rounds.refused(a.clone(), Reason::InFlightFull);
        assert_eq!((rounds.excluded(), rounds.takeovers_only()), (&[a.clone()][..], &[a.clone()][..]));
        rounds.refused(a.clone(), Reason::InFlightFull);
        assert_eq!((rounds.excluded(), rounds.takeovers_only()), (&[a.clone()][..], &[][..]), "once only");
        rounds.refused(b.clone(), Reason::WindowExhausted);
        assert!(rounds.takeovers_only().is_empty(), "a spent window admits no takeover either");
        assert_eq!(rounds.excluded(), &[a, b][..]);
    }

    // SPEC-0030 REQ-7: the `deferred` error's fields, and retry_after_seconds at least 1.
    #[test]
    fn req7_the_deferred_error_names_queue_reason_and_when() {
        let hint = AdmissionHint {
            reason: Some(Reason::WindowExhausted),
            next_eligible_at: Some(at(90)),
            exact: Some(true),
            window: None,
            shared_budget: None,
        };
        let error = deferred_error(&queue("a"), Reason::WindowExhausted, hint, Some(at(0)));
        assert_eq!(error.code, Code::Deferred);
        assert_eq!(error.message, "queue a admits no claim now: window_exhausted");
        assert_eq!(error.extras["retry_after_seconds"], 90);
        assert_eq!(error.extras["exact"], true);
        assert_eq!(error.extras["reason"], "window_exhausted");
        // Issue #51: the same instant format as every other answer, `Z` and milliseconds.
        let expected = at(90).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        assert!(expected.ends_with(".000Z"), "{expected}");
        assert_eq!(error.extras["next_eligible_at"], expected.as_str());

        let soon = deferred_error(&queue("a"), Reason::WindowExhausted, hint, Some(at(90)));
        assert_eq!(soon.extras["retry_after_seconds"], 1);
        let unknown = deferred_error(&queue("a"), Reason::AdmissionUnavailable, unavailable_status().hint, None);
        assert!(!unknown.extras.contains_key("retry_after_seconds"));
    }
}
