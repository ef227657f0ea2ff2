//! Notify hooks on PostgreSQL (SPEC-0024; `docs/push.md`): an endpoint's outbound URLs and the
//! outbox their calls wait in.
//!
//! A call is written to `hook_outbox` by the transaction that decided it (see `push.rs`), so a
//! replica crash loses none. A replica leases due rows (`SKIP LOCKED`, `HOOK_LEASE_SECONDS`),
//! sends them, and records the outcome only while it still holds the lease; a crashed sender's
//! lease lapses and another replica sends the call. The lease outlasts the 5 s call timeout, so
//! two live replicas never both send one call. The per-hook rate limit is counted on the hook's
//! row, exact across replicas.

use super::rows::identity_of;
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Duration, DurationRound, Utc};
use models::error::{Code, Error, Result};
use models::identity::QueueIdentity;
use models::push::{self, HOOK_DEFERRED_AT_SEND, HookCall, HookOutcome, NotifyHook};
use models::store::Hooks;
use serde_json::Value;
use sqlx::{Postgres, Transaction};

const HOOK_COLUMNS: &str =
    "h.id, h.endpoint_id, h.url, h.ignore_presence, h.enabled, h.consecutive_failures, h.disabled_reason, h.created_at";

#[derive(sqlx::FromRow)]
struct HookRow {
    id: String,
    endpoint_id: String,
    url: String,
    ignore_presence: bool,
    enabled: bool,
    consecutive_failures: i32,
    disabled_reason: Option<String>,
    created_at: DateTime<Utc>,
}

impl From<HookRow> for NotifyHook {
    fn from(row: HookRow) -> NotifyHook {
        NotifyHook {
            id: row.id,
            endpoint_id: row.endpoint_id,
            url: row.url,
            ignore_presence: row.ignore_presence,
            enabled: row.enabled,
            consecutive_failures: row.consecutive_failures,
            disabled_reason: row.disabled_reason,
            created_at: row.created_at,
        }
    }
}

#[derive(sqlx::FromRow)]
struct CallRow {
    id: i64,
    hook_id: String,
    url: String,
    secret: String,
    msg_id: String,
    body: Value,
    attempts: i32,
    /// The queue identity of the todo the call is about, while the todo exists.
    todo_endpoint_id: Option<String>,
    todo_team_id: Option<String>,
    todo_queue: Option<String>,
}

impl CallRow {
    fn identity(&self) -> Option<QueueIdentity> {
        identity_of(self.todo_endpoint_id.clone(), self.todo_team_id.clone(), self.todo_queue.clone()?).ok()
    }
}

