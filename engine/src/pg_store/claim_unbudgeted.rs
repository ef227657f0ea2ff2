//! `claim_next`'s one-statement path for queues without a policy (SPEC-0003 "Atomic Claim";
//! SPEC-0030 REQ-4 leaves an unbudgeted queue's claim untouched): steps 1 and 2 and the claim
//! itself in one autocommitted statement. A candidate whose queue turns out to have a policy is
//! left untouched, and the caller takes the transactional path of `claim.rs`.

use super::PgStore;
use super::db_error;
use super::rows::TodoRow;
use super::sql::{Binds, CLAIM_ORDER_ROWS, CLAIMABLE, TODO_COLUMNS, owner_groups, owner_groups_filter};
use models::error::Result;
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::todo::Todo;
use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row};

impl PgStore {
    /// Steps 1 and 2 (and the claim, when no policy applies) as one autocommitted statement:
    /// the oldest claimable todo is locked, its policy looked up by index, and it is claimed only
    /// if it has none. A budgeted candidate is left untouched for the transactional path.
    pub(super) async fn claim_next_unbudgeted(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<FastPath> {
        let mut binds = Binds::default();
        let now = binds.push(self.now_param());
        let owner = binds.push(actor.label());
        let claimant = binds.push(actor.endpoint_id());
        let lease = binds.push(lease_seconds as f64);
        let policy_lookup = binds.push(self.admission_lookup);
        let queues = owner_groups_filter(&mut binds, &owner_groups(queues));
        let query = sqlx::query_with(
            composed_sql!(
                "WITH clock AS (SELECT coalesce({now}::timestamptz, clock_timestamp()) AS now), \
                 cand AS ( \
                   SELECT t.id, t.endpoint_id, t.team_id, t.queue FROM todos t, clock \
                   WHERE {queues} AND {CLAIM_ORDER_ROWS} AND {CLAIMABLE} \
                   ORDER BY t.created_at, t.id FOR UPDATE OF t SKIP LOCKED LIMIT 1), \
                 pol AS ( \
                   SELECT p.id FROM admission_policies p, cand \
                   WHERE {policy_lookup} AND p.queue = cand.queue \
                     AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id)), \
                 claimed AS ( \
                   UPDATE todos t SET state = 'claimed', owner = {owner}, claimed_by_endpoint_id = {claimant}, \
                     lease_expires_at = clock.now + make_interval(secs => {lease}::double precision), \
                     attempt = t.attempt + 1, claimed_at = clock.now, next_retry_at = NULL, completed_at = NULL, \
                     updated_at = clock.now \
                   FROM cand, clock WHERE t.id = cand.id AND NOT EXISTS (SELECT 1 FROM pol) RETURNING t.*), \
                 closed AS ( \
                   UPDATE todo_attempts a SET ended_at = clock.now, outcome = 'lease_expired' FROM claimed, clock \
                   WHERE a.todo_id = claimed.id AND a.ended_at IS NULL), \
                 opened AS ( \
                   INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at) \
                   SELECT claimed.id, \
                     (SELECT coalesce(max(a.seq), 0) + 1 FROM todo_attempts a WHERE a.todo_id = claimed.id), \
                     {owner}, {claimant}, clock.now FROM claimed, clock) \
                 SELECT cand.id AS candidate_id, {TODO_COLUMNS} FROM cand LEFT JOIN claimed t ON t.id = cand.id"
            ),
            binds.into_arguments().map_err(db_error)?,
        );
        let row: Option<PgRow> = query.fetch_optional(&self.pool).await.map_err(db_error)?;
        let Some(row) = row else {
            return Ok(FastPath::Empty);
        };
        let claimed_id: Option<String> = row.try_get("id").map_err(db_error)?;
        if claimed_id.is_none() {
            return Ok(FastPath::Budgeted);
        }
        let todo = TodoRow::from_row(&row).map_err(db_error)?.into_todo()?;
        Ok(FastPath::Claimed(Box::new(todo)))
    }
}

pub(super) enum FastPath {
    Claimed(Box<Todo>),
    Empty,
    /// The oldest candidate's queue has a policy.
    Budgeted,
}
