//! The component schemas of the OpenAPI document: request bodies with the constraints the
//! server's validators enforce, and the answers as the handlers build them.
//!
//! Every constraint here is copied from a validator and cites it by its constant, so a limit
//! changed in one place is found from the other: queue names (`validate_queue_name`), scopes
//! (`ScopeRef::parse`), titles (`validate_title`), idempotency keys (`NewTodo::validate`),
//! policies (`Policy::from_request`, `WindowSpec::parse`), shifts (`Shift::parse`), presence
//! (`clock_in`) and each handler's `Args::only` list, which is what `additionalProperties: false`
//! states. No string the server stores may hold the NUL character (`models::storable`).

use models::admission::{MAX_CLAIMS_PER_WINDOW_LIMIT, MAX_IN_FLIGHT_LIMIT};
use models::capacity::CAPACITY_SETTING_MAX;
use models::identity::QUEUE_NAME_LENGTH_MAX;
use models::limits::TODOS_PER_BATCH_MAX;
use models::presence::{CLOCK_IN_MAX_SECONDS, CLOCK_IN_MIN_SECONDS, SHIFT_TEXT_BYTES_MAX};
use models::todo::{IDEMPOTENCY_KEY_BYTES_MAX, MAX_ATTEMPTS_LIMIT, TITLE_LENGTH_MAX};
use serde_json::{Value, json};

/// A string without the NUL character, which PostgreSQL cannot store.
const NO_NUL: &str = "^[^\\u0000]*$";
/// The characters Rust's `char::is_whitespace` names (Unicode White_Space): a title or name
/// made only of these is blank, since the server trims before it checks.
const WHITE_SPACE: &str =
    "\\t\\n\\u000b\\u000c\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
/// Day names of a weekly window or a shift, Monday first.
const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
/// `HH:MM` from 00:00 to 23:59 (`window::parse_hhmm`).
const HHMM: &str = "([01][0-9]|2[0-3]):[0-5][0-9]";
/// Id and slug characters: ids are `<prefix>_<32 hex>`, slugs `[a-z0-9-]`.
pub const REFERENCE: &str = "^[a-z0-9_-]{1,64}$";

/// Text that is not blank once trimmed and holds no NUL, at most `max` characters.
fn text(max: usize) -> Value {
    let pattern = format!("^[^\\u0000]*[^\\u0000{WHITE_SPACE}][^\\u0000]*$");
    json!({ "type": "string", "minLength": 1, "maxLength": max, "pattern": pattern })
}

/// An id the server made: `<prefix>_` and 32 hex digits.
pub fn id(prefix: &str) -> Value {
    json!({ "type": "string", "pattern": format!("^{prefix}_[0-9a-f]{{32}}$") })
}

fn nullable(schema: Value) -> Value {
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// The IANA zone names the server knows (chrono-tz's compiled-in table), as a regex alternation.
fn zone_alternation() -> String {
    let escape = |name: &str| -> String {
        name.chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '/' || c == '_' { c.to_string() } else { format!("\\{c}") })
            .collect()
    };
    chrono_tz::TZ_VARIANTS.iter().map(|tz| escape(tz.name())).collect::<Vec<_>>().join("|")
}

/// A shift as `Shift::parse` reads it: `TZ=<zone> <days> <HH:MM>-<HH:MM>`, separated by ASCII
/// white space; days a comma list of days or forward ranges; start and end differ.
fn shift_pattern() -> String {
    let mut items: Vec<String> = Vec::new();
    for (first, from) in DAYS.iter().enumerate() {
        items.push((*from).to_string());
        items.extend(DAYS.iter().skip(first + 1).map(|to| format!("{from}-{to}")));
    }
    let item = format!("(?:{})", items.join("|"));
    let hhmm = "(?:[01][0-9]|2[0-3]):[0-5][0-9]";
    let space = "[\\t\\n\\f\\r ]";
    format!(
        "^{space}*TZ=(?:{zones}){space}+{item}(?:,{item})*{space}+(?!({hhmm})-\\1{space}*$){hhmm}-{hhmm}{space}*$",
        zones = zone_alternation()
    )
}

