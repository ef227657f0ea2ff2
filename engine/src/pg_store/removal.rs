//! Removing principals: `switchboard admin human remove NAME` and `switchboard admin team member
//! remove TEAM HUMAN`, each one transaction, so a departure takes effect all at once.
//!
//! A removed human keeps their row, so the work and audit they leave stay attributable, but can
//! no longer act: their operator tokens are revoked, their board sessions and sign-in links are
//! gone, their team memberships are gone, their endpoints are revoked (MCP then 401, the work is
//! kept) and they are no longer an instance admin. A removed member loses the team's reach and
//! management at once, because reach is computed from live rows on every call.
//!
//! Either way, todos leased to an endpoint the person owns (for a member: the team's todos only)
//! go back to pending with their attempt unchanged, as a release does, so nobody waits for a
//! lease nobody will finish. This module must never delete a todo or a human row.

use super::PgStore;
use super::bootstrap::BootstrapError;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;

/// How many released todo ids a removal reports; the count is always exact.
const RELEASED_IDS_REPORTED_MAX: i64 = 100;

/// What `admin human remove` took away.
#[derive(Debug)]
pub struct HumanRemoval {
    pub human_id: String,
    pub name: String,
    pub tokens_revoked: u64,
    pub board_sessions_ended: u64,
    pub teams_left: Vec<String>,
    pub endpoints_revoked: u64,
    pub leases_released: u64,
    /// The first released todo ids (at most `RELEASED_IDS_REPORTED_MAX`).
    pub released_todo_ids: Vec<String>,
}

/// What `admin team member remove` took away.
#[derive(Debug)]
pub struct MemberRemoval {
    pub team_id: String,
    pub human_id: String,
    pub role: String,
    pub leases_released: u64,
    pub released_todo_ids: Vec<String>,
}

#[derive(sqlx::FromRow)]
struct Released {
    count: i64,
    ids: Vec<String>,
}

