//! The budgeted `claim_next` as one autocommitted statement (SPEC-0030 REQ-4, steps 1–6).
//!
//! The budgeted `claim_next` first tries all six steps as one autocommitted statement, so the
//! policy lock is held only while the database runs it and never across a round trip to this
//! process. Measured, that round trip is what bounded a queue's claim rate with many claimers
//! (`ci/bench-admission`). Deciding inside the statement needs two things in SQL: a fresh read
//! after the lock (`admission_observe`, migration 0008) and the decision (`admission_admits`, the
//! SQL form of `decide`, compared with it case by case by `admission_admits_agrees_with_decide`).
//! Window arithmetic stays in Rust: the statement is given the policy rows this replica has
//! locked before, each with its current window (`known_policies.rs`), and writes nothing unless
//! the locked row equals one of them and its clock reading falls in that window. Every outcome
//! is decided again here with `decide` on the values the statement used. Whatever the statement
//! cannot decide goes to the step-by-step transaction in `claim.rs`, which every other claim
//! uses.

use super::claim::{Step, candidate_ctes, evaluate, headroom, identity_of};
use super::known_policies::KnownRows;
use super::{
    PgStore, TODO_COLUMNS, TodoRow, db_error, identity_arrays, identity_filter, owner_groups, owner_groups_filter,
};
use chrono::{DateTime, Utc};
use models::admission::{self, Decision, Observation};
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::mutants::{self, Mutant};
use models::scope::Actor;
use models::store::Claimed;
use models::todo::Todo;
use sqlx::{FromRow, Row};

/// One row of the at-once statement: the candidate, its locked policy row (null without one),
/// the remembered window it was matched with, what was read under the lock, and the verdict.
/// The claimed todo's own columns follow, read as a `TodoRow` when `id` is not null.
#[derive(FromRow)]
struct AtOnceRow {
    candidate_endpoint_id: Option<String>,
    candidate_team_id: Option<String>,
    candidate_queue: String,
    policy_id: Option<String>,
    max_in_flight: Option<i32>,
    max_claims_per_window: Option<i32>,
    window_period: Option<String>,
    window_tz: Option<String>,
    window_start: Option<String>,
    window_weekday: Option<String>,
    window_from: Option<DateTime<Utc>>,
    window_until: Option<DateTime<Utc>>,
    observed_at: Option<DateTime<Utc>>,
    in_flight: Option<i64>,
    earliest_lease: Option<DateTime<Utc>>,
    used: Option<i64>,
    stale: bool,
    admitted: bool,
    charged_used: Option<i32>,
}

