//! Admission policies: set, replace and clear with an audit record (REQ-10), and the status of
//! each budgeted queue identity, derived when read and never stored (REQ-6).

use super::rows::{AuditRow, PolicyLimitsRow, PolicyRow, identity_of};
use super::sql::{Binds, identity_filter};
use super::{PgStore, additional_windows, db_error, finish, mutant_hooks};
use chrono::{DateTime, Duration, Utc};
use models::admission::{self, ADDITIONAL_WINDOWS_MAX, Observation, Policy};
use models::error::{Error, Result};
use models::forecast::RecentCharges;
use models::identity::Owner;
use models::identity::QueueIdentity;
use models::limits::{
    CHARGE_LEDGER_RETENTION_DAYS, CLAIM_HISTORY_MAX, DETAIL_AUDIT_MAX, DETAIL_WINDOWS_MAX, USAGE_RETENTION_DAYS,
};
use models::scope::Reach;
use models::store::{AuditRecord, Policies, PolicyActor, PolicyDetail, QueueAdmission};
use models::what_if::PastClaim;
use serde_json::Value;

/// How many pending todos a status read counts: all of them (what REQ-7 reports), or only
/// whether there is one (what `claim_next`'s pre-skip needs; cheap on a deep queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pending {
    Count,
    AnyAtAll,
}

impl Pending {
    fn limit(self) -> i64 {
        match self {
            Pending::Count => i64::MAX,
            Pending::AnyAtAll => 1,
        }
    }
}

/// The head of every status read: the clock, and each policy row with its pending count (at
/// most `pending`'s limit) and in-flight claims, as `PolicyRow` names them. The caller appends
/// the WHERE and ORDER BY. The pending count takes one branch per owner kind (a policy has one
/// owner, so the other counts nothing): with the two kinds in one OR, PostgreSQL ORs two bitmap
/// scans, which read every pending entry of a deep queue before the LIMIT can stop them (4 ms
/// for 60,000 pending todos, measured in `bench-admission`'s path (c)). The in-flight claims
/// are read the same way, one branch per kind, for another reason: a bitmap scan never marks an
/// index entry dead, and every claimed-then-finished todo leaves one behind in the in-flight
/// index (a claim's update is not HOT) until vacuum. A plain index scan marks each such entry
/// the first time it meets it; a bitmap scan revisits the heap for all of them at every read
/// (0.19 ms per claim after a few thousand jobs, measured in `bench-peer`'s (b)).
fn status_select(binds: &mut Binds, now: Option<DateTime<Utc>>, pending: Pending) -> String {
    let now = binds.push(now);
    let pending_limit = binds.push(pending.limit());
    format!(
        "WITH clock AS (SELECT coalesce({now}::timestamptz, clock_timestamp()) AS now) \
         SELECT p.id, p.endpoint_id, p.team_id, p.queue, p.max_in_flight, p.max_claims_per_window, \
           p.window_period, p.window_tz, p.window_start, p.window_weekday, p.additional_windows, \
           p.created_at, p.updated_at, \
           (SELECT count(*) FROM (SELECT 1 FROM todos t WHERE t.state = 'pending' AND t.queue = p.queue \
              AND t.endpoint_id = p.endpoint_id LIMIT {pending_limit}) counted) \
           + (SELECT count(*) FROM (SELECT 1 FROM todos t WHERE t.state = 'pending' AND t.queue = p.queue \
              AND t.team_id = p.team_id LIMIT {pending_limit}) counted) AS pending, \
           f.n AS in_flight, f.earliest, f.lapsed, clock.now \
         FROM admission_policies p CROSS JOIN clock \
         CROSS JOIN LATERAL (SELECT count(*) AS n, \
             min(t.lease_expires_at) FILTER (WHERE t.lease_expires_at >= clock.now) AS earliest, \
             count(*) FILTER (WHERE t.lease_expires_at < clock.now AND t.attempt < t.max_attempts) AS lapsed \
             FROM (SELECT t.lease_expires_at, t.attempt, t.max_attempts FROM todos t \
                   WHERE t.state = 'claimed' AND t.queue = p.queue AND t.endpoint_id = p.endpoint_id \
                   UNION ALL SELECT t.lease_expires_at, t.attempt, t.max_attempts FROM todos t \
                   WHERE t.state = 'claimed' AND t.queue = p.queue AND t.team_id = p.team_id) t) f"
    )
}

