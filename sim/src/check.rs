//! The invariants of design.md ("Invariants every test layer checks"), checked from the
//! simulation's ledger (what committed, in commit order) while a run goes, and against the
//! store's final state at its end.
//!
//! Exists so every run, on either store, is judged by the same rules, computed independently of
//! the engine: windows come from the brute-force `Oracle`, in-flight counts from the ledger. The
//! push invariants (`check_push.rs`) are judged here too, against the same admission state: a
//! doorbell is checked against whether the ledger says its queue identity was deferred.

use crate::check_push::PushJudge;
use crate::check_reopen::ReopenJudge;
use crate::faults::{Event, Faulty};
use crate::oracle::Oracle;
use crate::sim_store::SimStore;
use chrono::{DateTime, Utc};
use models::admission::{self, Decision, Headroom, Policy, Used};
use models::identity::QueueIdentity;
use models::store::prelude::*;
use models::store::{TodoQuery, TodoSet};
use models::todo::TodoState;
use std::collections::{BTreeMap, BTreeSet};

/// How many recent windows a policy detail lists: charges in windows older than the oldest
/// listed one cannot be compared once the list is full.
const DETAIL_WINDOWS_LISTED: usize = models::limits::DETAIL_WINDOWS_MAX as usize;

struct Holding {
    identity: QueueIdentity,
    holder: String,
    lease_expires_at: Option<DateTime<Utc>>,
}

/// Who may hold what: the other owner's agent (the mirror) only its own queue, the team's agents
/// only the team's queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenancy {
    pub mirror_holder: String,
    pub mirror_queue: QueueIdentity,
    pub team_id: String,
}

impl Tenancy {
    fn allows(&self, holder: &str, identity: &QueueIdentity) -> bool {
        if holder == self.mirror_holder {
            identity == &self.mirror_queue
        } else {
            identity.team_id() == Some(self.team_id.as_str())
        }
    }
}

/// The ledger's judge: fed the events as they commit (during a run, every few hundred steps, so
/// the invariants are checked continuously), then `finish`ed against the final state.
pub struct LedgerCheck {
    tenancy: Tenancy,
    oracle: Oracle,
    policies: BTreeMap<QueueIdentity, Policy>,
    corrupted: BTreeSet<QueueIdentity>,
    holdings: BTreeMap<String, Holding>,
    /// Every charged claim's commit instant per identity, in commit order: the ground truth of
    /// REQ-3 ("usage of a window equals the claims of that identity committed in it"), kept
    /// through every policy delete, re-create and redefinition (issue #28).
    charges: BTreeMap<QueueIdentity, Vec<DateTime<Utc>>>,
    /// The usage rows the store must hold, per (identity, window start), derived from `charges`
    /// as the oracle places windows: each claim adds one to its window, and each policy write
    /// rebuilds the new current window from the charges inside its span.
    counters: BTreeMap<(QueueIdentity, DateTime<Utc>), i64>,
    created: BTreeMap<String, QueueIdentity>,
    push: PushJudge,
    reopen: ReopenJudge,
    violations: Vec<String>,
    /// How many ledger events have been checked.
    seen: usize,
}

impl LedgerCheck {
    pub fn new(tenancy: Tenancy) -> LedgerCheck {
        let mirror_endpoint = tenancy.mirror_holder.strip_prefix("endpoint:").unwrap_or_default().to_string();
        LedgerCheck {
            reopen: ReopenJudge::new(mirror_endpoint),
            tenancy,
            oracle: Oracle::default(),
            policies: BTreeMap::new(),
            corrupted: BTreeSet::new(),
            holdings: BTreeMap::new(),
            charges: BTreeMap::new(),
            counters: BTreeMap::new(),
            created: BTreeMap::new(),
            push: PushJudge::default(),
            violations: vec![],
            seen: 0,
        }
    }

    /// Checks the events committed since the last call.
    pub fn feed(&mut self, ledger: &[Event]) {
        for event in ledger.iter().skip(self.seen) {
            self.check(event);
        }
        self.seen = ledger.len().max(self.seen);
    }

