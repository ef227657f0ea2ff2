//! The reference model: the queue and admission state machine written for a reader, the first
//! piece of the executable specification (issue 4, item 1).
//!
//! Governing: SPEC-0030 REQ-1 (zero pauses), REQ-3 (charging rule), REQ-4 (the decision on every
//! claim path, takeover not counting itself), REQ-5 (usage per window start), REQ-6 (deferred
//! work keeps attempt and retry), base-system §2 (the todo lifecycle).
//!
//! One endpoint's queues, one agent identity per claim, time moved explicitly. Each transition is
//! a short function; the decision (`admission::decide`), the windows (`WindowSpec`) and the
//! claimable predicate (`Todo::claimable_at`) are the same functions `PgStore` calls, so the
//! model and production cannot disagree about them. `check` asserts the invariants every test
//! layer checks (`docs/requirements.md`, "Simulation and SQL invariants") that a single-threaded
//! model can see. The full `Store` in memory, which the simulation runs on, is the separate
//! `model_store::ModelStore`; fault injection wraps it in the simulation (`sim/src/faults.rs`).

use crate::admission::{self, Decision, Policy, Reason};
use crate::identity::QueueIdentity;
use crate::todo::{CreatedByKind, Todo, TodoState, retry_backoff};
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;

/// The endpoint every queue of the model belongs to.
pub const ENDPOINT: &str = "ep_model";

/// What an admitted candidate is charged under: its policy and the window start to charge
/// (None when the queue has no policy; an inner None when it has no window limit).
type Admitted = Option<(Policy, Option<DateTime<Utc>>)>;

/// One committed claim, as the invariants need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRecord {
    pub queue: String,
    pub todo: usize,
    /// The window the claim was charged to (None: the queue had no window limit).
    pub window_start: Option<DateTime<Utc>>,
    /// The limits and the counts right after this claim committed.
    pub max_claims_per_window: Option<i64>,
    pub used_after: i64,
    pub max_in_flight: Option<i64>,
    pub in_flight_after: i64,
}

/// The whole state.
#[derive(Debug, Clone)]
pub struct Model {
    pub now: DateTime<Utc>,
    pub todos: Vec<Todo>,
    pub policies: BTreeMap<String, Policy>,
    /// Units charged per (queue, window start) (REQ-5).
    pub usage: BTreeMap<(String, DateTime<Utc>), i64>,
    pub claims: Vec<ClaimRecord>,
    pub refusals: Vec<(String, Reason)>,
}

impl Model {
    pub fn new(now: DateTime<Utc>) -> Model {
        Model {
            now,
            todos: vec![],
            policies: BTreeMap::new(),
            usage: BTreeMap::new(),
            claims: vec![],
            refusals: vec![],
        }
    }

    /// Time passes; nothing else happens (REQ-5: a window ends without writing to any todo).
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    /// A new pending todo (base-system §2 "create").
    pub fn create(&mut self, queue: &str, max_attempts: i32) -> usize {
        let index = self.todos.len();
        self.todos.push(Todo {
            id: format!("td_{index}"),
            identity: QueueIdentity::endpoint(ENDPOINT, queue),
            title: format!("todo {index}"),
            payload: None,
            idempotency_key: None,
            state: TodoState::Pending,
            owner: None,
            claimed_by_endpoint_id: None,
            lease_expires_at: None,
            attempt: 0,
            max_attempts,
            result: None,
            created_at: self.now,
            updated_at: self.now,
            claimed_at: None,
            completed_at: None,
            next_retry_at: None,
            created_by_kind: CreatedByKind::System,
            created_by_id: None,
            payload_size_bytes: 0,
        });
        index
    }

    /// REQ-10: a policy takes effect on the next claim; usage already counted stands.
    pub fn set_policy(&mut self, queue: &str, policy: Option<Policy>) {
        match policy {
            Some(policy) => self.policies.insert(queue.to_string(), policy),
            None => self.policies.remove(queue),
        };
    }

    fn in_flight(&self, queue: &str, except: usize) -> i64 {
        self.todos
            .iter()
            .enumerate()
            .filter(|(i, t)| *i != except && t.identity.queue == queue && t.state == TodoState::Claimed)
            .count() as i64
    }

