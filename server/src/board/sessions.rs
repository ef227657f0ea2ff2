//! Board sign-in state on PostgreSQL: one-time login links, server-side sessions (migration
//! 0009) and the signed-in human's time zone, which every page renders times in (migration
//! 0022). Only SHA-256 digests of link tokens and session ids are stored, so a copy of the table
//! signs nobody in.
//!
//! This lives beside the `Store` trait, not in it, because only `switchboard serve` on
//! PostgreSQL has a board; the simulation's in-memory store never signs a browser in. Expiry
//! is decided by the database clock in the same statement that reads a row, so every replica
//! agrees on it.

use engine::pg_store::{hash_token, new_token};
use models::error::{Error, Result};
use sqlx::PgPool;

/// How long a printed login link stays valid.
pub const LINK_TTL_MINUTES: i64 = 10;
/// A session unused this long is gone.
pub const SESSION_IDLE_HOURS: i64 = 12;
/// A session is gone this long after sign-in, however busy.
pub const SESSION_ABSOLUTE_DAYS: i64 = 7;
/// Prefix of a login link token (`/login/sbl_…`).
pub const LINK_TOKEN_PREFIX: &str = "sbl_";
const SESSION_ID_PREFIX: &str = "sbs_";
const CSRF_PREFIX: &str = "csrf_";

/// A live session: who signed in, the synchronizer token its forms carry, and the human's time
/// zone as stored (None until set).
#[derive(Debug, Clone)]
pub struct Session {
    pub id_hash: String,
    pub human_id: String,
    pub csrf_token: String,
    pub time_zone: Option<String>,
}

fn db_error(error: sqlx::Error) -> Error {
    tracing::error!(%error, "board session query failed");
    Error::unavailable("the database is unavailable")
}

/// `switchboard admin login-link NAME`: a fresh one-time link token for the human named (or
/// with id) `name`; None when there is no such human.
pub async fn mint_login_link(pool: &PgPool, name: &str) -> Result<Option<String>> {
    let human_id: Option<String> = sqlx::query_scalar("SELECT id FROM humans WHERE name = $1 OR id = $1")
        .bind(name)
        .fetch_optional(pool)
        .await
        .map_err(db_error)?;
    let Some(human_id) = human_id else { return Ok(None) };
    let token = new_token(LINK_TOKEN_PREFIX);
    sqlx::query(
        "INSERT INTO board_login_links (token_hash, human_id, expires_at) \
         VALUES ($1, $2, now() + make_interval(mins => $3::int))",
    )
    .bind(hash_token(&token))
    .bind(&human_id)
    .bind(LINK_TTL_MINUTES as i32)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(Some(token))
}

/// Spends a login link: the human it names, once, while it is unexpired. The check and the
/// spending are one statement, so two browsers racing for one link cannot both win.
pub async fn redeem_login_link(pool: &PgPool, token: &str) -> Result<Option<String>> {
    if !token.starts_with(LINK_TOKEN_PREFIX) || token.len() > 100 {
        return Ok(None);
    }
    sqlx::query_scalar(
        "UPDATE board_login_links SET used_at = now() \
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING human_id",
    )
    .bind(hash_token(token))
    .fetch_optional(pool)
    .await
    .map_err(db_error)
}

/// Opens a session for `human_id`; answers the cookie value (shown to the browser only).
/// Expired sessions and spent links are swept here, on the rare write path.
pub async fn open(pool: &PgPool, human_id: &str) -> Result<String> {
    let id = new_token(SESSION_ID_PREFIX);
    sqlx::query(
        "WITH swept AS (DELETE FROM board_sessions WHERE last_seen_at < now() - make_interval(hours => $4::int) \
                        OR created_at < now() - make_interval(days => $5::int)), \
              spent AS (DELETE FROM board_login_links WHERE expires_at < now() - interval '1 day') \
         INSERT INTO board_sessions (id_hash, human_id, csrf_token) VALUES ($1, $2, $3)",
    )
    .bind(hash_token(&id))
    .bind(human_id)
    .bind(new_token(CSRF_PREFIX))
    .bind(SESSION_IDLE_HOURS as i32)
    .bind(SESSION_ABSOLUTE_DAYS as i32)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(id)
}

/// The live session behind a cookie value. `touch` renews the idle expiry (page views do; the
/// live-update stream does not, so an open tab alone never keeps a session alive).
pub async fn lookup(pool: &PgPool, cookie_value: &str, touch: bool) -> Result<Option<Session>> {
    if !cookie_value.starts_with(SESSION_ID_PREFIX) || cookie_value.len() > 100 {
        return Ok(None);
    }
    let id_hash = hash_token(cookie_value);
    let row: Option<(String, String, Option<String>)> = sqlx::query_as(
        "UPDATE board_sessions s SET last_seen_at = CASE WHEN $2 THEN now() ELSE s.last_seen_at END \
         FROM humans h \
         WHERE s.id_hash = $1 AND s.last_seen_at > now() - make_interval(hours => $3::int) \
           AND s.created_at > now() - make_interval(days => $4::int) AND h.id = s.human_id \
         RETURNING s.human_id, s.csrf_token, h.time_zone",
    )
    .bind(&id_hash)
    .bind(touch)
    .bind(SESSION_IDLE_HOURS as i32)
    .bind(SESSION_ABSOLUTE_DAYS as i32)
    .fetch_optional(pool)
    .await
    .map_err(db_error)?;
    Ok(row.map(|(human_id, csrf_token, time_zone)| Session { id_hash, human_id, csrf_token, time_zone }))
}

/// Sets the human's time zone (an IANA name the caller has checked), or forgets it.
pub async fn set_time_zone(pool: &PgPool, human_id: &str, zone: Option<&str>) -> Result<()> {
    sqlx::query("UPDATE humans SET time_zone = $2 WHERE id = $1")
        .bind(human_id)
        .bind(zone)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Sign-out: the session row is deleted, so the cookie is worthless on every replica.
pub async fn close(pool: &PgPool, session: &Session) -> Result<()> {
    sqlx::query("DELETE FROM board_sessions WHERE id_hash = $1")
        .bind(&session.id_hash)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(())
}
