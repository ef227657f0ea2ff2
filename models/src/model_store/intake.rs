//! Intake capacity and owner cancellation in memory (`engine/src/pg_store/intake.rs`).
//!
//! Capacity is one install-wide value read at each intake (environment > persisted setting >
//! default). Cancellation turns pending todos `discarded` (terminal; they keep their dedup slot);
//! purge deletes a queue identity's todos and policy; deleting an endpoint cascades as the
//! foreign keys do.
//!
//! Governing: intake-capacity.md; SPEC-0030 REQ-6 (clearing removes deferred todos too, and
//! never charges or refunds), REQ-10 (a purged policy's audit stays).

use super::{Cancellation, ModelStore, State, database_error};
use crate::capacity::{self, Capacity, CapacityEnv};
use crate::error::{Code, Error, Result};
use crate::identity::{Owner, QueueIdentity, ScopeRef};
use crate::scope::HumanScope;
use crate::store::{Intake, PolicyActor};
use crate::todo::{CreatedByKind, Todo, TodoState, validate_title};
use chrono::{DateTime, Utc};
use serde_json::Value;

impl ModelStore {
    /// The effective capacity and its source; the persisted value shown even when locked
    /// (intake-capacity.md; no SPEC-0030 requirement: intake is not admission).
    pub(super) fn queue_capacity_tx(&self) -> Capacity {
        let state = self.lock();
        let mut capacity = state.capacity(self.intake_env);
        if capacity.locked {
            capacity.setting = capacity::parse_setting(state.settings.get(capacity::CAPACITY_SETTING_KEY));
        }
        capacity
    }

    /// Persists the setting (`conflict` while the environment locks it); never removes work
    /// (intake-capacity.md; no SPEC-0030 requirement).
    pub(super) fn set_queue_capacity_tx(&self, max_pending: i64, by_human_id: &str) -> Result<Capacity> {
        capacity::check_settable(self.intake_env, max_pending)?;
        {
            let mut state = self.lock();
            // `updated_by_human_id REFERENCES humans`.
            if !state.human_exists(by_human_id) {
                return Err(database_error());
            }
            state.settings.insert(capacity::CAPACITY_SETTING_KEY.to_string(), Value::from(max_pending));
        }
        Ok(self.queue_capacity_tx())
    }

