//! Where the seeded bugs of `models::mutants` reach `PgStore`: one named hook per site, so the
//! production code around each site reads as production and the catalog's switches live here.
//!
//! Without the `mutants` feature (every build but the simulation's mutant hunt) no bug can be
//! switched on: each hook is the identity or a no-op (`mutants::active` is a constant `false`, so
//! the compiler removes the branches). Production SQL stays literal text at its call site and is
//! handed to a hook, which alone decides whether a bug substitutes it; a substitution that no
//! longer finds its fragment panics, so editing the production SQL cannot silently disarm a bug.
//!
//! Must never hold a rule of its own: a hook answers "as production does" unless its bug is on.

use chrono::{DateTime, Utc};
use models::error::Result;
use models::mutants::{Mutant, active};
use sqlx::{Postgres, Transaction};
use std::sync::OnceLock;

/// `claim_next`, after a refused candidate: whether to give up instead of going on to the other
/// queues (`ClaimNextStopsAtFirstRefusal`; REQ-4).
pub(super) fn claim_next_gives_up_after_refusal() -> bool {
    active(Mutant::ClaimNextStopsAtFirstRefusal)
}

/// `claim_next`'s read first (issue #15) excludes queues on an unlocked status read, so those
/// queues never reach the locked decision: whether to take it, which production always does.
/// Off while a bug that lives in that decision is on (`IgnoreUsage`, `FailOpenUnknownZone`,
/// `CheckOutsideLock`), so every refused queue still meets the bug, as before the read first.
pub(super) fn reads_first() -> bool {
    !(active(Mutant::IgnoreUsage) || active(Mutant::FailOpenUnknownZone) || active(Mutant::CheckOutsideLock))
}

/// The claim's over-admission assertion: whether a bug that over-admits on purpose is on, in
/// which case the assertion stands aside so the simulation's invariants, not a panic, catch it.
/// Read once per claim, so a bug switched off mid-request cannot make its own claim look like an
/// engine fault.
pub(super) fn over_admits_on_purpose() -> bool {
    active(Mutant::CheckOutsideLock) || active(Mutant::IgnoreUsage)
}

/// A locked policy row that does not evaluate: whether to claim as if there were no policy
/// (`FailOpenUnknownZone`; REQ-9 says fail closed).
pub(super) fn fails_open_on_invalid_policy() -> bool {
    active(Mutant::FailOpenUnknownZone)
}

/// The window usage the decision is given (`IgnoreUsage`: none at all; REQ-4).
pub(super) fn used_for_decision(used: i64) -> i64 {
    if active(Mutant::IgnoreUsage) { 0 } else { used }
}

/// The charge of an admitted claim (`ChargePerTodo`: only a todo's first claim is charged; REQ-3
/// charges every claim). The attempt count is read only while that bug is on.
pub(super) async fn charge(
    tx: &mut Transaction<'static, Postgres>,
    todo_id: &str,
    charge: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>> {
    if !active(Mutant::ChargePerTodo) {
        return Ok(charge);
    }
    let attempt: i32 = sqlx::query_scalar("SELECT attempt FROM todos WHERE id = $1")
        .bind(todo_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(super::db_error)?;
    Ok(if attempt > 0 { None } else { charge })
}

/// The in-flight statement of step 4 (`InFlightAcrossQueues`: counts the claims of every queue of
/// the owner; REQ-4 counts this queue's).
pub(super) fn observe_sql(production: &'static str) -> &'static str {
    if !active(Mutant::InFlightAcrossQueues) {
        return production;
    }
    static MUTATED: OnceLock<String> = OnceLock::new();
    MUTATED.get_or_init(|| substituted(production, "t.queue = $4", "true"))
}

/// Whether a candidate that is a lapsed claim is left out of the in-flight count its own
/// takeover is decided on (`TakeoverCountsItself`: never, so it counts itself; REQ-4).
pub(super) fn takeover_leaves_itself_out(takes_over: bool) -> bool {
    takes_over && !active(Mutant::TakeoverCountsItself)
}

/// `claim_next`'s candidate-and-policy statement (`CheckOutsideLock`: the policy row is read
/// without `FOR UPDATE`, so in-flight and usage are read outside the lock).
pub(super) fn pick_candidate_sql(production: String) -> String {
    if !active(Mutant::CheckOutsideLock) {
        return production;
    }
    substituted(&production, " FOR UPDATE) p ON true", ") p ON true")
}

/// `claim`'s policy lock (`CheckOutsideLock`, as in [`pick_candidate_sql`]).
pub(super) fn lock_policy_sql(production: &'static str) -> &'static str {
    if !active(Mutant::CheckOutsideLock) {
        return production;
    }
    static MUTATED: OnceLock<String> = OnceLock::new();
    MUTATED.get_or_init(|| substituted(production, " FOR UPDATE", ""))
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

/// The statuses `claim_next`'s unlocked pre-skip reads: as read, unless the bug counts every
/// lapsed lease as a slot (`PreSkipCountsLapsed`; REQ-4 takes a lapsed claim over within the cap).
pub(super) fn pre_skip_statuses(
    mut statuses: Vec<models::store::QueueAdmission>,
) -> Vec<models::store::QueueAdmission> {
    if active(Mutant::PreSkipCountsLapsed) {
        statuses.iter_mut().for_each(|queue| queue.lapsed = 0);
    }
    statuses
}

/// A webhook delivery whose id is already recorded: whether to treat it as new and create its
/// todos again (`DedupIgnored`; REQ-2/REQ-3 dedup by delivery id).
pub(super) fn redelivery_treated_as_new() -> bool {
    active(Mutant::DedupIgnored)
}

/// `production` with `fragment` replaced once by `replacement`; a fragment that is gone means the
/// production SQL changed under the bug, which must be re-seeded rather than silently disarmed.
fn substituted(production: &str, fragment: &str, replacement: &str) -> String {
    assert!(production.contains(fragment), "seeded bug no longer applies: {fragment:?} is not in {production:?}");
    production.replacen(fragment, replacement, 1)
}
