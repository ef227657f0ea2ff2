//! The counters of a policy's additional windows (issue #52, `admission_additional_windows`):
//! read by the claim under its policy lock, by status reads and by policy writes, and recounted
//! from the charge ledger when a policy is written.
//!
//! Its own leaf module because three transaction modules (claims, policies, the claim statement)
//! share these statements and none of them should import another. The primary window's counter
//! stays in `admission_windows`, read where it always was; a policy with no additional window
//! never reaches this module, so SPEC-0030's claim path pays nothing for it.

use super::db_error;
use chrono::{DateTime, Utc};
use models::admission::{ADDITIONAL_WINDOWS_MAX, Policy, WindowSlot};
use models::error::Result;
use models::identity::QueueIdentity;
use sqlx::Postgres;

/// The additional windows of `policy` at `now`, as the columns the statements below bind: each
/// slot (1..) and the start of its window containing `now`.
pub(crate) fn current_windows(policy: &Policy, now: DateTime<Utc>) -> (Vec<i16>, Vec<DateTime<Utc>>) {
    policy
        .charged_windows(now)
        .into_iter()
        .filter(|(slot, _, _)| *slot > 0)
        .map(|(slot, start, _)| (slot as i16, start))
        .unzip()
}

/// The usage of each additional window's current window at `now`, in slot order (zero past the
/// policy's windows and for a window nothing was charged to yet).
pub(crate) async fn used_now<'e>(
    executor: impl sqlx::Executor<'e, Database = Postgres>,
    identity: &QueueIdentity,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<[i64; ADDITIONAL_WINDOWS_MAX]> {
    let (slots, starts) = current_windows(policy, now);
    let mut used = [0; ADDITIONAL_WINDOWS_MAX];
    if slots.is_empty() {
        return Ok(used);
    }
    let rows: Vec<(i16, i32)> = sqlx::query_as(
        "SELECT w.slot, w.used FROM admission_additional_windows w \
         JOIN unnest($3::smallint[], $4::timestamptz[]) AS k (slot, window_start) \
           ON w.slot = k.slot AND w.window_start = k.window_start \
         WHERE w.owner_id = $1 AND w.queue = $2",
    )
    .bind(identity.owner_id())
    .bind(&identity.queue)
    .bind(&slots)
    .bind(&starts)
    .fetch_all(executor)
    .await
    .map_err(db_error)?;
    for (slot, units) in rows {
        if let Some(entry) = used.get_mut((slot as WindowSlot).wrapping_sub(1)) {
            *entry = i64::from(units);
        }
    }
    Ok(used)
}

/// Issue #28's rule per window: each additional window's counter for its current window at
/// `now` rebuilt from the ledger, so a slot whose definition changed counts every charge already
/// in its span. A counter keyed by the same slot and start can only count charges made since that
/// start, all of them in the ledger's sum, so the rebuild never lowers one. Runs under the policy
/// lock, as the primary window's recount does.
pub(crate) async fn recount(
    tx: &mut sqlx::Transaction<'static, Postgres>,
    identity: &QueueIdentity,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<()> {
    let windows: Vec<(WindowSlot, DateTime<Utc>, DateTime<Utc>)> =
        policy.charged_windows(now).into_iter().filter(|(slot, _, _)| *slot > 0).collect();
    if windows.is_empty() {
        return Ok(());
    }
    let slots: Vec<i16> = windows.iter().map(|(slot, _, _)| *slot as i16).collect();
    let starts: Vec<DateTime<Utc>> = windows.iter().map(|(_, start, _)| *start).collect();
    let ends: Vec<DateTime<Utc>> = windows.iter().map(|(_, _, end)| *end).collect();
    sqlx::query(
        "INSERT INTO admission_additional_windows AS w (endpoint_id, team_id, queue, slot, window_start, used, updated_at) \
         SELECT $1, $2, $3, k.slot, k.window_start, sum(c.units), $7 \
         FROM unnest($4::smallint[], $5::timestamptz[], $6::timestamptz[]) AS k (slot, window_start, window_end) \
         JOIN admission_charges c ON c.owner_id = coalesce($1, $2) AND c.queue = $3 \
           AND c.minute >= k.window_start AND c.minute < k.window_end \
         GROUP BY k.slot, k.window_start HAVING sum(c.units) > 0 \
         ON CONFLICT (owner_id, queue, slot, window_start) DO UPDATE SET used = EXCLUDED.used, updated_at = EXCLUDED.updated_at",
    )
    .bind(identity.endpoint_id())
    .bind(identity.team_id())
    .bind(&identity.queue)
    .bind(&slots)
    .bind(&starts)
    .bind(&ends)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}