impl PgStore {
    /// Status of every identity in `identities` that has a policy (unlocked reads).
    pub(crate) async fn queue_admissions_tx(
        &self,
        identities: &[QueueIdentity],
        pending: Pending,
    ) -> Result<Vec<QueueAdmission>> {
        if identities.is_empty() {
            return Ok(vec![]);
        }
        let mut binds = Binds::default();
        let select = status_select(&mut binds, self.now_param(), pending);
        let identities = identity_filter(&mut binds, "p", identities);
        let sql = composed_sql!("{select} WHERE {identities} ORDER BY p.endpoint_id, p.team_id, p.queue");
        self.status_rows(sql, binds, pending).await
    }

    pub(crate) async fn reach_admissions_tx(&self, reach: &Reach) -> Result<Vec<QueueAdmission>> {
        let mut binds = Binds::default();
        let select = status_select(&mut binds, self.now_param(), Pending::Count);
        let (endpoint_ids, team_ids) = (binds.push(&reach.endpoint_ids), binds.push(&reach.team_ids));
        let sql = composed_sql!(
            "{select} WHERE p.endpoint_id = ANY({endpoint_ids}) OR p.team_id = ANY({team_ids}) \
             ORDER BY p.endpoint_id, p.team_id, p.queue"
        );
        self.status_rows(sql, binds, Pending::Count).await
    }

    pub(crate) async fn all_admissions_tx(&self) -> Result<Vec<QueueAdmission>> {
        let mut binds = Binds::default();
        let select = status_select(&mut binds, self.now_param(), Pending::Count);
        self.status_rows(composed_sql!("{select} ORDER BY p.queue, p.id"), binds, Pending::Count).await
    }

    /// Runs a status read (`status_select` and its filter) and evaluates its rows.
    async fn status_rows(
        &self,
        sql: sqlx::AssertSqlSafe<String>,
        binds: Binds,
        pending: Pending,
    ) -> Result<Vec<QueueAdmission>> {
        let rows: Vec<PolicyRow> = sqlx::query_as_with(sql, binds.into_arguments().map_err(db_error)?)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        self.evaluate_rows(rows, pending).await
    }

    /// Reads each policy's current-window usage and derives its status with the shared function.
    /// A row that does not validate is `admission_unavailable` (REQ-9). The forecast's ledger read
    /// is left out of `Pending::AnyAtAll` reads (the pre-skip's and push's), which only ask whether
    /// an identity is deferred and run on the claim and push paths.
    async fn evaluate_rows(&self, rows: Vec<PolicyRow>, pending: Pending) -> Result<Vec<QueueAdmission>> {
        let policies: Vec<std::result::Result<Policy, String>> = rows.iter().map(|row| row.limits.evaluate()).collect();
        // Usage is the identity's, whatever policy row charged it (issue #28).
        let mut keys = UsageKeys::default();
        for (row, policy) in rows.iter().zip(&policies) {
            if let Ok(Policy { window: Some(window), .. }) = policy {
                keys.policy_ids.push(&row.id);
                keys.owner_ids.push(row.endpoint_id.as_deref().or(row.team_id.as_deref()).unwrap_or_default());
                keys.queues.push(&row.queue);
                keys.window_starts.push(window.window_start(row.now));
            }
        }
        let usage: Vec<(String, i32)> = if keys.policy_ids.is_empty() {
            vec![]
        } else {
            sqlx::query_as(
                "SELECT k.policy_id, w.used FROM admission_windows w \
                 JOIN unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS k (policy_id, owner_id, queue, window_start) \
                   ON w.owner_id = k.owner_id AND w.queue = k.queue AND w.window_start = k.window_start",
            )
            .bind(&keys.policy_ids)
            .bind(&keys.owner_ids)
            .bind(&keys.queues)
            .bind(&keys.window_starts)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?
        };
        let usage: std::collections::HashMap<String, i32> = usage.into_iter().collect();
        // Issue #52: the few policies with additional windows read those counters one by one.
        let mut additional_used = Vec::with_capacity(rows.len());
        for (row, policy) in rows.iter().zip(&policies) {
            additional_used.push(match policy {
                Ok(policy) if !policy.additional_windows.is_empty() => {
                    let identity = identity_of(row.endpoint_id.clone(), row.team_id.clone(), row.queue.clone())?;
                    additional_windows::used_now(&self.pool, &identity, policy, row.now).await?
                }
                _ => [0; ADDITIONAL_WINDOWS_MAX],
            });
        }
        let recent = if pending == Pending::Count { self.recent_charges(&keys).await? } else { vec![] };
        rows.into_iter()
            .zip(policies)
            .zip(additional_used)
            .map(|((row, policy), additional_used)| {
                let owner = row.endpoint_id.as_deref().or(row.team_id.as_deref()).unwrap_or_default();
                let ledger = recent.iter().filter(|(o, q, _, _)| o == owner && *q == row.queue);
                let recent = RecentCharges::from_ledger(
                    row.now,
                    ledger.map(|(_, _, minute, units)| (*minute, i64::from(*units))),
                );
                let used = usage.get(&row.id).map_or(0, |used| i64::from(*used));
                let status = match &policy {
                    Ok(policy) => admission::status(
                        policy,
                        &Observation {
                            now: row.now,
                            in_flight: row.in_flight,
                            used,
                            additional_used,
                            recent,
                            earliest_lease_expiry: row.earliest,
                            reaper_interval: self.reaper_interval_chrono(),
                        },
                    ),
                    Err(problem) => {
                        tracing::warn!(policy = %row.id, %problem, "admission policy cannot be evaluated");
                        admission::unavailable_status()
                    }
                };
                Ok(QueueAdmission {
                    identity: identity_of(row.endpoint_id, row.team_id, row.queue)?,
                    policy_id: row.id,
                    policy: policy.ok(),
                    status,
                    pending: row.pending,
                    lapsed: row.lapsed,
                    created_at: row.created_at,
                    updated_at: row.updated_at,
                })
            })
            .collect()
    }

