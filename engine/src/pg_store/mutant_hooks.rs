//! Where the seeded bugs of `models::mutants` reach `PgStore`, so the production code around
//! each site reads as production and the catalog's switches live here.
//!
//! The claim transaction asks once, when it begins: `ClaimPlan::now()` is the bugs that are on
//! at that moment, as plain flags the transaction reads as it goes, so a bug switched mid-claim
//! cannot make half a claim look like an engine fault. No production SQL passes through here:
//! where a bug changes a statement, the statement is written once with the bug's variant beside
//! it at its call site, and the plan picks. The other sites (release, policy delete and write,
//! ingest) are a hook each.
//!
//! Without the `mutants` feature (every build but the simulation's mutant hunt) no bug can be
//! switched on: `mutants::active` is a constant `false`, `ClaimPlan::now()` is always
//! `ClaimPlan::PRODUCTION`, each hook is the production answer, and the compiler removes the
//! branches.
//!
//! Must never hold a rule of its own: a plan or a hook answers "as production does" unless its
//! bug is on.

use chrono::{DateTime, Utc};
use models::error::Result;
use models::mutants::{Mutant, active};
use sqlx::{Postgres, Transaction};

/// How one claim transaction runs, fixed when it begins (REQ-4's steps, and which seeded bug
/// bends which of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ClaimPlan {
    /// `claim_next` reads statuses before its first pick (issue #15), which production always
    /// does. Off while a bug that lives in the locked decision is on (`IgnoreUsage`,
    /// `FailOpenUnknownZone`, `CheckOutsideLock`), so every refused queue still meets the bug.
    pub(super) reads_first: bool,
    /// After a refused candidate, give up instead of going on to the other queues
    /// (`ClaimNextStopsAtFirstRefusal`; REQ-4 goes on).
    pub(super) gives_up_after_refusal: bool,
    /// The unlocked pre-skip counts every lapsed lease as a slot (`PreSkipCountsLapsed`; REQ-4
    /// takes a lapsed claim over within the cap).
    pub(super) pre_skip_counts_lapsed: bool,
    /// The policy row is read without `FOR UPDATE`, so in-flight and usage are read outside the
    /// lock (`CheckOutsideLock`; REQ-4 step 3).
    pub(super) policy_unlocked: bool,
    /// A locked policy row that does not evaluate is claimed past as if there were none
    /// (`FailOpenUnknownZone`; REQ-9 fails closed).
    pub(super) fails_open_on_invalid_policy: bool,
    /// The decision is given no window usage (`IgnoreUsage`; REQ-4).
    pub(super) ignores_usage: bool,
    /// Step 4's in-flight count takes every queue of the owner (`InFlightAcrossQueues`; REQ-4
    /// counts this queue's).
    pub(super) in_flight_across_queues: bool,
    /// A lapsed claim counts itself against its own takeover (`TakeoverCountsItself`; REQ-4).
    pub(super) takeover_counts_itself: bool,
    /// Only a todo's first claim is charged (`ChargePerTodo`; REQ-3 charges every claim).
    pub(super) charges_first_claim_only: bool,
    /// A claim charges its primary window only (`ChargeOneWindowOnly`; issue #52 charges every
    /// window).
    pub(super) charges_one_window_only: bool,
}

impl ClaimPlan {
    /// Every step as SPEC-0030 says.
    pub(super) const PRODUCTION: ClaimPlan = ClaimPlan {
        reads_first: true,
        gives_up_after_refusal: false,
        pre_skip_counts_lapsed: false,
        policy_unlocked: false,
        fails_open_on_invalid_policy: false,
        ignores_usage: false,
        in_flight_across_queues: false,
        takeover_counts_itself: false,
        charges_first_claim_only: false,
        charges_one_window_only: false,
    };

    /// The plan of a claim transaction beginning now.
    pub(super) fn now() -> ClaimPlan {
        if !cfg!(feature = "mutants") {
            return ClaimPlan::PRODUCTION;
        }
        let ignores_usage = active(Mutant::IgnoreUsage);
        let fails_open_on_invalid_policy = active(Mutant::FailOpenUnknownZone);
        let policy_unlocked = active(Mutant::CheckOutsideLock);
        ClaimPlan {
            reads_first: !(ignores_usage || fails_open_on_invalid_policy || policy_unlocked),
            gives_up_after_refusal: active(Mutant::ClaimNextStopsAtFirstRefusal),
            pre_skip_counts_lapsed: active(Mutant::PreSkipCountsLapsed),
            policy_unlocked,
            fails_open_on_invalid_policy,
            ignores_usage,
            in_flight_across_queues: active(Mutant::InFlightAcrossQueues),
            takeover_counts_itself: active(Mutant::TakeoverCountsItself),
            charges_first_claim_only: active(Mutant::ChargePerTodo),
            charges_one_window_only: active(Mutant::ChargeOneWindowOnly),
        }
    }

