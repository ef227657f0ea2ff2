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
    if let Some(refused) = refuse_transport_headers(headers, state.public_url.configured()) {
        return Err(refused);
    }
    require_agent(&state.store, headers, slug).await.map_err(|error| ApiError(error).into_response())
}

/// What streamable HTTP asks a server to refuse before anything else: a browser page of another
/// site (an `Origin` that is not this server's: 403, against DNS rebinding), and a revision in
/// `MCP-Protocol-Version` this server does not speak (400).
fn refuse_transport_headers(headers: &HeaderMap, public_url: Option<&str>) -> Option<Response> {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or(""));
    if let Some(origin) = text("origin")
        && !origin_is_this_server(origin, text("host").unwrap_or(""), public_url)
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

/// Whether a browser's `Origin` is this server's: the host the request was sent to (`Host`), the
/// configured public URL's origin (a proxy in front may rewrite `Host`), or `null` (a sandboxed
/// or local page, which carries no site to rebind from).
fn origin_is_this_server(origin: &str, host: &str, public_url: Option<&str>) -> bool {
    let origin_authority = authority(origin);
    origin == "null"
        || (!origin_authority.is_empty() && origin_authority.eq_ignore_ascii_case(host))
        || public_url.is_some_and(|public| {
            let scheme = |url: &str| url.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
            scheme(public) == scheme(origin) && authority(public).eq_ignore_ascii_case(origin_authority)
        })
}

/// `host[:port]` of `scheme://host[:port][/path]`; empty when there is none.
fn authority(url: &str) -> &str {
    url.split_once("://").map_or("", |(_, rest)| rest).split('/').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::origin_is_this_server;

    #[test]
    fn an_origin_is_this_servers_by_host_by_public_url_or_null() {
        assert!(origin_is_this_server("http://127.0.0.1:8080", "127.0.0.1:8080", None));
        assert!(origin_is_this_server("null", "127.0.0.1:8080", None));
        assert!(!origin_is_this_server("http://evil.example", "127.0.0.1:8080", None));
        // Behind a proxy that rewrote Host to the upstream: the public URL's origin.
        let public = Some("https://switchboard.example.com/prefix");
        assert!(origin_is_this_server("https://switchboard.example.com", "10.0.0.5:8080", public));
        assert!(!origin_is_this_server("http://switchboard.example.com", "10.0.0.5:8080", public), "scheme");
        assert!(!origin_is_this_server("https://evil.example", "10.0.0.5:8080", public));
    }
}
