//! Humans, API tokens, teams and vended endpoints in memory
//! (`engine/src/pg_store/principals.rs`): who may act, and on what.
//!
//! Reach is computed on every call from the live rows, never cached: an endpoint's effective
//! grant is its vend grant intersected with its owner's current team memberships. The setup
//! helpers mirror `PgStore`'s `bootstrap_*`, except that the caller supplies the token's SHA-256
//! digest (models has no hashing and no randomness), so a simulation stays deterministic.
//!
//! Governing: base-system §1, §3 (tenancy); SPEC-0030 REQ-2 (queue identities), REQ-10 (what a
//! human or an endpoint may manage, and whom an agent acts for).

use super::{EndpointRow, ModelStore, State, TokenRow, database_error, queue_name_ok};
use crate::error::{Error, Result};
use crate::identity::{Owner, QueueIdentity, ScopeRef};
use crate::scope::{AgentScope, Endpoint, Human, HumanScope, Reach, Team, TeamRole, check_principal_name, slugify};
use crate::store::{AgentLookup, ApiToken, NewEndpoint, Principals};
use std::collections::BTreeSet;

impl ModelStore {
    /// `bootstrap_human`: creates (or finds by name) a human, optionally an instance admin (never
    /// demoted), and registers an API token given by its SHA-256 hex digest.
    pub fn add_human(&self, name: &str, admin: bool, token_hash: &str) -> Result<Human> {
        check_principal_name(name).map_err(|problem| Error::invalid("name", problem))?;
        let mut state = self.lock();
        if state.api_tokens.contains_key(token_hash) {
            return Err(database_error());
        }
        let human = match state.humans.iter_mut().find(|h| h.name == name) {
            Some(human) => {
                human.instance_admin |= admin;
                human.clone()
            }
            None => {
                let human = Human { id: state.next_id("hu"), name: name.to_string(), instance_admin: admin };
                state.humans.push(human.clone());
                human
            }
        };
        let row = TokenRow {
            id: state.next_id("tk"),
            human_id: human.id.clone(),
            label: Some("bootstrap".to_string()),
            created_at: self.clock.now(),
            expires_at: None,
            revoked: false,
        };
        state.api_tokens.insert(token_hash.to_string(), row);
        Ok(human)
    }

    /// `bootstrap_team`: creates (or finds by name) a team and makes `owner` (name or id) its owner.
    pub fn add_team(&self, name: &str, owner: &str) -> Result<Team> {
        check_principal_name(name).map_err(|problem| Error::invalid("name", problem))?;
        let mut state = self.lock();
        let owner_id = state.human_by_ref(owner).map(|h| h.id.clone()).ok_or_else(Error::not_found)?;
        let team = match state.teams.iter().find(|t| t.name == name) {
            Some(team) => team.clone(),
            None => {
                let slug = format!("{}-{}", slugify(name), state.next_suffix()).chars().take(63).collect();
                let team = Team { id: state.next_id("tm"), slug, name: name.to_string() };
                state.teams.push(team.clone());
                team
            }
        };
        state.members.insert((team.id.clone(), owner_id), TeamRole::Owner);
        Ok(team)
    }

    /// `bootstrap_member`: adds (or re-roles) a human, by id or name, in a team by id, slug or name.
    pub fn add_member(&self, team: &str, human: &str, role: TeamRole) -> Result<(Team, Human)> {
        let mut state = self.lock();
        let found = state.teams.iter().find(|t| t.id == team || t.slug == team || t.name == team).cloned();
        let team = found.ok_or_else(Error::not_found)?;
        let human = state.human_by_ref(human).cloned().ok_or_else(Error::not_found)?;
        state.members.insert((team.id.clone(), human.id.clone()), role);
        Ok((team, human))
    }

    /// The human an operator token authenticates, with their reach and what they manage (REQ-10).
    pub(super) fn human_by_token_tx(&self, token_hash: &str) -> Option<HumanScope> {
        let state = self.lock();
        let now = self.clock.now();
        let token = state.api_tokens.get(token_hash)?;
        if token.revoked || token.expires_at.is_some_and(|at| at <= now) {
            return None;
        }
        scope_of(&state, &token.human_id)
    }