    /// Whether the first violation has been found yet.
    pub fn has_violations(&self) -> bool {
        !self.violations.is_empty() || !self.push.violations.is_empty() || !self.reopen.violations.is_empty()
    }

    /// REQ-6 from the ledger alone: whether `identity` admitted no claim at this point of it (a
    /// damaged policy row, a pause, a spent window as the oracle places it, a full in-flight cap).
    fn deferred_at(&mut self, identity: &QueueIdentity, at: DateTime<Utc>) -> bool {
        if self.corrupted.contains(identity) {
            return true;
        }
        let Some(policy) = self.policies.get(identity) else {
            return false;
        };
        let in_flight = self.holdings.values().filter(|h| &h.identity == identity).count() as i64;
        let policy = policy.clone();
        let used = self.used_at(identity, &policy, at);
        admission::decide(&policy, in_flight, used) != Decision::Admit
    }

    /// Every window's usage at `at` from the ledger, each window placed by the oracle (issue #52:
    /// the additional windows too).
    fn used_at(&mut self, identity: &QueueIdentity, policy: &Policy, at: DateTime<Utc>) -> Used {
        let mut used = Used::default();
        for (slot, _, window) in policy.windows() {
            let span = self.oracle.window(&window, at);
            let units = self.charged_within(identity, span);
            if slot == 0 {
                used.primary = units;
            } else {
                used.additional[slot - 1] = units;
            }
        }
        used
    }

    /// REQ-3: the claims of `identity` charged within `[start, end)`, whatever policy charged them.
    fn charged_within(&self, identity: &QueueIdentity, (start, end): (DateTime<Utc>, DateTime<Utc>)) -> i64 {
        // Commit order is clock order (the clock only jumps forward), so the span is a slice.
        self.charges
            .get(identity)
            .map_or(0, |at| (at.partition_point(|t| *t < end) - at.partition_point(|t| *t < start)) as i64)
    }

    /// A policy write at `at`: the usage row of the window it places `at` in now counts the
    /// claims already charged in that window's span (issue #28).
    fn policy_set(&mut self, identity: &QueueIdentity, policy: &Policy, at: DateTime<Utc>) {
        if let (Some(window), Some(_)) = (&policy.window, policy.max_claims_per_window) {
            let span = self.oracle.window(window, at);
            let units = self.charged_within(identity, span);
            if units > 0 {
                self.counters.insert((identity.clone(), span.0), units);
            }
        }
        self.policies.insert(identity.clone(), policy.clone());
        self.corrupted.remove(identity);
    }

    /// A push pass: each doorbell against the admission state and presence at its instant, and
    /// the identities deferred then, for the hook calls it enqueued.
    fn pushed(&mut self, pass: &str, rings: &[models::push::Ring], hook_calls: u64, at: DateTime<Utc>) {
        for ring in rings {
            let identity = ring.todo_id.as_ref().and_then(|id| self.created.get(id)).cloned();
            let deferred = identity.map(|identity| self.deferred_at(&identity, at));
            self.push.ring(pass, ring, at, deferred);
        }
        if pass == "reopen" {
            let owed = self.reopen.owed();
            let admitted = owed.into_iter().filter(|identity| !self.deferred_at(identity, at)).collect();
            let push = &self.push;
            self.reopen.reopen_pass(rings, at, &admitted, |endpoint| push.surely_in(endpoint, at));
        }
        if hook_calls > 0 {
            let budgeted: BTreeSet<QueueIdentity> =
                self.policies.keys().chain(self.corrupted.iter()).cloned().collect();
            let deferred = budgeted.into_iter().filter(|identity| self.deferred_at(identity, at)).collect();
            self.push.hook_batch(hook_calls, at, deferred);
        }
    }