impl PgStore {
    /// Steps 1–6 as one autocommitted statement (see the module comment). None when it could
    /// not decide (no remembered row for the candidate's policy, a changed row, a window boundary)
    /// and wrote nothing: the caller takes the step-by-step path.
    pub(super) async fn claim_at_once(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        excluded: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<Option<Step>> {
        // The seeded bugs that change how a claim is written are in the step-by-step path only.
        if mutants::active(Mutant::ChargePerTodo) || mutants::active(Mutant::FailOpenUnknownZone) {
            return Ok(None);
        }
        let known = self.known_policies.rows_for(queues, self.clock.now());
        if known.policy_ids.is_empty() {
            return Ok(None);
        }
        let Some((row, todo)) = self.run_at_once(actor, queues, excluded, &known, lease_seconds).await? else {
            return Ok(Some(Step::Empty));
        };
        let identity = identity_of(row.candidate_endpoint_id, row.candidate_team_id, row.candidate_queue);
        let Some(policy_id) = row.policy_id else {
            // No policy: the base claim, committed.
            let todo = todo.ok_or_else(|| Error::internal("the at-once claim of an unbudgeted todo wrote nothing"))?;
            return Ok(Some(Step::Claimed(Box::new(Claimed { todo, admission: None }))));
        };
        if row.stale {
            return Ok(None);
        }
        let stored = (
            row.max_in_flight,
            row.max_claims_per_window,
            row.window_period,
            row.window_tz,
            row.window_start,
            row.window_weekday,
        );
        // The statement matched the locked row to one this replica evaluated, so it evaluates.
        let policy = evaluate(&stored).map_err(|problem| {
            Error::internal(format!("policy {policy_id} matched a remembered row but does not evaluate: {problem}"))
        })?;
        let (Some(now), Some(in_flight), Some(used)) = (row.observed_at, row.in_flight, row.used) else {
            return Err(Error::internal("the at-once claim decided without its observation"));
        };
        let observed = Observation {
            now,
            in_flight,
            used,
            earliest_lease_expiry: row.earliest_lease,
            reaper_interval: self.reaper_interval_chrono(),
        };
        let used_for_decision = if mutants::active(Mutant::IgnoreUsage) { 0 } else { observed.used };
        let decision = admission::decide(&policy, observed.in_flight, used_for_decision);
        match (row.admitted, decision, todo) {
            (true, Decision::Admit, Some(todo)) => {
                let unguarded = mutants::active(Mutant::CheckOutsideLock) || mutants::active(Mutant::IgnoreUsage);
                let used = row.charged_used.map(i64::from);
                if let (Some(max), Some(used)) = (policy.max_claims_per_window, used)
                    && !unguarded
                {
                    assert!(used <= max, "over-admission: charged {used} > max_claims_per_window {max}");
                }
                let window = row.window_from.zip(row.window_until);
                let admission = Some(headroom(&policy, &observed, window, used));
                Ok(Some(Step::Claimed(Box::new(Claimed { todo, admission }))))
            }
            (false, Decision::Refuse(reason), None) => Ok(Some(Step::Refused { identity, reason })),
            (true, Decision::Refuse(reason), _) => {
                // Committed against decide: admission_admits has drifted from it. The guard above
                // exists for the same reason; a claim over a limit must never pass silently.
                panic!("admission_admits admitted a claim decide refuses ({reason:?}) on queue {identity}")
            }
            (admitted, _, _) => {
                // Refused where decide admits (or no row came back): nothing was written, so the
                // step-by-step transaction decides instead.
                tracing::error!(admitted, queue = %identity, "admission_admits disagrees with decide; deciding step by step");
                debug_assert!(false, "admission_admits disagrees with decide on queue {identity}");
                Ok(None)
            }
        }
    }

    /// The at-once statement itself: the oldest claimable todo (`SKIP LOCKED`), its policy locked
    /// (blocking) and matched against the remembered rows, `admission_observe` after the lock, the
    /// verdict, and when admitted the claim and its charge. Data flows in that order through the
    /// CTEs, which is what orders them: each reads the one before.
    async fn run_at_once(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        excluded: &[QueueIdentity],
        known: &KnownRows,
        lease_seconds: i64,
    ) -> Result<Option<(AtOnceRow, Option<Todo>)>> {
        let groups = owner_groups(queues);
        let [x_endpoint_ids, x_endpoint_queues, x_team_ids, x_team_queues] = identity_arrays(excluded);
        let policy_lock = if mutants::active(Mutant::CheckOutsideLock) { "" } else { "FOR UPDATE" };
        let mut query = sqlx::query(composed_sql!(
            "{}, \
             locked AS MATERIALIZED ( \
               SELECT cand.id AS candidate_id, cand.endpoint_id AS candidate_endpoint_id, \
                 cand.team_id AS candidate_team_id, cand.queue AS candidate_queue, p.id AS policy_id, \
                 p.max_in_flight, p.max_claims_per_window, p.window_period, p.window_tz, p.window_start, \
                 p.window_weekday, k.window_from, k.window_until, k.policy_id IS NOT NULL AS known \
               FROM cand \
               LEFT JOIN LATERAL ( \
                 SELECT p.* FROM admission_policies p \
                 WHERE p.queue = cand.queue AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id) \
                 {policy_lock}) p ON true \
               LEFT JOIN LATERAL ( \
                 SELECT k.* FROM unnest($12::text[], $13::int[], $14::int[], $15::text[], $16::text[], $17::text[], \
                   $18::text[], $19::timestamptz[], $20::timestamptz[]) \
                   AS k(policy_id, max_in_flight, max_claims_per_window, window_period, window_tz, window_start, \
                        window_weekday, window_from, window_until) \
                 WHERE k.policy_id = p.id AND k.max_in_flight IS NOT DISTINCT FROM p.max_in_flight \
                   AND k.max_claims_per_window IS NOT DISTINCT FROM p.max_claims_per_window \
                   AND k.window_period IS NOT DISTINCT FROM p.window_period \
                   AND k.window_tz IS NOT DISTINCT FROM p.window_tz \
                   AND k.window_start IS NOT DISTINCT FROM p.window_start \
                   AND k.window_weekday IS NOT DISTINCT FROM p.window_weekday LIMIT 1) k ON true), \
             seen AS MATERIALIZED ( \
               SELECT locked.*, o.observed_at, o.in_flight, o.earliest_lease, \
                 CASE WHEN locked.max_claims_per_window IS NULL THEN 0::bigint \
                      WHEN o.observed_at < locked.window_from OR o.observed_at >= locked.window_until THEN NULL \
                      WHEN o.latest_window_start IS NULL OR o.latest_window_start < locked.window_from THEN 0 \
                      WHEN o.latest_window_start = locked.window_from THEN o.latest_used END AS used \
               FROM locked LEFT JOIN LATERAL admission_observe( \
                 CASE WHEN locked.known THEN locked.policy_id END, locked.candidate_endpoint_id, \
                 locked.candidate_team_id, locked.candidate_queue, \
                 CASE WHEN $6 THEN '' ELSE locked.candidate_id END, $1, $7) o ON true), \
             verdict AS MATERIALIZED ( \
               SELECT seen.*, \
                 seen.policy_id IS NOT NULL AND (NOT seen.known OR seen.used IS NULL) AS stale, \
                 seen.policy_id IS NULL OR (seen.known AND seen.used IS NOT NULL AND admission_admits( \
                   seen.max_in_flight, seen.max_claims_per_window, seen.in_flight, \
                   CASE WHEN $8 THEN 0 ELSE seen.used END)) AS admitted \
               FROM seen), \
             claimed AS ( \
               UPDATE todos t SET state = 'claimed', owner = $9, claimed_by_endpoint_id = $10, \
                 lease_expires_at = coalesce(v.observed_at, clock.now) + make_interval(secs => $11::double precision), \
                 attempt = t.attempt + 1, claimed_at = coalesce(v.observed_at, clock.now), next_retry_at = NULL, \
                 completed_at = NULL, updated_at = coalesce(v.observed_at, clock.now) \
               FROM verdict v, clock WHERE v.admitted AND t.id = v.candidate_id RETURNING t.*), \
             closed AS ( \
               UPDATE todo_attempts a SET ended_at = claimed.claimed_at, outcome = 'lease_expired' FROM claimed \
               WHERE a.todo_id = claimed.id AND a.ended_at IS NULL), \
             opened AS ( \
               INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at) \
               SELECT claimed.id, (SELECT coalesce(max(a.seq), 0) + 1 FROM todo_attempts a WHERE a.todo_id = claimed.id), \
                 $9, $10, claimed.claimed_at FROM claimed), \
             charged AS ( \
               INSERT INTO admission_windows AS w (policy_id, window_start, used, updated_at) \
               SELECT v.policy_id, v.window_from, 1, claimed.claimed_at FROM verdict v, claimed \
               WHERE v.max_claims_per_window IS NOT NULL \
               ON CONFLICT (policy_id, window_start) DO UPDATE SET used = w.used + 1, updated_at = EXCLUDED.updated_at \
               RETURNING w.used) \
             SELECT verdict.candidate_id, verdict.candidate_endpoint_id, verdict.candidate_team_id, \
               verdict.candidate_queue, verdict.policy_id, verdict.max_in_flight, verdict.max_claims_per_window, \
               verdict.window_period, verdict.window_tz, verdict.window_start, verdict.window_weekday, \
               verdict.window_from, verdict.window_until, verdict.observed_at, verdict.in_flight, \
               verdict.earliest_lease, verdict.used, verdict.stale, verdict.admitted, \
               (SELECT used FROM charged) AS charged_used, {TODO_COLUMNS} \
             FROM verdict LEFT JOIN claimed t ON t.id = verdict.candidate_id",
            candidate_ctes(&owner_groups_filter(&groups, 21), &identity_filter(2))
        ))
        .bind(self.now_param())
        .bind(&x_endpoint_ids)
        .bind(&x_endpoint_queues)
        .bind(&x_team_ids)
        .bind(&x_team_queues)
        .bind(mutants::active(Mutant::TakeoverCountsItself))
        .bind(mutants::active(Mutant::InFlightAcrossQueues))
        .bind(mutants::active(Mutant::IgnoreUsage))
        .bind(actor.label())
        .bind(actor.endpoint_id())
        .bind(lease_seconds as f64)
        .bind(&known.policy_ids)
        .bind(&known.max_in_flight)
        .bind(&known.max_claims_per_window)
        .bind(&known.periods)
        .bind(&known.zones)
        .bind(&known.starts)
        .bind(&known.weekdays)
        .bind(&known.windows_from)
        .bind(&known.windows_until);
        for (_, owner, names) in &groups {
            query = query.bind(owner.clone()).bind(names.clone());
        }
        let Some(row) = query.fetch_optional(&self.pool).await.map_err(db_error)? else {
            return Ok(None);
        };
        let at_once = AtOnceRow::from_row(&row).map_err(db_error)?;
        let claimed_id: Option<String> = row.try_get("id").map_err(db_error)?;
        let todo = match claimed_id {
            Some(_) => Some(TodoRow::from_row(&row).map_err(db_error)?.into_todo()?),
            None => None,
        };
        Ok(Some((at_once, todo)))
    }
}