/// Any JSON value the server can store: strings and keys without NUL, at any depth.
fn storable_json() -> Value {
    let string = json!({ "type": "string", "pattern": NO_NUL });
    json!({ "anyOf": [
        { "type": ["null", "boolean", "number"] },
        string,
        { "type": "array", "items": { "$ref": "#/components/schemas/StorableJson" } },
        { "type": "object", "propertyNames": string,
          "additionalProperties": { "$ref": "#/components/schemas/StorableJson" } },
    ] })
}

fn window() -> Value {
    let tz = json!({ "type": "string", "pattern": format!("^(?:{})$", zone_alternation()), "description": "IANA zone name" });
    let start = json!({ "type": "string", "pattern": format!("^{HHMM}$") });
    json!({ "oneOf": [
        { "type": "object", "additionalProperties": false, "required": ["period", "tz", "start"],
          "properties": { "period": { "enum": ["hour", "day"] }, "tz": tz, "start": start, "weekday": { "type": "null" } } },
        { "type": "object", "additionalProperties": false, "required": ["period", "tz", "start", "weekday"],
          "properties": { "period": { "const": "week" }, "tz": tz, "start": start, "weekday": { "enum": DAYS } } },
    ] })
}

/// The request bodies, each as strict as the handler that reads it.
pub fn requests() -> Value {
    let scope = json!({ "$ref": "#/components/schemas/Scope" });
    let queue = json!({ "$ref": "#/components/schemas/QueueName" });
    let storable = json!({ "$ref": "#/components/schemas/StorableJson" });
    let limit = |max: i64| json!({ "type": ["integer", "null"], "minimum": 0, "maximum": max });
    // Two complete alternatives rather than constraints beside `properties`, so a generator
    // meets each rule: an in-flight cap alone, or a window limit with its window.
    let in_flight_only = json!({ "type": "object", "additionalProperties": false, "required": ["max_in_flight"],
        "properties": { "max_in_flight": { "type": "integer", "minimum": 0, "maximum": MAX_IN_FLIGHT_LIMIT },
            "max_claims_per_window": { "type": "null" }, "window": nullable(window()) } });
    let windowed = json!({ "type": "object", "additionalProperties": false,
        "required": ["max_claims_per_window", "window"],
        "properties": { "max_in_flight": limit(MAX_IN_FLIGHT_LIMIT),
            "max_claims_per_window": { "type": "integer", "minimum": 0, "maximum": MAX_CLAIMS_PER_WINDOW_LIMIT },
            "window": window() } });
    let policy = json!({ "anyOf": [in_flight_only, windowed],
        "description": "max_in_flight, max_claims_per_window or both; a window whenever max_claims_per_window is set" });
    let todo = json!({ "type": "object", "additionalProperties": false, "required": ["scope", "queue", "title"],
        "properties": { "scope": scope, "queue": queue, "title": text(TITLE_LENGTH_MAX), "payload": storable,
            "idempotency_key": { "type": ["string", "null"], "minLength": 1, "maxLength": IDEMPOTENCY_KEY_BYTES_MAX,
                "pattern": "^(?!wh:)[^\\u0000]*$", "description": "at most 200 bytes; the wh: prefix is the webhooks'" },
            "max_attempts": { "type": ["integer", "null"], "minimum": 1, "maximum": MAX_ATTEMPTS_LIMIT } } });
    let grant = format!("^(team:[^/\\u0000]+/)?[a-z0-9._-]{{1,{QUEUE_NAME_LENGTH_MAX}}}$");
    let verbs: Vec<&str> = models::verbs::ALL_VERBS.to_vec();
    let lease = json!({ "type": ["integer", "null"], "minimum": 1, "maximum": i64::MAX,
        "description": "seconds, clamped to 86400" });
    json!({
        "StorableJson": storable_json(),
        "Scope": { "type": "string", "pattern": "^(endpoint|team):[a-z0-9_-]{1,64}$",
            "description": "endpoint:<slug-or-id> or team:<slug-or-id>" },
        "QueueName": { "type": "string", "pattern": format!("^[a-z0-9._-]{{1,{QUEUE_NAME_LENGTH_MAX}}}$") },
        "TodoFilter": { "type": "object", "properties": { "scope": scope, "queue": queue,
            "state": { "enum": ["pending", "claimed", "done", "failed", "discarded"] },
            "limit": { "type": "integer", "minimum": 1, "maximum": 200 } },
            "dependentRequired": { "queue": ["scope"] },
            "description": "each member is its own query parameter; queue needs scope; others are ignored" },
        "VendRequest": { "type": "object", "additionalProperties": false, "required": ["name", "queues"],
            "properties": { "name": text(crate::vend::ENDPOINT_NAME_LENGTH_MAX),
                "queues": { "type": "array", "minItems": 1, "maxItems": crate::vend::GRANTED_QUEUES_MAX,
                    "items": { "type": "string", "pattern": grant }, "description": "queue, or team:<slug>/<queue>" },
                "verbs": { "type": ["array", "null"], "items": { "enum": verbs } },
                "team": { "type": ["string", "null"], "pattern": REFERENCE } } },
        "TodoRequest": todo,
        "TodoPush": { "oneOf": [schema_ref("TodoRequest"),
            { "type": "array", "minItems": 1, "maxItems": TODOS_PER_BATCH_MAX, "items": schema_ref("TodoRequest") }] },
        "ClaimRequest": { "type": "object", "additionalProperties": false, "properties": { "lease_ttl_seconds": lease } },
        "ResultRequest": { "type": "object", "additionalProperties": false, "properties": { "result": storable } },
        "EmptyRequest": { "type": "object", "additionalProperties": false },
        "TokenRequest": { "type": "object", "additionalProperties": false, "properties": {
            "label": { "type": ["string", "null"], "maxLength": crate::api::TOKEN_LABEL_LENGTH_MAX, "pattern": NO_NUL },
            "expires_in_seconds": { "type": ["integer", "null"], "minimum": 1,
                "maximum": crate::api::MAX_TOKEN_LIFETIME_SECONDS } } },
        "PolicyRequest": policy,
        "WebhookRequest": { "type": "object", "additionalProperties": false, "required": ["name", "targets"],
            "properties": { "name": text(100), "targets": { "type": "array", "minItems": 1, "maxItems": 50,
                "items": { "type": "object", "required": ["scope", "queue"],
                    "properties": { "scope": scope, "queue": queue },
                    "propertyNames": { "type": "string", "pattern": NO_NUL },
                    "additionalProperties": storable, "description": "other members are ignored" } } } },
        "TodoEdit": { "anyOf": [
            { "type": "object", "additionalProperties": false, "required": ["title"],
              "properties": { "title": text(TITLE_LENGTH_MAX), "payload": storable } },
            { "type": "object", "additionalProperties": false, "required": ["payload"],
              "properties": { "title": { "type": "null" }, "payload": storable } },
        ], "description": "a title, a payload (null clears it), or both" },
        "CapacityRequest": { "type": "object", "additionalProperties": false, "required": ["max_pending_per_queue"],
            "properties": { "max_pending_per_queue": { "type": "integer", "minimum": 0, "maximum": CAPACITY_SETTING_MAX,
                "description": "0 is unlimited" } } },
        "PresenceRequest": { "oneOf": [
            { "type": "object", "additionalProperties": false, "required": ["presence"], "properties": {
                "presence": { "const": "in" },
                "for_seconds": { "type": ["integer", "null"], "minimum": CLOCK_IN_MIN_SECONDS, "maximum": CLOCK_IN_MAX_SECONDS } } },
            { "type": "object", "additionalProperties": false, "required": ["presence"], "properties": {
                "presence": { "const": "out" },
                "for_seconds": { "type": ["integer", "null"], "description": "ignored when clocking out" } } },
        ] },
        "ShiftRequest": { "type": "object", "additionalProperties": false, "properties": {
            "shift": { "type": ["string", "null"], "maxLength": SHIFT_TEXT_BYTES_MAX, "pattern": shift_pattern(),
                "description": "TZ=<IANA zone> <days> <HH:MM>-<HH:MM>, e.g. TZ=America/Los_Angeles Mon-Fri 09:00-17:00; \
                    null or absent clears it" } } },
        "HookRequest": { "type": "object", "additionalProperties": false, "required": ["url"], "properties": {
            "url": { "type": "string", "format": "uri", "pattern": "^https?://",
                "description": "http or https, resolving to a public address" },
            "ignore_presence": { "type": ["boolean", "null"] } } },
    })
}

