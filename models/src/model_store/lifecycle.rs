//! Everything after a claim, in memory (`engine/src/pg_store/lifecycle.rs`): heartbeat,
//! complete, fail, release, Retry now, and the two sweeps that return work to the queue.
//!
//! Only the lease holder may heartbeat, complete, fail or release (base-system §2); anyone else
//! in scope gets `conflict` with the todo's state. None of these refunds a charge (SPEC-0030
//! REQ-3), and none changes a deferred todo's attempt because of admission (REQ-6).

use super::{ModelStore, State};
use crate::error::{Error, Result};
use crate::push::DueReason;
use crate::scope::Actor;
use crate::store::{Lifecycle, SweepReport};
use crate::todo::{Todo, TodoState, retry_backoff};
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

impl ModelStore {
    /// The todo the actor holds the lease on, and the clock read after the lock.
    fn held(&self, state: &State, actor: &Actor, id: &str) -> Result<(Todo, DateTime<Utc>)> {
        let todo = state.todos.get(id).ok_or_else(Error::not_found)?;
        actor.check_todo_access(&todo.identity)?;
        if todo.state != TodoState::Claimed || todo.owner.as_deref() != Some(actor.label().as_str()) {
            return Err(Error::conflict_state("the caller does not hold this todo's lease", todo.state.as_str()));
        }
        Ok((todo.clone(), self.clock.now()))
    }

    /// Heartbeat: the lease runs `lease_seconds` from now (a lapsed but unreaped lease too);
    /// REQ-6: it moves the in-flight hint, which is why that hint is inexact.
    pub(super) fn heartbeat_tx(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        let mut state = self.lock();
        let (_, now) = self.held(&state, actor, id)?;
        let todo = state.todo_mut(id)?;
        todo.lease_expires_at = Some(now + Duration::seconds(lease_seconds));
        todo.updated_at = now;
        Ok(todo.clone())
    }

    /// Complete (REQ-3: no refund; REQ-8: frees an in-flight slot).
    pub(super) fn complete_tx(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        let mut state = self.lock();
        let (_, now) = self.held(&state, actor, id)?;
        let todo = complete_held(&mut state, id, result, now)?;
        drop(state);
        self.counters.completed(&todo.identity.queue, "complete");
        Ok(todo)
    }