    /// An MCP bearer against the endpoint the URL names (slug or id): unknown or revoked, another
    /// endpoint's, or the agent's effective scope (REQ-2 queue identities; REQ-10 what it manages
    /// and whom it acts for).
    pub(super) fn agent_by_token_tx(&self, slug: &str, token_hash: &str) -> AgentLookup {
        let state = self.lock();
        let Some(endpoint) = state.endpoints.iter().find(|e| e.token_hash == token_hash && !e.revoked) else {
            return AgentLookup::Unknown;
        };
        if endpoint.slug != slug && endpoint.id != slug {
            return AgentLookup::OtherEndpoint;
        }
        let is_member = |team: &String, roles: &[TeamRole]| {
            endpoint.owner_human_id.as_ref().is_some_and(|human| {
                state.members.get(&(team.clone(), human.clone())).is_some_and(|role| roles.contains(role))
            })
        };
        let all_roles = [TeamRole::Owner, TeamRole::Admin, TeamRole::Member];
        let mut reach = Reach { endpoint_ids: vec![endpoint.id.clone()], team_ids: vec![] };
        let mut granted = Vec::new();
        // Team grants count only while the endpoint's owner still reaches the team.
        for (team, queue) in &endpoint.grants {
            match team {
                None => granted.push(QueueIdentity::endpoint(endpoint.id.clone(), queue.clone())),
                Some(team) if endpoint.owner_team_id.as_ref() == Some(team) || is_member(team, &all_roles) => {
                    if !reach.team_ids.contains(team) {
                        reach.team_ids.push(team.clone());
                    }
                    granted.push(QueueIdentity::team(team.clone(), queue.clone()));
                }
                Some(_) => {}
            }
        }
        let mut configured: Vec<String> = state
            .teams
            .iter()
            .filter(|t| {
                endpoint.owner_team_id.as_ref() == Some(&t.id) || is_member(&t.id, &[TeamRole::Owner, TeamRole::Admin])
            })
            .map(|t| t.id.clone())
            .collect();
        configured.sort();
        AgentLookup::Found(Box::new(AgentScope {
            acting_for_human_id: endpoint.created_by_human_id.clone().or_else(|| endpoint.owner_human_id.clone()),
            endpoint_id: endpoint.id.clone(),
            endpoint_slug: endpoint.slug.clone(),
            owner_human_id: endpoint.owner_human_id.clone(),
            manages: Reach { endpoint_ids: vec![endpoint.id.clone()], team_ids: configured },
            reach,
            granted: granted.into(),
            verbs: endpoint.verbs.clone(),
        }))
    }