impl PgStore {
    pub(crate) async fn add_hook_tx(
        &self,
        endpoint_id: &str,
        url: &str,
        secret: &str,
        ignore_presence: bool,
    ) -> Result<NotifyHook> {
        let mut tx = self.begin().await?;
        let outcome = async {
            // The endpoint row lock serialises concurrent adds, so the cap is exact.
            let found: Option<String> = sqlx::query_scalar("SELECT id FROM endpoints WHERE id = $1 FOR UPDATE")
                .bind(endpoint_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
            found.ok_or_else(Error::not_found)?;
            let count: i64 = sqlx::query_scalar("SELECT count(*) FROM notify_hooks WHERE endpoint_id = $1")
                .bind(endpoint_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
            if count >= push::HOOKS_PER_ENDPOINT_MAX {
                return Err(Error::new(
                    Code::Conflict,
                    format!("an endpoint has at most {} notify hooks", push::HOOKS_PER_ENDPOINT_MAX),
                ));
            }
            let row: HookRow = sqlx::query_as(composed_sql!(
                "INSERT INTO notify_hooks AS h (id, endpoint_id, url, secret, ignore_presence, created_at) \
                 VALUES ('nh_' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3, $4, \
                         coalesce($5::timestamptz, clock_timestamp())) \
                 RETURNING {HOOK_COLUMNS}"
            ))
            .bind(endpoint_id)
            .bind(url)
            .bind(secret)
            .bind(ignore_presence)
            .bind(self.now_param())
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            Ok(NotifyHook::from(row))
        }
        .await;
        finish(tx, outcome).await
    }

    pub(crate) async fn list_hooks_tx(&self, endpoint_id: &str) -> Result<Vec<NotifyHook>> {
        let rows: Vec<HookRow> = sqlx::query_as(composed_sql!(
            "SELECT {HOOK_COLUMNS} FROM notify_hooks h WHERE h.endpoint_id = $1 ORDER BY h.created_at, h.id"
        ))
        .bind(endpoint_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(NotifyHook::from).collect())
    }

    pub(crate) async fn hook_for_test_tx(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)> {
        #[derive(sqlx::FromRow)]
        struct WithSecret {
            #[sqlx(flatten)]
            hook: HookRow,
            secret: String,
        }
        let row: Option<WithSecret> = sqlx::query_as(composed_sql!(
            "SELECT {HOOK_COLUMNS}, h.secret FROM notify_hooks h WHERE h.endpoint_id = $1 AND h.id = $2"
        ))
        .bind(endpoint_id)
        .bind(hook_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        let row = row.ok_or_else(Error::not_found)?;
        Ok((NotifyHook::from(row.hook), row.secret))
    }

    pub(crate) async fn remove_hook_tx(&self, endpoint_id: &str, hook_id: &str) -> Result<()> {
        let removed = sqlx::query("DELETE FROM notify_hooks WHERE endpoint_id = $1 AND id = $2")
            .bind(endpoint_id)
            .bind(hook_id)
            .execute(&self.pool)
            .await
            .map_err(db_error)?
            .rows_affected();
        if removed == 0 { Err(Error::not_found()) } else { Ok(()) }
    }

    /// Leases due calls of enabled hooks to `replica`. A hook past its per-minute limit keeps
    /// its calls for the next minute.
    pub(crate) async fn take_hook_calls_tx(&self, replica: &str) -> Result<Vec<HookCall>> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let now: DateTime<Utc> = sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
                .bind(self.now_param())
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
            let due = lock_due_calls(&mut tx, now).await?;
            let due = self.drop_deferred_calls(&mut tx, due, now).await?;
            let minute = now.duration_trunc(Duration::minutes(1)).unwrap_or(now);
            let mut calls = Vec::new();
            for row in due {
                if let Some(call) = lease_within_rate(&mut tx, row, replica, now, minute).await? {
                    calls.push(call);
                }
            }
            Ok(calls)
        }
        .await;
        finish(tx, outcome).await
    }

    /// REQ-8 (issue #28): no hook call while its queue is deferred, checked again at send time.
    /// A call whose queue was deferred since it was enqueued is dropped and its queue watched
    /// (the reopening enqueues a `reopened` call); the others are returned, in order.
    async fn drop_deferred_calls(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        due: Vec<CallRow>,
        now: DateTime<Utc>,
    ) -> Result<Vec<CallRow>> {
        let identities: Vec<Option<QueueIdentity>> = due.iter().map(CallRow::identity).collect();
        let deferred = self.deferred_among(identities.iter().flatten()).await?;
        let mut sendable = Vec::with_capacity(due.len());
        for (row, identity) in due.into_iter().zip(identities) {
            match identity.filter(|identity| deferred.contains(identity)) {
                Some(identity) => {
                    sqlx::query(
                        "UPDATE hook_outbox SET outcome = 'dropped', last_error = $2, leased_until = NULL WHERE id = $1",
                    )
                    .bind(row.id)
                    .bind(HOOK_DEFERRED_AT_SEND)
                    .execute(&mut **tx)
                    .await
                    .map_err(db_error)?;
                    self.watch_if_waiting(tx, &identity, now).await?;
                }
                None => sendable.push(row),
            }
        }
        Ok(sendable)
    }

    /// Records a call's outcome while `replica` still holds its lease: delivered; failed
    /// (retried with backoff up to `HOOK_ATTEMPTS_MAX`); refused (never retried). Failures and
    /// refusals count toward disabling the hook; a delivery resets the count.
    pub(crate) async fn finish_hook_call_tx(&self, call_id: i64, replica: &str, outcome: &HookOutcome) -> Result<()> {
        let mut tx = self.begin().await?;
        let result = async {
            let now: DateTime<Utc> = sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
                .bind(self.now_param())
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
            let held: Option<(String, i32)> = sqlx::query_as(
                "SELECT hook_id, attempts FROM hook_outbox WHERE id = $1 AND leased_by = $2 AND outcome IS NULL FOR UPDATE",
            )
            .bind(call_id)
            .bind(replica)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            let Some((hook_id, attempts_before)) = held else {
                return Ok(());
            };
            let attempts = attempts_before + 1;
            let (final_outcome, error, retry_at) = match outcome {
                HookOutcome::Delivered => (Some("delivered"), None, None),
                HookOutcome::Refused(reason) => (Some("refused"), Some(reason.as_str()), None),
                HookOutcome::Failed(reason) if attempts >= push::HOOK_ATTEMPTS_MAX => {
                    (Some("failed"), Some(reason.as_str()), None)
                }
                HookOutcome::Failed(reason) => (None, Some(reason.as_str()), Some(now + push::hook_retry_after(attempts))),
            };
            sqlx::query(
                "UPDATE hook_outbox SET attempts = $2, outcome = $3, last_error = $4, leased_by = NULL, leased_until = NULL, \
                   sent_at = CASE WHEN $3 = 'delivered' THEN $5 ELSE sent_at END, \
                   next_attempt_at = coalesce($6, next_attempt_at) WHERE id = $1",
            )
            .bind(call_id)
            .bind(attempts)
            .bind(final_outcome)
            .bind(error)
            .bind(now)
            .bind(retry_at)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            record_hook_health(&mut tx, &hook_id, *outcome == HookOutcome::Delivered).await
        }
        .await;
        finish(tx, result).await
    }
}

/// A finished call's effect on its hook: a delivery resets the failure count; a failure or refusal
/// adds one, and the one that reaches `HOOK_FAILURES_TO_DISABLE` disables the hook and drops its
/// waiting calls.
async fn record_hook_health(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    hook_id: &str,
    delivered: bool,
) -> Result<()> {
    if delivered {
        sqlx::query("UPDATE notify_hooks SET consecutive_failures = 0 WHERE id = $1")
            .bind(hook_id)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        return Ok(());
    }
    let disabled: Option<String> = sqlx::query_scalar(
        "UPDATE notify_hooks SET consecutive_failures = consecutive_failures + 1, \
           enabled = CASE WHEN consecutive_failures + 1 >= $2 THEN false ELSE enabled END, \
           disabled_reason = CASE WHEN consecutive_failures + 1 >= $2 AND enabled \
             THEN format('disabled after %s consecutive failed calls', consecutive_failures + 1) \
             ELSE disabled_reason END \
         WHERE id = $1 RETURNING CASE WHEN enabled THEN NULL ELSE id END",
    )
    .bind(hook_id)
    .bind(push::HOOK_FAILURES_TO_DISABLE)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db_error)?
    .flatten();
    if disabled.is_some() {
        // A disabled hook's waiting calls are dropped, not sent later by surprise.
        sqlx::query(
            "UPDATE hook_outbox SET outcome = 'dropped', leased_by = NULL, leased_until = NULL \
             WHERE hook_id = $1 AND outcome IS NULL",
        )
        .bind(hook_id)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// The due calls of enabled hooks no replica holds, oldest first, locked (`SKIP LOCKED`, so
/// replicas take different calls), at most `HOOK_CALLS_PER_PASS_MAX`.
async fn lock_due_calls(tx: &mut Transaction<'static, Postgres>, now: DateTime<Utc>) -> Result<Vec<CallRow>> {
    sqlx::query_as(
        "SELECT o.id, o.hook_id, h.url, h.secret, o.msg_id, o.body, o.attempts, \
           t.endpoint_id AS todo_endpoint_id, t.team_id AS todo_team_id, t.queue AS todo_queue \
         FROM hook_outbox o JOIN notify_hooks h ON h.id = o.hook_id \
         LEFT JOIN todos t ON t.id = o.body->>'todo_id' \
         WHERE o.outcome IS NULL AND o.next_attempt_at <= $1 AND (o.leased_until IS NULL OR o.leased_until < $1) \
           AND h.enabled \
         ORDER BY o.next_attempt_at, o.id LIMIT $2 FOR UPDATE OF o SKIP LOCKED",
    )
    .bind(now)
    .bind(push::HOOK_CALLS_PER_PASS_MAX)
    .fetch_all(&mut **tx)
    .await
    .map_err(db_error)
}

/// Leases `row` to `replica` if its hook is within this minute's call limit (counted on the hook
/// row: exact across replicas, reset each minute); otherwise moves it to the next minute.
async fn lease_within_rate(
    tx: &mut Transaction<'static, Postgres>,
    row: CallRow,
    replica: &str,
    now: DateTime<Utc>,
    minute: DateTime<Utc>,
) -> Result<Option<HookCall>> {
    let allowed: Option<String> = sqlx::query_scalar(
        "UPDATE notify_hooks SET rate_calls = CASE WHEN rate_minute = $2 THEN rate_calls + 1 ELSE 1 END, \
           rate_minute = $2 \
         WHERE id = $1 AND (rate_minute IS DISTINCT FROM $2 OR rate_calls < $3) RETURNING id",
    )
    .bind(&row.hook_id)
    .bind(minute)
    .bind(push::HOOK_CALLS_PER_MINUTE_MAX)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db_error)?;
    let (leased_until, next_attempt_at) = match allowed {
        Some(_) => (Some(now + Duration::seconds(push::HOOK_LEASE_SECONDS)), None),
        None => (None, Some(minute + Duration::minutes(1))),
    };
    sqlx::query(
        "UPDATE hook_outbox SET leased_by = CASE WHEN $2::timestamptz IS NULL THEN leased_by ELSE $4 END, \
           leased_until = coalesce($2, leased_until), next_attempt_at = coalesce($3, next_attempt_at) \
         WHERE id = $1",
    )
    .bind(row.id)
    .bind(leased_until)
    .bind(next_attempt_at)
    .bind(replica)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(leased_until.map(|_| HookCall {
        id: row.id,
        hook_id: row.hook_id,
        url: row.url,
        secret: row.secret,
        msg_id: row.msg_id,
        body: row.body,
        attempts: row.attempts,
    }))
}

/// The hooks role on PostgreSQL: each method is one of the transactions above.
impl Hooks for PgStore {
    async fn add_hook(&self, endpoint_id: &str, url: &str, secret: &str, ignore_presence: bool) -> Result<NotifyHook> {
        self.add_hook_tx(endpoint_id, url, secret, ignore_presence).await
    }

    async fn list_hooks(&self, endpoint_id: &str) -> Result<Vec<NotifyHook>> {
        self.list_hooks_tx(endpoint_id).await
    }

    async fn hook_for_test(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)> {
        self.hook_for_test_tx(endpoint_id, hook_id).await
    }

    async fn remove_hook(&self, endpoint_id: &str, hook_id: &str) -> Result<()> {
        self.remove_hook_tx(endpoint_id, hook_id).await
    }

    async fn take_hook_calls(&self, replica_id: &str) -> Result<Vec<HookCall>> {
        self.take_hook_calls_tx(replica_id).await
    }

    async fn finish_hook_call(&self, call_id: i64, replica_id: &str, outcome: &HookOutcome) -> Result<()> {
        self.finish_hook_call_tx(call_id, replica_id, outcome).await
    }
}
