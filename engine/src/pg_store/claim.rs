//! The claim transaction (SPEC-0003 "Atomic Claim", amended by SPEC-0030 REQ-4).
//!
//! One transaction per claim, in this order and no other:
//! 1. pick the candidate: `FOR UPDATE SKIP LOCKED` for `claim_next` (concurrent claimers get
//!    different rows), a blocking `FOR UPDATE` for `claim` of a named todo;
//! 2. look up the queue identity's policy (one indexed lookup; none → the base claim, untouched);
//! 3. lock the policy row `FOR UPDATE` (blocking; for `claim_next` 1–3 are one statement whose
//!    candidate CTE is materialised, so the todo is locked first; for `claim`, 2 and 3 are one);
//! 4. read `clock_timestamp()` after the lock, then in-flight (not counting the candidate) and the
//!    current window's usage;
//! 5. decide with `models::admission::decide`, the function the reference model uses;
//! 6. refuse → roll back, and `claim_next` goes on to its other queues without the refused one;
//!    admit → claim, charge one unit, commit.
//!
//! A transaction holds at most one policy lock and never waits on a todo lock while holding it:
//! the todo is always locked first. Dropping a transaction on any early return (an error, a
//! cancelled request) rolls it back, so nothing is charged that did not commit (REQ-13).
//!
//! This file holds only the I/O. What a refusal means for `claim_next`'s next pick, the deferred
//! list, the headroom and the `deferred` error are pure rules in `models` (`models::claim`,
//! `Headroom::after_claim`) that the reference model applies too. The mutant hunt's seeded bugs
//! reach this transaction only through the named hooks of `mutant_hooks`. The row locks a named
//! claim takes (`lock_todo`, step 1; `lock_policy`, steps 2–3) live in `rows`, which lifecycle,
//! intake and admission share, so no other transaction module imports this one.

use super::admission::Pending;
use super::claim_unbudgeted::FastPath;
use super::mutant_hooks;
use super::rows::{LockedPolicy, PolicyLimitsRow, TodoRow, identity_of, lock_policy, lock_todo};
use super::sql::{
    Binds, CLAIM_ORDER_ROWS, CLAIMABLE, OwnerGroup, TODO_COLUMNS, identity_filter, owner_groups, owner_groups_filter,
};
use super::{BudgetedHint, PgStore, db_error, finish};
use chrono::{DateTime, Duration, Utc};
use models::admission::{self, Decision, Headroom, Observation, Policy, Reason};
use models::claim::{ClaimNextRounds, Exhausted, deferred_error};
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::{ClaimNext, Claimed};
use models::todo::Todo;
use sqlx::{Postgres, Transaction};

/// A candidate locked by step 1. `claim` names a todo that may not be claimable, so it carries
/// the locked row to check at the clock of step 4; `claim_next` picked a claimable one, and
/// claimability only grows with time (a lease stays lapsed, a retry stays due).
struct Candidate {
    id: String,
    identity: QueueIdentity,
    named: Option<Todo>,
}

/// What steps 2–6 concluded for a locked candidate.
enum Admission {
    Claimed(Box<Claimed>),
    Refused { reason: Reason, hint: models::admission::AdmissionHint, now: Option<DateTime<Utc>> },
}

/// Steps 2–3's outcome: the policy locked (None: the queue has none), or the database error
/// that kept it from being read, which refuses this candidate only (REQ-9).
type PolicyLock = std::result::Result<Option<LockedPolicy>, sqlx::Error>;

/// Step 1's candidate as `candidate_cte` selects it.
#[derive(sqlx::FromRow)]
struct CandidateRow {
    id: String,
    endpoint_id: Option<String>,
    team_id: Option<String>,
    queue: String,
}

impl CandidateRow {
    fn into_candidate(self) -> Result<Candidate> {
        Ok(Candidate { identity: identity_of(self.endpoint_id, self.team_id, self.queue)?, id: self.id, named: None })
    }
}