    fn used(&self, queue: &str, window_start: Option<DateTime<Utc>>) -> i64 {
        window_start.and_then(|start| self.usage.get(&(queue.to_string(), start)).copied()).unwrap_or(0)
    }

    /// REQ-4: the decision for one candidate. In flight does not count the candidate itself (a
    /// takeover replaces its lapsed claim); usage is the window containing now.
    fn admit(&self, index: usize) -> std::result::Result<Admitted, Reason> {
        let queue = &self.todos[index].identity.queue;
        let Some(policy) = self.policies.get(queue) else {
            return Ok(None);
        };
        let window_start = policy.window.as_ref().filter(|_| policy.charges()).map(|w| w.window_start(self.now));
        match admission::decide(policy, self.in_flight(queue, index), self.used(queue, window_start)) {
            Decision::Admit => Ok(Some((policy.clone(), window_start))),
            Decision::Refuse(reason) => Err(reason),
        }
    }

    /// REQ-3, REQ-4: a committed claim — state, lease, attempt + 1, and one unit charged to the
    /// window containing now when the queue has a window limit.
    fn commit_claim(
        &mut self,
        index: usize,
        holder: &str,
        lease: Duration,
        admitted: Option<(Policy, Option<DateTime<Utc>>)>,
    ) {
        let now = self.now;
        let todo = &mut self.todos[index];
        todo.state = TodoState::Claimed;
        todo.owner = Some(holder.to_string());
        todo.lease_expires_at = Some(now + lease);
        todo.attempt += 1;
        todo.claimed_at = Some(now);
        todo.next_retry_at = None;
        let queue = todo.identity.queue.clone();
        if let Some((policy, window_start)) = admitted {
            if let Some(start) = window_start {
                *self.usage.entry((queue.clone(), start)).or_default() += 1;
            }
            let record = ClaimRecord {
                queue: queue.clone(),
                todo: index,
                window_start,
                max_claims_per_window: policy.max_claims_per_window,
                used_after: self.used(&queue, window_start),
                max_in_flight: policy.max_in_flight,
                in_flight_after: self.in_flight(&queue, usize::MAX),
            };
            self.claims.push(record);
        } else {
            let record = ClaimRecord {
                in_flight_after: self.in_flight(&queue, usize::MAX),
                queue,
                todo: index,
                window_start: None,
                max_claims_per_window: None,
                used_after: 0,
                max_in_flight: None,
            };
            self.claims.push(record);
        }
    }

    /// `claim_next` (REQ-4, REQ-7): the oldest claimable todo of a queue that admits it; a
    /// refused queue is skipped and the next one tried. None when nothing is claimable.
    pub fn claim_next(&mut self, holder: &str, lease: Duration) -> Option<usize> {
        let mut refused: Vec<String> = Vec::new();
        let mut candidates: Vec<usize> =
            (0..self.todos.len()).filter(|&i| self.todos[i].claimable_at(self.now)).collect();
        candidates.sort_by_key(|&i| (self.todos[i].created_at, i));
        for index in candidates {
            let queue = self.todos[index].identity.queue.clone();
            if refused.contains(&queue) {
                continue;
            }
            match self.admit(index) {
                Ok(admitted) => {
                    self.commit_claim(index, holder, lease, admitted);
                    return Some(index);
                }
                Err(reason) => {
                    self.refusals.push((queue.clone(), reason));
                    refused.push(queue);
                }
            }
        }
        None
    }

    /// `claim` of a named todo: `Err(None)` when not claimable, `Err(Some(reason))` when its
    /// queue defers it (REQ-7: nothing changes).
    pub fn claim(&mut self, index: usize, holder: &str, lease: Duration) -> std::result::Result<(), Option<Reason>> {
        if !self.todos.get(index).is_some_and(|t| t.claimable_at(self.now)) {
            return Err(None);
        }
        match self.admit(index) {
            Ok(admitted) => {
                self.commit_claim(index, holder, lease, admitted);
                Ok(())
            }
            Err(reason) => {
                self.refusals.push((self.todos[index].identity.queue.clone(), reason));
                Err(Some(reason))
            }
        }
    }

