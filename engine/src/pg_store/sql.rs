//! SQL text shared by several statements, and the placeholder numbering of composed statements.
//!
//! Owns the constant fragments (`TODO_COLUMNS`, `CLAIMABLE`, `CLAIM_ORDER_ROWS`) and the filters
//! whose length depends on the request (one clause per owner group, one array per owner kind).
//! A composed statement numbers its placeholders with [`Binds`], which hands out `$n` as each value
//! is bound, so no helper has to know how many values were bound before it. The composed text is
//! plain SQL with `$1`, `$2`, … and can be pasted into psql as it is.
//!
//! Must never put a value into the text: every value is a bind parameter (REQ-13), and every
//! fragment here is a constant or built from constants and placeholders. The one exception is a
//! [`RowLimit`], a number the server clamps itself, never text from a request.

use models::identity::{Owner, QueueIdentity};
use sqlx::Postgres;
use sqlx::error::BoxDynError;
use sqlx::postgres::PgArguments;

/// The todo columns every query returns, in `TodoRow` order. `t` is the todos alias.
pub(crate) const TODO_COLUMNS: &str = "t.id, t.endpoint_id, t.team_id, t.queue, t.title, t.payload, t.idempotency_key, \
     t.state, t.owner, t.claimed_by_endpoint_id, t.lease_expires_at, t.attempt, t.max_attempts, t.result, \
     t.created_at, t.updated_at, t.claimed_at, t.completed_at, t.next_retry_at, t.created_by_kind, t.created_by_id, \
     t.payload_bytes AS payload_size_bytes";

/// `TODO_COLUMNS` as a listing returns them: the payload and result stay in the table (only a
/// read of one todo carries them) and the stored `payload_bytes` stands in for the payload.
pub(crate) const LISTED_TODO_COLUMNS: &str = "t.id, t.endpoint_id, t.team_id, t.queue, t.title, \
     NULL::jsonb AS payload, t.idempotency_key, t.state, t.owner, t.claimed_by_endpoint_id, t.lease_expires_at, \
     t.attempt, t.max_attempts, NULL::jsonb AS result, t.created_at, t.updated_at, t.claimed_at, t.completed_at, \
     t.next_retry_at, t.created_by_kind, t.created_by_id, t.payload_bytes AS payload_size_bytes";

/// The claimable predicate of base-system §2 over alias `t` at instant `clock.now`.
pub(crate) const CLAIMABLE: &str = "(t.state = 'pending' \
     OR (t.state = 'claimed' AND t.lease_expires_at < clock.now AND t.attempt < t.max_attempts) \
     OR (t.state = 'failed' AND t.next_retry_at <= clock.now AND t.attempt < t.max_attempts))";

/// The claimable predicate restated in the claim-order indexes' own terms, so the planner can
/// match the index predicate (what `CLAIMABLE` implies, spelled the index's way).
pub(crate) const CLAIM_ORDER_ROWS: &str =
    "(t.state IN ('pending', 'claimed') OR (t.state = 'failed' AND t.next_retry_at IS NOT NULL))";

/// A claim's row limit, written into the statement as a number. PostgreSQL costs a generic
/// plan's `LIMIT $n` as a tenth of the rows, so the generic plan of the unbudgeted claim looked
/// dearer than its custom ones and the statement was planned anew at every run: bench-peer (a)
/// at half its speed (1 worker 535 jobs/s against 978, 16 workers 1,187 against 2,287;
/// `docs/benchmarks.md`; `tests/claim_plans.rs` pins the generic plan). Clamped to
/// 1..=`CLAIMS_PER_CALL_MAX`, so at most that many statement texts exist, and only digits reach
/// the text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowLimit(usize);

impl RowLimit {
    pub(crate) fn new(limit: usize) -> RowLimit {
        RowLimit(limit.clamp(1, models::limits::CLAIMS_PER_CALL_MAX))
    }
}

impl std::fmt::Display for RowLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The bind values of one composed statement, each numbered as it is pushed.
#[derive(Default)]
pub(crate) struct Binds {
    arguments: PgArguments,
    count: usize,
    /// The first value that failed to encode; the statement then fails when it runs, as a
    /// failed `bind` does.
    failed: Option<BoxDynError>,
}

impl Binds {
    /// Binds `value` and returns its placeholder (`$1` for the first value pushed, and so on).
    pub(crate) fn push<'q, T>(&mut self, value: T) -> String
    where
        T: sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
    {
        if let Err(error) = sqlx::Arguments::add(&mut self.arguments, value) {
            self.failed.get_or_insert(error);
        }
        self.count += 1;
        format!("${}", self.count)
    }

    /// The values, for `sqlx::query_with` and `sqlx::query_as_with`; a value that did not encode
    /// is the error a failed `bind` gives when its statement runs.
    pub(crate) fn into_arguments(self) -> Result<PgArguments, sqlx::Error> {
        match self.failed {
            Some(error) => Err(sqlx::Error::Encode(error)),
            None => Ok(self.arguments),
        }
    }
}