    fn check(&mut self, event: &Event) {
        match event {
            Event::PolicySet { identity, policy, at } => {
                self.policy_set(identity, policy, *at);
                // The write that leaves its identity deferred records the watch (issue #28).
                if self.deferred_at(identity, *at) {
                    self.reopen.deferred(identity, *at, true);
                }
            }
            Event::PolicyCleared { identity } => {
                self.policies.remove(identity);
                self.corrupted.remove(identity);
            }
            Event::PolicyCorrupted { identity } => {
                self.corrupted.insert(identity.clone());
                // Damage no store transaction saw: a deferral, but nobody watched it yet.
                self.reopen.deferred(identity, DateTime::<Utc>::MIN_UTC, false);
            }
            Event::Created { id, identity, deduped } => {
                self.created.insert(id.clone(), identity.clone());
                self.reopen.created(id, identity, *deduped);
            }
            Event::Ended { id, how } => {
                self.holdings.remove(id);
                self.reopen.ended(id, how);
            }
            Event::Heartbeat { id, lease_expires_at } => {
                if let Some(holding) = self.holdings.get_mut(id) {
                    holding.lease_expires_at = *lease_expires_at;
                }
            }
            // A sweep returned every claim lapsed when it ran: those are no longer in flight.
            Event::Reaped { at, .. } => {
                let lapsed: Vec<String> = self
                    .holdings
                    .iter()
                    .filter(|(_, h)| h.lease_expires_at.is_some_and(|lease| lease < *at))
                    .map(|(id, _)| id.clone())
                    .collect();
                lapsed.iter().for_each(|id| {
                    self.holdings.remove(id);
                });
                self.reopen.reaped(&lapsed);
            }
            Event::Requeued { .. } => {}
            Event::Pushed { pass, rings, hook_calls, at } => self.pushed(pass, rings, *hook_calls, *at),
            Event::PresenceSet { endpoint_id, override_ } => self.push.presence_set(endpoint_id, *override_),
            Event::ShiftSet { endpoint_id, shift } => self.push.shift_set(endpoint_id, *shift),
            Event::Claimed { id, identity, holder, at, lease_expires_at, admission, .. } => {
                self.claimed(id, identity, holder, (*at, *lease_expires_at), admission.as_ref());
                self.reopen.claimed(id);
                // A claim that leaves no room records the watch (issue #28).
                if self.deferred_at(identity, *at) {
                    self.reopen.deferred(identity, *at, true);
                }
            }
            Event::SessionAttached { session_id, endpoint_id, replica, at } => {
                self.reopen.session_attached(session_id, endpoint_id, replica, *at)
            }
            Event::SessionDetached { session_id, replica } => self.reopen.session_detached(session_id, replica),
            Event::SessionClosed { session_id } => self.reopen.session_closed(session_id),
            Event::SessionsRefreshed { replica, alive, at } => self.reopen.sessions_refreshed(replica, alive, *at),
        }
    }

    /// A claim committed at `at` with this lease: judged against who held the todo, whose queue
    /// it is, and the policy in force (invariants 1 and 3 to 6).
    fn claimed(
        &mut self,
        id: &str,
        identity: &QueueIdentity,
        holder: &str,
        (at, lease_expires_at): (DateTime<Utc>, Option<DateTime<Utc>>),
        admission: Option<&Headroom>,
    ) {
        self.push.claimed(id);
        // A lapsed claim counts as in flight until the reaper returns it or a claim takes it
        // over, as in the engine.
        // 4. No todo claimed by two holders at once.
        if let Some(previous) = self.holdings.get(id)
            && previous.lease_expires_at.is_some_and(|lease| lease >= at)
        {
            self.violations.push(format!(
                "double claim: {id} claimed by {holder} at {at} while {} held it until {:?}",
                previous.holder, previous.lease_expires_at
            ));
        }
        self.holdings.remove(id);
        // 3. Fail closed.
        if self.corrupted.contains(identity) {
            self.violations.push(format!("fail-open: {id} claimed at {at} while {identity:?}'s policy was unreadable"));
        }
        // 6. Tenancy: team agents hold team todos, the other owner's agent only its own.
        if !self.tenancy.allows(holder, identity) {
            self.violations.push(format!("tenancy: {holder} got {id} of {identity:?}"));
        }
        match self.policies.get(identity).cloned() {
            None => {
                // 5. No policy, no change.
                if admission.is_some() {
                    self.violations.push(format!("no-policy queue {identity:?} answered headroom on {id}"));
                }
            }
            Some(policy) if !self.corrupted.contains(identity) => {
                self.admitted(id, identity, &policy, at, admission);
            }
            Some(_) => {}
        }
        let holding = Holding { identity: identity.clone(), holder: holder.to_string(), lease_expires_at };
        self.holdings.insert(id.to_string(), holding);
    }

