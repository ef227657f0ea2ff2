//! One read of what a viewer's board shows: the queue identities they reach, each with its
//! header (the queue page's header and the board table's row). Shared by the board page, the
//! queue page and the live stream, so a header reads the same wherever it is rendered.

use super::view::{HeaderView, Names, QueueRef, header_fragment, header_view};
use chrono_tz::Tz;
use engine::PgStore;
use models::capacity::Capacity;
use models::error::Result;
use models::identity::QueueIdentity;
use models::scope::HumanScope;
use models::store::QueueAdmission;
use models::store::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

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

/// The header of one identity. Pending (and, without a policy, claimed) are the store's counts.
pub fn header_for(
    identity: &QueueIdentity,
    names: &Names,
    scope: &HumanScope,
    admission: Option<&QueueAdmission>,
    counts: (i64, i64),
    capacity: &Capacity,
    viewer_zone: Tz,
) -> HeaderView {
    let (pending, claimed) = counts;
    let pending = admission.map_or(pending, |a| a.pending);
    let fragment = header_fragment(admission, pending, Some(claimed), capacity, viewer_zone);
    header_view(QueueRef::new(identity, names), scope.manages.contains(identity), &fragment)
}

/// Every queue of the viewer's board, as table rows sorted by title: queues granted to their
/// endpoints, queues with a policy, and queues with pending or claimed work, in their reach
/// only. One read of each kind, whatever the number of queues.
pub async fn rows(store: &PgStore, scope: &HumanScope, viewer_zone: Tz) -> Result<Vec<HeaderView>> {
    let names = names(store, scope).await?;
    let capacity = store.queue_capacity().await?;
    let admissions = store.reach_admissions(&scope.reach).await?;
    let counts = store.queue_counts(&scope.reach).await?;
    let admissions: BTreeMap<&QueueIdentity, &QueueAdmission> = admissions.iter().map(|a| (&a.identity, a)).collect();
    let counts: BTreeMap<&QueueIdentity, (i64, i64)> =
        counts.iter().map(|c| (&c.identity, (c.pending, c.claimed))).collect();
    let mut identities: BTreeSet<QueueIdentity> = BTreeSet::new();
    for endpoint in store.list_endpoints(scope).await? {
        identities.extend(endpoint.queues);
    }
    identities.extend(admissions.keys().map(|identity| (*identity).clone()));
    identities.extend(counts.keys().map(|identity| (*identity).clone()));
    let mut rows: Vec<HeaderView> = identities
        .iter()
        .filter(|identity| scope.reach.contains(identity))
        .map(|identity| {
            let count = counts.get(identity).copied().unwrap_or((0, 0));
            header_for(identity, &names, scope, admissions.get(identity).copied(), count, &capacity, viewer_zone)
        })
        .collect();
    rows.sort_by_cached_key(|row| (row.queue.title.to_lowercase(), row.queue.key.clone()));
    Ok(rows)
}

/// The live headers of the viewer's queues with a policy (what `/events` compares each tick).
pub async fn live_headers(
    store: &PgStore,
    scope: &HumanScope,
    names: &Names,
    viewer_zone: Tz,
) -> Result<Vec<HeaderView>> {
    let capacity = store.queue_capacity().await?;
    let admissions = store.reach_admissions(&scope.reach).await?;
    Ok(admissions
        .iter()
        .filter(|a| scope.reach.contains(&a.identity))
        .map(|a| header_for(&a.identity, names, scope, Some(a), (a.pending, 0), &capacity, viewer_zone))
        .collect())
}