/// A reference to one of the document's named schemas.
pub fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// The answers, as the handlers build them (`wire_types::TodoBody`, `wire_types::AdmissionBody`, …).
pub fn responses() -> Value {
    let ts = json!({ "type": ["string", "null"], "format": "date-time" });
    let int_or_null = json!({ "type": ["integer", "null"] });
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
        "max_in_flight": int_or_null, "in_flight": int_or_null, "max_claims_per_window": int_or_null,
        "used": int_or_null, "remaining": int_or_null, "window_start": ts, "window_resets_at": ts,
        "next_eligible_at": ts, "exact": { "type": ["boolean", "null"] } }, "required": ["status"] });
    let policy = json!({ "type": ["object", "null"], "properties": { "max_in_flight": int_or_null,
        "max_claims_per_window": int_or_null, "window": { "type": ["object", "null"], "properties": {
            "period": { "enum": ["hour", "day", "week"] }, "tz": { "type": "string" }, "start": { "type": "string" },
            "weekday": { "enum": DAYS } } } } });
    let todo = json!({ "type": "object", "properties": {
        "id": { "type": "string" }, "scope": { "type": "string" }, "queue": { "type": "string" }, "title": { "type": "string" },
        "state": { "enum": ["pending", "claimed", "done", "failed", "discarded"] }, "attempt": { "type": "integer" },
        "max_attempts": { "type": "integer" }, "lease_expires_at": ts, "next_retry_at": ts, "dead_letter": { "type": "boolean" },
        "created_by_kind": { "enum": ["human", "agent", "workflow", "ingest", "system"] }, "admission": hint },
        "required": ["id", "state"] });
    let admission = json!({ "type": "object", "properties": { "scope": { "type": "string" }, "queue": { "type": "string" },
        "policy": policy, "status": status, "pending": { "type": "integer" } } });
    let audit = json!({ "type": "object", "properties": { "actor_human_id": { "type": ["string", "null"] },
        "actor_endpoint_id": { "type": ["string", "null"] }, "at": ts, "action": { "enum": ["create", "update", "delete"] },
        "before": {}, "after": {} } });
    let endpoint = json!({ "type": "object", "properties": { "id": { "type": "string" }, "slug": { "type": "string" },
        "name": { "type": "string" }, "queues": { "type": "array", "items": { "type": "string" } },
        "verbs": { "type": "array", "items": { "type": "string" } }, "token": { "type": "string" }, "mcp_url": { "type": "string" } },
        "required": ["id", "slug"] });
    let presence = json!({ "type": "object", "properties": { "presence": { "enum": ["in", "out"] },
        "source": { "enum": ["default", "shift", "override"] }, "until": ts, "shift": { "type": ["string", "null"] },
        "pending": { "type": "integer" } } });
    let hook = json!({ "type": "object", "properties": { "id": { "type": "string" }, "url": { "type": "string" },
        "ignore_presence": { "type": "boolean" }, "enabled": { "type": "boolean" }, "consecutive_failures": { "type": "integer" },
        "disabled_reason": { "type": ["string", "null"] }, "created_at": ts }, "required": ["id"] });
    let list = |key: &str, item: &Value| json!({ "type": "object", "properties": { key: { "type": "array", "items": item } } });
    let todo_answer = json!({ "type": "object", "properties": { "todo": todo, "deduped": { "type": "boolean" },
        "admission": status }, "required": ["todo"] });
    let mut answers = json!({
        "Error": { "type": "object", "properties": { "error": { "type": "string" }, "code": { "type": "string" },
            "field": { "type": "string" }, "state": { "type": "string" } }, "required": ["error", "code"] },
        "Endpoint": endpoint,
        "EndpointList": list("endpoints", &endpoint),
        "TodoPushAnswer": { "oneOf": [todo_answer, { "type": "object", "properties": {
            "todos": { "type": "array", "items": todo_answer } }, "required": ["todos"] }] },
        "Todo": todo,
        "TodoAnswer": todo_answer,
        "TodoList": list("todos", &todo),
        "Token": { "type": "object", "properties": { "token": { "type": "string" }, "label": { "type": ["string", "null"] },
            "human_id": { "type": "string" } } },
        "TeamList": list("teams", &json!({ "type": "object", "properties": { "id": { "type": "string" }, "slug": { "type": "string" },
            "name": { "type": "string" }, "role": { "enum": ["owner", "admin", "member"] } } })),
        "PolicyStatus": status,
        "PolicyAdmission": admission,
        "PolicyList": list("policies", &admission),
        "PolicyDetail": { "allOf": [admission, { "type": "object", "properties": {
            "usage": { "type": "object", "properties": { "window_start": ts, "used": int_or_null } },
            "windows": { "type": "array", "items": { "type": "object", "properties": { "window_start": ts, "used": { "type": "integer" } } } },
            "audit": { "type": "array", "items": audit } } }] },
        "AuditList": list("records", &audit),
        "Purged": { "type": "object", "properties": { "purged": { "type": "integer" } } },
        "Cleared": { "type": "object", "properties": { "removed": { "type": "integer" } } },
        "Capacity": { "type": "object", "properties": {
            "setting": { "type": "object", "properties": { "max_pending_per_queue": int_or_null } },
            "effective": { "type": "object", "properties": { "max_pending_per_queue": { "type": "integer" },
                "source": { "enum": ["default", "setting", "environment"] }, "locked": { "type": "boolean" } } } } },
        "Presence": presence,
        "HookAdded": { "type": "object", "properties": { "hook": hook, "secret": { "type": "string" } }, "required": ["hook"] },
        "HookList": list("hooks", &hook),
        "HookTestOutcome": { "type": "object", "properties": { "outcome": { "enum": ["delivered", "failed", "refused"] },
            "status": { "type": "integer" }, "reason": { "type": "string" } }, "required": ["outcome"] },
    });
    // Kept apart so one `json!` stays within the macro's recursion limit.
    let credentials = json!({
        "Webhook": { "type": "object", "properties": { "id": { "type": "string" }, "name": { "type": "string" },
            "ingest_url": { "type": "string" }, "secret": { "type": "string" },
            "targets": { "type": "array", "items": target } }, "required": ["id"] },
        "TokenList": list("tokens", &token_row),
        "EndpointToken": { "type": "object", "properties": { "token": { "type": "string" } } },
        "WebhookList": list("webhooks", &webhook_summary),
        "WebhookSecret": { "type": "object", "properties": {
            "secret": { "type": "string" },
            "previous_secret_expires_at": { "type": ["string", "null"], "format": "date-time",
                "description": "until when deliveries signed with the replaced secret still verify" }
        } },
    });
    if let (Some(all), Value::Object(more)) = (answers.as_object_mut(), credentials) {
        all.extend(more);
    }
    answers
}
