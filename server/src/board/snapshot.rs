//! One read of what a viewer's board shows: the queue identities they reach, each with its
//! header, its pending, claimed and recently finished todos. Shared by the board page, the queue
//! page and the live stream, so a header reads the same wherever it is rendered.

use super::view::{HeaderView, Names, QueueRef, TodoView, header_fragment, header_view, todo_view};
use engine::PgStore;
use models::capacity::Capacity;
use models::error::Result;
use models::identity::QueueIdentity;
use models::scope::HumanScope;
use models::store::{QueueAdmission, Store, TodoQuery, TodoSet};
use models::todo::{Todo, TodoState};
use std::collections::BTreeSet;

/// Most todos one board read lists (newest first); counts past it come from the store's own
/// pending count where the queue has a policy.
pub const BOARD_TODOS_MAX: i64 = 500;
/// Finished todos a card shows.
const FINISHED_PER_CARD: usize = 5;

/// A queue's card: its header and its todos by lane.
pub struct Card {
    pub header: HeaderView,
    pub pending: Vec<TodoView>,
    pub claimed: Vec<TodoView>,
    pub finished: Vec<TodoView>,
}

/// Names of the endpoints and teams the viewer reaches.
pub async fn names(store: &PgStore, scope: &HumanScope) -> Result<Names> {
    let mut names = Names::default();
    for endpoint in store.list_endpoints(scope).await? {
        names.by_owner_id.insert(endpoint.id, endpoint.name);
    }
    for (team, _) in store.list_teams(scope).await? {
        names.by_owner_id.insert(team.id, team.name);
    }
    Ok(names)
}

/// The header of one identity. Pending is the store's count when the queue has a policy (what
/// the live stream also uses), else the count among the listed todos.
pub fn header_for(
    identity: &QueueIdentity,
    names: &Names,
    scope: &HumanScope,
    admission: Option<&QueueAdmission>,
    listed_pending: i64,
    capacity: &Capacity,
) -> HeaderView {
    let pending = admission.map_or(listed_pending, |a| a.pending);
    let fragment = header_fragment(admission, pending, capacity);
    header_view(QueueRef::new(identity, names), scope.manages.contains(identity), &fragment)
}

/// A card from an identity's todos (newest first).
pub fn card(
    identity: &QueueIdentity,
    names: &Names,
    scope: &HumanScope,
    admission: Option<&QueueAdmission>,
    todos: &[&Todo],
    capacity: &Capacity,
) -> Card {
    let lane = |states: &[TodoState]| -> Vec<TodoView> {
        todos.iter().filter(|t| states.contains(&t.state)).map(|t| todo_view(t, admission)).collect()
    };
    // Pending reads oldest first, the order work is claimed in.
    let mut pending = lane(&[TodoState::Pending]);
    pending.reverse();
    let mut finished = lane(&[TodoState::Done, TodoState::Failed, TodoState::Discarded]);
    finished.truncate(FINISHED_PER_CARD);
    Card {
        header: header_for(identity, names, scope, admission, pending.len() as i64, capacity),
        claimed: lane(&[TodoState::Claimed]),
        pending,
        finished,
    }
}

/// Every card of the viewer's board: queues granted to their endpoints, queues with a policy,
/// and queues with todos, in the viewer's reach only.
pub async fn cards(store: &PgStore, scope: &HumanScope) -> Result<Vec<Card>> {
    let names = names(store, scope).await?;
    let capacity = store.queue_capacity().await?;
    let admissions = store.reach_admissions(&scope.reach).await?;
    let todos = store
        .list_todos(TodoQuery { set: TodoSet::Owners(scope.reach.clone()), state: None, limit: BOARD_TODOS_MAX })
        .await?;
    let mut identities: BTreeSet<QueueIdentity> = BTreeSet::new();
    for endpoint in store.list_endpoints(scope).await? {
        identities.extend(endpoint.queues.into_iter().filter(|q| scope.reach.contains(q)));
    }
    identities.extend(admissions.iter().map(|a| a.identity.clone()));
    identities.extend(todos.iter().map(|t| t.identity.clone()));
    Ok(identities
        .iter()
        .filter(|identity| scope.reach.contains(identity))
        .map(|identity| {
            let admission = admissions.iter().find(|a| &a.identity == identity);
            let own: Vec<&Todo> = todos.iter().filter(|t| &t.identity == identity).collect();
            card(identity, &names, scope, admission, &own, &capacity)
        })
        .collect())
}

/// The live headers of the viewer's queues with a policy (what `/events` compares each tick).
pub async fn live_headers(store: &PgStore, scope: &HumanScope, names: &Names) -> Result<Vec<HeaderView>> {
    let capacity = store.queue_capacity().await?;
    let admissions = store.reach_admissions(&scope.reach).await?;
    Ok(admissions
        .iter()
        .filter(|a| scope.reach.contains(&a.identity))
        .map(|a| header_for(&a.identity, names, scope, Some(a), a.pending, &capacity))
        .collect())
}
