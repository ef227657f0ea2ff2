//! The claim transaction in memory (`engine/src/pg_store/claim.rs`): the same steps in the same
//! order — pick the oldest claimable candidate, find its policy, read the clock, in-flight (not
//! counting the candidate) and the window's usage, decide with `admission::decide`, then refuse
//! (nothing changes) or claim and charge one unit.
//!
//! Governing: SPEC-0030 REQ-3 (charging), REQ-4 (the decision on every claim path), REQ-7 (claim
//! responses: headroom, the deferred list, the `deferred` error), REQ-9 (fail closed).

use super::admission::Pending;
use super::{ModelStore, State};
use crate::admission::{self, AdmissionHint, Decision, Headroom, Observation, Policy, Reason, Used, WindowSlot};
use crate::claim::{ClaimNextRounds, Exhausted, deferred_error};
use crate::error::{Error, Result};
use crate::identity::QueueIdentity;
use crate::scope::Actor;
use crate::store::{ClaimNext, Claimed, ClaimedMany, Claims};
use crate::todo::{Todo, TodoState};
use chrono::{DateTime, Duration, Utc};

/// A candidate picked (claim_next) or named (claim). A named one may not be claimable.
struct Candidate {
    id: String,
    identity: QueueIdentity,
    named: bool,
}

/// What the admission steps concluded for a candidate.
enum Admission {
    Claimed(Box<Claimed>),
    Refused { reason: Reason, hint: AdmissionHint, now: Option<DateTime<Utc>> },
}

