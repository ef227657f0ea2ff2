//! Steps 1–3 of the claim transaction (`claim.rs`): the statements that pick and lock the
//! candidates (`FOR UPDATE SKIP LOCKED`) and, in the same statement, the policy of their queue,
//! plus the unlocked pick the read first uses.
//!
//! Its own module so the transaction's order of steps reads in `claim.rs` without the SQL each
//! step composes; it decides nothing.

use super::super::mutant_hooks::ClaimPlan;
use super::super::rows::{LockedPolicy, PolicyLimitsRow, identity_of, lock_policy};
use super::super::sql::{Binds, CLAIM_ORDER_ROWS, CLAIMABLE, owner_groups, owner_groups_filter};
use super::super::{PgStore, db_error};
use super::{Candidate, PolicyLock};
use chrono::{DateTime, Utc};
use models::claim::ClaimNextRounds;
use models::error::Result;
use models::identity::QueueIdentity;
use sqlx::{Postgres, Transaction};
use std::collections::HashSet;

/// Step 1's candidate as `candidate_cte` selects it.
#[derive(sqlx::FromRow)]
struct CandidateRow {
    id: String,
    endpoint_id: Option<String>,
    team_id: Option<String>,
    queue: String,
    takes_over: bool,
}

impl CandidateRow {
    fn into_candidate(self) -> Result<Candidate> {
        let identity = identity_of(self.endpoint_id, self.team_id, self.queue)?;
        Ok(Candidate { identity, id: self.id, named: None, takes_over: self.takes_over })
    }
}

/// Steps 1–3 in one statement: the candidates and their policy row, locked (all policy columns
/// NULL when the queue has none).
#[derive(sqlx::FromRow)]
struct LockedCandidateRow {
    #[sqlx(flatten)]
    candidate: CandidateRow,
    /// The further candidates of the same queue, in claim order, and which are lapsed claims.
    more_ids: Vec<String>,
    more_take_over: Vec<bool>,
    policy_id: Option<String>,
    #[sqlx(flatten)]
    limits: PolicyLimitsRow,
}

impl PgStore {
    /// The queue of the oldest claimable todo of `queues`, read without locking anything: the
    /// queue the budgeted path's first pick would try when no other claimer holds that todo. (A
    /// held one is still seen here, so under contention the read first may count the refusal of
    /// a queue whose work another claimer holds; the claim and the charges are unaffected.)
    pub(super) async fn oldest_claimable_queue(&self, queues: &[QueueIdentity]) -> Result<Option<QueueIdentity>> {
        let mut binds = Binds::default();
        let sql = candidate_select(&mut binds, self.now_param(), queues, &ClaimNextRounds::new(queues), Lock::None);
        let row: Option<CandidateRow> =
            sqlx::query_as_with(sqlx::AssertSqlSafe(sql), binds.into_arguments().map_err(db_error)?)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
        row.map(|row| row.into_candidate().map(|candidate| candidate.identity)).transpose()
    }

    /// Steps 1–3 of the budgeted path in one statement: the oldest claimable todo outside the
    /// excluded queues (or a lapsed claim of a queue `rounds` leaves open to takeovers) and up to `wanted - 1` more of its queue, in claim order, locked (`SKIP
    /// LOCKED`), then that queue's policy looked up by index and locked (blocking). The candidate
    /// CTEs are materialised and the policy is joined to their result, so every todo lock is
    /// taken before the policy lock, and no todo lock is ever waited on.
    pub(super) async fn pick_candidates(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        queues: &[QueueIdentity],
        rounds: &ClaimNextRounds,
        wanted: usize,
        plan: ClaimPlan,
    ) -> Result<Option<(Vec<Candidate>, PolicyLock)>> {
        let mut binds = Binds::default();
        let head = candidate_cte(&mut binds, self.now_param(), queues, rounds, Lock::SkipLocked);
        let more = binds.push(wanted.saturating_sub(1) as i64);
        // The further candidates, read in claim order through the queue's own claim-scan index
        // with the first candidate's owner and queue as constants (one branch per owner kind;
        // the other finds nothing), so the scan stops after `more` rows however deep the queue.
        let more_of = |column: &str| {
            format!(
                "SELECT t.id, t.created_at, t.state = 'claimed' AS takes_over FROM todos t, clock \
                 WHERE t.{column} = (SELECT c.{column} FROM cand c) AND t.queue = (SELECT c.queue FROM cand c) \
                   AND t.id <> (SELECT c.id FROM cand c) AND {CLAIM_ORDER_ROWS} AND {CLAIMABLE} \
                 ORDER BY t.created_at, t.id FOR UPDATE OF t SKIP LOCKED LIMIT {more}"
            )
        };
        // The policy row is locked, so in-flight and usage are read under it (REQ-4 step 3); the
        // seeded `CheckOutsideLock` bug's plan reads it unlocked.
        let policy_lock = if plan.policy_unlocked { "" } else { "FOR UPDATE" };
        let sql = format!(
            "{head}, \
             more_endpoint AS MATERIALIZED ({}), \
             more_team AS MATERIALIZED ({}), \
             more AS (SELECT * FROM more_endpoint UNION ALL SELECT * FROM more_team), \
             picked AS MATERIALIZED ( \
               SELECT cand.*, \
                 coalesce((SELECT array_agg(more.id ORDER BY more.created_at, more.id) FROM more), '{{}}') AS more_ids, \
                 coalesce((SELECT array_agg(more.takes_over ORDER BY more.created_at, more.id) FROM more), '{{}}') \
                   AS more_take_over FROM cand) \
             SELECT cand.id, cand.endpoint_id, cand.team_id, cand.queue, cand.takes_over, cand.more_ids, \
               cand.more_take_over, p.id AS policy_id, \
               p.max_in_flight, p.max_claims_per_window, p.window_period, p.window_tz, p.window_start, \
               p.window_weekday, p.additional_windows \
             FROM picked cand LEFT JOIN LATERAL ( \
               SELECT p.* FROM admission_policies p \
               WHERE p.queue = cand.queue AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id) \
               {policy_lock}) p ON true",
            more_of("endpoint_id"),
            more_of("team_id"),
        );
        let row: Option<LockedCandidateRow> =
            sqlx::query_as_with(sqlx::AssertSqlSafe(sql), binds.into_arguments().map_err(db_error)?)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let policy = row.policy_id.map(|id| LockedPolicy::new(id, &row.limits));
        let first = row.candidate.into_candidate()?;
        let identity = first.identity.clone();
        let more = row.more_ids.into_iter().zip(row.more_take_over).map(|(id, takes_over)| Candidate {
            id,
            identity: identity.clone(),
            named: None,
            takes_over,
        });
        let candidates = std::iter::once(first).chain(more).collect::<Vec<_>>();
        Ok(Some((candidates, Ok(policy))))
    }

