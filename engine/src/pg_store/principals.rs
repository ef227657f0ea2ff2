//! Humans, their API tokens, teams and vended endpoints: who may act, and on what.
//!
//! Reach is computed from live rows (an endpoint's effective scope is its vend grant intersected
//! with its owner's current team memberships). A serving replica answers an endpoint credential
//! from its cache (`credential_cache`), which every change to those rows invalidates on every
//! replica before the change's call returns; a human's token is read on every call.

use super::{PgStore, db_error, finish, touched};
use chrono::{DateTime, Utc};
use models::error::{Error, Result};
use models::identity::{Owner, QueueIdentity, ScopeRef};
use models::scope::{AgentScope, Endpoint, Human, HumanScope, Reach, Team, TeamRole, slugify};
use models::store::{AgentLookup, ApiToken, NewEndpoint, Principals};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// A human with the reach `human_scope_of` computes for them.
#[derive(sqlx::FromRow)]
struct HumanScopeRow {
    id: String,
    name: String,
    instance_admin: bool,
    endpoint_ids: Vec<String>,
    team_ids: Vec<String>,
    /// The human's role in each of `team_ids`, in the same order.
    roles: Vec<String>,
    managed_endpoint_ids: Vec<String>,
}

/// An endpoint found by its token, with its live grants (team id or '' for its own queues) and
/// the teams its owner configures.
#[derive(sqlx::FromRow)]
struct AgentRow {
    id: String,
    slug: String,
    owner_human_id: Option<String>,
    created_by_human_id: Option<String>,
    verbs: Vec<String>,
    grant_team_ids: Vec<String>,
    grant_queues: Vec<String>,
    configured_team_ids: Vec<String>,
    /// `credential_epoch` in the same snapshot as the rest (`credential_cache`, rule 1).
    epoch: i64,
}

/// An endpoint with its vend grants (team id or '' for its own queues, and the queue, in order).
#[derive(sqlx::FromRow)]
struct EndpointRow {
    id: String,
    slug: String,
    name: String,
    owner_human_id: Option<String>,
    owner_team_id: Option<String>,
    verbs: Vec<String>,
    revoked: bool,
    grant_team_ids: Vec<String>,
    grant_queues: Vec<String>,
}

