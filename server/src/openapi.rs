//! The OpenAPI 3.1 document of `/api/v1`, served at `GET /api/v1/openapi.json`.
//!
//! Generated from one route table (`ROUTES`) rather than from derive macros: the handlers read
//! their bodies by hand so every refusal can name its field, and a second, derived description
//! of the same shapes would drift. Two tests keep the table honest: a unit test that every
//! `/api/v1` route the router declares is in the table (and nothing else is), and a black-box
//! test that every documented operation is served and refuses a caller without credentials.

use serde_json::{Map, Value, json};

/// One documented operation.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    /// A component schema name for the JSON request body, if any.
    pub body: Option<&'static str>,
    /// (status, description, component schema name or "").
    pub responses: &'static [(u16, &'static str, &'static str)],
}

const AUTH_ERRORS: [(u16, &str, &str); 2] = [(401, "no or wrong bearer", "Error"), (429, "rate limited", "Error")];

pub const ROUTES: &[Route] = &[
    Route {
        method: "post",
        path: "/api/v1/endpoints",
        summary: "Vend an endpoint; the sbk_ token is shown once",
        body: Some("VendRequest"),
        responses: &[
            (201, "vended", "Endpoint"),
            (400, "invalid_argument naming the field", "Error"),
            (404, "team not manageable", "Error"),
        ],
    },
    Route {
        method: "get",
        path: "/api/v1/endpoints",
        summary: "Endpoints in the caller's reach",
        body: None,
        responses: &[(200, "endpoints", "EndpointList")],
    },
    Route {
        method: "post",
        path: "/api/v1/todos",
        summary: "Push a todo, or a batch of up to 1000 in one transaction (dedup on idempotency_key)",
        body: Some("TodoPush"),
        responses: &[
            (201, "created (a batch: at least one created)", "TodoPushAnswer"),
            (200, "deduped onto a live todo (a batch: every one deduped)", "TodoPushAnswer"),
            (400, "invalid_argument", "Error"),
            (404, "scope not in reach", "Error"),
        ],
    },
    Route {
        method: "get",
        path: "/api/v1/todos",
        summary: "Todos in reach, newest first; pending todos of budgeted queues carry admission",
        body: None,
        responses: &[(200, "todos", "TodoList")],
    },
    Route {
        method: "get",
        path: "/api/v1/todos/{id}",
        summary: "One todo",
        body: None,
        responses: &[(200, "the todo", "TodoAnswer"), (404, "not found", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/todos/{id}/{action}",
        summary: "Owner action: claim, complete, fail, release or retry",
        body: None,
        responses: &[
            (200, "the todo", "TodoAnswer"),
            (409, "conflict with state", "Error"),
            (429, "deferred (claim)", "Error"),
            (404, "not found", "Error"),
        ],
    },
    Route {
        method: "post",
        path: "/api/v1/tokens",
        summary: "Mint another operator API token for the caller",
        body: Some("TokenRequest"),
        responses: &[(201, "token (shown once)", "Token"), (400, "invalid_argument naming the field", "Error")],
    },
    Route {
        method: "get",
        path: "/api/v1/tokens",
        summary: "The caller's unrevoked operator tokens (never the secret)",
        body: None,
        responses: &[(200, "tokens", "TokenList")],
    },
    Route {
        method: "delete",
        path: "/api/v1/tokens/{id}",
        summary: "Revoke one of the caller's operator tokens; it is refused (401) from then on",
        body: None,
        responses: &[(204, "revoked", ""), (404, "not the caller's token", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/endpoints/{reference}/revoke",
        summary: "Revoke the endpoint's MCP credential, keeping the endpoint and its todos",
        body: None,
        responses: &[(204, "revoked", ""), (404, "not manageable", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/endpoints/{reference}/rotate",
        summary: "Issue a new sbk_ credential for the endpoint; the old one is refused at once",
        body: None,
        responses: &[(200, "new token (shown once)", "EndpointToken"), (404, "not manageable", "Error")],
    },
    Route {
        method: "get",
        path: "/api/v1/teams",
        summary: "The caller's teams and roles",
        body: None,
        responses: &[(200, "teams", "TeamList")],
    },
    Route {
        method: "get",
        path: "/api/v1/admission",
        summary: "Policies the caller manages, with status and usage",
        body: None,
        responses: &[(200, "policies", "PolicyList")],
    },
    Route {
        method: "get",
        path: "/api/v1/admission/{scope}/{queue}",
        summary: "Policy, status, usage, last 30 windows, audit tail",
        body: None,
        responses: &[(200, "the policy", "PolicyDetail"), (404, "foreign or unknown: the same answer", "Error")],
    },
    Route {
        method: "put",
        path: "/api/v1/admission/{scope}/{queue}",
        summary: "Create or fully replace a policy (body at most 16 KiB)",
        body: Some("PolicyRequest"),
        responses: &[
            (200, "saved", "PolicyAdmission"),
            (400, "invalid_argument naming the field", "Error"),
            (404, "not manageable", "Error"),
            (413, "payload_too_large", "Error"),
        ],
    },
    Route {
        method: "delete",
        path: "/api/v1/admission/{scope}/{queue}",
        summary: "Remove a policy; the audit stays",
        body: None,
        responses: &[(204, "removed", ""), (404, "no policy, or not manageable", "Error")],
    },
    Route {
        method: "get",
        path: "/api/v1/admission/{scope}/{queue}/audit",
        summary: "Who changed the policy, when, from what to what",
        body: None,
        responses: &[(200, "records", "AuditList"), (404, "not manageable or never had a policy", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/webhooks",
        summary: "Register a webhook; answers its ingest URL and signing secret",
        body: Some("WebhookRequest"),
        responses: &[
            (201, "registered", "Webhook"),
            (400, "invalid_argument", "Error"),
            (404, "target not manageable", "Error"),
        ],
    },
    Route {
        method: "get",
        path: "/api/v1/webhooks",
        summary: "The caller's webhooks with their targets (never the secret)",
        body: None,
        responses: &[(200, "webhooks", "WebhookList")],
    },
    Route {
        method: "delete",
        path: "/api/v1/webhooks/{id}",
        summary: "Delete one of the caller's webhooks; its ingest URL is 404 from then on",
        body: None,
        responses: &[(204, "deleted", ""), (404, "not the caller's webhook", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/webhooks/{id}/rotate",
        summary: "Issue a new signing secret; the old one still verifies for 24 h (previous_secret_expires_at)",
        body: None,
        responses: &[(200, "new secret (shown once)", "WebhookSecret"), (404, "not the caller's webhook", "Error")],
    },
    Route {
        method: "delete",
        path: "/api/v1/endpoints/{reference}",
        summary: "Delete an endpoint and every todo of its queues (purge)",
        body: None,
        responses: &[(204, "deleted", ""), (404, "not manageable", "Error")],
    },
    Route {
        method: "get",
        path: "/api/v1/endpoints/{reference}/presence",
        summary: "Whether the endpoint is rung for new work now: presence, its source, until, shift",
        body: None,
        responses: &[(200, "presence", "Presence"), (404, "not manageable", "Error")],
    },
    Route {
        method: "put",
        path: "/api/v1/endpoints/{reference}/presence",
        summary: "Clock the endpoint in (for_seconds, ending at the shift's next boundary) or out",
        body: Some("PresenceRequest"),
        responses: &[
            (200, "presence", "Presence"),
            (400, "invalid_argument naming the field", "Error"),
            (404, "not manageable", "Error"),
        ],
    },
    Route {
        method: "delete",
        path: "/api/v1/endpoints/{reference}/presence",
        summary: "Clear the operator's presence override; the shift decides again",
        body: None,
        responses: &[(200, "presence", "Presence"), (404, "not manageable", "Error")],
    },
    Route {
        method: "put",
        path: "/api/v1/endpoints/{reference}/shift",
        summary: "Set or clear (null) the endpoint's working hours",
        body: Some("ShiftRequest"),
        responses: &[
            (200, "presence", "Presence"),
            (400, "invalid_argument on shift", "Error"),
            (404, "not manageable", "Error"),
        ],
    },
    Route {
        method: "get",
        path: "/api/v1/endpoints/{reference}/hooks",
        summary: "The endpoint's notify hooks (never their secrets)",
        body: None,
        responses: &[(200, "hooks", "HookList"), (404, "not manageable", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/endpoints/{reference}/hooks",
        summary: "Add a notify hook; the Standard Webhooks signing secret is shown once",
        body: Some("HookRequest"),
        responses: &[
            (201, "added", "HookAdded"),
            (400, "invalid_argument on url (scheme, or a private address: the SSRF guard)", "Error"),
            (404, "not manageable", "Error"),
        ],
    },
    Route {
        method: "delete",
        path: "/api/v1/endpoints/{reference}/hooks/{hook_id}",
        summary: "Remove a notify hook",
        body: None,
        responses: &[(204, "removed", ""), (404, "no such hook, or not manageable", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/endpoints/{reference}/hooks/{hook_id}/test",
        summary: "Call the hook once now with a signed test body; answers the outcome",
        body: None,
        responses: &[(200, "outcome", "HookTestOutcome"), (404, "no such hook, or not manageable", "Error")],
    },
    Route {
        method: "patch",
        path: "/api/v1/todos/{id}",
        summary: "Edit a pending todo's title/payload (only the human who created it)",
        body: Some("TodoEdit"),
        responses: &[(200, "the todo", "TodoAnswer"), (409, "not editable", "Error"), (404, "not found", "Error")],
    },
    Route {
        method: "delete",
        path: "/api/v1/queues/{scope}/{queue}",
        summary: "Delete a queue identity with all its todos (pending and claimed) and its policy",
        body: None,
        responses: &[(200, "the count purged", "Purged"), (404, "not manageable", "Error")],
    },
    Route {
        method: "post",
        path: "/api/v1/queues/{scope}/{queue}/clear",
        summary: "Remove every pending todo of a queue identity",
        body: None,
        responses: &[(200, "the exact count", "Cleared"), (404, "not manageable", "Error")],
    },
    Route {
        method: "delete",
        path: "/api/v1/queues/{scope}/{queue}/todos/{id}",
        summary: "Remove one pending todo, whatever created it",
        body: None,
        responses: &[(204, "removed", ""), (409, "not_pending with state", "Error"), (404, "not found", "Error")],
    },
    Route {
        method: "get",
        path: "/api/v1/system/queue-capacity",
        summary: "Intake capacity: configured and effective value, source, lock",
        body: None,
        responses: &[(200, "capacity", "Capacity")],
    },
    Route {
        method: "patch",
        path: "/api/v1/system/queue-capacity",
        summary: "Set the install-wide intake capacity (instance admins)",
        body: Some("CapacityRequest"),
        responses: &[
            (200, "capacity", "Capacity"),
            (400, "invalid_argument", "Error"),
            (403, "not an admin", "Error"),
            (409, "locked by the environment", "Error"),
        ],
    },
    Route {
        method: "get",
        path: "/api/v1/openapi.json",
        summary: "This document",
        body: None,
        responses: &[(200, "OpenAPI 3.1", "")],
    },
];

fn schemas() -> Value {
    let ts = json!({ "type": ["string", "null"], "format": "date-time" });
    let target =
        json!({ "type": "object", "properties": { "scope": { "type": "string" }, "queue": { "type": "string" } } });
    let webhook_summary = json!({ "type": "object", "properties": { "id": { "type": "string" },
        "name": { "type": "string" }, "targets": { "type": "array", "items": target } } });
    let token_row = json!({ "type": "object", "properties": { "id": { "type": "string" },
        "label": { "type": ["string", "null"] }, "created_at": ts, "expires_at": ts } });
    let hint = json!({ "type": "object", "properties": { "state": { "enum": ["admitted", "deferred"] },
        "reason": { "enum": ["window_exhausted", "in_flight_full", "paused", "admission_unavailable"] },
        "next_eligible_at": ts, "exact": { "type": ["boolean", "null"] } }, "required": ["state"] });
    let status = json!({ "type": "object", "properties": {
        "status": { "enum": ["admitted", "window_exhausted", "in_flight_full", "paused", "admission_unavailable"] },
        "max_in_flight": { "type": ["integer", "null"] }, "in_flight": { "type": ["integer", "null"] },
        "max_claims_per_window": { "type": ["integer", "null"] }, "used": { "type": ["integer", "null"] },
        "remaining": { "type": ["integer", "null"] }, "window_start": ts, "window_resets_at": ts,
        "next_eligible_at": ts, "exact": { "type": ["boolean", "null"] } }, "required": ["status"] });
    let window = json!({ "type": ["object", "null"], "properties": { "period": { "enum": ["hour", "day", "week"] },
        "tz": { "type": "string", "description": "IANA zone name" }, "start": { "type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$" },
        "weekday": { "enum": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"] } }, "required": ["period", "tz", "start"] });
    let policy = json!({ "type": "object", "properties": {
        "max_in_flight": { "type": ["integer", "null"], "minimum": 0, "maximum": 10000 },
        "max_claims_per_window": { "type": ["integer", "null"], "minimum": 0, "maximum": 1000000 },
        "window": window }, "additionalProperties": false });
    let todo = json!({ "type": "object", "properties": {
        "id": { "type": "string" }, "scope": { "type": "string" }, "queue": { "type": "string" }, "title": { "type": "string" },
        "state": { "enum": ["pending", "claimed", "done", "failed"] }, "attempt": { "type": "integer" }, "max_attempts": { "type": "integer" },
        "lease_expires_at": ts, "next_retry_at": ts, "dead_letter": { "type": "boolean" },
        "created_by_kind": { "enum": ["human", "agent", "workflow", "ingest", "system"] }, "admission": hint }, "required": ["id", "state"] });
    let admission = json!({ "type": "object", "properties": { "scope": { "type": "string" }, "queue": { "type": "string" },
        "policy": { "anyOf": [policy, { "type": "null" }] }, "status": status, "pending": { "type": "integer" } } });
    let audit = json!({ "type": "object", "properties": { "actor_human_id": { "type": ["string", "null"] },
        "actor_endpoint_id": { "type": ["string", "null"] }, "at": ts, "action": { "enum": ["create", "update", "delete"] },
        "before": {}, "after": {} } });
    let endpoint = json!({ "type": "object", "properties": { "id": { "type": "string" }, "slug": { "type": "string" },
        "name": { "type": "string" }, "queues": { "type": "array", "items": { "type": "string" } },
        "verbs": { "type": "array", "items": { "type": "string" } }, "token": { "type": "string" }, "mcp_url": { "type": "string" } } });
    let presence = json!({ "type": "object", "properties": { "presence": { "enum": ["in", "out"] },
        "source": { "enum": ["default", "shift", "override"] }, "until": ts, "shift": { "type": ["string", "null"] }, "pending": { "type": "integer" } } });
    let hook = json!({ "type": "object", "properties": { "id": { "type": "string" }, "url": { "type": "string" },
        "ignore_presence": { "type": "boolean" }, "enabled": { "type": "boolean" }, "consecutive_failures": { "type": "integer" },
        "disabled_reason": { "type": ["string", "null"] }, "created_at": ts } });
    let list = |key: &str, item: &Value| json!({ "type": "object", "properties": { key: { "type": "array", "items": item } } });
    let mut schemas = json!({
        "Error": { "type": "object", "properties": { "error": { "type": "string" }, "code": { "type": "string" },
            "field": { "type": "string" }, "state": { "type": "string" } }, "required": ["error", "code"] },
        "VendRequest": { "type": "object", "properties": { "name": { "type": "string" },
            "queues": { "type": "array", "items": { "type": "string" }, "description": "queue, or team:<slug>/<queue>" },
            "verbs": { "type": "array", "items": { "type": "string" } }, "team": { "type": "string" } }, "required": ["name", "queues"] },
        "Endpoint": endpoint,
        "EndpointList": list("endpoints", &endpoint),
        "TodoRequest": { "type": "object", "properties": { "scope": { "type": "string" }, "queue": { "type": "string" },
            "title": { "type": "string" }, "payload": {}, "idempotency_key": { "type": "string" },
            "max_attempts": { "type": "integer", "minimum": 1, "maximum": 100 } }, "required": ["scope", "queue", "title"] },
        "TodoPush": { "oneOf": [schema_ref("TodoRequest"),
            { "type": "array", "minItems": 1, "maxItems": 1000, "items": schema_ref("TodoRequest") }] },
        "TodoPushAnswer": { "oneOf": [schema_ref("TodoAnswer"), { "type": "object", "properties": {
            "todos": { "type": "array", "items": schema_ref("TodoAnswer") } } }] },
        "Todo": todo,
        "TodoAnswer": { "type": "object", "properties": { "todo": todo, "deduped": { "type": "boolean" }, "admission": status } },
        "TodoList": list("todos", &todo),
        "TokenRequest": { "type": "object", "properties": { "label": { "type": "string" },
            "expires_in_seconds": { "type": "integer", "minimum": 1, "maximum": 31_622_400 } } },
        "Token": { "type": "object", "properties": { "token": { "type": "string" }, "label": { "type": ["string", "null"] } } },
        "TeamList": list("teams", &json!({ "type": "object", "properties": { "id": { "type": "string" }, "slug": { "type": "string" },
            "name": { "type": "string" }, "role": { "enum": ["owner", "admin", "member"] } } })),
        "PolicyRequest": policy,
        "PolicyStatus": status,
        "PolicyAdmission": admission,
        "PolicyList": list("policies", &admission),
        "PolicyDetail": { "allOf": [admission, { "type": "object", "properties": {
            "usage": { "type": "object", "properties": { "window_start": ts, "used": { "type": ["integer", "null"] } } },
            "windows": { "type": "array", "items": { "type": "object", "properties": { "window_start": ts, "used": { "type": "integer" } } } },
            "audit": { "type": "array", "items": audit } } }] },
        "AuditList": list("records", &audit),
        "WebhookRequest": { "type": "object", "properties": { "name": { "type": "string" }, "targets": { "type": "array",
            "items": { "type": "object", "properties": { "scope": { "type": "string" }, "queue": { "type": "string" } } } } },
            "required": ["name", "targets"] },
        "TodoEdit": { "type": "object", "properties": { "title": { "type": "string" }, "payload": {} } },
        "Purged": { "type": "object", "properties": { "purged": { "type": "integer" } } },
        "Cleared": { "type": "object", "properties": { "removed": { "type": "integer" } } },
        "CapacityRequest": { "type": "object", "properties": { "max_pending_per_queue": { "type": "integer", "minimum": 0, "maximum": 1000000 } },
            "required": ["max_pending_per_queue"] },
        "Capacity": { "type": "object", "properties": {
            "setting": { "type": "object", "properties": { "max_pending_per_queue": { "type": ["integer", "null"] } } },
            "effective": { "type": "object", "properties": { "max_pending_per_queue": { "type": "integer" },
                "source": { "enum": ["default", "setting", "environment"] }, "locked": { "type": "boolean" } } } } },
        "Presence": presence,
        "PresenceRequest": { "type": "object", "properties": { "presence": { "enum": ["in", "out"] },
            "for_seconds": { "type": "integer", "description": "clock-in only" } }, "required": ["presence"] },
        "ShiftRequest": { "type": "object", "properties": { "shift": { "type": ["string", "null"],
            "description": "TZ=<IANA zone> <days> <HH:MM>-<HH:MM>, e.g. TZ=America/Los_Angeles Mon-Fri 09:00-17:00" } },
            "required": ["shift"] },
        "HookRequest": { "type": "object", "properties": { "url": { "type": "string" }, "ignore_presence": { "type": "boolean" } },
            "required": ["url"] },
        "HookAdded": { "type": "object", "properties": { "hook": hook, "secret": { "type": "string" } } },
        "HookList": list("hooks", &hook),
        "HookTestOutcome": { "type": "object", "properties": { "outcome": { "enum": ["delivered", "failed", "refused"] },
            "status": { "type": "integer" }, "reason": { "type": "string" } }, "required": ["outcome"] },
        "Webhook": { "type": "object", "properties": { "id": { "type": "string" }, "ingest_url": { "type": "string" },
            "secret": { "type": "string" } } },
    });
    // Credential management (issue #14), kept apart so one `json!` stays within the macro's
    // recursion limit.
    let credentials = json!({
        "TokenList": list("tokens", &token_row),
        "EndpointToken": { "type": "object", "properties": { "token": { "type": "string" } } },
        "WebhookList": list("webhooks", &webhook_summary),
        "WebhookSecret": { "type": "object", "properties": {
            "secret": { "type": "string" },
            "previous_secret_expires_at": { "type": ["string", "null"], "format": "date-time",
                "description": "until when deliveries signed with the replaced secret still verify" }
        } },
    });
    if let (Some(all), Value::Object(more)) = (schemas.as_object_mut(), credentials) {
        all.extend(more);
    }
    schemas
}

/// The document, built from `ROUTES`.
pub fn document() -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for route in ROUTES {
        let mut responses = Map::new();
        let public = route.path == "/api/v1/openapi.json";
        let auth: &[(u16, &str, &str)] = if public { &[] } else { &AUTH_ERRORS };
        for (status, description, schema) in route.responses.iter().chain(auth) {
            let mut response = json!({ "description": description });
            if !schema.is_empty()
                && let Some(map) = response.as_object_mut()
            {
                map.insert(
                    "content".into(),
                    json!({ "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }),
                );
            }
            responses.insert(status.to_string(), response);
        }
        let parameters: Vec<Value> = route
            .path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        let mut operation = json!({ "summary": route.summary, "responses": responses, "parameters": parameters });
        if let Some(map) = operation.as_object_mut() {
            if let Some(body) = route.body {
                map.insert("requestBody".into(), json!({ "required": true,
                    "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{body}") } } } }));
            }
            if public {
                map.insert("security".into(), json!([]));
            }
        }
        let item = paths.entry(route.path.to_string()).or_insert_with(|| json!({}));
        if let Some(map) = item.as_object_mut() {
            map.insert(route.method.to_string(), operation);
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Switchboard operator API", "version": env!("CARGO_PKG_VERSION"),
            "description": "Errors answer {error, code, ...extras}; anything outside the caller's reach is 404 not_found." },
        "servers": [{ "url": "/" }],
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": { "schemas": schemas(),
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer", "description": "operator token sbh_..." } } },
    })
}

/// `GET /api/v1/openapi.json`: public metadata, no tenant data.
pub async fn serve() -> axum::Json<Value> {
    axum::Json(document())
}

/// A reference to one of the document's named schemas.
fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every `/api/v1` path the router declares is documented, and nothing undeclared is.
    #[test]
    fn the_document_covers_exactly_the_routed_api_paths() {
        let router_source = include_str!("app.rs");
        let routed: BTreeSet<&str> = router_source
            .split(".route(")
            .skip(1)
            .filter_map(|rest| rest.trim_start().strip_prefix('"').and_then(|r| r.split('"').next()))
            .filter(|path| path.starts_with("/api/v1"))
            .collect();
        let documented: BTreeSet<&str> = ROUTES.iter().map(|r| r.path).collect();
        assert_eq!(routed, documented);
        // Every referenced schema exists.
        let doc = document();
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        for route in ROUTES {
            for name in route.body.iter().chain(route.responses.iter().map(|r| &r.2)).filter(|n| !n.is_empty()) {
                assert!(schemas.contains_key(*name), "{} {} refers to missing schema {name}", route.method, route.path);
            }
        }
    }
}
