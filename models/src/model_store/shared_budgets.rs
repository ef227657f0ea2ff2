//! Shared budgets in memory (issue #52): the rows of `shared_budgets`, their members and their
//! audit, as `migrations/0024_shared_budgets.sql` keeps them.

use super::{ModelStore, State, database_error, queue_name_ok};
use crate::error::{Error, Result};
use crate::identity::QueueIdentity;
use crate::shared_budget::{
    BudgetOwner, SHARED_BUDGETS_PER_QUEUE_MAX, SharedBudgetSpec, SharedBudgetView, too_many_budgets, validate_name,
};
use crate::store::{AuditRecord, PolicyActor, SharedBudgets};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// The shared budget tables.
#[derive(Debug, Clone, Default)]
pub(super) struct BudgetTables {
    /// By owner then name, as the store lists them.
    budgets: std::collections::BTreeMap<(BudgetOwner, String), SharedBudgetView>,
    /// Append-only: (owner id, name, record).
    audit: Vec<(String, String, AuditRecord)>,
}

impl BudgetTables {
    /// An endpoint or team is gone: its queues leave every budget (`ON DELETE CASCADE`).
    pub(super) fn forget_members(&mut self, gone: impl Fn(&QueueIdentity) -> bool) {
        for budget in self.budgets.values_mut() {
            budget.spec.members.retain(|member| !gone(member));
        }
    }

    fn audit(&mut self, owner: &BudgetOwner, name: &str, record: AuditRecord) {
        self.audit.push((owner.id().to_string(), name.to_string(), record));
    }
}

impl ModelStore {
    fn set_shared_budget_tx(
        &self,
        owner: &BudgetOwner,
        spec: &SharedBudgetSpec,
        actor: &PolicyActor,
    ) -> Result<SharedBudgetView> {
        let mut state = self.lock();
        let now = self.clock.now();
        validate_name(&spec.name)?;
        // The tables' CHECKs and foreign keys.
        let owner_exists = match owner {
            BudgetOwner::Human(id) => state.human_exists(id),
            BudgetOwner::Team(id) => state.teams.iter().any(|t| &t.id == id),
        };
        if !owner_exists
            || !(0..=crate::admission::MAX_CLAIMS_PER_WINDOW_LIMIT).contains(&spec.max_claims)
            || spec.members.iter().any(|m| !state.owner_exists(m) || !queue_name_ok(&m.queue))
        {
            return Err(database_error());
        }
        let key = (owner.clone(), spec.name.clone());
        check_memberships(&state, &key, spec)?;
        let before = state.budgets.budgets.get(&key).map(|b| b.spec.to_json());
        let created_at = state.budgets.budgets.get(&key).map_or(now, |b| b.created_at);
        let view = SharedBudgetView { owner: owner.clone(), spec: spec.clone(), created_at, updated_at: now };
        state.budgets.budgets.insert(key, view.clone());
        let action = if before.is_some() { "update" } else { "create" };
        state.budgets.audit(owner, &spec.name, record(actor, action, before, Some(spec.to_json()), now));
        Ok(view)
    }

    fn delete_shared_budget_tx(&self, owner: &BudgetOwner, name: &str, actor: &PolicyActor) -> Result<()> {
        let mut state = self.lock();
        let now = self.clock.now();
        let removed = state.budgets.budgets.remove(&(owner.clone(), name.to_string())).ok_or_else(Error::not_found)?;
        state.budgets.audit(owner, name, record(actor, "delete", Some(removed.spec.to_json()), None, now));
        Ok(())
    }
}

/// A queue may belong to at most `SHARED_BUDGETS_PER_QUEUE_MAX` budgets: counted over the
/// others, the budget being written aside.
fn check_memberships(state: &State, key: &(BudgetOwner, String), spec: &SharedBudgetSpec) -> Result<()> {
    for (i, member) in spec.members.iter().enumerate() {
        let others = state
            .budgets
            .budgets
            .iter()
            .filter(|(other, budget)| *other != key && budget.spec.members.contains(member))
            .count();
        if others >= SHARED_BUDGETS_PER_QUEUE_MAX {
            return Err(too_many_budgets(i));
        }
    }
    Ok(())
}