    /// A claim admitted under a readable `policy`: within its in-flight cap (invariant 1) and its
    /// window budget, charged once (invariant 2), with the headroom the store answered.
    fn admitted(
        &mut self,
        id: &str,
        identity: &QueueIdentity,
        policy: &Policy,
        at: DateTime<Utc>,
        admission: Option<&Headroom>,
    ) {
        // 1. In flight never above the cap when a claim commits (this claim included).
        let in_flight = self.holdings.values().filter(|h| &h.identity == identity).count() as i64 + 1;
        if let Some(cap) = policy.max_in_flight
            && in_flight > cap
        {
            self.violations.push(format!(
                "over-admission: {id} made {in_flight} in flight on {} (cap {cap}) at {at}",
                identity.queue
            ));
        }
        if let Some(headroom) = admission
            && headroom.in_flight != in_flight
        {
            self.violations.push(format!(
                "in-flight miscount on {}: store said {}, ledger {in_flight} at {at}",
                identity.queue, headroom.in_flight
            ));
        }
        let (Some(limit), Some(window)) = (policy.max_claims_per_window, &policy.window) else {
            return;
        };
        // Issue #52: each additional window within its own limit, this claim included.
        for limit in &policy.additional_windows {
            let span = self.oracle.window(&limit.window, at);
            let used = self.charged_within(identity, span) + 1;
            if used > limit.max_claims {
                self.violations.push(format!(
                    "over-admission: {id} was claim {used} of {} window {} on {} (limit {})",
                    limit.window.period_name(),
                    span.0,
                    identity.queue,
                    limit.max_claims
                ));
            }
        }
        let (start, end) = self.oracle.window(window, at);
        let used = self.charged_within(identity, (start, end)) + 1;
        self.charges.entry(identity.clone()).or_default().push(at);
        *self.counters.entry((identity.clone(), start)).or_default() += 1;
        if used > limit {
            self.violations.push(format!(
                "over-admission: {id} was claim {used} of window {start} on {} (limit {limit})",
                identity.queue
            ));
        }
        let Some(headroom) = admission else { return };
        if headroom.used != Some(used) {
            self.violations.push(format!(
                "charging: store said used {:?} after {id}, ledger {used} in window {start} of {}",
                headroom.used, identity.queue
            ));
        }
        if headroom.window_resets_at != Some(end) {
            self.violations.push(format!(
                "window: {id} at {at} on {} resets at {:?}, the oracle says {end}",
                identity.queue, headroom.window_resets_at
            ));
        }
    }

    /// The end of a run: the rest of the ledger, the counters and the store's final state; every
    /// violation found, as a sentence naming the invariant (empty when all hold), and how many
    /// reopenings the derived judge required a ring for.
    pub fn finish<S: SimStore>(mut self, store: &Faulty<S>, identities: &[QueueIdentity]) -> (Vec<String>, u64) {
        let ledger = store.ledger();
        self.feed(&ledger);
        // 2. The claimed and charged counters (what /metrics shows) rise exactly as the claims that
        // committed and the units they charged.
        let counted = store.counters().snapshot();
        let claims = ledger.iter().filter(|e| matches!(e, Event::Claimed { .. })).count() as u64;
        let charged_claims = ledger
            .iter()
            .filter(|e| matches!(e, Event::Claimed { admission: Some(headroom), .. } if headroom.used.is_some()))
            .count() as u64;
        if counted.claimed.values().sum::<u64>() != claims || counted.charged.values().sum::<u64>() != charged_claims {
            self.violations.push(format!(
            "metrics: claimed counter {} and charged counter {} against {claims} claims committed, {charged_claims} charged",
            counted.claimed.values().sum::<u64>(),
            counted.charged.values().sum::<u64>()
        ));
        }
        final_state(store, identities, &self.created, &self.counters, &self.policies, &mut self.violations);
        let inner = store.inner();
        let journal = inner.push_journal();
        let push = std::mem::take(&mut self.push);
        self.violations.extend(push.finish(&inner.hook_outbox(), journal.as_ref(), &self.created, store.now()));
        self.violations.append(&mut self.reopen.violations);
        (self.violations, self.reopen.judged)
    }
}