impl ModelStore {
    /// `claim_next` (REQ-4, REQ-7): the oldest claimable todo across `queues`. Without a policy
    /// on its queue it is claimed at once (the fast path); otherwise the budgeted path.
    pub(super) fn claim_next_tx(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<ClaimNext> {
        if queues.is_empty() {
            return Ok(ClaimNext::Empty { deferred: vec![] });
        }
        let mut state = self.lock();
        self.claim_next_locked(&mut state, actor, queues, lease_seconds)
    }

    /// `claim_next_many` (issue #31 item 2): `claim_next` up to `max` times under the one lock,
    /// each claim decided and charged in turn; the first that finds nothing ends it with its
    /// deferred list. An error after some claims answers those claims (they stand, as the
    /// engine's committed ones do).
    pub(super) fn claim_next_many_tx(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> Result<ClaimedMany> {
        let mut many = ClaimedMany::default();
        if queues.is_empty() {
            return Ok(many);
        }
        let mut state = self.lock();
        while many.claimed.len() < max {
            match self.claim_next_locked(&mut state, actor, queues, lease_seconds) {
                Ok(ClaimNext::Claimed(claimed)) => many.claimed.push(*claimed),
                Ok(ClaimNext::Empty { deferred }) => {
                    many.deferred = deferred;
                    break;
                }
                Err(error) if many.claimed.is_empty() => return Err(error),
                Err(_) => break,
            }
        }
        Ok(many)
    }

    /// One `claim_next` with the state locked: the oldest candidate, claimed at once when its
    /// queue has no policy, else the budgeted path.
    fn claim_next_locked(
        &self,
        state: &mut State,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<ClaimNext> {
        let now = self.clock.now();
        let Some(candidate) = state.pick_candidate(queues, &ClaimNextRounds::new(queues), now) else {
            return Ok(ClaimNext::Empty { deferred: vec![] });
        };
        if state.policy_of(&candidate.identity).is_some() {
            return self.claim_next_budgeted(state, actor, queues, lease_seconds);
        }
        // REQ-1 "No policy, no change": no admission row read beyond the lookup, none written.
        let (todo, _) = state.claim_locked(actor, &candidate.id, now, lease_seconds, None)?;
        self.counters.claimed(&todo.identity.queue, false);
        Ok(ClaimNext::Claimed(Box::new(Claimed { todo, admission: None })))
    }

    /// REQ-4, REQ-7: candidate by candidate, each refused queue excluded; after the first
    /// refusal the queues an unlocked read shows deferred are excluded too (REQ-4's permitted
    /// pre-skip); when nothing is left, `ClaimNextRounds` gives the answer or one more round.
    fn claim_next_budgeted(
        &self,
        state: &mut State,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<ClaimNext> {
        let mut rounds = ClaimNextRounds::new(queues);
        for _ in 0..ClaimNextRounds::ROUNDS_MAX {
            for _ in 0..=queues.len() {
                let now = self.clock.now();
                let Some(candidate) = state.pick_candidate(queues, &rounds, now) else {
                    break;
                };
                match self.admit_and_claim(state, actor, &candidate, lease_seconds)? {
                    Admission::Claimed(claimed) => {
                        self.counters
                            .claimed(&claimed.todo.identity.queue, claimed.admission.is_some_and(|a| a.used.is_some()));
                        return Ok(ClaimNext::Claimed(claimed));
                    }
                    Admission::Refused { reason, .. } => {
                        self.counters.refused(&candidate.identity.queue, reason);
                        if rounds.refused(candidate.identity, reason) {
                            let statuses = self.admissions_of(state, queues, Pending::AnyAtAll);
                            self.counters.refused_all(&rounds.exclude_deferred(&statuses));
                        }
                    }
                }
            }
            let excluded = rounds.excluded();
            let statuses =
                if excluded.is_empty() { vec![] } else { self.admissions_of(state, excluded, Pending::Count) };
            if let Exhausted::Answer(answer) = rounds.exhausted(statuses) {
                if let ClaimNext::Empty { deferred } = &answer {
                    let now = self.clock.now();
                    for waiting in deferred {
                        state.watch_if_waiting(&waiting.identity, now);
                    }
                }
                return Ok(answer);
            }
        }
        Ok(ClaimNext::Empty { deferred: vec![] })
    }

    /// `claim` of a named todo (REQ-4, REQ-7): in a deferred queue it fails with `deferred`
    /// (queue, reason, next_eligible_at, exact, retry_after_seconds) and changes nothing.
    pub(super) fn claim_tx(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        let mut state = self.lock();
        let todo = state.todos.get(id).ok_or_else(Error::not_found)?;
        actor.check_todo_access(&todo.identity)?;
        let candidate = Candidate { id: todo.id.clone(), identity: todo.identity.clone(), named: true };
        match self.admit_and_claim(&mut state, actor, &candidate, lease_seconds)? {
            Admission::Claimed(claimed) => {
                self.counters
                    .claimed(&claimed.todo.identity.queue, claimed.admission.is_some_and(|a| a.used.is_some()));
                Ok(*claimed)
            }
            Admission::Refused { reason, hint, now } => {
                self.counters.refused(&candidate.identity.queue, reason);
                state.watch_if_waiting(&candidate.identity, self.clock.now());
                Err(deferred_error(&candidate.identity, reason, hint, now))
            }
        }
    }

    /// REQ-4 steps 2–6 (REQ-9: a row that does not evaluate refuses before anything else).
    fn admit_and_claim(
        &self,
        state: &mut State,
        actor: &Actor,
        candidate: &Candidate,
        lease_seconds: i64,
    ) -> Result<Admission> {
        let Some(row) = state.policy_of(&candidate.identity) else {
            let now = self.clock.now();
            state.check_claimable(candidate, now)?;
            let (todo, _) = state.claim_locked(actor, &candidate.id, now, lease_seconds, None)?;
            return Ok(Admission::Claimed(Box::new(Claimed { todo, admission: None })));
        };
        let Ok(policy) = row.evaluate() else {
            // A named todo that is not claimable anyway says so first (as with a readable policy).
            state.check_claimable(candidate, self.clock.now())?;
            return Ok(Admission::Refused {
                reason: Reason::AdmissionUnavailable,
                hint: admission::unavailable_status().hint,
                now: None,
            });
        };
        let observed = self.observe(state, &policy, candidate);
        state.check_claimable(candidate, observed.now)?;
        match admission::decide(&policy, observed.in_flight, observed.usage()) {
            Decision::Refuse(reason) => {
                let hint = admission::status(&policy, &observed).hint;
                Ok(Admission::Refused { reason, hint, now: Some(observed.now) })
            }
            Decision::Admit => {
                let charged_window = policy.charged_window(observed.now);
                let charge: Option<Vec<(WindowSlot, DateTime<Utc>)>> = charged_window.map(|_| {
                    let windows =
                        policy.charged_windows(observed.now).into_iter().map(|(slot, start, _)| (slot, start));
                    let one_only = crate::mutants::hooks::charges_one_window_only();
                    windows.filter(|(slot, _)| *slot == 0 || !one_only).collect()
                });
                let (todo, used) = state.claim_locked(actor, &candidate.id, observed.now, lease_seconds, charge)?;
                if let Some(used) = used {
                    for (slot, max, _) in policy.windows() {
                        let charged = used.of(slot);
                        assert!(
                            charged <= max,
                            "over-admission: charged {charged} > max_claims {max} of window {slot}"
                        );
                    }
                }
                let headroom = Headroom::after_claim(&policy, observed.in_flight, used, charged_window);
                if headroom.leaves_no_room() && !crate::mutants::hooks::watch_on_refusal_only() {
                    state.watch_if_waiting(&candidate.identity, observed.now);
                }
                Ok(Admission::Claimed(Box::new(Claimed { todo, admission: Some(headroom) })))
            }
        }
    }

    /// REQ-4 step 4: the clock, in-flight without the candidate, the earliest lease among them,
    /// and the usage of the window containing that clock reading.
    fn observe(&self, state: &State, policy: &Policy, candidate: &Candidate) -> Observation {
        let now = self.clock.now();
        let others: Vec<&Todo> = state
            .todos
            .values()
            .filter(|t| t.state == TodoState::Claimed && t.identity == candidate.identity && t.id != candidate.id)
            .collect();
        let used = state.used(&candidate.identity, policy, now);
        Observation {
            now,
            in_flight: others.len() as i64,
            used: used.primary,
            additional_used: used.additional,
            recent: Default::default(),
            // REQ-6: the earliest live lease; a lapsed one frees its slot at the next reap.
            earliest_lease_expiry: others.iter().filter_map(|t| t.lease_expires_at).filter(|l| *l >= now).min(),
            reaper_interval: self.reaper_interval_chrono(),
        }
    }
}

impl State {
    /// REQ-4 step 1: the oldest claimable todo by (created_at, id) outside the excluded queues,
    /// or a lapsed claim of an excluded queue whose takeover its cap may still admit.
    fn pick_candidate(
        &self,
        queues: &[QueueIdentity],
        rounds: &ClaimNextRounds,
        now: DateTime<Utc>,
    ) -> Option<Candidate> {
        let open = |t: &Todo| {
            !rounds.excluded().contains(&t.identity)
                || (t.state == TodoState::Claimed && rounds.takeovers_only().contains(&t.identity))
        };
        self.todos
            .values()
            // The state first: most todos are finished, and it is cheaper than comparing identities.
            .filter(|t| t.claimable_at(now) && queues.contains(&t.identity) && open(t))
            .min_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
            .map(|t| Candidate { id: t.id.clone(), identity: t.identity.clone(), named: false })
    }

    /// `conflict` with the state when a named todo is not claimable at `now`.
    fn check_claimable(&self, candidate: &Candidate, now: DateTime<Utc>) -> Result<()> {
        match self.todos.get(&candidate.id) {
            Some(todo) if candidate.named && !todo.claimable_at(now) => {
                Err(Error::conflict_state("the todo is not claimable", todo.state.as_str()))
            }
            _ => Ok(()),
        }
    }

    /// REQ-3: the claim itself — state, lease, attempt + 1, an attempt row (closing a lapsed
    /// claimant's) and, with a window limit, one unit charged to the window containing `now`.
    /// Returns the todo and the window's usage after the charge.
    fn claim_locked(
        &mut self,
        actor: &Actor,
        id: &str,
        now: DateTime<Utc>,
        lease_seconds: i64,
        charge: Option<Vec<(WindowSlot, DateTime<Utc>)>>,
    ) -> Result<(Todo, Option<Used>)> {
        let label = actor.label();
        let todo = self.todo_mut(id)?;
        todo.state = TodoState::Claimed;
        todo.owner = Some(label.clone());
        todo.claimed_by_endpoint_id = actor.endpoint_id().map(str::to_string);
        todo.lease_expires_at = Some(now + Duration::seconds(lease_seconds));
        todo.attempt += 1;
        todo.claimed_at = Some(now);
        todo.next_retry_at = None;
        todo.completed_at = None;
        todo.updated_at = now;
        let todo = todo.clone();
        self.close_attempt(id, now, "lease_expired");
        let attempts = self.attempts.entry(id.to_string()).or_default();
        let seq = attempts.iter().map(|a| a.seq).max().unwrap_or(0) + 1;
        attempts.push(super::Attempt {
            seq,
            claimant: label,
            endpoint_id: actor.endpoint_id().map(str::to_string),
            started_at: now,
            ended_at: None,
            outcome: None,
        });
        let identity = todo.identity.clone();
        let used = charge.map(|windows| self.charge(&identity, &windows, now));
        debug_assert!(todo.state == TodoState::Claimed && todo.attempt >= 1);
        Ok((todo, used))
    }
}

/// The claims role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Claims for ModelStore {
    async fn claim_next(&self, actor: &Actor, queues: &[QueueIdentity], lease_seconds: i64) -> Result<ClaimNext> {
        self.claim_next_tx(actor, queues, lease_seconds)
    }

    async fn claim_next_many(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> Result<ClaimedMany> {
        self.claim_next_many_tx(actor, queues, lease_seconds, max)
    }

    async fn claim(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        self.claim_tx(actor, id, lease_seconds)
    }
}