    /// Complete of several held todos (issue #31 item 2): every id is checked as `complete`
    /// checks it before any is completed, so one refusal (naming its `id`) completes none.
    pub(super) fn complete_many_tx(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>> {
        crate::todo::validate_ids(ids)?;
        let mut state = self.lock();
        let now = self.clock.now();
        for id in ids {
            self.held(&state, actor, id).map_err(|error| error.with("id", id.as_str()))?;
        }
        let todos =
            ids.iter().map(|id| complete_held(&mut state, id, result.clone(), now)).collect::<Result<Vec<Todo>>>()?;
        drop(state);
        for todo in &todos {
            self.counters.completed(&todo.identity.queue, "complete");
        }
        Ok(todos)
    }

    /// Fail: parked with a backoff below `max_attempts`, dead-lettered at it (REQ-3: no refund).
    pub(super) fn fail_tx(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        let mut state = self.lock();
        let (held, now) = self.held(&state, actor, id)?;
        let todo = state.todo_mut(id)?;
        todo.state = TodoState::Failed;
        todo.result = result;
        todo.next_retry_at = (held.attempt < held.max_attempts).then(|| now + retry_backoff(held.attempt));
        todo.lease_expires_at = None;
        todo.updated_at = now;
        let todo = todo.clone();
        state.close_attempt(id, now, "failed");
        drop(state);
        self.counters.completed(&todo.identity.queue, "fail");
        Ok(todo)
    }

    /// Release: back to pending with the attempt unchanged (REQ-3: the charge stands).
    pub(super) fn release_tx(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let mut state = self.lock();
        let (_, now) = self.held(&state, actor, id)?;
        let todo = state.todo_mut(id)?;
        todo.state = TodoState::Pending;
        todo.owner = None;
        todo.claimed_by_endpoint_id = None;
        todo.lease_expires_at = None;
        todo.updated_at = now;
        let todo = todo.clone();
        state.close_attempt(id, now, "released");
        Ok(todo)
    }

    /// Retry now: a failed todo back to pending with a fresh attempt budget (REQ-3: a later claim
    /// is charged again). A dead letter whose idempotency key another live todo holds cannot come
    /// back under that key: `conflict`, as `PgStore` maps the dedup index's violation.
    pub(super) fn retry_now_tx(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let mut state = self.lock();
        let todo = state.todos.get(id).ok_or_else(Error::not_found)?;
        actor.check_todo_access(&todo.identity)?;
        if todo.state != TodoState::Failed {
            return Err(Error::conflict_state("only a failed todo can be retried", todo.state.as_str()));
        }
        let now = self.clock.now();
        let slot_taken = todo.dead_letter()
            && todo.idempotency_key.as_deref().is_some_and(|key| state.live_holder(&todo.identity, key).is_some());
        if slot_taken {
            return Err(crate::todo::retry_slot_taken());
        }
        let todo = state.todo_mut(id)?;
        todo.state = TodoState::Pending;
        todo.attempt = 0;
        todo.result = None;
        todo.claimed_at = None;
        todo.completed_at = None;
        todo.next_retry_at = None;
        todo.owner = None;
        todo.claimed_by_endpoint_id = None;
        todo.updated_at = now;
        Ok(todo.clone())
    }

    /// The lease reaper (REQ-8: frees in-flight slots): lapsed claims back to pending, or
    /// dead-lettered at `max_attempts`.
    pub(super) fn reap_tx(&self) -> SweepReport {
        let mut state = self.lock();
        let now = self.clock.now();
        let lapsed: Vec<String> =
            state.todos.values().filter(|t| t.is_takeover_at(now)).map(|t| t.id.clone()).collect();
        let mut report = SweepReport::default();
        for id in lapsed {
            let mut requeued = false;
            if let Some(todo) = state.todos.get_mut(&id) {
                let dead = todo.attempt >= todo.max_attempts;
                requeued = !dead;
                todo.state = if dead { TodoState::Failed } else { TodoState::Pending };
                todo.owner = None;
                todo.claimed_by_endpoint_id = None;
                todo.lease_expires_at = None;
                todo.next_retry_at = None;
                todo.updated_at = now;
                if dead {
                    report.dead_lettered += 1;
                } else {
                    report.returned_to_pending += 1;
                }
            }
            state.close_attempt(&id, now, "reaped");
            if requeued {
                // REQ-8: back in pending, its push is decided by the next pass.
                state.push_due(&id, DueReason::Requeued);
            }
        }
        report
    }

    /// The retry scheduler (REQ-6: a due retry returns to pending even while deferred).
    pub(super) fn requeue_due_retries_tx(&self) -> u64 {
        let mut state = self.lock();
        let now = self.clock.now();
        let mut requeued = Vec::new();
        for todo in state.todos.values_mut().filter(|t| {
            t.state == TodoState::Failed && t.next_retry_at.is_some_and(|due| due <= now) && t.attempt < t.max_attempts
        }) {
            todo.state = TodoState::Pending;
            todo.owner = None;
            todo.claimed_by_endpoint_id = None;
            todo.next_retry_at = None;
            todo.updated_at = now;
            requeued.push(todo.id.clone());
        }
        // REQ-8: back in pending, each one's push is decided by the next pass.
        for id in &requeued {
            state.push_due(id, DueReason::Requeued);
        }
        requeued.len() as u64
    }
}

/// Completes a todo `held` found the caller holding, closing its attempt at `now`.
fn complete_held(state: &mut State, id: &str, result: Option<Value>, now: DateTime<Utc>) -> Result<Todo> {
    let todo = state.todo_mut(id)?;
    todo.state = TodoState::Done;
    todo.result = result;
    todo.completed_at = Some(now);
    todo.lease_expires_at = None;
    todo.updated_at = now;
    let todo = todo.clone();
    state.close_attempt(id, now, "completed");
    Ok(todo)
}

/// The lifecycle role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Lifecycle for ModelStore {
    async fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        self.heartbeat_tx(actor, id, lease_seconds)
    }

    async fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.complete_tx(actor, id, result)
    }

    async fn complete_many(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>> {
        self.complete_many_tx(actor, ids, result)
    }

    async fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.fail_tx(actor, id, result)
    }

    async fn release(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.release_tx(actor, id)
    }

    async fn retry_now(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.retry_now_tx(actor, id)
    }

    async fn reap_lapsed_leases(&self) -> Result<SweepReport> {
        Ok(self.reap_tx())
    }

    async fn requeue_due_retries(&self) -> Result<u64> {
        Ok(self.requeue_due_retries_tx())
    }
}
