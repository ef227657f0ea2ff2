//! Target `operator_api`: every operator API request body (`/api/v1`), plus the path segments
//! and the todo list's query string, through the production router with the owner's bearer.
//!
//! The first byte picks a route from `ROUTES` (modulo its length); its high bit instead puts the
//! rest's first line into the route's `{queue}` (percent-encoded), so names are fuzzed too. The
//! rest is the body, or for `GET /api/v1/todos` the query string.
//!
//! Laws: never 5xx; a refusal of a body is the API's error envelope `{error, code}`. A fuzzed path
//! or query may also meet axum's own plain-text rejections, so there only "never 5xx" holds.
//!
//! Left out on purpose: `POST …/hooks` and `…/hooks/{id}/test` resolve and call the URL they are
//! given (DNS and HTTP from a fuzzer); `check_url`, their pure half, is fuzzed instead (route 0).

use crate::world::{OWN_QUEUE, OWNER_TOKEN, TEAM_QUEUE, World, assert_error_envelope, assert_not_server_error};
use axum::body::Body;
use axum::http::{Method, Request, header};

/// Method and path template: `{slug}`, `{todo}`, `{team}`, `{webhook}` are the world's own;
/// `{queue}` is the default queue of that scope, or the fuzzed name.
const ROUTES: &[(Method, &str)] = &[
    (Method::GET, "check_url"),
    (Method::POST, "/api/v1/endpoints"),
    (Method::PUT, "/api/v1/endpoints/{slug}/presence"),
    (Method::PUT, "/api/v1/endpoints/{slug}/shift"),
    (Method::POST, "/api/v1/todos"),
    (Method::PATCH, "/api/v1/todos/{todo}"),
    (Method::POST, "/api/v1/todos/{todo}/claim"),
    (Method::POST, "/api/v1/todos/{todo}/complete"),
    (Method::POST, "/api/v1/todos/{todo}/fail"),
    (Method::POST, "/api/v1/todos/{todo}/release"),
    (Method::POST, "/api/v1/todos/{todo}/retry"),
    (Method::PATCH, "/api/v1/system/queue-capacity"),
    (Method::POST, "/api/v1/tokens"),
    (Method::PUT, "/api/v1/admission/team:{team}/{queue}"),
    (Method::PUT, "/api/v1/admission/endpoint:{slug}/{queue}"),
    (Method::POST, "/api/v1/webhooks"),
    (Method::POST, "/api/v1/webhooks/{webhook}/rotate"),
    (Method::POST, "/api/v1/queues/endpoint:{slug}/{queue}/clear"),
    (Method::DELETE, "/api/v1/queues/endpoint:{slug}/{queue}/todos/{todo}"),
    (Method::DELETE, "/api/v1/queues/team:{team}/{queue}"),
    (Method::GET, "/api/v1/admission/team:{team}/{queue}"),
    (Method::GET, "/api/v1/todos"),
];

pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let (method, template) = &ROUTES[usize::from(selector & 0x7f) % ROUTES.len()];
    if *template == "check_url" {
        if let Ok(url) = server::hook_sender::check_url(&String::from_utf8_lossy(rest)) {
            assert!(matches!(url.scheme(), "http" | "https"), "a hook URL is http(s): {url}");
        }
        return;
    }
    let fuzzed_queue = selector & 0x80 != 0 && template.contains("{queue}");
    let (queue, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(end) if fuzzed_queue => (percent_encode(&rest[..end]), &rest[end + 1..]),
        _ if template.contains("team:") => (TEAM_QUEUE.to_string(), rest),
        _ => (OWN_QUEUE.to_string(), rest),
    };
    let world = World::new();
    let mut uri = template
        .replace("{slug}", &world.endpoint_slug)
        .replace("{todo}", &world.todo_id)
        .replace("{team}", &world.team_slug)
        .replace("{webhook}", &world.webhook_id)
        .replace("{queue}", &queue);
    let query = *template == "/api/v1/todos" && method == Method::GET;
    if query {
        uri = format!("{uri}?{}", percent_encode_query(body));
    }
    let request = Request::builder()
        .method(method.clone())
        .uri(&uri)
        .header(header::AUTHORIZATION, format!("Bearer {OWNER_TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(if query { Body::empty() } else { Body::from(body.to_vec()) })
        .unwrap_or_else(|e| panic!("harness: request {method} {uri}: {e}"));
    let answer = world.send(request);
    let what = format!("{method} {uri}");
    assert_not_server_error(&what, &answer);
    if !fuzzed_queue && !query {
        assert_error_envelope(&what, &answer);
    }
}

/// Every byte but the unreserved ones as `%XX`, so any name reaches the router as one segment.
fn percent_encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// As `percent_encode`, keeping `=` and `&` so the bytes read as a query of pairs.
fn percent_encode_query(bytes: &[u8]) -> String {
    bytes
        .split(|&b| b == b'&')
        .map(|pair| pair.split(|&b| b == b'=').map(percent_encode).collect::<Vec<_>>().join("="))
        .collect::<Vec<_>>()
        .join("&")
}
