//! Principals and their credentials: humans and their operator tokens, teams, vended endpoints
//! and their MCP tokens. Who may act, and on what.
//!
//! Token arguments are SHA-256 hex digests; raw tokens never reach the store.

use crate::error::{Error, Result};
use crate::identity::ScopeRef;
use crate::scope::{AgentScope, Endpoint, HumanScope};
use chrono::{DateTime, Utc};
use std::future::Future;

/// An operator API token as its owner may see it: never the secret or its digest.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiToken {
    pub id: String,
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// How an MCP bearer resolved against the endpoint named in the URL.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentLookup {
    /// No endpoint has this token, or it is revoked: 401.
    Unknown,
    /// A valid token for a different endpoint than the URL names: 403.
    OtherEndpoint,
    Found(Box<AgentScope>),
}

/// A vend request after validation and grant resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEndpoint {
    pub name: String,
    pub owner_human_id: Option<String>,
    pub owner_team_id: Option<String>,
    /// Endpoint queues by name; team queues already resolved to team ids.
    pub own_queues: Vec<String>,
    pub team_queues: Vec<(String, String)>,
    pub verbs: Vec<String>,
    pub token_hash: String,
    /// The human who vended it.
    pub created_by_human_id: Option<String>,
}

/// The principals role: looking up who a token belongs to, resolving scope references within a
/// reach, and vending, listing, rotating and revoking credentials. Each method is one whole
/// transaction.
pub trait Principals: Send + Sync {
    /// The human an operator token belongs to, with their reach; None when it is unknown,
    /// revoked or expired.
    fn human_by_token(&self, token_hash: &str) -> impl Future<Output = Result<Option<HumanScope>>> + Send;
    /// How an MCP bearer resolves against the endpoint `slug` names in the URL.
    fn agent_by_token(&self, slug: &str, token_hash: &str) -> impl Future<Output = Result<AgentLookup>> + Send;
    /// Resolves `endpoint:<ref>`/`team:<ref>` within a reach (what a human reaches, or what they
    /// manage); outside it, `not_found`, the same as for something that does not exist.
    fn resolve_scope(
        &self,
        reach: &crate::scope::Reach,
        scope: &ScopeRef,
    ) -> impl Future<Output = Result<crate::identity::Owner>> + Send;
    /// Resolves many `team:<ref>` at once within a reach, answering their ids in the order
    /// given; any one outside it is `not_found`, as `resolve_scope` answers. `PgStore` answers
    /// in one statement; this default asks `resolve_scope` once per reference.
    fn resolve_teams(
        &self,
        reach: &crate::scope::Reach,
        references: &[String],
    ) -> impl Future<Output = Result<Vec<String>>> + Send {
        async move {
            let mut ids = Vec::with_capacity(references.len());
            for reference in references {
                match self.resolve_scope(reach, &ScopeRef::Team(reference.clone())).await? {
                    crate::identity::Owner::Team(id) => ids.push(id),
                    crate::identity::Owner::Endpoint(_) => {
                        return Err(Error::internal("team scope resolved to an endpoint"));
                    }
                }
            }
            Ok(ids)
        }
    }
    /// Vends an endpoint. Refused with `conflict` when its owner (a human or a team) already
    /// owns `limits::ENDPOINTS_PER_OWNER_MAX` endpoints.
    fn vend_endpoint(&self, endpoint: NewEndpoint) -> impl Future<Output = Result<Endpoint>> + Send;
    /// The endpoints a human reaches.
    fn list_endpoints(&self, human: &HumanScope) -> impl Future<Output = Result<Vec<Endpoint>>> + Send;

    /// Mints another operator API token for a human (`POST /api/v1/tokens`), expiring
    /// `expires_in_seconds` from now when given.
    fn mint_token(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// A human's unrevoked operator tokens (expired ones included), oldest first.
    fn list_tokens(&self, human_id: &str) -> impl Future<Output = Result<Vec<ApiToken>>> + Send;
    /// Revokes one of the human's own unrevoked tokens; anything else is `not_found`.
    fn revoke_token(&self, human_id: &str, token_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Revokes an endpoint's MCP credential, keeping the endpoint and its work. The caller has
    /// already checked the human manages it; unknown is `not_found`.
    fn revoke_endpoint(&self, endpoint_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Replaces an endpoint's MCP credential (un-revoking it); the old one stops working at once.
    fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> impl Future<Output = Result<()>> + Send;
    /// The teams a human belongs to, with their role.
    fn list_teams(
        &self,
        human: &HumanScope,
    ) -> impl Future<Output = Result<Vec<(crate::scope::Team, crate::scope::TeamRole)>>> + Send;
}
