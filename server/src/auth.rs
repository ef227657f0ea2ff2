//! Who is calling: `sbh_` bearers are humans on the operator API, `sbk_` bearers are agents on
//! MCP, and neither is accepted on the other's surface (401).

use axum::http::{HeaderMap, header};
use engine::pg_store::hash_token;
use models::error::{Code, Error, Result};
use models::scope::{AgentScope, HumanScope};
use models::store::{AgentLookup, Store};

/// Operator API bearer prefix.
pub const HUMAN_TOKEN_PREFIX: &str = "sbh_";
/// Vended endpoint (MCP) bearer prefix.
pub const ENDPOINT_TOKEN_PREFIX: &str = "sbk_";

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim())
}

fn unauthenticated(message: &str) -> Error {
    Error::new(Code::Unauthenticated, message)
}

/// The human behind an operator API call.
pub async fn require_human<S: Store>(store: &S, headers: &HeaderMap) -> Result<HumanScope> {
    let token = bearer(headers).ok_or_else(|| unauthenticated("a bearer token (sbh_...) is required"))?;
    if !token.starts_with(HUMAN_TOKEN_PREFIX) {
        return Err(unauthenticated("the operator API takes human tokens (sbh_...), not endpoint credentials"));
    }
    store.human_by_token(&hash_token(token)).await?.ok_or_else(|| unauthenticated("unknown or revoked token"))
}

/// The agent behind an MCP call on `/mcp/{slug}`.
pub async fn require_agent<S: Store>(store: &S, headers: &HeaderMap, slug: &str) -> Result<AgentScope> {
    let token = bearer(headers).ok_or_else(|| unauthenticated("a bearer token (sbk_...) is required"))?;
    if !token.starts_with(ENDPOINT_TOKEN_PREFIX) {
        return Err(unauthenticated("MCP takes endpoint credentials (sbk_...), not human tokens"));
    }
    match store.agent_by_token(slug, &hash_token(token)).await? {
        AgentLookup::Found(agent) => Ok(*agent),
        AgentLookup::Unknown => Err(unauthenticated("unknown or revoked endpoint credential")),
        AgentLookup::OtherEndpoint => Err(Error::forbidden("this credential belongs to another endpoint")),
    }
}
