//! The admission write limiter's state in PostgreSQL, so one limit holds across every replica
//! (SPEC-0030 Security Requirements, issue #28). The arithmetic is `models::rate`'s; this module
//! holds only the statement that applies it to `write_limits`.

use super::{PgStore, db_error};
use chrono::{DateTime, Utc};
use models::error::Result;
use models::rate::{Quota, Verdict, retry_after_seconds};

impl PgStore {
    /// One write against `key`: decided and, when admitted, recorded in one statement, at the
    /// database's clock (one clock for all replicas; the store's clock when one is set). Two
    /// replicas' writes on one key serialise on its row: `ON CONFLICT DO UPDATE ... WHERE`
    /// re-checks the condition against the row as the other committed it.
    pub(crate) async fn take_write_token_tx(&self, key: &str, quota: Quota) -> Result<Verdict> {
        let interval = quota.interval().num_microseconds().unwrap_or(i64::MAX);
        let tolerance = quota.tolerance().num_microseconds().unwrap_or(i64::MAX);
        let (now, prior, admitted): (DateTime<Utc>, Option<DateTime<Utc>>, Option<DateTime<Utc>>) = sqlx::query_as(
            "WITH clock AS (SELECT coalesce($2::timestamptz, clock_timestamp()) AS now), \
             prior AS (SELECT tat FROM write_limits WHERE key = $1), \
             taken AS ( \
               INSERT INTO write_limits AS l (key, tat) \
               SELECT $1, clock.now + make_interval(secs => $3::bigint / 1e6) FROM clock \
               ON CONFLICT (key) DO UPDATE \
                 SET tat = greatest(l.tat, (SELECT now FROM clock)) + make_interval(secs => $3::bigint / 1e6) \
                 WHERE greatest(l.tat, (SELECT now FROM clock)) - (SELECT now FROM clock) \
                   <= make_interval(secs => $4::bigint / 1e6) \
               RETURNING l.tat) \
             SELECT (SELECT now FROM clock), (SELECT tat FROM prior), (SELECT tat FROM taken)",
        )
        .bind(key)
        .bind(self.now_param())
        .bind(interval)
        .bind(tolerance)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?;
        if let Some(tat) = admitted {
            return Ok(Verdict::Admitted { tat });
        }
        // Refused: the wait from the TAT as this statement's snapshot saw it (a write another
        // replica committed meanwhile can only make the true wait longer, by one interval).
        let ahead = prior.map_or(chrono::TimeDelta::zero(), |tat| tat.max(now) - now);
        Ok(Verdict::Refused { retry_after_seconds: retry_after_seconds(ahead - quota.tolerance()) })
    }

    /// Deletes limiter rows whose time has passed: a key idle that long is admitted from scratch.
    pub(crate) async fn prune_write_limits_tx(&self) -> Result<u64> {
        let pruned = sqlx::query("DELETE FROM write_limits WHERE tat < coalesce($1::timestamptz, clock_timestamp())")
            .bind(self.now_param())
            .execute(&self.pool)
            .await
            .map_err(db_error)?
            .rows_affected();
        Ok(pruned)
    }
}
