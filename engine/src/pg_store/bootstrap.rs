//! Bootstrapping principals: `switchboard admin human add`, `admin team add` and `admin team
//! member add`, which create humans, teams and memberships before anyone holds a token, and the
//! error the CLI reports for them (`removal.rs` reports with it too).
//!
//! Its own module because these run from the command line, not through the `Store`: nothing
//! here is reachable by a request.

use super::PgStore;
use super::principals::{hash_token, new_token, random_suffix};
use models::scope::{Human, Team, TeamRole, check_principal_name, slugify};

/// Bootstrap failures the CLI reports with a clear message and exit status.
#[derive(Debug)]
pub enum BootstrapError {
    NotFound(String),
    Invalid(String),
    Database(sqlx::Error),
    /// Committed, but not every serving replica confirmed it in time (`credential_cache`).
    Unconfirmed(String),
}

impl BootstrapError {
    pub(crate) fn unconfirmed(error: models::error::Error) -> Self {
        BootstrapError::Unconfirmed(error.to_string())
    }
}

impl std::fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootstrapError::NotFound(what) => write!(f, "not found: {what}"),
            BootstrapError::Invalid(what) => write!(f, "invalid: {what}"),
            BootstrapError::Database(error) => write!(f, "database error: {error}"),
            BootstrapError::Unconfirmed(what) => write!(f, "unconfirmed: {what}"),
        }
    }
}

impl From<sqlx::Error> for BootstrapError {
    fn from(error: sqlx::Error) -> Self {
        BootstrapError::Database(error)
    }
}

impl PgStore {
    /// `switchboard admin human add`: creates (or finds) human `name`, optionally making them an
    /// instance admin, and mints an operator API token for them.
    pub async fn bootstrap_human(&self, name: &str, admin: bool) -> Result<(Human, String), BootstrapError> {
        check_principal_name(name).map_err(|problem| BootstrapError::Invalid(problem.into()))?;
        let mut tx = self.pool.begin().await?;
        let (id, name, instance_admin): (String, String, bool) = sqlx::query_as(
            "INSERT INTO humans (id, name, instance_admin) \
             VALUES ('hu_' || replace(gen_random_uuid()::text, '-', ''), $1, $2) \
             ON CONFLICT (name) DO UPDATE SET instance_admin = humans.instance_admin OR EXCLUDED.instance_admin \
             RETURNING id, name, instance_admin",
        )
        .bind(name)
        .bind(admin)
        .fetch_one(&mut *tx)
        .await?;
        let token = new_token("sbh_");
        sqlx::query("INSERT INTO api_tokens (token_hash, human_id, label) VALUES ($1, $2, 'bootstrap')")
            .bind(hash_token(&token))
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((Human { id, name, instance_admin }, token))
    }

    /// `switchboard admin team add NAME --owner HUMAN`.
    pub async fn bootstrap_team(&self, name: &str, owner_name: &str) -> Result<Team, BootstrapError> {
        check_principal_name(name).map_err(|problem| BootstrapError::Invalid(problem.into()))?;
        let mut tx = self.pool.begin().await?;
        let owner: Option<String> = sqlx::query_scalar("SELECT id FROM humans WHERE name = $1 OR id = $1")
            .bind(owner_name)
            .fetch_optional(&mut *tx)
            .await?;
        let owner = owner.ok_or_else(|| BootstrapError::NotFound(format!("human {owner_name}")))?;
        let existing: Option<(String, String, String)> =
            sqlx::query_as("SELECT id, slug, name FROM teams WHERE name = $1")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        let (id, slug, name) = match existing {
            Some(team) => team,
            None => {
                sqlx::query_as(
                    "INSERT INTO teams (id, slug, name) VALUES ('tm_' || replace(gen_random_uuid()::text, '-', ''), $1, $2) \
                     RETURNING id, slug, name",
                )
                .bind(format!("{}-{}", slugify(name), random_suffix()).chars().take(63).collect::<String>())
                .bind(name)
                .fetch_one(&mut *tx)
                .await?
            }
        };
        sqlx::query(
            "INSERT INTO team_members (team_id, human_id, role) VALUES ($1, $2, 'owner') \
             ON CONFLICT (team_id, human_id) DO UPDATE SET role = 'owner'",
        )
        .bind(&id)
        .bind(&owner)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.await_credential_change().await.map_err(BootstrapError::unconfirmed)?;
        Ok(Team { id, slug, name })
    }

    /// `switchboard admin team member add TEAM HUMAN --role ROLE`.
    pub async fn bootstrap_member(
        &self,
        team: &str,
        human: &str,
        role: TeamRole,
    ) -> Result<(Team, Human), BootstrapError> {
        let mut tx = self.pool.begin().await?;
        let found: Option<(String, String, String)> =
            sqlx::query_as("SELECT id, slug, name FROM teams WHERE id = $1 OR slug = $1 OR name = $1")
                .bind(team)
                .fetch_optional(&mut *tx)
                .await?;
        let (team_id, slug, team_name) = found.ok_or_else(|| BootstrapError::NotFound(format!("team {team}")))?;
        let found: Option<(String, String, bool)> =
            sqlx::query_as("SELECT id, name, instance_admin FROM humans WHERE id = $1 OR name = $1")
                .bind(human)
                .fetch_optional(&mut *tx)
                .await?;
        let (human_id, name, instance_admin) =
            found.ok_or_else(|| BootstrapError::NotFound(format!("human {human}")))?;
        sqlx::query(
            "INSERT INTO team_members (team_id, human_id, role) VALUES ($1, $2, $3) \
             ON CONFLICT (team_id, human_id) DO UPDATE SET role = EXCLUDED.role",
        )
        .bind(&team_id)
        .bind(&human_id)
        .bind(role.as_str())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.await_credential_change().await.map_err(BootstrapError::unconfirmed)?;
        Ok((Team { id: team_id, slug, name: team_name }, Human { id: human_id, name, instance_admin }))
    }
}
