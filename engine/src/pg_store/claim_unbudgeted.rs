//! `claim_next`'s one-statement path for queues without a policy (SPEC-0003 "Atomic Claim";
//! SPEC-0030 REQ-4 leaves an unbudgeted queue's claim untouched): steps 1 and 2 and the claim
//! itself in one autocommitted statement, for one claim or the first several of a `claim_next
//! {max}`. A candidate whose queue turns out to have a policy is left untouched, and the caller
//! takes the transactional path of `claim.rs`.

use super::PgStore;
use super::db_error;
use super::rows::TodoRow;
use super::sql::{Binds, CLAIM_ORDER_ROWS, CLAIMABLE, RowLimit, TODO_COLUMNS, owner_groups, owner_groups_filter};
use models::error::Result;
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::todo::Todo;
use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row};

impl PgStore {
    /// Steps 1 and 2 (and the claim, when no policy applies) as one autocommitted statement:
    /// the `limit` oldest claimable todos are locked and their policies looked up by index, and
    /// those before the first budgeted one are claimed, in claim order: what `limit` lone
    /// `claim_next` calls would take by this path one after the other (`claim_next {max}`,
    /// issue #31 item 2). A budgeted candidate and those after it are left unclaimed for the
    /// transactional path of `claim.rs`, but they were locked for the statement's few
    /// milliseconds: a concurrent pick skips them meanwhile, as it skips any row another claimer
    /// holds, and may answer empty for that instant (a batch can hide up to `limit` rows so, a
    /// single claim one). Nothing is claimed or charged by it; the next poll sees them.
    pub(super) async fn claim_next_unbudgeted(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        limit: usize,
    ) -> Result<FastPath> {
        let mut binds = Binds::default();
        let now = binds.push(self.now_param());
        let owner = binds.push(actor.label());
        let claimant = binds.push(actor.endpoint_id());
        let lease = binds.push(lease_seconds as f64);
        let policy_lookup = binds.push(self.tuning.admission_lookup);
        let limit = RowLimit::new(limit);
        let queues = owner_groups_filter(&mut binds, &owner_groups(queues));
        let query = sqlx::query_with(
            composed_sql!(
                "WITH clock AS (SELECT coalesce({now}::timestamptz, clock_timestamp()) AS now), \
                 cand AS ( \
                   SELECT t.id, t.endpoint_id, t.team_id, t.queue, t.created_at FROM todos t, clock \
                   WHERE {queues} AND {CLAIM_ORDER_ROWS} AND {CLAIMABLE} \
                   ORDER BY t.created_at, t.id FOR UPDATE OF t SKIP LOCKED LIMIT {limit}), \
                 ranked AS ( \
                   SELECT cand.id, row_number() OVER (ORDER BY cand.created_at, cand.id) AS turn, \
                     EXISTS (SELECT 1 FROM admission_policies p \
                             WHERE {policy_lookup} AND p.queue = cand.queue \
                               AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id)) AS budgeted \
                   FROM cand), \
                 first_budgeted AS (SELECT min(turn) AS turn FROM ranked WHERE budgeted), \
                 taken AS ( \
                   SELECT ranked.id FROM ranked, first_budgeted \
                   WHERE first_budgeted.turn IS NULL OR ranked.turn < first_budgeted.turn), \
                 claimed AS ( \
                   UPDATE todos t SET state = 'claimed', owner = {owner}, claimed_by_endpoint_id = {claimant}, \
                     lease_expires_at = clock.now + make_interval(secs => {lease}::double precision), \
                     attempt = t.attempt + 1, claimed_at = clock.now, next_retry_at = NULL, completed_at = NULL, \
                     updated_at = clock.now \
                   FROM taken, clock WHERE t.id = taken.id RETURNING t.*), \
                 closed AS ( \
                   UPDATE todo_attempts a SET ended_at = clock.now, outcome = 'lease_expired' FROM claimed, clock \
                   WHERE a.todo_id = claimed.id AND a.ended_at IS NULL), \
                 opened AS ( \
                   INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at) \
                   SELECT claimed.id, \
                     (SELECT coalesce(max(a.seq), 0) + 1 FROM todo_attempts a WHERE a.todo_id = claimed.id), \
                     {owner}, {claimant}, clock.now FROM claimed, clock) \
                 SELECT ranked.id AS candidate_id, {TODO_COLUMNS} \
                 FROM ranked LEFT JOIN claimed t ON t.id = ranked.id ORDER BY ranked.turn"
            ),
            binds.into_arguments().map_err(db_error)?,
        );
        let rows: Vec<PgRow> = query.fetch_all(&self.pool).await.map_err(db_error)?;
        let mut path = FastPath { claimed: Vec::with_capacity(rows.len()), budgeted_next: false };
        // The statement has committed: a row that does not decode is logged and the batch ends
        // there, but the claims decoded before it are answered (an error would lose them too).
        for row in &rows {
            let claimed_id: Option<String> = row.try_get("id").map_err(db_error)?;
            if claimed_id.is_none() {
                path.budgeted_next = true;
                break;
            }
            match TodoRow::from_row(row).map_err(db_error).and_then(TodoRow::into_todo) {
                Ok(todo) => path.claimed.push(todo),
                Err(error) if !path.claimed.is_empty() => {
                    tracing::error!(%error, "a claimed todo did not decode; its lease will lapse");
                    break;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(path)
    }
}

/// What the one-statement path did: the todos it claimed, in claim order, and whether it stopped
/// at a candidate whose queue has a policy (the transactional path's to decide). Neither: no
/// claimable todo was left, or `limit` were claimed.
pub(super) struct FastPath {
    pub(super) claimed: Vec<Todo>,
    pub(super) budgeted_next: bool,
}