/// Steps 1–3 in one statement: the candidate and its policy row, locked (all policy columns
/// NULL when the queue has none).
#[derive(sqlx::FromRow)]
struct LockedCandidateRow {
    #[sqlx(flatten)]
    candidate: CandidateRow,
    policy_id: Option<String>,
    #[sqlx(flatten)]
    limits: PolicyLimitsRow,
}

/// The claimed todo and, when a window was charged, its usage after the charge.
#[derive(sqlx::FromRow)]
struct ClaimedRow {
    #[sqlx(flatten)]
    todo: TodoRow,
    window_used: Option<i32>,
}

impl PgStore {
    pub(crate) async fn claim_next_tx(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<ClaimNext> {
        if queues.is_empty() {
            return Ok(ClaimNext::Empty { deferred: vec![] });
        }
        // Queues without a policy: steps 1, 2 and the claim in a single statement. A queue set
        // whose oldest candidate was budgeted last time goes straight to the transaction, which
        // handles an unbudgeted candidate too (the hint only saves a statement).
        let set = BudgetedHint::fingerprint(queues);
        if !self.budgeted_hint.contains(set) {
            match self.claim_next_unbudgeted(actor, queues, lease_seconds).await? {
                FastPath::Claimed(todo) => {
                    self.counters.claimed(&todo.identity.queue, false);
                    return Ok(ClaimNext::Claimed(Box::new(Claimed { todo: *todo, admission: None })));
                }
                FastPath::Empty => return Ok(ClaimNext::Empty { deferred: vec![] }),
                FastPath::Budgeted => self.budgeted_hint.mark(set, true),
            }
        }
        // At most a few claimers of this queue set hold a connection while the policy lock
        // serializes them; the rest wait here, holding nothing (issue #14, `waiters.rs`).
        let _permit = self.claim_waiters.enter(set).await?;
        let answer = self.claim_next_budgeted(actor, queues, lease_seconds).await?;
        if matches!(&answer, ClaimNext::Claimed(claimed) if claimed.admission.is_none()) {
            self.budgeted_hint.mark(set, false);
        }
        Ok(answer)
    }

    /// The transactional path of `claim_next`, once the oldest candidate turned out budgeted.
    async fn claim_next_budgeted(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<ClaimNext> {
        // The oldest candidate has a policy: claim under the lock, queue by queue, each refused
        // queue excluded from the next pick; `ClaimNextRounds` keeps that account (REQ-4, REQ-7).
        let mut rounds = ClaimNextRounds::new(queues);
        for _ in 0..ClaimNextRounds::ROUNDS_MAX {
            for _ in 0..=queues.len() {
                let mut tx = self.begin().await?;
                let picked = match self.pick_candidate(&mut tx, queues, rounds.excluded()).await {
                    Ok(picked) => picked,
                    Err(error) => {
                        // REQ-9: the statement that locks the candidate and its policy failed.
                        // Take the steps one statement each, so a policy that cannot be locked
                        // or read fails only its own queue and the others are still served.
                        tracing::warn!(%error, "claim_next candidate pick failed; retrying step by step");
                        finish(tx, Ok(())).await.ok();
                        tx = self.begin().await?;
                        or_rollback!(tx, self.pick_candidate_step_by_step(&mut tx, queues, rounds.excluded()).await)
                    }
                };
                let Some((candidate, policy)) = picked else {
                    finish(tx, Ok(())).await?;
                    break;
                };
                match or_rollback!(tx, self.admit_and_claim(&mut tx, actor, &candidate, policy, lease_seconds).await) {
                    Admission::Claimed(claimed) => {
                        tx.commit().await.map_err(db_error)?;
                        self.counters
                            .claimed(&claimed.todo.identity.queue, claimed.admission.is_some_and(|a| a.used.is_some()));
                        return Ok(ClaimNext::Claimed(claimed));
                    }
                    Admission::Refused { reason, .. } => {
                        tx.rollback().await.map_err(db_error)?;
                        self.counters.refused(&candidate.identity.queue, reason);
                        if mutant_hooks::claim_next_gives_up_after_refusal() {
                            return Ok(ClaimNext::Empty { deferred: vec![] });
                        }
                        if rounds.refused(candidate.identity) {
                            let statuses = self.queue_admissions_tx(queues, Pending::AnyAtAll).await?;
                            for (identity, reason) in rounds.exclude_deferred(statuses) {
                                self.counters.refused(&identity.queue, reason);
                            }
                        }
                    }
                }
            }
            // Nothing claimable outside the excluded queues: the deferred list, or one more round.
            let excluded = rounds.excluded();
            let statuses =
                if excluded.is_empty() { vec![] } else { self.queue_admissions_tx(excluded, Pending::Count).await? };
            if let Exhausted::Answer(answer) = rounds.exhausted(statuses) {
                return Ok(answer);
            }
        }
        Ok(ClaimNext::Empty { deferred: vec![] })
    }

    pub(crate) async fn claim_tx(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        let mut tx = self.begin().await?;

        // 1. Lock the named todo, waiting for any claimer that holds it.
        let locked = async {
            let todo = lock_todo(&mut tx, id, actor.reach()).await?;
            actor.check_todo_access(&todo.identity)?;
            Ok(Candidate { id: todo.id.clone(), identity: todo.identity.clone(), named: Some(todo) })
        }
        .await;
        let candidate = or_rollback!(tx, locked);

        // 2–6.
        let policy = lock_policy(&mut tx, &candidate.identity).await;
        match or_rollback!(tx, self.admit_and_claim(&mut tx, actor, &candidate, policy, lease_seconds).await) {
            Admission::Claimed(claimed) => {
                tx.commit().await.map_err(db_error)?;
                self.counters
                    .claimed(&claimed.todo.identity.queue, claimed.admission.is_some_and(|a| a.used.is_some()));
                Ok(*claimed)
            }
            Admission::Refused { reason, hint, now } => {
                tx.rollback().await.map_err(db_error)?;
                self.counters.refused(&candidate.identity.queue, reason);
                Err(deferred_error(&candidate.identity, reason, hint, now))
            }
        }
    }

    /// Steps 4–6 for a candidate this transaction has locked, with its policy as steps 2–3 found
    /// and locked it.
    async fn admit_and_claim(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        actor: &Actor,
        candidate: &Candidate,
        policy: PolicyLock,
        lease_seconds: i64,
    ) -> Result<Admission> {
        let over_admits_on_purpose = mutant_hooks::over_admits_on_purpose();
        // 2–3. The policy, locked; none → the base claim, taking no admission lock.
        let locked = match policy {
            Ok(locked) => locked,
            Err(error) => {
                // REQ-9: a policy that cannot be read refuses this candidate, and only it.
                tracing::warn!(%error, queue = %candidate.identity, "admission policy unreadable; refusing (fail closed)");
                return Ok(unavailable());
            }
        };
        let Some(locked) = locked else {
            return self.claim_unbudgeted(tx, actor, candidate, lease_seconds).await;
        };
        let policy = match &locked.evaluated {
            Ok(policy) => policy,
            Err(_) if mutant_hooks::fails_open_on_invalid_policy() => {
                return self.claim_unbudgeted(tx, actor, candidate, lease_seconds).await;
            }
            Err(problem) => {
                // A named todo that is not claimable anyway (done, held) says so first, as it
                // does in a queue whose policy reads fine.
                if candidate.named.is_some() {
                    check_claimable(candidate, self.clock_after_lock(tx).await?)?;
                }
                tracing::warn!(%problem, queue = %candidate.identity, "admission policy invalid; refusing (fail closed)");
                return Ok(unavailable());
            }
        };

        // 4. The clock after the lock, then in-flight and usage under it.
        let observed = self.observe(tx, &locked.id, policy, candidate).await?;
        check_claimable(candidate, observed.now)?;

        // 5. Decide.
        match admission::decide(policy, observed.in_flight, mutant_hooks::used_for_decision(observed.used)) {
            Decision::Refuse(reason) => {
                let hint = admission::status(policy, &observed).hint;
                Ok(Admission::Refused { reason, hint, now: Some(observed.now) })
            }
            // 6. Claim and charge.
            Decision::Admit => {
                let charged_window = policy.charged_window(observed.now);
                let charge = charged_window.map(|(start, _)| (locked.id.clone(), start));
                let charge = mutant_hooks::charge(tx, &candidate.id, charge).await?;
                let (todo, used) = claim_locked(tx, actor, &candidate.id, observed.now, lease_seconds, charge).await?;
                if let (Some(max), Some(used)) = (policy.max_claims_per_window, used)
                    && !over_admits_on_purpose
                {
                    assert!(used <= max, "over-admission: charged {used} > max_claims_per_window {max}");
                }
                let headroom = Headroom::after_claim(policy, observed.in_flight, used, charged_window);
                Ok(Admission::Claimed(Box::new(Claimed { todo, admission: Some(headroom) })))
            }
        }
    }

    /// The base claim of a locked candidate whose queue has no policy: no admission lock, nothing
    /// charged.
    async fn claim_unbudgeted(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        actor: &Actor,
        candidate: &Candidate,
        lease_seconds: i64,
    ) -> Result<Admission> {
        let now = self.clock_after_lock(tx).await?;
        check_claimable(candidate, now)?;
        let (todo, _) = claim_locked(tx, actor, &candidate.id, now, lease_seconds, None).await?;
        Ok(Admission::Claimed(Box::new(Claimed { todo, admission: None })))
    }

    /// Step 4: the clock (read after the policy lock), the in-flight count without the candidate,
    /// the earliest lease among them, and the usage of the window containing that clock reading.
    /// This must be its own statement, after the lock statement: under READ COMMITTED a
    /// statement's snapshot is taken when it starts, before any lock wait, so counts read in the
    /// locking statement would miss the claim committed by the transaction we waited for.
    async fn observe(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        policy_id: &str,
        policy: &Policy,
        candidate: &Candidate,
    ) -> Result<Observation> {
        // Guess the window from this host's clock so one round trip usually suffices; if the
        // database's clock lands in another window, read that window's usage as well.
        let guess = policy.window.as_ref().map(|w| w.window_containing(self.clock.now()));
        // $6 is the guessed window's start; $7 the candidate, which is not counted in flight.
        const OBSERVE_SQL: &str = "SELECT coalesce($1::timestamptz, clock_timestamp()), f.n, f.earliest, \
               (SELECT w.used FROM admission_windows w WHERE w.policy_id = $5 AND w.window_start = $6) \
             FROM (SELECT count(*) AS n, min(t.lease_expires_at) AS earliest FROM todos t \
                   WHERE t.state = 'claimed' AND t.queue = $4 AND t.id <> $7 \
                     AND (t.endpoint_id = $2 OR t.team_id = $3)) f";
        let (now, in_flight, earliest, used): (DateTime<Utc>, i64, Option<DateTime<Utc>>, Option<i32>) =
            sqlx::query_as(mutant_hooks::observe_sql(OBSERVE_SQL))
                .bind(self.now_param())
                .bind(candidate.identity.endpoint_id())
                .bind(candidate.identity.team_id())
                .bind(&candidate.identity.queue)
                .bind(policy_id)
                .bind(guess.map(|(start, _)| start))
                .bind(mutant_hooks::in_flight_leaves_out(&candidate.id))
                .fetch_one(&mut **tx)
                .await
                .map_err(db_error)?;
        let mut used = i64::from(used.unwrap_or(0));
        if let Some(window) = &policy.window {
            let actual = window.window_start(now);
            if guess.map(|(start, _)| start) != Some(actual) {
                let reread: Option<i32> =
                    sqlx::query_scalar("SELECT used FROM admission_windows WHERE policy_id = $1 AND window_start = $2")
                        .bind(policy_id)
                        .bind(actual)
                        .fetch_optional(&mut **tx)
                        .await
                        .map_err(db_error)?;
                used = i64::from(reread.unwrap_or(0));
            }
        }
        Ok(Observation {
            now,
            in_flight,
            used,
            earliest_lease_expiry: earliest,
            reaper_interval: self.reaper_interval_chrono(),
        })
    }

    /// Steps 1–3 of the budgeted path in one statement: the oldest claimable todo outside the
    /// excluded queues, locked (`SKIP LOCKED`), then its queue's policy looked up by index and
    /// locked (blocking). The candidate CTE is materialised, so the todo lock is taken before the
    /// policy lock, and no todo lock is ever waited on.
    async fn pick_candidate(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        queues: &[QueueIdentity],
        excluded: &[QueueIdentity],
    ) -> Result<Option<(Candidate, PolicyLock)>> {
        let mut binds = Binds::default();
        let sql = format!(
            "{} \
             SELECT cand.id, cand.endpoint_id, cand.team_id, cand.queue, p.id AS policy_id, p.max_in_flight, \
               p.max_claims_per_window, p.window_period, p.window_tz, p.window_start, p.window_weekday \
             FROM cand LEFT JOIN LATERAL ( \
               SELECT p.* FROM admission_policies p \
               WHERE p.queue = cand.queue AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id) \
               FOR UPDATE) p ON true",
            candidate_cte(&mut binds, self.now_param(), &owner_groups(queues), excluded)
        );
        let row: Option<LockedCandidateRow> = sqlx::query_as_with(
            sqlx::AssertSqlSafe(mutant_hooks::pick_candidate_sql(sql)),
            binds.into_arguments().map_err(db_error)?,
        )
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let policy = row.policy_id.map(|id| LockedPolicy::new(id, &row.limits));
        Ok(Some((row.candidate.into_candidate()?, Ok(policy))))
    }

    /// Steps 1–3 of the budgeted path one statement each, for when the combined statement of
    /// `pick_candidate` failed: the candidate is locked alone, then its policy (`lock_policy`). A
    /// database error on the policy then comes back as that queue's failed read, which
    /// `admit_and_claim` refuses as `admission_unavailable` (REQ-9) and the caller excludes.
    async fn pick_candidate_step_by_step(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        queues: &[QueueIdentity],
        excluded: &[QueueIdentity],
    ) -> Result<Option<(Candidate, PolicyLock)>> {
        let mut binds = Binds::default();
        let sql = format!(
            "{} SELECT cand.id, cand.endpoint_id, cand.team_id, cand.queue FROM cand",
            candidate_cte(&mut binds, self.now_param(), &owner_groups(queues), excluded)
        );
        let row: Option<CandidateRow> =
            sqlx::query_as_with(sqlx::AssertSqlSafe(sql), binds.into_arguments().map_err(db_error)?)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let candidate = row.into_candidate()?;
        let policy = lock_policy(tx, &candidate.identity).await;
        Ok(Some((candidate, policy)))
    }
}

fn unavailable() -> Admission {
    Admission::Refused { reason: Reason::AdmissionUnavailable, hint: admission::unavailable_status().hint, now: None }
}

/// `conflict` with the todo's state when a named todo is not claimable at `now` (a live claim,
/// a finished todo, a retry not yet due).
fn check_claimable(candidate: &Candidate, now: DateTime<Utc>) -> Result<()> {
    match &candidate.named {
        Some(todo) if !todo.claimable_at(now) => {
            Err(Error::conflict_state("the todo is not claimable", todo.state.as_str()))
        }
        _ => Ok(()),
    }
}

/// Step 1's statement head: the clock (`now`, or the database's when None), and `cand`, the
/// oldest claimable todo of `queues` outside the `excluded` identities, locked without waiting
/// (`SKIP LOCKED`). Materialised, so the todo lock is taken before anything the statement locks
/// after it.
fn candidate_cte(
    binds: &mut Binds,
    now: Option<DateTime<Utc>>,
    queues: &[OwnerGroup],
    excluded: &[QueueIdentity],
) -> String {
    let now = binds.push(now);
    let excluded = identity_filter(binds, "t", excluded);
    let queues = owner_groups_filter(binds, queues);
    format!(
        "WITH clock AS (SELECT coalesce({now}::timestamptz, clock_timestamp()) AS now), \
         cand AS MATERIALIZED ( \
           SELECT t.id, t.endpoint_id, t.team_id, t.queue FROM todos t, clock \
           WHERE {queues} AND NOT {excluded} AND {CLAIM_ORDER_ROWS} AND {CLAIMABLE} \
           ORDER BY t.created_at, t.id FOR UPDATE OF t SKIP LOCKED LIMIT 1)"
    )
}

/// The claim itself on a row this transaction holds: state, lease, attempt + 1, an attempt row
/// (closing a lapsed claimant's), and, with a window limit, one unit charged to the window
/// containing `now`. Returns the todo and the window's usage after the charge.
async fn claim_locked(
    tx: &mut Transaction<'static, Postgres>,
    actor: &Actor,
    id: &str,
    now: DateTime<Utc>,
    lease_seconds: i64,
    charge: Option<(String, DateTime<Utc>)>,
) -> Result<(Todo, Option<i64>)> {
    let lease_expires_at = now + Duration::seconds(lease_seconds);
    let (policy_id, window_start) = charge.unzip();
    let row: ClaimedRow = sqlx::query_as(composed_sql!(
        "WITH closed AS ( \
           UPDATE todo_attempts SET ended_at = $2, outcome = 'lease_expired' WHERE todo_id = $1 AND ended_at IS NULL), \
         opened AS ( \
           INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at) \
           SELECT $1, coalesce(max(seq), 0) + 1, $3, $4, $2 FROM todo_attempts WHERE todo_id = $1), \
         charged AS ( \
           INSERT INTO admission_windows AS w (policy_id, window_start, used, updated_at) \
           SELECT $6, $7, 1, $2 WHERE $6::text IS NOT NULL \
           ON CONFLICT (policy_id, window_start) DO UPDATE SET used = w.used + 1, updated_at = EXCLUDED.updated_at \
           RETURNING w.used), \
         claimed AS ( \
           UPDATE todos t SET state = 'claimed', owner = $3, claimed_by_endpoint_id = $4, lease_expires_at = $5, \
             attempt = t.attempt + 1, claimed_at = $2, next_retry_at = NULL, completed_at = NULL, updated_at = $2 \
           WHERE t.id = $1 RETURNING t.*) \
         SELECT {TODO_COLUMNS}, (SELECT used FROM charged) AS window_used FROM claimed t"
    ))
    .bind(id)
    .bind(now)
    .bind(actor.label())
    .bind(actor.endpoint_id())
    .bind(lease_expires_at)
    .bind(policy_id)
    .bind(window_start)
    .fetch_one(&mut **tx)
    .await
    .map_err(db_error)?;
    let (todo, used) = (row.todo.into_todo()?, row.window_used);
    // Not `attempt <= max_attempts`: a todo released on its last attempt is pending again and
    // claimable (base-system §2: release keeps the attempt), so its next claim goes past it, and
    // a later fail dead-letters it at once.
    debug_assert!(todo.state == models::todo::TodoState::Claimed && todo.attempt >= 1);
    Ok((todo, used.map(i64::from)))
}