    /// Issue #52: the ledger's recent minutes of the windowed policies in `keys`, for the
    /// forecast: one range read of `admission_charges` per identity, in one statement.
    async fn recent_charges(&self, keys: &UsageKeys<'_>) -> Result<Vec<(String, String, DateTime<Utc>, i32)>> {
        let Some(now) = keys.window_starts.first().map(|_| self.clock.now()) else { return Ok(vec![]) };
        sqlx::query_as(
            "SELECT c.owner_id, c.queue, c.minute, c.units FROM admission_charges c \
             JOIN unnest($1::text[], $2::text[]) AS k (owner_id, queue) ON c.owner_id = k.owner_id AND c.queue = k.queue \
             WHERE c.minute >= $3",
        )
        .bind(&keys.owner_ids)
        .bind(&keys.queues)
        .bind(RecentCharges::oldest_minute(now) - Duration::minutes(1))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }

    pub(crate) async fn policy_detail_tx(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        let admission = self
            .queue_admissions_tx(std::slice::from_ref(identity), Pending::Count)
            .await?
            .pop()
            .ok_or_else(Error::not_found)?;
        let windows: Vec<(DateTime<Utc>, i32)> = sqlx::query_as(
            "SELECT window_start, used FROM admission_windows WHERE owner_id = $1 AND queue = $2 \
             ORDER BY window_start DESC LIMIT $3",
        )
        .bind(identity.owner_id())
        .bind(&identity.queue)
        .bind(DETAIL_WINDOWS_MAX)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let audit = self.policy_audit_tx(identity, DETAIL_AUDIT_MAX).await?;
        Ok(PolicyDetail {
            admission,
            windows: windows.into_iter().map(|(start, used)| (start, i64::from(used))).collect(),
            audit,
        })
    }

