//! Shared budgets (issue #52 item 2): a window limit several queue identities of one owner draw
//! from, kept with its members and an audit that outlives it. The owner and every member are
//! already authorised by the caller (REQ-10's rule for policies: whoever may manage every member
//! queue). Claims are not charged to a budget yet (`docs/requirements.md`, "X-2").

use super::policies::{AuditRecord, PolicyActor};
use crate::error::Result;
use crate::shared_budget::{BudgetOwner, SharedBudgetSpec, SharedBudgetView};
use std::future::Future;

pub trait SharedBudgets: Send + Sync {
    /// Creates or fully replaces the owner's budget `spec.name` and its members, with an audit
    /// record, in one transaction. A member already in `SHARED_BUDGETS_PER_QUEUE_MAX` other
    /// budgets is refused, naming it (`queues[i]`), and nothing changes.
    fn set_shared_budget(
        &self,
        owner: &BudgetOwner,
        spec: &SharedBudgetSpec,
        actor: &PolicyActor,
    ) -> impl Future<Output = Result<SharedBudgetView>> + Send;
    /// The budgets of these owners, by owner then name.
    fn shared_budgets(&self, owners: &[BudgetOwner]) -> impl Future<Output = Result<Vec<SharedBudgetView>>> + Send;
    /// One budget; `not_found` when the owner has none of that name.
    fn shared_budget(&self, owner: &BudgetOwner, name: &str) -> impl Future<Output = Result<SharedBudgetView>> + Send;
    /// Deletes a budget (`not_found` if none), keeping its audit.
    fn delete_shared_budget(
        &self,
        owner: &BudgetOwner,
        name: &str,
        actor: &PolicyActor,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The newest `limit` audit records of the owner's budget of that name, kept after it is gone.
    fn shared_budget_audit(
        &self,
        owner: &BudgetOwner,
        name: &str,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<AuditRecord>>> + Send;
}
