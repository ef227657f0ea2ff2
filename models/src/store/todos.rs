//! Todos: creating them (one or a batch), listing them and reading one. The queue's rows as
//! producers and readers see them; claiming and finishing them are `claims` and `lifecycle`.

use crate::error::Result;
use crate::identity::QueueIdentity;
use crate::scope::Actor;
use crate::todo::{Created, NewTodo, Todo, TodoState};
use std::future::Future;

/// Which todos a listing covers. The caller's scope has already been applied.
#[derive(Debug, Clone, PartialEq)]
pub enum TodoSet {
    /// These queue identities only.
    Queues(Vec<QueueIdentity>),
    /// Every queue of these endpoints and teams.
    Owners(crate::scope::Reach),
}

/// A listing: newest first, at most `limit` rows.
#[derive(Debug, Clone, PartialEq)]
pub struct TodoQuery {
    pub set: TodoSet,
    pub state: Option<TodoState>,
    pub limit: i64,
}

/// The todos role: create, create in a batch, list and read. Each is one transaction.
pub trait Todos: Send + Sync {
    /// Creates one todo, or answers the existing one when its idempotency key was seen (deduped).
    fn create_todo(&self, todo: NewTodo) -> impl Future<Output = Result<Created>> + Send;
    /// Several todos in one transaction and at one instant, answered in order: each is created or
    /// deduped as `create_todo` would (a later copy of a key in the batch dedups onto the
    /// earlier). If any is refused (invalid, `queue_full`), none is created. Empty or longer than
    /// `TODOS_PER_BATCH_MAX` is `invalid_argument` (`todos`).
    fn create_todos(&self, todos: Vec<NewTodo>) -> impl Future<Output = Result<Vec<Created>>> + Send;
    /// A listing of the todos `query` covers, newest first.
    fn list_todos(&self, query: TodoQuery) -> impl Future<Output = Result<Vec<Todo>>> + Send;
    /// One todo the actor may see; anything else is `not_found`.
    fn get_todo(&self, actor: &Actor, id: &str) -> impl Future<Output = Result<Todo>> + Send;
}