    /// The identity's committed claims since `since`, oldest first: when each was claimed and
    /// how long it held its slot (to now when it still does). Every attempt is one committed
    /// claim, charged or not, so the history exists before any budget does. At most
    /// `CLAIM_HISTORY_MAX`, the newest. Read by the board's usage charts and budget preview.
    pub async fn claim_history(&self, identity: &QueueIdentity, since: DateTime<Utc>) -> Result<Vec<PastClaim>> {
        // One constant statement per owner kind, so each uses its own tenant index.
        let sql = match identity.owner {
            Owner::Endpoint(_) => {
                "SELECT a.started_at, a.ended_at FROM todo_attempts a JOIN todos t ON t.id = a.todo_id \
                 WHERE t.endpoint_id = $1 AND t.queue = $2 AND a.started_at >= $3 \
                 ORDER BY a.started_at DESC LIMIT $4"
            }
            Owner::Team(_) => {
                "SELECT a.started_at, a.ended_at FROM todo_attempts a JOIN todos t ON t.id = a.todo_id \
                 WHERE t.team_id = $1 AND t.queue = $2 AND a.started_at >= $3 \
                 ORDER BY a.started_at DESC LIMIT $4"
            }
        };
        let rows: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)> = sqlx::query_as(sql)
            .bind(identity.owner_id())
            .bind(&identity.queue)
            .bind(since)
            .bind(CLAIM_HISTORY_MAX)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        let now = self.clock.now();
        Ok(rows
            .into_iter()
            .rev()
            .map(|(started, ended)| PastClaim { claimed_at: started, held_for: ended.unwrap_or(now) - started })
            .collect())
    }

    /// Issue #52's usage charts, one per window: the units the charge ledger holds for
    /// `identity` in each span `[start, end)`, in the order given. The ledger counts every
    /// charge whatever window it was charged to, so any window definition's past spans can be
    /// summed from it, as far back as it is kept (`CHARGE_LEDGER_RETENTION_DAYS`).
    pub async fn charged_in(
        &self,
        identity: &QueueIdentity,
        spans: &[(DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<Vec<i64>> {
        let (starts, ends): (Vec<DateTime<Utc>>, Vec<DateTime<Utc>>) = spans.iter().copied().unzip();
        let units: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT k.n, coalesce(sum(c.units), 0)::bigint \
             FROM unnest($3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS k (start, until, n) \
             LEFT JOIN admission_charges c ON c.owner_id = $1 AND c.queue = $2 \
               AND c.minute >= k.start AND c.minute < k.until \
             GROUP BY k.n ORDER BY k.n",
        )
        .bind(identity.owner_id())
        .bind(&identity.queue)
        .bind(&starts)
        .bind(&ends)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(units.into_iter().map(|(_, units)| units).collect())
    }

    /// REQ-10: full replace (or create), audited, in one transaction. The policy row is locked
    /// like a claim locks it, so a change lands between claims, never inside one.
    pub(crate) async fn set_policy_tx(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        let mut tx = self.begin().await?;
        let outcome = async {
            // The row lock first, then the clock: the audit's `at` then follows every claim that
            // committed under the previous version.
            let before = locked_policy_json(&mut tx, identity).await?;
            let now = self.clock_after_lock(&mut tx).await?;
            let window = policy.window.as_ref();
            let additional_windows = policy.additional_windows_json();
            // The arbiter is the identity's unique constraint: (endpoint_id, queue) or (team_id, queue).
            let arbiter = if identity.endpoint_id().is_some() { "endpoint_id, queue" } else { "team_id, queue" };
            let id: String = sqlx::query_scalar(composed_sql!(
                "INSERT INTO admission_policies AS p (id, endpoint_id, team_id, queue, max_in_flight, max_claims_per_window, \
                   window_period, window_tz, window_start, window_weekday, additional_windows, created_by_human_id, \
                   updated_by_human_id, created_at, updated_at) \
                 VALUES ('ap_' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3, $4, $5, $6, $7, $8, $9, $12, $10, $10, \
                   $11, $11) \
                 ON CONFLICT ({arbiter}) DO UPDATE SET max_in_flight = EXCLUDED.max_in_flight, \
                   max_claims_per_window = EXCLUDED.max_claims_per_window, window_period = EXCLUDED.window_period, \
                   window_tz = EXCLUDED.window_tz, window_start = EXCLUDED.window_start, window_weekday = EXCLUDED.window_weekday, \
                   additional_windows = EXCLUDED.additional_windows, updated_by_human_id = EXCLUDED.updated_by_human_id, updated_at = EXCLUDED.updated_at \
                 RETURNING p.id"
            ))
            .bind(identity.endpoint_id())
            .bind(identity.team_id())
            .bind(&identity.queue)
            .bind(policy.max_in_flight.map(|v| v as i32))
            .bind(policy.max_claims_per_window.map(|v| v as i32))
            .bind(window.map(|w| w.period_name()))
            .bind(window.and_then(|w| w.tz_name()))
            .bind(window.and_then(|w| w.start_text()))
            .bind(window.and_then(|w| w.weekday_name()))
            .bind(&actor.human_id)
            .bind(now)
            .bind(additional_windows)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            if let Some(window) = policy.charged_window(now)
                && !mutant_hooks::redefinition_starts_at_zero()
            {
                recount_window(&mut tx, identity, window, now).await?;
                additional_windows::recount(&mut tx, identity, policy, now).await?;
            }
            self.watch_if_deferred_by(&mut tx, identity, policy, now).await?;
            let action = if before.is_some() { "update" } else { "create" };
            audit(&mut tx, &id, identity, actor, action, before, Some(policy.to_json()), now).await?;
            tracing::info!(queue = %identity, action, "admission policy saved");
            Ok(())
        }
        .await;
        finish(tx, outcome).await?;
        // Read back after commit, through the pool, as any later reader will see it.
        self.queue_admissions_tx(std::slice::from_ref(identity), Pending::Count)
            .await?
            .pop()
            .ok_or_else(|| Error::internal("saved policy vanished"))
    }

    /// REQ-8 (issue #28): a policy write that leaves the identity deferred (lowered below its
    /// usage or in-flight count, or paused) records the reopen watch in its own transaction, so
    /// raising it again rings the waiting work once. Read under the policy lock, as a claim reads.
    async fn watch_if_deferred_by(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
        identity: &QueueIdentity,
        policy: &Policy,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let window_start = policy.window.as_ref().map(|w| w.window_start(now));
        let (in_flight, used): (i64, Option<i32>) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM todos t WHERE t.state = 'claimed' AND t.queue = $3 AND t.endpoint_id = $1) \
                    + (SELECT count(*) FROM todos t WHERE t.state = 'claimed' AND t.queue = $3 AND t.team_id = $2), \
                    (SELECT w.used FROM admission_windows w WHERE w.owner_id = coalesce($1, $2) AND w.queue = $3 \
                       AND w.window_start = $4)",
        )
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .bind(window_start)
        .fetch_one(&mut **tx)
        .await
        .map_err(db_error)?;
        let used = if policy.charges() { i64::from(used.unwrap_or(0)) } else { 0 };
        let additional = additional_windows::used_now(&mut **tx, identity, policy, now).await?;
        if admission::decide(policy, in_flight, admission::Used { primary: used, additional })
            != admission::Decision::Admit
        {
            self.watch_if_waiting(tx, identity, now).await?;
        }
        Ok(())
    }

    pub(crate) async fn clear_policy_tx(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let Some(before) = locked_policy_json(&mut tx, identity).await? else {
                return Err(Error::not_found());
            };
            let id: String = sqlx::query_scalar(
                "DELETE FROM admission_policies WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) RETURNING id",
            )
            .bind(identity.endpoint_id())
            .bind(identity.team_id())
            .bind(&identity.queue)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            mutant_hooks::after_policy_delete(&mut tx, identity).await?;
            audit(&mut tx, &id, identity, actor, "delete", Some(before), None, now).await?;
            tracing::info!(queue = %identity, "admission policy cleared");
            Ok(())
        }
        .await;
        finish(tx, outcome).await
    }

    pub(crate) async fn policy_audit_tx(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>> {
        let rows: Vec<AuditRow> = sqlx::query_as(
            "SELECT actor_human_id, actor_endpoint_id, at, action, before, after FROM admission_audit \
             WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) ORDER BY at DESC, id DESC LIMIT $4",
        )
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .bind(limit.clamp(1, 1000))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(AuditRow::into_record).collect())
    }

    /// Drops usage rows older than the retention (recent windows stay readable), ledger rows
    /// older than the longest window needs (`CHARGE_LEDGER_RETENTION_DAYS`) and limiter rows whose
    /// time has passed. Counts the usage rows.
    pub(crate) async fn prune_usage_tx(&self) -> Result<u64> {
        let now = self.clock.now();
        let pruned = sqlx::query("DELETE FROM admission_windows WHERE window_start < $1")
            .bind(now - Duration::days(USAGE_RETENTION_DAYS))
            .execute(&self.pool)
            .await
            .map_err(db_error)?
            .rows_affected();
        sqlx::query("DELETE FROM admission_additional_windows WHERE window_start < $1")
            .bind(now - Duration::days(USAGE_RETENTION_DAYS))
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        sqlx::query("DELETE FROM admission_charges WHERE minute < $1")
            .bind(now - Duration::days(CHARGE_LEDGER_RETENTION_DAYS))
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        self.prune_write_limits_tx().await?;
        Ok(pruned)
    }
}