    /// Whether a bug that over-admits on purpose is on: the claim's over-admission assertion then
    /// stands aside, so the simulation's invariants, not a panic, catch it.
    pub(super) fn over_admits_on_purpose(&self) -> bool {
        self.policy_unlocked || self.ignores_usage
    }

    /// The window usage the decision is given.
    pub(super) fn used_for_decision(&self, used: i64) -> i64 {
        if self.ignores_usage { 0 } else { used }
    }

    /// Whether a candidate that is a lapsed claim is left out of the in-flight count its own
    /// takeover is decided on.
    pub(super) fn takeover_leaves_itself_out(&self, takes_over: bool) -> bool {
        takes_over && !self.takeover_counts_itself
    }

    /// The statuses `claim_next`'s unlocked pre-skip reads, as the plan sees them.
    pub(super) fn pre_skip_statuses<'a>(
        &self,
        statuses: &'a [models::store::QueueAdmission],
    ) -> std::borrow::Cow<'a, [models::store::QueueAdmission]> {
        if !self.pre_skip_counts_lapsed {
            return std::borrow::Cow::Borrowed(statuses);
        }
        let mut statuses = statuses.to_vec();
        statuses.iter_mut().for_each(|queue| queue.lapsed = 0);
        std::borrow::Cow::Owned(statuses)
    }

    /// The charge of an admitted claim: `charge` itself, unless the plan charges only a todo's
    /// first claim (the attempt count is read only then).
    pub(super) async fn charge(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        todo_id: &str,
        charge: Option<DateTime<Utc>>,
    ) -> Result<Option<DateTime<Utc>>> {
        if !self.charges_first_claim_only {
            return Ok(charge);
        }
        let attempt: i32 = sqlx::query_scalar("SELECT attempt FROM todos WHERE id = $1")
            .bind(todo_id)
            .fetch_one(&mut **tx)
            .await
            .map_err(super::db_error)?;
        Ok(if attempt > 0 { None } else { charge })
    }
}

/// After a release (`RefundOnRelease`: gives the latest window's unit back; REQ-3 forbids
/// refunds). A no-op otherwise.
pub(super) async fn after_release<'e>(executor: impl sqlx::PgExecutor<'e>, todo_id: &str) -> Result<()> {
    if !active(Mutant::RefundOnRelease) {
        return Ok(());
    }
    sqlx::query(
        "UPDATE admission_windows w SET used = used - 1 FROM todos t \
         WHERE t.id = $1 AND w.owner_id = coalesce(t.endpoint_id, t.team_id) AND w.queue = t.queue AND w.used > 0 \
           AND w.window_start = (SELECT max(x.window_start) FROM admission_windows x \
             WHERE x.owner_id = w.owner_id AND x.queue = w.queue)",
    )
    .bind(todo_id)
    .execute(executor)
    .await
    .map_err(super::db_error)?;
    Ok(())
}

/// After a policy delete (`RefundOnRecreate`: the identity's charges go with it, as the old
/// `ON DELETE CASCADE` did; REQ-3 keeps them). A no-op otherwise.
pub(super) async fn after_policy_delete(
    tx: &mut Transaction<'static, Postgres>,
    identity: &models::identity::QueueIdentity,
) -> Result<()> {
    if !active(Mutant::RefundOnRecreate) {
        return Ok(());
    }
    for table in ["admission_windows", "admission_charges"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {table} WHERE owner_id = $1 AND queue = $2")))
            .bind(identity.owner_id())
            .bind(&identity.queue)
            .execute(&mut **tx)
            .await
            .map_err(super::db_error)?;
    }
    Ok(())
}

/// A policy write: whether the new current window's counter is left as found instead of rebuilt
/// from the ledger (`RedefinitionStartsAtZero`; REQ-3).
pub(super) fn redefinition_starts_at_zero() -> bool {
    active(Mutant::RedefinitionStartsAtZero)
}

/// A webhook delivery whose id is already recorded: whether to treat it as new and create its
/// todos again (`DedupIgnored`; REQ-2/REQ-3 dedup by delivery id).
pub(super) fn redelivery_treated_as_new() -> bool {
    active(Mutant::DedupIgnored)
}

/// The push session pick: whether it skips a session another transaction holds
/// (`RingSkipsBusySession`; REQ-8, issue #51: a busy session is still rung).
pub(super) fn ring_skips_busy_session() -> bool {
    active(Mutant::RingSkipsBusySession)
}

/// The reopen sweep: whether a rung identity's watch is kept (`ReopenWatchKept`; REQ-8 rings a
/// reopening once).
pub(super) fn reopen_keeps_the_watch() -> bool {
    active(Mutant::ReopenWatchKept)
}

/// The reopen sweep: whether the watches are taken and deleted in a transaction of their own,
/// committed before the ring's (`WatchDroppedBeforeItsRing`; issue #51: a watch goes only with
/// its ring, in one transaction).
pub(super) fn reopen_drops_the_watch_first() -> bool {
    active(Mutant::WatchDroppedBeforeItsRing)
}