    /// Removes one pending todo of `identity`, whatever created it (REQ-6: deferred included).
    pub(super) fn discard_todo_tx(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()> {
        let mut state = self.lock();
        let now = self.clock.now();
        let Some(todo) = state.todos.get_mut(id).filter(|t| &t.identity == identity) else {
            return Err(Error::not_found());
        };
        if todo.state != TodoState::Pending {
            return Err(
                Error::new(Code::NotPending, "only a pending todo can be removed").with("state", todo.state.as_str())
            );
        }
        todo.state = TodoState::Discarded;
        todo.updated_at = now;
        state.record_cancellation(identity, by, "remove", vec![id.to_string()], now);
        drop(state);
        self.counters.discarded(&identity.queue, "remove", 1);
        Ok(())
    }

    /// Removes every pending todo of `identity`, deferred ones included (REQ-6): the exact count.
    pub(super) fn clear_queue_tx(&self, identity: &QueueIdentity, by: &PolicyActor) -> u64 {
        let mut state = self.lock();
        let now = self.clock.now();
        let mut removed = Vec::new();
        for todo in state.todos.values_mut().filter(|t| &t.identity == identity && t.state == TodoState::Pending) {
            todo.state = TodoState::Discarded;
            todo.updated_at = now;
            removed.push(todo.id.clone());
        }
        let count = removed.len() as u64;
        state.record_cancellation(identity, by, "clear", removed, now);
        drop(state);
        self.counters.discarded(&identity.queue, "clear", count);
        count
    }

    /// Edits a pending todo's title/payload: only the human who created it (intake-capacity.md;
    /// REQ-6: the todo's admission fields are untouched). `PgStore` stamps
    /// `updated_at` with the database's own clock here; the model uses the injected one.
    pub(super) fn edit_todo_tx(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> Result<Todo> {
        if let Some(title) = &title {
            validate_title(title)?;
        }
        let mut state = self.lock();
        let todo = state.todos.get(id).ok_or_else(Error::not_found)?;
        if !human.reach.contains(&todo.identity) {
            return Err(Error::not_found());
        }
        if todo.state != TodoState::Pending {
            return Err(Error::conflict_state("only a pending todo can be edited", todo.state.as_str()));
        }
        if todo.created_by_kind != CreatedByKind::Human
            || todo.created_by_id.as_deref() != Some(human.human.id.as_str())
        {
            return Err(Error::conflict_state("only the human who created this todo may edit it", todo.state.as_str())
                .with("created_by_kind", todo.created_by_kind.as_str()));
        }
        let now = self.clock.now();
        let todo = state.todo_mut(id)?;
        if let Some(title) = title {
            todo.title = title;
        }
        if let Some(payload) = payload {
            todo.payload = Some(payload);
        }
        todo.updated_at = now;
        Ok(todo.clone())
    }

    /// Purge: every todo of `identity` (any state) and its policy go; the policy's audit and the
    /// identity's charges stay (issue #28: no policy change refunds). A stale claimant's later complete or fail finds nothing.
    pub(super) fn purge_queue_tx(&self, identity: &QueueIdentity, by: &PolicyActor) -> u64 {
        let mut state = self.lock();
        let now = self.clock.now();
        let purged = state.delete_todos(|t| &t.identity == identity);
        if let Some(before) = state.policy_of(identity).map(super::PolicyRow::raw_json) {
            state.append_audit(identity, by, "delete", Some(before), None, now);
        }
        state.delete_policies(|p| &p.identity == identity);
        let count = purged.len() as u64;
        state.record_cancellation(identity, by, "purge", purged, now);
        count
    }

    /// REQ-2, REQ-10: deletes an endpoint the human manages, cascading as the foreign keys do: its grants,
    /// todos, policies, charges (usage and ledger), webhook targets, sessions (and doorbells) and hooks (and calls).
    /// Anything else is `not_found`.
    pub(super) fn delete_endpoint_tx(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()> {
        let Owner::Endpoint(id) = self.resolve_scope_tx(&human.manages, endpoint)? else {
            return Err(Error::not_found());
        };
        let mut state = self.lock();
        let Some(index) = state.endpoints.iter().position(|e| e.id == id) else {
            return Err(Error::not_found());
        };
        state.endpoints.remove(index);
        let owned = |identity: &QueueIdentity| identity.endpoint_id() == Some(id.as_str());
        state.delete_todos(|t| owned(&t.identity));
        let now = self.clock.now();
        let by = PolicyActor { human_id: Some(human.human.id.clone()), endpoint_id: None };
        let mut removed: Vec<(QueueIdentity, Value)> =
            state.policies.iter().filter(|p| owned(&p.identity)).map(|p| (p.identity.clone(), p.raw_json())).collect();
        removed.sort_by(|a, b| a.0.queue.cmp(&b.0.queue));
        for (identity, before) in removed {
            state.append_audit(&identity, &by, "delete", Some(before), None, now);
        }
        state.delete_policies(|p| owned(&p.identity));
        state.forget_charges(|identity| owned(identity));
        for webhook in &mut state.webhooks {
            webhook.targets.retain(|target| !owned(target));
        }
        state.push.forget_endpoint(&id);
        state.budgets.forget_members(owned);
        Ok(())
    }
}

impl State {
    /// The effective capacity: the environment when it locks, else the persisted setting (a
    /// corrupt value counts as unset), else the default.
    pub(super) fn capacity(&self, env: CapacityEnv) -> Capacity {
        let stored = match env {
            CapacityEnv::Locked(_) => None,
            CapacityEnv::Unset => self.settings.get(capacity::CAPACITY_SETTING_KEY),
        };
        capacity::effective(env, capacity::parse_setting(stored))
    }

    fn record_cancellation(
        &mut self,
        identity: &QueueIdentity,
        by: &PolicyActor,
        action: &'static str,
        todo_ids: Vec<String>,
        at: DateTime<Utc>,
    ) {
        let removed = todo_ids.len() as u64;
        let mut sample = Vec::new();
        crate::limits::keep_audit_sample(&mut sample, todo_ids);
        self.cancellations.push(Cancellation {
            identity: identity.clone(),
            actor_human_id: by.human_id.clone(),
            actor_endpoint_id: by.endpoint_id.clone(),
            action,
            removed,
            truncated: (sample.len() as u64) < removed,
            todo_ids: sample,
            at,
        });
    }
}

/// The intake role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Intake for ModelStore {
    async fn queue_capacity(&self) -> Result<Capacity> {
        Ok(self.queue_capacity_tx())
    }

    async fn set_queue_capacity(&self, max_pending: i64, by_human_id: &str) -> Result<Capacity> {
        self.set_queue_capacity_tx(max_pending, by_human_id)
    }

    async fn discard_todo(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()> {
        self.discard_todo_tx(identity, id, by)
    }

    async fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        Ok(self.clear_queue_tx(identity, by))
    }

    async fn edit_todo(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> Result<Todo> {
        self.edit_todo_tx(human, id, title, payload)
    }

    async fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        Ok(self.purge_queue_tx(identity, by))
    }

    async fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()> {
        self.delete_endpoint_tx(human, endpoint)
    }
}
