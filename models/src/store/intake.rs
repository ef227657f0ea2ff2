//! Intake capacity and owner cancellation (intake-capacity.md): how many pending todos the
//! install admits, and an owner taking work back out of a queue: discard one, clear a queue,
//! edit a pending todo, purge a queue identity or a whole endpoint.

use crate::error::Result;
use crate::identity::{QueueIdentity, ScopeRef};
use crate::scope::HumanScope;
use crate::store::PolicyActor;
use crate::todo::Todo;
use serde_json::Value;
use std::future::Future;

/// The intake role. Each method is one transaction; the caller has already checked that the
/// human manages what is named.
pub trait Intake: Send + Sync {
    /// The effective intake capacity and its source.
    fn queue_capacity(&self) -> impl Future<Output = Result<crate::capacity::Capacity>> + Send;
    /// Persists the install setting (`conflict` while the environment locks it).
    fn set_queue_capacity(
        &self,
        max_pending: i64,
        by_human_id: &str,
    ) -> impl Future<Output = Result<crate::capacity::Capacity>> + Send;
    /// Removes one pending todo of `identity` (any provenance): `not_found` if it is not a todo of
    /// that identity, `not_pending` with its state otherwise.
    fn discard_todo(
        &self,
        identity: &QueueIdentity,
        id: &str,
        by: &PolicyActor,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Removes every pending todo of `identity`, deferred ones included; the exact count.
    fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> impl Future<Output = Result<u64>> + Send;
    /// Edits a pending todo's title/payload: only the human who created it.
    fn edit_todo(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> impl Future<Output = Result<Todo>> + Send;
    /// Deletes a queue identity (purge): every todo of it, pending and claimed, and its policy
    /// (the audit stays). A stale claimant's later complete or fail finds nothing.
    fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> impl Future<Output = Result<u64>> + Send;
    /// Deletes an endpoint the human manages, with its todos, pending and claimed (purge).
    fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> impl Future<Output = Result<()>> + Send;
}