/// A fresh bearer token: the type prefix (`sbh_`, `sbk_`) and 192 random bits in hex.
pub fn new_token(prefix: &str) -> String {
    let mut bytes = [0_u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

/// Tokens are stored and looked up only as their SHA-256 digest.
pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Eight random hex digits that make a generated slug unique.
pub(super) fn random_suffix() -> String {
    let mut bytes = [0_u8; 4];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl PgStore {
    pub(crate) async fn human_by_token_tx(&self, token_hash: &str) -> Result<Option<HumanScope>> {
        self.human_scope_of(
            "FROM api_tokens k JOIN humans h ON h.id = k.human_id WHERE k.token_hash = $1 AND k.revoked_at IS NULL \
             AND (k.expires_at IS NULL OR k.expires_at > now())",
            token_hash,
        )
        .await
    }

    /// The scope of human `human_id` (a board session stores the human, not a token), or None
    /// when the human no longer exists. Reach is computed exactly as for a token.
    pub async fn human_scope(&self, human_id: &str) -> Result<Option<HumanScope>> {
        self.human_scope_of("FROM humans h WHERE h.id = $1", human_id).await
    }

    /// A human's scope from live rows, never cached (`= ANY(ARRAY(…))` rather than `IN (…)`, so
    /// the planner looks the few team ids up by index instead of scanning every endpoint): the human `from_where` selects (as `h`,
    /// keyed by `$1` = `key`), the endpoints and teams they reach and those they manage.
    async fn human_scope_of(&self, from_where: &'static str, key: &str) -> Result<Option<HumanScope>> {
        let row: Option<HumanScopeRow> = sqlx::query_as(composed_sql!(
            "SELECT h.id, h.name, h.instance_admin, \
               ARRAY(SELECT e.id FROM endpoints e WHERE e.owner_human_id = h.id \
                     OR e.owner_team_id = ANY(ARRAY(SELECT m.team_id FROM team_members m WHERE m.human_id = h.id)) \
                     ORDER BY e.id) AS endpoint_ids, \
               ARRAY(SELECT m.team_id FROM team_members m WHERE m.human_id = h.id ORDER BY m.team_id) AS team_ids, \
               ARRAY(SELECT m.role FROM team_members m WHERE m.human_id = h.id ORDER BY m.team_id) AS roles, \
               ARRAY(SELECT e.id FROM endpoints e WHERE e.owner_human_id = h.id \
                     OR e.owner_team_id = ANY(ARRAY(SELECT m.team_id FROM team_members m \
                                            WHERE m.human_id = h.id AND m.role IN ('owner', 'admin'))) \
                     ORDER BY e.id) AS managed_endpoint_ids \
             {from_where}"
        ))
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        let Some(HumanScopeRow { id, name, instance_admin, endpoint_ids, team_ids, roles, managed_endpoint_ids }) = row
        else {
            return Ok(None);
        };
        let teams = team_ids
            .iter()
            .zip(&roles)
            .map(|(team, role)| Ok((team.clone(), TeamRole::parse("role", role)?)))
            .collect::<Result<Vec<_>>>()?;
        let configured = teams.iter().filter(|(_, role)| role.configures()).map(|(team, _)| team.clone()).collect();
        Ok(Some(HumanScope {
            human: Human { id, name, instance_admin },
            reach: Reach { endpoint_ids, team_ids },
            teams,
            manages: Reach { endpoint_ids: managed_endpoint_ids, team_ids: configured },
        }))
    }

    pub(crate) async fn agent_by_token_tx(&self, slug: &str, token_hash: &str) -> Result<AgentLookup> {
        if let Some(answer) = self.credentials.as_ref().and_then(|cache| cache.lookup(slug, token_hash)) {
            return Ok(answer);
        }
        // Team grants count only while the endpoint's owner still reaches the team.
        let row: Option<AgentRow> = sqlx::query_as(
            "WITH live AS ( \
               SELECT g.team_id, g.queue FROM endpoint_grants g JOIN endpoints e ON e.id = g.endpoint_id \
               WHERE e.token_hash = $1 AND (g.team_id IS NULL OR g.team_id = e.owner_team_id \
                 OR EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = g.team_id AND m.human_id = e.owner_human_id))) \
             SELECT e.id, e.slug, e.owner_human_id, e.created_by_human_id, e.verbs, \
               ARRAY(SELECT coalesce(team_id, '') FROM live ORDER BY team_id NULLS FIRST, queue) AS grant_team_ids, \
               ARRAY(SELECT queue FROM live ORDER BY team_id NULLS FIRST, queue) AS grant_queues, \
               ARRAY(SELECT t.id FROM teams t WHERE t.id = e.owner_team_id \
                     OR t.id = ANY(ARRAY(SELECT m.team_id FROM team_members m WHERE m.human_id = e.owner_human_id \
                                 AND m.role IN ('owner', 'admin'))) ORDER BY t.id) AS configured_team_ids, \
               (SELECT epoch FROM credential_epoch) AS epoch \
             FROM endpoints e WHERE e.token_hash = $1 AND NOT e.revoked",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        let Some(AgentRow {
            id,
            slug: endpoint_slug,
            owner_human_id,
            created_by_human_id,
            verbs,
            grant_team_ids,
            grant_queues,
            configured_team_ids,
            epoch,
        }) = row
        else {
            return Ok(AgentLookup::Unknown);
        };
        if endpoint_slug != slug && id != slug {
            return Ok(AgentLookup::OtherEndpoint);
        }
        let mut reach = Reach { endpoint_ids: vec![id.clone()], team_ids: vec![] };
        let granted = grant_team_ids
            .into_iter()
            .zip(grant_queues)
            .map(|(team, queue)| {
                if team.is_empty() {
                    QueueIdentity::endpoint(id.clone(), queue)
                } else {
                    if !reach.team_ids.contains(&team) {
                        reach.team_ids.push(team.clone());
                    }
                    QueueIdentity::team(team, queue)
                }
            })
            .collect();
        let manages = Reach { endpoint_ids: vec![id.clone()], team_ids: configured_team_ids };
        let agent = AgentScope {
            acting_for_human_id: created_by_human_id.or_else(|| owner_human_id.clone()),
            endpoint_id: id,
            endpoint_slug,
            owner_human_id,
            reach,
            granted,
            verbs,
            manages,
        };
        if let Some(cache) = &self.credentials {
            cache.remember(token_hash, epoch, &agent);
        }
        Ok(AgentLookup::Found(Box::new(agent)))
    }

    pub(crate) async fn resolve_scope_tx(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner> {
        let (sql, reference, allowed) = match scope {
            ScopeRef::Endpoint(reference) => (
                "SELECT id FROM endpoints WHERE (id = $1 OR slug = $1) AND id = ANY($2)",
                reference,
                &reach.endpoint_ids,
            ),
            ScopeRef::Team(reference) => {
                ("SELECT id FROM teams WHERE (id = $1 OR slug = $1) AND id = ANY($2)", reference, &reach.team_ids)
            }
        };
        let id: Option<String> =
            sqlx::query_scalar(sql).bind(reference).bind(allowed).fetch_optional(&self.pool).await.map_err(db_error)?;
        match (id, scope) {
            (Some(id), ScopeRef::Endpoint(_)) => Ok(Owner::Endpoint(id)),
            (Some(id), ScopeRef::Team(_)) => Ok(Owner::Team(id)),
            (None, _) => Err(Error::not_found()),
        }
    }

    /// Many `team:<ref>` in one statement: each reference's team id within `allowed`, in the
    /// order given; one that resolves to nothing is `not_found`.
    pub(crate) async fn resolve_teams_tx(&self, reach: &Reach, references: &[String]) -> Result<Vec<String>> {
        let ids: Vec<Option<String>> = sqlx::query_scalar(
            "SELECT (SELECT t.id FROM teams t WHERE (t.id = r.reference OR t.slug = r.reference) AND t.id = ANY($2) LIMIT 1) \
             FROM unnest($1::text[]) WITH ORDINALITY AS r (reference, n) ORDER BY r.n",
        )
        .bind(references)
        .bind(&reach.team_ids)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        ids.into_iter().map(|id| id.ok_or_else(Error::not_found)).collect()
    }

    pub(crate) async fn vend_endpoint_tx(&self, new: NewEndpoint) -> Result<Endpoint> {
        if new.owner_human_id.is_some() == new.owner_team_id.is_some() {
            return Err(Error::internal("an endpoint needs exactly one owner"));
        }
        let mut tx = self.begin().await?;
        // The owner's lock makes count-then-insert exact across replicas: two vends racing at
        // the limit cannot both pass. The transaction ends (and the lock with it) on every path.
        let owner = new.owner_human_id.as_deref().or(new.owner_team_id.as_deref()).unwrap_or_default();
        or_rollback!(
            tx,
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('endpoints:' || $1, 0))")
                .bind(owner)
                .execute(&mut *tx)
                .await
                .map_err(db_error)
        );
        let owned: i64 = or_rollback!(
            tx,
            sqlx::query_scalar("SELECT count(*) FROM endpoints WHERE owner_human_id = $1 OR owner_team_id = $1")
                .bind(owner)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)
        );
        or_rollback!(tx, models::limits::check_endpoint_quota(owned));
        let slug = format!("{}-{}", slugify(&new.name), random_suffix());
        let id: String = sqlx::query_scalar(
            "INSERT INTO endpoints (id, slug, name, owner_human_id, owner_team_id, token_hash, verbs, created_by_human_id) \
             VALUES ('ep_' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(&slug)
        .bind(&new.name)
        .bind(&new.owner_human_id)
        .bind(&new.owner_team_id)
        .bind(&new.token_hash)
        .bind(&new.verbs)
        .bind(&new.created_by_human_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        let mut teams: Vec<String> = new.own_queues.iter().map(|_| String::new()).collect();
        let mut queues = new.own_queues.clone();
        for (team, queue) in &new.team_queues {
            teams.push(team.clone());
            queues.push(queue.clone());
        }
        sqlx::query(
            "INSERT INTO endpoint_grants (endpoint_id, team_id, queue) \
             SELECT DISTINCT $1, nullif(team, ''), queue FROM unnest($2::text[], $3::text[]) AS grants (team, queue)",
        )
        .bind(&id)
        .bind(&teams)
        .bind(&queues)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        let mut endpoints = self.endpoints_by_ids(&[id]).await?;
        endpoints.pop().ok_or_else(|| Error::internal("vended endpoint vanished"))
    }

    pub(crate) async fn endpoints_by_ids(&self, ids: &[String]) -> Result<Vec<Endpoint>> {
        let rows: Vec<EndpointRow> = sqlx::query_as(
            "SELECT e.id, e.slug, e.name, e.owner_human_id, e.owner_team_id, e.verbs, e.revoked, \
               ARRAY(SELECT coalesce(g.team_id, '') FROM endpoint_grants g WHERE g.endpoint_id = e.id \
                     ORDER BY g.team_id NULLS FIRST, g.queue) AS grant_team_ids, \
               ARRAY(SELECT g.queue FROM endpoint_grants g WHERE g.endpoint_id = e.id \
                     ORDER BY g.team_id NULLS FIRST, g.queue) AS grant_queues \
             FROM endpoints e WHERE e.id = ANY($1) ORDER BY e.created_at, e.id",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let EndpointRow {
                    id,
                    slug,
                    name,
                    owner_human_id,
                    owner_team_id,
                    verbs,
                    revoked,
                    grant_team_ids,
                    grant_queues,
                } = row;
                let queues = grant_team_ids
                    .into_iter()
                    .zip(grant_queues)
                    .map(|(team, queue)| {
                        if team.is_empty() {
                            QueueIdentity::endpoint(id.clone(), queue)
                        } else {
                            QueueIdentity::team(team, queue)
                        }
                    })
                    .collect();
                Endpoint { id, slug, name, owner_human_id, owner_team_id, queues, verbs, revoked }
            })
            .collect())
    }

    pub(crate) async fn mint_token_tx(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        let minted = async {
            // The human's row serializes concurrent mints, so the count below is exact.
            sqlx::query("SELECT id FROM humans WHERE id = $1 FOR UPDATE")
                .bind(human_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            let live: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM api_tokens WHERE human_id = $1 AND revoked_at IS NULL \
                   AND (expires_at IS NULL OR expires_at > now())",
            )
            .bind(human_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            models::limits::check_token_quota(live)?;
            sqlx::query(
                "INSERT INTO api_tokens (token_hash, human_id, label, expires_at) \
                 VALUES ($1, $2, $3, now() + make_interval(secs => $4::bigint))",
            )
            .bind(token_hash)
            .bind(human_id)
            .bind(label)
            .bind(expires_in_seconds)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            Ok(())
        }
        .await;
        finish(tx, minted).await
    }

    pub(crate) async fn list_tokens_tx(&self, human_id: &str) -> Result<Vec<ApiToken>> {
        type Row = (String, Option<String>, DateTime<Utc>, Option<DateTime<Utc>>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, label, created_at, expires_at FROM api_tokens \
             WHERE human_id = $1 AND revoked_at IS NULL ORDER BY created_at, id",
        )
        .bind(human_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(id, label, created_at, expires_at)| ApiToken { id, label, created_at, expires_at })
            .collect())
    }

    pub(crate) async fn revoke_token_tx(&self, human_id: &str, token_id: &str) -> Result<()> {
        sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND human_id = $2 AND revoked_at IS NULL")
            .bind(token_id)
            .bind(human_id)
            .execute(&self.pool)
            .await
            .map_err(db_error)
            .and_then(touched)
    }

    pub(crate) async fn revoke_endpoint_tx(&self, endpoint_id: &str) -> Result<()> {
        sqlx::query("UPDATE endpoints SET revoked = true WHERE id = $1")
            .bind(endpoint_id)
            .execute(&self.pool)
            .await
            .map_err(db_error)
            .and_then(touched)?;
        self.await_credential_change().await
    }

    pub(crate) async fn rotate_endpoint_tx(&self, endpoint_id: &str, token_hash: &str) -> Result<()> {
        sqlx::query("UPDATE endpoints SET token_hash = $2, revoked = false WHERE id = $1")
            .bind(endpoint_id)
            .bind(token_hash)
            .execute(&self.pool)
            .await
            .map_err(db_error)
            .and_then(touched)?;
        self.await_credential_change().await
    }

    pub(crate) async fn list_teams_tx(&self, human: &HumanScope) -> Result<Vec<(Team, TeamRole)>> {
        let rows: Vec<(String, String, String, String)> = sqlx::query_as(
            "SELECT t.id, t.slug, t.name, m.role FROM teams t JOIN team_members m ON m.team_id = t.id \
             WHERE m.human_id = $1 ORDER BY t.name, t.id",
        )
        .bind(&human.human.id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        rows.into_iter()
            .map(|(id, slug, name, role)| Ok((Team { id, slug, name }, TeamRole::parse("role", &role)?)))
            .collect()
    }

    /// Finds a human by name, for tests and the CLI; never exposed over HTTP.
    pub async fn human_id_by_name(&self, name: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT id FROM humans WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)
    }
}

/// The principals role on PostgreSQL: each method is one of the transactions above.
impl Principals for PgStore {
    async fn human_by_token(&self, token_hash: &str) -> Result<Option<HumanScope>> {
        self.human_by_token_tx(token_hash).await
    }

    async fn agent_by_token(&self, slug: &str, token_hash: &str) -> Result<AgentLookup> {
        self.agent_by_token_tx(slug, token_hash).await
    }

    async fn resolve_scope(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner> {
        self.resolve_scope_tx(reach, scope).await
    }

    async fn resolve_teams(&self, reach: &Reach, references: &[String]) -> Result<Vec<String>> {
        self.resolve_teams_tx(reach, references).await
    }

    async fn vend_endpoint(&self, endpoint: NewEndpoint) -> Result<Endpoint> {
        self.vend_endpoint_tx(endpoint).await
    }

    async fn list_endpoints(&self, human: &HumanScope) -> Result<Vec<Endpoint>> {
        self.endpoints_by_ids(&human.reach.endpoint_ids).await
    }

    async fn mint_token(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> Result<()> {
        self.mint_token_tx(human_id, label, token_hash, expires_in_seconds).await
    }

    async fn list_tokens(&self, human_id: &str) -> Result<Vec<models::store::ApiToken>> {
        self.list_tokens_tx(human_id).await
    }

    async fn revoke_token(&self, human_id: &str, token_id: &str) -> Result<()> {
        self.revoke_token_tx(human_id, token_id).await
    }

    async fn revoke_endpoint(&self, endpoint_id: &str) -> Result<()> {
        self.revoke_endpoint_tx(endpoint_id).await
    }

    async fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> Result<()> {
        self.rotate_endpoint_tx(endpoint_id, token_hash).await
    }

    async fn list_teams(&self, human: &HumanScope) -> Result<Vec<(models::scope::Team, models::scope::TeamRole)>> {
        self.list_teams_tx(human).await
    }
}