impl PgStore {
    /// `switchboard admin human remove NAME` (name or id).
    pub async fn remove_human(&self, human: &str) -> Result<HumanRemoval, BootstrapError> {
        let mut tx = self.pool.begin().await?;
        let found: Option<(String, String)> = sqlx::query_as(
            "SELECT id, name FROM humans WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1 FOR UPDATE",
        )
        .bind(human)
        .fetch_optional(&mut *tx)
        .await?;
        let (human_id, name) = found.ok_or_else(|| BootstrapError::NotFound(format!("human {human}")))?;
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
            .bind(self.now_param())
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query("UPDATE humans SET instance_admin = false WHERE id = $1").bind(&human_id).execute(&mut *tx).await?;
        let tokens_revoked =
            sqlx::query("UPDATE api_tokens SET revoked_at = $2 WHERE human_id = $1 AND revoked_at IS NULL")
                .bind(&human_id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        let board_sessions_ended = sqlx::query("DELETE FROM board_sessions WHERE human_id = $1")
            .bind(&human_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM board_login_links WHERE human_id = $1").bind(&human_id).execute(&mut *tx).await?;
        let mut teams_left: Vec<String> =
            sqlx::query_scalar("DELETE FROM team_members WHERE human_id = $1 RETURNING team_id")
                .bind(&human_id)
                .fetch_all(&mut *tx)
                .await?;
        teams_left.sort();
        let endpoints_revoked =
            sqlx::query("UPDATE endpoints SET revoked = true WHERE owner_human_id = $1 AND NOT revoked")
                .bind(&human_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        let released = release_leases_of(&mut tx, &human_id, None, now).await?;
        tx.commit().await?;
        self.await_credential_change().await.map_err(BootstrapError::unconfirmed)?;
        let removal = HumanRemoval {
            human_id,
            name,
            tokens_revoked,
            board_sessions_ended,
            teams_left,
            endpoints_revoked,
            leases_released: u64::try_from(released.count).unwrap_or(0),
            released_todo_ids: released.ids,
        };
        tracing::info!(
            human = %removal.human_id,
            tokens_revoked = removal.tokens_revoked,
            board_sessions_ended = removal.board_sessions_ended,
            teams_left = removal.teams_left.len(),
            endpoints_revoked = removal.endpoints_revoked,
            leases_released = removal.leases_released,
            "admin: human removed"
        );
        Ok(removal)
    }

    /// `switchboard admin team member remove TEAM HUMAN`. The team's last owner cannot be
    /// removed: a team nobody configures could never be managed again.
    pub async fn remove_member(&self, team: &str, human: &str) -> Result<MemberRemoval, BootstrapError> {
        let mut tx = self.pool.begin().await?;
        let team_id: Option<String> = sqlx::query_scalar(
            "SELECT id FROM teams WHERE id = $1 OR slug = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1",
        )
        .bind(team)
        .fetch_optional(&mut *tx)
        .await?;
        let team_id = team_id.ok_or_else(|| BootstrapError::NotFound(format!("team {team}")))?;
        let human_id: Option<String> =
            sqlx::query_scalar("SELECT id FROM humans WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1")
                .bind(human)
                .fetch_optional(&mut *tx)
                .await?;
        let human_id = human_id.ok_or_else(|| BootstrapError::NotFound(format!("human {human}")))?;
        // Every member row of the team, locked: two removals of its owners cannot both pass the
        // last-owner check.
        let members: Vec<(String, String)> =
            sqlx::query_as("SELECT human_id, role FROM team_members WHERE team_id = $1 ORDER BY human_id FOR UPDATE")
                .bind(&team_id)
                .fetch_all(&mut *tx)
                .await?;
        let Some((_, role)) = members.iter().find(|(member, _)| member == &human_id) else {
            return Err(BootstrapError::NotFound(format!("{human} is not a member of team {team}")));
        };
        let role = role.clone();
        let owners = members.iter().filter(|(_, role)| role == "owner").count();
        if role == "owner" && owners == 1 {
            return Err(BootstrapError::Invalid(format!(
                "{human} is the last owner of team {team}; add another owner first"
            )));
        }
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
            .bind(self.now_param())
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM team_members WHERE team_id = $1 AND human_id = $2")
            .bind(&team_id)
            .bind(&human_id)
            .execute(&mut *tx)
            .await?;
        let released = release_leases_of(&mut tx, &human_id, Some(&team_id), now).await?;
        tx.commit().await?;
        self.await_credential_change().await.map_err(BootstrapError::unconfirmed)?;
        let removal = MemberRemoval {
            team_id,
            human_id,
            role,
            leases_released: u64::try_from(released.count).unwrap_or(0),
            released_todo_ids: released.ids,
        };
        tracing::info!(
            team = %removal.team_id,
            human = %removal.human_id,
            role = %removal.role,
            leases_released = removal.leases_released,
            "admin: team member removed"
        );
        Ok(removal)
    }
}

/// Returns to pending every todo claimed through an endpoint `human_id` owns (only `team_id`'s
/// todos when given): owner and lease cleared, the attempt row closed as `released`, the attempt
/// count unchanged, and a `requeued` push so the queue's other agents hear of it. Rows a claim
/// transaction holds are waited for, then re-checked, as a clear does. The claimed todos are
/// read from the in-flight indexes, which is why the condition names both owner kinds (each
/// index's predicate names one); a removal is rare, so their OR's bitmap scans do no harm.
async fn release_leases_of(
    conn: &mut PgConnection,
    human_id: &str,
    team_id: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Released, sqlx::Error> {
    sqlx::query_as(
        "WITH held AS ( \
           SELECT t.id FROM todos t JOIN endpoints e ON e.id = t.claimed_by_endpoint_id \
           WHERE e.owner_human_id = $1 AND t.state = 'claimed' AND (t.endpoint_id IS NOT NULL OR t.team_id IS NOT NULL) \
             AND ($2::text IS NULL OR t.team_id = $2) \
           ORDER BY t.id FOR UPDATE OF t), \
         released AS ( \
           UPDATE todos t SET state = 'pending', owner = NULL, claimed_by_endpoint_id = NULL, lease_expires_at = NULL, \
             updated_at = $3 FROM held WHERE t.id = held.id AND t.state = 'claimed' RETURNING t.id), \
         closed AS ( \
           UPDATE todo_attempts a SET ended_at = $3, outcome = 'released' FROM released \
           WHERE a.todo_id = released.id AND a.ended_at IS NULL), \
         push AS (INSERT INTO push_due (todo_id, reason, at) SELECT released.id, 'requeued', $3 FROM released) \
         SELECT (SELECT count(*) FROM released) AS count, ARRAY(SELECT id FROM released ORDER BY id LIMIT $4) AS ids",
    )
    .bind(human_id)
    .bind(team_id)
    .bind(now)
    .bind(RELEASED_IDS_REPORTED_MAX)
    .fetch_one(&mut *conn)
    .await
}