    /// `endpoint:<ref>`/`team:<ref>` within a reach, by id or slug; outside it, `not_found`,
    /// indistinguishable from absent (REQ-10).
    pub(super) fn resolve_scope_tx(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner> {
        let state = self.lock();
        match scope {
            ScopeRef::Endpoint(reference) => state
                .endpoints
                .iter()
                .find(|e| (&e.id == reference || &e.slug == reference) && reach.endpoint_ids.contains(&e.id))
                .map(|e| Owner::Endpoint(e.id.clone())),
            ScopeRef::Team(reference) => state
                .teams
                .iter()
                .find(|t| (&t.id == reference || &t.slug == reference) && reach.team_ids.contains(&t.id))
                .map(|t| Owner::Team(t.id.clone())),
        }
        .ok_or_else(Error::not_found)
    }

    /// Vends an endpoint: one owner, a unique token digest, grants deduplicated; the verbs are
    /// stored as given (REQ-10: the policy verbs are never added by default).
    pub(super) fn vend_endpoint_tx(&self, new: NewEndpoint) -> Result<Endpoint> {
        if new.owner_human_id.is_some() == new.owner_team_id.is_some() {
            return Err(Error::internal("an endpoint needs exactly one owner"));
        }
        let mut state = self.lock();
        let mut grants: BTreeSet<(Option<String>, String)> = BTreeSet::new();
        for queue in &new.own_queues {
            grants.insert((None, queue.clone()));
        }
        for (team, queue) in &new.team_queues {
            // `nullif(team, '')`
            grants.insert((Some(team.clone()).filter(|t| !t.is_empty()), queue.clone()));
        }
        // The foreign keys, the token's UNIQUE and the grants' CHECK.
        let human_ok = |id: &Option<String>| id.as_deref().is_none_or(|id| state.human_exists(id));
        let team_ok = |id: &Option<String>| id.as_ref().is_none_or(|id| state.teams.iter().any(|t| &t.id == id));
        if !human_ok(&new.owner_human_id)
            || !human_ok(&new.created_by_human_id)
            || !team_ok(&new.owner_team_id)
            || state.endpoints.iter().any(|e| e.token_hash == new.token_hash)
            || grants.iter().any(|(team, queue)| !team_ok(team) || !queue_name_ok(queue))
        {
            return Err(database_error());
        }
        let owned = state
            .endpoints
            .iter()
            .filter(|e| {
                (new.owner_human_id.is_some() && e.owner_human_id == new.owner_human_id)
                    || (new.owner_team_id.is_some() && e.owner_team_id == new.owner_team_id)
            })
            .count();
        crate::limits::check_endpoint_quota(owned as i64)?;
        let slug = format!("{}-{}", slugify(&new.name), state.next_suffix());
        let id = state.next_id("ep");
        state.endpoints.push(EndpointRow {
            id: id.clone(),
            slug,
            name: new.name,
            owner_human_id: new.owner_human_id,
            owner_team_id: new.owner_team_id,
            token_hash: new.token_hash,
            verbs: new.verbs,
            revoked: false,
            created_by_human_id: new.created_by_human_id,
            grants,
        });
        state.endpoints_by_ids(&[id]).pop().ok_or_else(|| Error::internal("vended endpoint vanished"))
    }

    /// The endpoints a human reaches, in creation order (base-system §1; no SPEC-0030 requirement).
    pub(super) fn list_endpoints_tx(&self, human: &HumanScope) -> Vec<Endpoint> {
        self.lock().endpoints_by_ids(&human.reach.endpoint_ids)
    }

    /// Mints another operator API token; a reused digest is a database error (base-system §1).
    pub(super) fn mint_token_tx(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> Result<()> {
        let mut state = self.lock();
        if state.api_tokens.contains_key(token_hash) || !state.human_exists(human_id) {
            return Err(database_error());
        }
        let now = self.clock.now();
        let live = state
            .api_tokens
            .values()
            .filter(|t| t.human_id == human_id && !t.revoked && t.expires_at.is_none_or(|at| at > now))
            .count() as i64;
        crate::limits::check_token_quota(live)?;
        let row = TokenRow {
            id: state.next_id("tk"),
            human_id: human_id.to_string(),
            label: label.map(str::to_string),
            created_at: now,
            expires_at: expires_in_seconds.map(|secs| now + chrono::Duration::seconds(secs)),
            revoked: false,
        };
        state.api_tokens.insert(token_hash.to_string(), row);
        Ok(())
    }

    /// A human's unrevoked tokens, by creation time then id.
    pub(super) fn list_tokens_tx(&self, human_id: &str) -> Vec<ApiToken> {
        let state = self.lock();
        let mut tokens: Vec<ApiToken> = state
            .api_tokens
            .values()
            .filter(|t| t.human_id == human_id && !t.revoked)
            .map(|t| ApiToken {
                id: t.id.clone(),
                label: t.label.clone(),
                created_at: t.created_at,
                expires_at: t.expires_at,
            })
            .collect();
        tokens.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        tokens
    }

    /// Revokes one of the human's own unrevoked tokens.
    pub(super) fn revoke_token_tx(&self, human_id: &str, token_id: &str) -> Result<()> {
        let mut state = self.lock();
        let token = state
            .api_tokens
            .values_mut()
            .find(|t| t.id == token_id && t.human_id == human_id && !t.revoked)
            .ok_or_else(Error::not_found)?;
        token.revoked = true;
        Ok(())
    }

    /// Revokes an endpoint's credential, keeping the endpoint and its todos.
    pub(super) fn revoke_endpoint_tx(&self, endpoint_id: &str) -> Result<()> {
        let mut state = self.lock();
        let endpoint = state.endpoints.iter_mut().find(|e| e.id == endpoint_id).ok_or_else(Error::not_found)?;
        endpoint.revoked = true;
        Ok(())
    }

    /// Gives an endpoint a new credential digest and un-revokes it.
    pub(super) fn rotate_endpoint_tx(&self, endpoint_id: &str, token_hash: &str) -> Result<()> {
        let mut state = self.lock();
        if state.endpoints.iter().any(|e| e.token_hash == token_hash) {
            return Err(database_error());
        }
        let endpoint = state.endpoints.iter_mut().find(|e| e.id == endpoint_id).ok_or_else(Error::not_found)?;
        endpoint.token_hash = token_hash.to_string();
        endpoint.revoked = false;
        Ok(())
    }

    /// The teams a human belongs to, with their role, by name then id (REQ-10: configuring roles).
    pub(super) fn list_teams_tx(&self, human: &HumanScope) -> Vec<(Team, TeamRole)> {
        let state = self.lock();
        let mut teams: Vec<(Team, TeamRole)> = state
            .members
            .iter()
            .filter(|((_, member), _)| member == &human.human.id)
            .filter_map(|((team, _), role)| state.teams.iter().find(|t| &t.id == team).map(|t| (t.clone(), *role)))
            .collect();
        teams.sort_by(|a, b| (&a.0.name, &a.0.id).cmp(&(&b.0.name, &b.0.id)));
        teams
    }
}

impl State {
    fn human_by_ref(&self, reference: &str) -> Option<&Human> {
        self.humans.iter().find(|h| h.name == reference || h.id == reference)
    }

    /// `ORDER BY e.created_at, e.id`: creation order; grants `ORDER BY team_id NULLS FIRST, queue`.
    fn endpoints_by_ids(&self, ids: &[String]) -> Vec<Endpoint> {
        self.endpoints
            .iter()
            .filter(|e| ids.contains(&e.id))
            .map(|e| Endpoint {
                id: e.id.clone(),
                slug: e.slug.clone(),
                name: e.name.clone(),
                owner_human_id: e.owner_human_id.clone(),
                owner_team_id: e.owner_team_id.clone(),
                queues: e
                    .grants
                    .iter()
                    .map(|(team, queue)| match team {
                        None => QueueIdentity::endpoint(e.id.clone(), queue.clone()),
                        Some(team) => QueueIdentity::team(team.clone(), queue.clone()),
                    })
                    .collect(),
                verbs: e.verbs.clone(),
                revoked: e.revoked,
            })
            .collect()
    }
}

/// The scope of human `human_id` from the live rows (as `PgStore::human_scope_of`): whom they
/// reach and what they manage; None when there is no such human.
pub(super) fn scope_of(state: &State, human_id: &str) -> Option<HumanScope> {
    let human = state.humans.iter().find(|h| h.id == human_id)?.clone();
    let teams: Vec<(String, TeamRole)> = state
        .members
        .iter()
        .filter(|((_, member), _)| member == &human.id)
        .map(|((team, _), role)| (team.clone(), *role))
        .collect();
    let endpoints_of = |team_ids: &[&String]| -> Vec<String> {
        let mut ids: Vec<String> = state
            .endpoints
            .iter()
            .filter(|e| {
                e.owner_human_id.as_ref() == Some(&human.id)
                    || e.owner_team_id.as_ref().is_some_and(|team| team_ids.contains(&team))
            })
            .map(|e| e.id.clone())
            .collect();
        ids.sort();
        ids
    };
    let member_of: Vec<&String> = teams.iter().map(|(team, _)| team).collect();
    let configured: Vec<&String> = teams.iter().filter(|(_, role)| role.configures()).map(|(team, _)| team).collect();
    Some(HumanScope {
        reach: Reach {
            endpoint_ids: endpoints_of(&member_of),
            team_ids: member_of.iter().map(|t| t.to_string()).collect(),
        },
        manages: Reach {
            endpoint_ids: endpoints_of(&configured),
            team_ids: configured.iter().map(|t| t.to_string()).collect(),
        },
        teams: teams.clone(),
        human,
    })
}

/// The principals role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Principals for ModelStore {
    async fn human_by_token(&self, token_hash: &str) -> Result<Option<HumanScope>> {
        Ok(self.human_by_token_tx(token_hash))
    }

    async fn agent_by_token(&self, slug: &str, token_hash: &str) -> Result<AgentLookup> {
        Ok(self.agent_by_token_tx(slug, token_hash))
    }

    async fn resolve_scope(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner> {
        self.resolve_scope_tx(reach, scope)
    }

    async fn vend_endpoint(&self, endpoint: NewEndpoint) -> Result<Endpoint> {
        self.vend_endpoint_tx(endpoint)
    }

    async fn list_endpoints(&self, human: &HumanScope) -> Result<Vec<Endpoint>> {
        Ok(self.list_endpoints_tx(human))
    }

    async fn mint_token(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> Result<()> {
        self.mint_token_tx(human_id, label, token_hash, expires_in_seconds)
    }

    async fn list_tokens(&self, human_id: &str) -> Result<Vec<ApiToken>> {
        Ok(self.list_tokens_tx(human_id))
    }

    async fn revoke_token(&self, human_id: &str, token_id: &str) -> Result<()> {
        self.revoke_token_tx(human_id, token_id)
    }

    async fn revoke_endpoint(&self, endpoint_id: &str) -> Result<()> {
        self.revoke_endpoint_tx(endpoint_id)
    }

    async fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> Result<()> {
        self.rotate_endpoint_tx(endpoint_id, token_hash)
    }

    async fn list_teams(&self, human: &HumanScope) -> Result<Vec<(Team, TeamRole)>> {
        Ok(self.list_teams_tx(human))
    }
}