    fn held_by(&self, index: usize, holder: &str) -> bool {
        self.todos.get(index).is_some_and(|t| t.state == TodoState::Claimed && t.owner.as_deref() == Some(holder))
    }

    /// Only the lease holder completes (base-system §2); no refund (REQ-3).
    pub fn complete(&mut self, index: usize, holder: &str) -> bool {
        if !self.held_by(index, holder) {
            return false;
        }
        let todo = &mut self.todos[index];
        todo.state = TodoState::Done;
        todo.lease_expires_at = None;
        todo.completed_at = Some(self.now);
        true
    }

    /// Fail: parked with backoff below max_attempts, else dead-lettered (base-system §2).
    pub fn fail(&mut self, index: usize, holder: &str) -> bool {
        if !self.held_by(index, holder) {
            return false;
        }
        let now = self.now;
        let todo = &mut self.todos[index];
        todo.state = TodoState::Failed;
        todo.lease_expires_at = None;
        todo.next_retry_at = (todo.attempt < todo.max_attempts).then(|| now + retry_backoff(todo.attempt));
        true
    }

    /// Release: pending again, attempt unchanged, nothing refunded (REQ-3).
    pub fn release(&mut self, index: usize, holder: &str) -> bool {
        if !self.held_by(index, holder) {
            return false;
        }
        let todo = &mut self.todos[index];
        todo.state = TodoState::Pending;
        todo.owner = None;
        todo.lease_expires_at = None;
        true
    }

    /// The lease reaper: lapsed claims back to pending, or dead-lettered at max_attempts.
    pub fn reap(&mut self) {
        let now = self.now;
        for todo in self
            .todos
            .iter_mut()
            .filter(|t| t.state == TodoState::Claimed && t.lease_expires_at.is_some_and(|l| l < now))
        {
            todo.state = if todo.attempt >= todo.max_attempts { TodoState::Failed } else { TodoState::Pending };
            todo.owner = None;
            todo.lease_expires_at = None;
            todo.next_retry_at = None;
        }
    }

    /// The retry scheduler: due retries back to pending, attempt kept (REQ-6).
    pub fn requeue_due_retries(&mut self) {
        let now = self.now;
        for todo in self.todos.iter_mut().filter(|t| {
            t.state == TodoState::Failed && t.next_retry_at.is_some_and(|due| due <= now) && t.attempt < t.max_attempts
        }) {
            todo.state = TodoState::Pending;
            todo.owner = None;
            todo.next_retry_at = None;
        }
    }

    /// Retry now: a failed todo back to pending with a fresh attempt budget.
    pub fn retry_now(&mut self, index: usize) -> bool {
        let Some(todo) = self.todos.get_mut(index).filter(|t| t.state == TodoState::Failed) else {
            return false;
        };
        todo.state = TodoState::Pending;
        todo.attempt = 0;
        todo.owner = None;
        todo.next_retry_at = None;
        true
    }

    /// The invariants (design.md): no over-admission at any commit, charged == committed per
    /// window, every todo in one consistent state.
    pub fn check(&self) {
        for claim in &self.claims {
            if let Some(max) = claim.max_claims_per_window {
                assert!(claim.used_after <= max, "over-admission: {claim:?}");
            }
            if let Some(max) = claim.max_in_flight {
                assert!(claim.in_flight_after <= max, "in flight above the cap: {claim:?}");
            }
        }
        let mut committed: BTreeMap<(String, DateTime<Utc>), i64> = BTreeMap::new();
        for claim in &self.claims {
            if let Some(start) = claim.window_start {
                *committed.entry((claim.queue.clone(), start)).or_default() += 1;
            }
        }
        assert_eq!(committed, self.usage, "charged units must equal committed claims per window");
        for todo in &self.todos {
            assert_eq!(
                todo.state == TodoState::Claimed,
                todo.lease_expires_at.is_some(),
                "a lease exists exactly while claimed: {todo:?}"
            );
            assert!(todo.attempt >= 0);
        }
    }
}