fn final_state<S: SimStore>(
    store: &Faulty<S>,
    identities: &[QueueIdentity],
    created: &BTreeMap<String, QueueIdentity>,
    counters: &BTreeMap<(QueueIdentity, DateTime<Utc>), i64>,
    policies: &BTreeMap<QueueIdentity, Policy>,
    violations: &mut Vec<String>,
) {
    // 4. Nothing lost: every todo created is there, once, in one state.
    let query = TodoQuery { set: TodoSet::Queues(identities.to_vec()), state: None, limit: 100_000 };
    match futures::executor::block_on(store.list_todos(query)) {
        Ok(todos) => {
            let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
            for todo in &todos {
                *seen.entry(todo.id.as_str()).or_default() += 1;
                if todo.state == TodoState::Claimed && (todo.lease_expires_at.is_none() || todo.owner.is_none()) {
                    violations.push(format!("claimed todo {} has no lease or owner", todo.id));
                }
                if todo.state == TodoState::Pending && todo.lease_expires_at.is_some() {
                    violations.push(format!("pending todo {} still has a lease", todo.id));
                }
                if !created.contains_key(&todo.id) {
                    violations.push(format!("todo {} exists but was never created", todo.id));
                }
            }
            for id in created.keys() {
                match seen.get(id.as_str()) {
                    Some(1) => {}
                    Some(n) => violations.push(format!("todo {id} listed {n} times")),
                    None => violations.push(format!("lost: todo {id} was created and is gone")),
                }
            }
        }
        Err(error) => violations.push(format!("final listing failed: {error}")),
    }
    // 2. Charging equality, window by window, against the store's usage rows (kept by identity
    // through every policy change); 5. no admission rows without a policy.
    for identity in identities {
        let detail = futures::executor::block_on(store.policy_detail(identity));
        match (policies.get(identity), detail) {
            (None, Ok(_)) => violations.push(format!("{identity:?} has a policy nobody set")),
            (None, Err(_)) => {}
            (Some(_), Err(error)) => violations.push(format!("policy of {identity:?} unreadable at the end: {error}")),
            (Some(_), Ok(detail)) => {
                let stored: BTreeMap<DateTime<Utc>, i64> = detail.windows.iter().copied().collect();
                let oldest_listed = stored.keys().next().copied();
                for ((charged_identity, start), count) in counters.range((identity.clone(), DateTime::<Utc>::MIN_UTC)..)
                {
                    if charged_identity != identity {
                        break;
                    }
                    if oldest_listed.is_some_and(|oldest| *start < oldest)
                        && detail.windows.len() >= DETAIL_WINDOWS_LISTED
                    {
                        continue; // older than the detail's window list
                    }
                    let used = stored.get(start).copied().unwrap_or(0);
                    if used != *count {
                        violations.push(format!(
                            "charging: window {start} of {} charged {used}, claims committed {count}",
                            identity.queue
                        ));
                    }
                }
                for (start, used) in &stored {
                    if *used > 0 && !counters.contains_key(&(identity.clone(), *start)) {
                        violations.push(format!(
                            "charging: window {start} of {} charged {used} with no claim committed in it",
                            identity.queue
                        ));
                    }
                }
            }
        }
    }
}