/// Issue #28: the counter of `window` (the one the policy just written places `now` in) rebuilt
/// from the ledger, so it counts every charge committed in its span, under whatever definition
/// made it. Runs under the policy lock, so no claim of the identity charges meanwhile. A span
/// with no charge writes no row, as a claim would not have.
async fn recount_window(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    identity: &QueueIdentity,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO admission_windows AS w (endpoint_id, team_id, queue, window_start, used, updated_at) \
         SELECT $1, $2, $3, $4, sum(c.units), $6 FROM admission_charges c \
         WHERE c.owner_id = coalesce($1, $2) AND c.queue = $3 AND c.minute >= $4 AND c.minute < $5 \
         HAVING sum(c.units) > 0 \
         ON CONFLICT (owner_id, queue, window_start) DO UPDATE SET used = EXCLUDED.used, updated_at = EXCLUDED.updated_at",
    )
    .bind(identity.endpoint_id())
    .bind(identity.team_id())
    .bind(&identity.queue)
    .bind(start)
    .bind(end)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The usage rows a status read looks up, one per policy with a window, by column.
#[derive(Default)]
struct UsageKeys<'a> {
    policy_ids: Vec<&'a str>,
    owner_ids: Vec<&'a str>,
    queues: Vec<&'a str>,
    window_starts: Vec<DateTime<Utc>>,
}