/// The queues of one owner among the identities a claimer drains.
pub(crate) struct OwnerGroup {
    pub(crate) owner: Owner,
    pub(crate) queues: Vec<String>,
}

/// Identities grouped by owner, in first-seen order, each queue once. Most callers drain one
/// endpoint's queues, which makes a single group.
pub(crate) fn owner_groups(identities: &[QueueIdentity]) -> Vec<OwnerGroup> {
    let mut groups: Vec<OwnerGroup> = Vec::new();
    for identity in identities {
        match groups.iter_mut().find(|group| group.owner == identity.owner) {
            Some(group) if group.queues.contains(&identity.queue) => {}
            Some(group) => group.queues.push(identity.queue.clone()),
            None => groups.push(OwnerGroup { owner: identity.owner.clone(), queues: vec![identity.queue.clone()] }),
        }
    }
    groups
}

/// `((t.endpoint_id = $k AND t.queue = ANY($k+1::text[])) OR …)`, binding each group's owner id
/// and queue names: the shape the claim-order indexes serve in `created_at` order. A group of one
/// queue names it by equality, `t.queue = $k+1`, which the per-queue claim-scan indexes serve in
/// order (a list of queues on their second column would need a sort). No group matches nothing.
pub(crate) fn owner_groups_filter(binds: &mut Binds, groups: &[OwnerGroup]) -> String {
    if groups.is_empty() {
        return "false".to_string();
    }
    let clauses: Vec<String> = groups
        .iter()
        .map(|group| {
            let (column, owner_id) = match &group.owner {
                Owner::Endpoint(id) => ("t.endpoint_id", id),
                Owner::Team(id) => ("t.team_id", id),
            };
            let owner_id = binds.push(owner_id.clone());
            if let [queue] = group.queues.as_slice() {
                let queue = binds.push(queue.clone());
                return format!("({column} = {owner_id} AND t.queue = {queue})");
            }
            let queues = binds.push(group.queues.clone());
            format!("({column} = {owner_id} AND t.queue = ANY({queues}::text[]))")
        })
        .collect();
    format!("({})", clauses.join(" OR "))
}

/// Splits identities into the parallel arrays SQL takes: endpoint (ids, queues), team (ids, queues).
fn identity_arrays(identities: &[QueueIdentity]) -> [Vec<String>; 4] {
    let mut arrays: [Vec<String>; 4] = Default::default();
    for identity in identities {
        let (offset, owner_id) = match &identity.owner {
            Owner::Endpoint(id) => (0, id),
            Owner::Team(id) => (2, id),
        };
        arrays[offset].push(owner_id.clone());
        arrays[offset + 1].push(identity.queue.clone());
    }
    arrays
}

/// Whether alias `alias`'s (endpoint_id | team_id, queue) is one of `identities`, binding them as
/// four arrays: endpoint ids, endpoint queues, team ids, team queues.
pub(crate) fn identity_filter(binds: &mut Binds, alias: &str, identities: &[QueueIdentity]) -> String {
    let [endpoint_ids, endpoint_queues, team_ids, team_queues] = identity_arrays(identities);
    let (a, b, c, d) =
        (binds.push(endpoint_ids), binds.push(endpoint_queues), binds.push(team_ids), binds.push(team_queues));
    format!(
        "(({alias}.endpoint_id, {alias}.queue) IN (SELECT * FROM unnest({a}::text[], {b}::text[])) \
          OR ({alias}.team_id, {alias}.queue) IN (SELECT * FROM unnest({c}::text[], {d}::text[])))"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_order_values_are_bound_in() {
        let mut binds = Binds::default();
        assert_eq!(binds.push(None::<i64>), "$1");
        let groups = owner_groups(&[
            QueueIdentity::endpoint("ep_1", "a"),
            QueueIdentity::team("tm_1", "b"),
            QueueIdentity::endpoint("ep_1", "c"),
            QueueIdentity::endpoint("ep_1", "a"),
        ]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].queues, ["a", "c"]);
        assert_eq!(
            owner_groups_filter(&mut binds, &groups),
            "((t.endpoint_id = $2 AND t.queue = ANY($3::text[])) OR (t.team_id = $4 AND t.queue = $5))"
        );
        assert!(identity_filter(&mut binds, "p", &[]).contains("unnest($6::text[], $7::text[])"));
        assert_eq!(binds.push(true), "$10");
        assert_eq!(owner_groups_filter(&mut binds, &[]), "false");
        let one_queue = owner_groups(&[QueueIdentity::team("tm_1", "b")]);
        assert_eq!(owner_groups_filter(&mut binds, &one_queue), "((t.team_id = $11 AND t.queue = $12))");
        assert!(binds.into_arguments().is_ok());
    }
}
