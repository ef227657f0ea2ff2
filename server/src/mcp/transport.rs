//! What streamable HTTP asks of every request on `/mcp/{slug}` before the method runs: the
//! protocol revisions this server speaks, the session header, the refusals of a foreign
//! `Origin` and of an unknown `MCP-Protocol-Version`, and the bearer check.
//!
//! A leaf both the JSON-RPC transport (`mcp`) and the event stream (`push::stream`) use, so
//! neither imports the other.

use crate::auth::require_agent;
use crate::state::AppState;
use crate::wire::ApiError;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use models::error::Error;
use models::store::Store;

/// The protocol revision this server speaks when the client asks for one it does not know.
pub(crate) const PROTOCOL_VERSION: &str = "2025-11-25";
/// Every revision it answers in; `docs/architecture.md` ("MCP protocol revisions") says what each
/// changed for this server.
pub(crate) const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The header that names the negotiated revision on every request after `initialize` (2025-06-18).
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// The header that names the session (streamable HTTP).
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The endpoint a request on `/mcp/{slug}` acts for, after the transport's own refusals
/// (`refuse_transport_headers`) and the bearer check; every method on the path starts here.
pub(crate) async fn transport_agent<S: Store>(
    state: &AppState<S>,
    headers: &HeaderMap,
    slug: &str,
) -> std::result::Result<models::scope::AgentScope, Response> {
    if let Some(refused) = refuse_transport_headers(headers) {
        return Err(refused);
    }
    require_agent(&state.store, headers, slug).await.map_err(|error| ApiError(error).into_response())
}

/// What streamable HTTP asks a server to refuse before anything else: a browser page of another
/// site (an `Origin` that is not this server's: 403, against DNS rebinding), and a revision in
/// `MCP-Protocol-Version` this server does not speak (400).
fn refuse_transport_headers(headers: &HeaderMap) -> Option<Response> {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or(""));
    if let Some(origin) = text("origin")
        && !origin_is_this_server(origin, text("host").unwrap_or(""))
    {
        let message = format!("Origin {origin} is not this server's; MCP is not served to other sites' pages\n");
        return Some((StatusCode::FORBIDDEN, message).into_response());
    }
    if let Some(version) = text(PROTOCOL_VERSION_HEADER)
        && !SUPPORTED_VERSIONS.contains(&version)
    {
        let error = Error::invalid(
            "MCP-Protocol-Version",
            format!("unsupported protocol revision {version:?}; this server speaks {}", SUPPORTED_VERSIONS.join(", ")),
        );
        return Some(ApiError(error).into_response());
    }
    None
}

/// Whether a browser's `Origin` names the host the request was sent to (`Host`), or is `null`
/// (a sandboxed or local page, which carries no site to rebind from).
fn origin_is_this_server(origin: &str, host: &str) -> bool {
    let authority = origin.split_once("://").map_or("", |(_, rest)| rest).trim_end_matches('/');
    origin == "null" || (!authority.is_empty() && authority.eq_ignore_ascii_case(host))
}