/// The current policy as JSON, locked for the change; None when there is none.
pub(super) async fn locked_policy_json(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    identity: &QueueIdentity,
) -> Result<Option<Value>> {
    let row: Option<PolicyLimitsRow> = sqlx::query_as(
        "SELECT max_in_flight, max_claims_per_window, window_period, window_tz, window_start, window_weekday, \
           additional_windows FROM admission_policies WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2) FOR UPDATE",
    )
    .bind(identity.endpoint_id())
    .bind(identity.team_id())
    .bind(&identity.queue)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(row.map(|row| {
        let mut before = serde_json::json!({
            "max_in_flight": row.max_in_flight,
            "max_claims_per_window": row.max_claims_per_window,
            "window": row.window_period.map(|period| serde_json::json!({
                "period": period, "tz": row.window_tz, "start": row.window_start, "weekday": row.window_weekday,
            })),
        });
        if let (Some(additional), Some(map)) = (row.additional_windows, before.as_object_mut()) {
            map.insert("additional_windows".into(), additional);
        }
        before
    }))
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn audit(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    policy_id: &str,
    identity: &QueueIdentity,
    actor: &PolicyActor,
    action: &str,
    before: Option<Value>,
    after: Option<Value>,
    at: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO admission_audit (policy_id, endpoint_id, team_id, queue, actor_human_id, actor_endpoint_id, action, before, after, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(policy_id)
    .bind(identity.endpoint_id())
    .bind(identity.team_id())
    .bind(&identity.queue)
    .bind(&actor.human_id)
    .bind(&actor.endpoint_id)
    .bind(action)
    .bind(before)
    .bind(after)
    .bind(at)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The policies role on PostgreSQL: the transactions above, and `write_limits.rs`'s write token.
impl Policies for PgStore {
    async fn all_admissions_unscoped(&self) -> Result<Vec<QueueAdmission>> {
        self.all_admissions_tx().await
    }

    async fn queue_admissions(&self, identities: &[QueueIdentity]) -> Result<Vec<QueueAdmission>> {
        self.queue_admissions_tx(identities, super::admission::Pending::Count).await
    }

    async fn reach_admissions(&self, reach: &Reach) -> Result<Vec<QueueAdmission>> {
        self.reach_admissions_tx(reach).await
    }

    async fn policy_detail(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        self.policy_detail_tx(identity).await
    }

    async fn set_policy(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        self.set_policy_tx(identity, policy, actor).await
    }

    async fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        self.clear_policy_tx(identity, actor).await
    }

    async fn policy_audit(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>> {
        self.policy_audit_tx(identity, limit).await
    }

    async fn prune_usage(&self) -> Result<u64> {
        self.prune_usage_tx().await
    }

    async fn take_write_token(&self, key: &str, quota: models::rate::Quota) -> Result<models::rate::Verdict> {
        self.take_write_token_tx(key, quota).await
    }
}