fn record(
    actor: &PolicyActor,
    action: &str,
    before: Option<Value>,
    after: Option<Value>,
    at: DateTime<Utc>,
) -> AuditRecord {
    AuditRecord {
        actor_human_id: actor.human_id.clone(),
        actor_endpoint_id: actor.endpoint_id.clone(),
        at,
        action: action.to_string(),
        before,
        after,
    }
}

impl SharedBudgets for ModelStore {
    async fn set_shared_budget(
        &self,
        owner: &BudgetOwner,
        spec: &SharedBudgetSpec,
        actor: &PolicyActor,
    ) -> Result<SharedBudgetView> {
        self.set_shared_budget_tx(owner, spec, actor)
    }

    async fn shared_budgets(&self, owners: &[BudgetOwner]) -> Result<Vec<SharedBudgetView>> {
        let state = self.lock();
        Ok(state.budgets.budgets.values().filter(|b| owners.contains(&b.owner)).cloned().collect())
    }

    async fn shared_budget(&self, owner: &BudgetOwner, name: &str) -> Result<SharedBudgetView> {
        let state = self.lock();
        state.budgets.budgets.get(&(owner.clone(), name.to_string())).cloned().ok_or_else(Error::not_found)
    }

    async fn delete_shared_budget(&self, owner: &BudgetOwner, name: &str, actor: &PolicyActor) -> Result<()> {
        self.delete_shared_budget_tx(owner, name, actor)
    }

    async fn shared_budget_audit(&self, owner: &BudgetOwner, name: &str, limit: i64) -> Result<Vec<AuditRecord>> {
        let state = self.lock();
        let records = state.budgets.audit.iter().rev().filter(|(id, n, _)| id == owner.id() && n == name);
        Ok(records.take(usize::try_from(limit).unwrap_or(0)).map(|(_, _, record)| record.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{World, run};
    use crate::error::Code;
    use crate::shared_budget::{BudgetOwner, SHARED_BUDGETS_PER_QUEUE_MAX, SharedBudgetSpec};
    use crate::store::{PolicyActor, SharedBudgets};
    use crate::window::WindowSpec;

    // Issue #52, the reference model as `engine/tests/shared_budgets.rs` proves PostgreSQL: a
    // budget saved, redefined and deleted with its audit kept; at most four budgets per queue,
    // a fifth refused naming the member and changing nothing.
    #[test]
    fn ext52_the_model_keeps_shared_budgets_as_postgresql_does() {
        let world = World::new(&["a", "shared"]);
        let (a, shared) = (world.queue("a"), world.queue("shared"));
        let me = BudgetOwner::Human(world.human_id.clone());
        let actor = PolicyActor { human_id: Some(world.human_id.clone()), endpoint_id: None };
        let window = WindowSpec::parse("day", "UTC", "00:00", None).expect("window");
        let spec = |name: &str, members: &[crate::identity::QueueIdentity]| SharedBudgetSpec {
            name: name.into(),
            max_claims: 10,
            window,
            members: members.to_vec(),
        };
        for n in 0..SHARED_BUDGETS_PER_QUEUE_MAX {
            run(world.store.set_shared_budget(&me, &spec(&format!("b{n}"), std::slice::from_ref(&shared)), &actor))
                .expect("save");
        }
        let refused = run(world.store.set_shared_budget(&me, &spec("b4", &[a.clone(), shared.clone()]), &actor))
            .expect_err("a fifth");
        assert_eq!(refused.extras.get("field").and_then(|f| f.as_str()), Some("queues[1]"));
        assert_eq!(run(world.store.shared_budget(&me, "b4")).expect_err("not saved").code, Code::NotFound);
        run(world.store.set_shared_budget(&me, &spec("b0", &[a, shared]), &actor)).expect("rewrite one of the four");
        run(world.store.delete_shared_budget(&me, "b0", &actor)).expect("delete");
        let audit = run(world.store.shared_budget_audit(&me, "b0", 10)).expect("audit");
        assert_eq!(audit.iter().map(|r| r.action.as_str()).collect::<Vec<_>>(), ["delete", "update", "create"]);
        let names: Vec<String> =
            run(world.store.shared_budgets(&[me])).expect("list").into_iter().map(|b| b.spec.name).collect();
        assert_eq!(names, ["b1", "b2", "b3"]);
    }
}
