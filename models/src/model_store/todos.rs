//! Creating, listing and reading todos in memory (`engine/src/pg_store/todos.rs`).
//!
//! Creation dedups on the idempotency key among live todos of the same queue identity (not done,
//! not dead-lettered; discarded ones keep their slot), and with an intake capacity set refuses a
//! create that would exceed it (intake-capacity.md), a dedup hit being answered first.
//!
//! Governing: base-system §2 (create, dedup), intake-capacity.md (`queue_full`); SPEC-0030 REQ-6
//! (a deferred todo keeps its dedup slot).

use super::{ModelStore, State, database_error};
use crate::error::{Error, Result};
use crate::identity::QueueIdentity;
use crate::push::DueReason;
use crate::scope::Actor;
use crate::store::{TodoQuery, TodoSet, Todos};
use crate::todo::{Created, NewTodo, Todo, TodoState, payload_size_bytes, validate_batch};
use chrono::{DateTime, Utc};

impl ModelStore {
    /// Create (base-system §2; intake capacity): a new pending todo, or the live one holding the
    /// idempotency key (`deduped`), or `queue_full`. REQ-6: a deferred todo keeps its dedup slot;
    /// REQ-3: creating never charges.
    pub(super) fn create_todo_tx(&self, new: NewTodo) -> Result<Created> {
        new.validate()?;
        let mut state = self.lock();
        let capacity = state.capacity(self.intake_env).effective;
        let now = self.clock.now();
        let created = state.create_in(&new, now, capacity);
        drop(state);
        self.counters.create_answered(&new, &created);
        created
    }

    /// A batched create: every todo at one instant, in order, in one transaction (a copy of the
    /// state kept only if every todo was created or deduped), as PgStore's `create_todos`.
    pub(super) fn create_todos_tx(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        validate_batch(&todos)?;
        let mut state = self.lock();
        let capacity = state.capacity(self.intake_env).effective;
        let now = self.clock.now();
        let created = match state.create_all(&todos, now, capacity) {
            Ok(created) => created,
            Err((at, error)) => {
                drop(state);
                self.counters.create_answered(&todos[at], &Err(error.clone()));
                return Err(error);
            }
        };
        drop(state);
        for (new, made) in todos.iter().zip(&created) {
            self.counters.create_answered(new, &Ok(made.clone()));
        }
        Ok(created)
    }

    /// REQ-6 (`list_todos` shows every pending todo, deferred ones included): newest first
    /// (`ORDER BY created_at DESC, id DESC`), at most `limit` (1..=1000).
    pub(super) fn list_todos_tx(&self, query: TodoQuery) -> Vec<Todo> {
        let state = self.lock();
        let matches = |todo: &Todo| match &query.set {
            TodoSet::Queues(identities) => identities.contains(&todo.identity),
            TodoSet::Owners(reach) => reach.contains(&todo.identity),
        };
        let mut todos: Vec<&Todo> =
            state.todos.values().filter(|t| matches(t) && query.state.is_none_or(|s| t.state == s)).collect();
        todos.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        todos.into_iter().take(query.limit.clamp(1, 1000) as usize).map(|todo| todo.clone().listed()).collect()
    }

    /// Read one todo (REQ-6: a deferred todo is read unchanged): a foreign id, or an own todo
    /// outside the grant, is `not_found` (base-system §3).
    pub(super) fn get_todo_tx(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let state = self.lock();
        let todo = state.todos.get(id).ok_or_else(Error::not_found)?;
        actor.check_todo_access(&todo.identity).map_err(|_| Error::not_found())?;
        Ok(todo.clone())
    }
}

impl State {
    /// Creates `todos` in order at `now`, all or none: on the first refusal every change the
    /// earlier ones made is undone (a transaction's rollback) and the refused index is answered.
    /// Undone exactly: `create_in` changes nothing but the id and push counters, the todos and
    /// the push-due rows (a copy of the whole state per batch was the model's costliest step).
    pub(super) fn create_all(
        &mut self,
        todos: &[NewTodo],
        now: DateTime<Utc>,
        capacity: i64,
    ) -> std::result::Result<Vec<Created>, (usize, Error)> {
        let (sequences, due_rows) = (self.sequences.clone(), self.push_due_mark());
        let mut created: Vec<Created> = Vec::with_capacity(todos.len());
        for (at, new) in todos.iter().enumerate() {
            match self.create_in(new, now, capacity) {
                Ok(made) => created.push(made),
                Err(error) => {
                    for made in created.iter().filter(|c| !c.deduped) {
                        self.todos.remove(&made.todo.id);
                    }
                    self.roll_back_push_due(due_rows);
                    self.sequences = sequences;
                    return Err((at, error));
                }
            }
        }
        Ok(created)
    }

    /// Inserts a todo created at `now`, deduping on the idempotency key among live todos. With
    /// a `capacity` (> 0) a dedup hit is answered first and never capped, then the count decides.
    pub(super) fn create_in(&mut self, new: &NewTodo, now: DateTime<Utc>, capacity: i64) -> Result<Created> {
        if let Some(existing) =
            new.idempotency_key.as_deref().and_then(|key| self.live_holder(&new.identity, key)).cloned()
        {
            return Ok(Created { todo: existing, deduped: true });
        }
        if capacity > 0 {
            self.check_intake(&new.identity, capacity)?;
        }
        // The owner's foreign key.
        if !self.owner_exists(&new.identity) {
            return Err(database_error());
        }
        let id = self.next_id("td");
        let todo = Todo {
            id: id.clone(),
            identity: new.identity.clone(),
            title: new.title.clone(),
            payload: new.payload.clone(),
            idempotency_key: new.idempotency_key.clone(),
            state: TodoState::Pending,
            owner: None,
            claimed_by_endpoint_id: None,
            lease_expires_at: None,
            attempt: 0,
            max_attempts: new.max_attempts,
            result: None,
            created_at: now,
            updated_at: now,
            claimed_at: None,
            completed_at: None,
            next_retry_at: None,
            created_by_kind: new.created_by_kind,
            created_by_id: new.created_by_id.clone(),
            payload_size_bytes: payload_size_bytes(new.payload.as_ref()),
        };
        self.todos.insert(id.clone(), todo.clone());
        // REQ-8: its push is decided by the next pass, as `PgStore`'s `push` CTE records it.
        self.push_due(&id, DueReason::Created);
        Ok(Created { todo, deduped: false })
    }

    /// The live todo holding `key` in `identity` (the slot the partial unique index guards), if any.
    pub(super) fn live_holder(&self, identity: &QueueIdentity, key: &str) -> Option<&Todo> {
        self.todos
            .values()
            .find(|t| &t.identity == identity && t.idempotency_key.as_deref() == Some(key) && t.holds_dedup_slot())
    }

    /// `queue_full` when the identity already holds `max` pending todos.
    fn check_intake(&self, identity: &QueueIdentity, max: i64) -> Result<()> {
        let pending =
            self.todos.values().filter(|t| t.state == TodoState::Pending && &t.identity == identity).count() as i64;
        crate::capacity::check_room(identity, pending, max)
    }
}

/// The todos role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Todos for ModelStore {
    async fn create_todo(&self, todo: NewTodo) -> Result<Created> {
        self.create_todo_tx(todo)
    }

    async fn create_todos(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        self.create_todos_tx(todos)
    }

    async fn list_todos(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        Ok(self.list_todos_tx(query))
    }

    async fn get_todo(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.get_todo_tx(actor, id)
    }
}