    /// Steps 1–3 of the budgeted path one statement each, for when the combined statement of
    /// `pick_candidates` failed: the candidate is locked alone, then its policy (`lock_policy`). A
    /// database error on the policy then comes back as that queue's failed read, which
    /// `admit_and_claim` refuses as `admission_unavailable` (REQ-9) and the caller excludes.
    pub(super) async fn pick_candidate_step_by_step(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        queues: &[QueueIdentity],
        rounds: &ClaimNextRounds,
        plan: ClaimPlan,
    ) -> Result<Option<(Candidate, PolicyLock)>> {
        let mut binds = Binds::default();
        let sql = candidate_select(&mut binds, self.now_param(), queues, rounds, Lock::SkipLocked);
        let row: Option<CandidateRow> =
            sqlx::query_as_with(sqlx::AssertSqlSafe(sql), binds.into_arguments().map_err(db_error)?)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let candidate = row.into_candidate()?;
        let policy = lock_policy(tx, &candidate.identity, plan).await;
        Ok(Some((candidate, policy)))
    }
}

/// Whether `candidate_cte` locks its candidate.
enum Lock {
    /// Step 1: locked without waiting, so concurrent claimers get different rows.
    SkipLocked,
    /// A read that locks nothing (the pre-skip read's oldest queue).
    None,
}

/// Step 1's statement head: the clock (`now`, or the database's when None), and `cand`, the
/// oldest claimable todo of `queues` outside the identities `rounds` excludes, or a lapsed claim
/// of those it leaves open to takeovers, locked as `lock` says.
/// Materialised, so the todo lock is taken before anything the statement locks after it.
///
/// The statement names only the queues left open, not the excluded ones to skip: a queue
/// refused for its window keeps its backlog, usually the oldest work, and skipping it row by row
/// walked that backlog on every pick. With one queue of an owner left, the per-queue index
/// reads from its oldest claimable todo (`owner_groups_filter`).
fn candidate_cte(
    binds: &mut Binds,
    now: Option<DateTime<Utc>>,
    queues: &[QueueIdentity],
    rounds: &ClaimNextRounds,
    lock: Lock,
) -> String {
    // Looked up in a set: a group of path (c) excludes 199 of 200 queues, and comparing every
    // queue with every excluded one took 93 us of the leader's serial path per pick, against
    // 15 us this way (issue #31 item 4).
    let excluded: HashSet<&QueueIdentity> = rounds.excluded().iter().collect();
    let open: Vec<QueueIdentity> = queues.iter().filter(|queue| !excluded.contains(queue)).cloned().collect();
    let now = binds.push(now);
    let mut queues = owner_groups_filter(binds, &owner_groups(&open));
    // Only after an `in_flight_full` refusal: the lapsed claims of that queue, whose takeover
    // the cap may admit (REQ-4; issue #51).
    if !rounds.takeovers_only().is_empty() {
        let takeovers = owner_groups_filter(binds, &owner_groups(rounds.takeovers_only()));
        queues = format!("({queues} OR ({takeovers} AND t.state = 'claimed'))");
    }
    let lock = match lock {
        Lock::SkipLocked => "FOR UPDATE OF t SKIP LOCKED",
        Lock::None => "",
    };
    format!(
        "WITH clock AS (SELECT coalesce({now}::timestamptz, clock_timestamp()) AS now), \
         cand AS MATERIALIZED ( \
           SELECT t.id, t.endpoint_id, t.team_id, t.queue, t.state = 'claimed' AS takes_over FROM todos t, clock \
           WHERE {queues} AND {CLAIM_ORDER_ROWS} AND {CLAIMABLE} \
           ORDER BY t.created_at, t.id {lock} LIMIT 1)"
    )
}

/// `candidate_cte`'s candidate alone, as `CandidateRow` reads it.
fn candidate_select(
    binds: &mut Binds,
    now: Option<DateTime<Utc>>,
    queues: &[QueueIdentity],
    rounds: &ClaimNextRounds,
    lock: Lock,
) -> String {
    let head = candidate_cte(binds, now, queues, rounds, lock);
    format!("{head} SELECT cand.id, cand.endpoint_id, cand.team_id, cand.queue, cand.takes_over FROM cand")
}
