//! What the API's bodies and the MCP tools' arguments may hold: one `serde` type per request,
//! read by its handler with [`read`], and the JSON Schema the OpenAPI document and `tools/list`
//! publish for it (`schemars`), so what is read and what is documented are one declaration.
//!
//! A typed read checks shapes: the members a request may have (`deny_unknown_fields`, published
//! as `additionalProperties: false`), their JSON types and what is required. The rules about
//! values stay with the validators that own them (queue names, scopes, titles, policies, shifts)
//! and run after the read; each schema states those rules too, citing the validator's constant,
//! so a client generated from the document sends what the server accepts.

pub use super::text_schemas::REFERENCE;
use super::text_schemas::{NO_NUL, grant_pattern, not_blank, shift_pattern};
use models::admission::{ADDITIONAL_WINDOWS_MAX, MAX_CLAIMS_PER_WINDOW_LIMIT, MAX_IN_FLIGHT_LIMIT};
use models::capacity::CAPACITY_SETTING_MAX;
use models::error::{Error, Result};
use models::limits::TODOS_PER_BATCH_MAX;
use models::presence::{CLOCK_IN_MAX_SECONDS, CLOCK_IN_MIN_SECONDS, Presence, SHIFT_TEXT_BYTES_MAX};
use models::todo::{IDEMPOTENCY_KEY_BYTES_MAX, MAX_ATTEMPTS_LIMIT, TITLE_LENGTH_MAX};
use models::window::WindowSpec;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// Reads `value` as the request `T`; a refusal names the field (`title`, `todos[3].queue`) and
/// says what it must be.
pub fn read<T: DeserializeOwned>(value: &Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(refusal)
}

/// serde's refusal, in the API's words (`<field> must be a string`, `<field> is required`,
/// `unknown field <field>`).
fn refusal(error: serde_path_to_error::Error<serde_json::Error>) -> Error {
    let path = error.path().to_string();
    // serde_path_to_error's path ends at the member being read: an unknown member's own name, or
    // the object a missing member belongs to.
    let within = |name: &str| match path.as_str() {
        "." => name.to_string(),
        at if at == name || at.ends_with(&format!(".{name}")) => at.to_string(),
        at => format!("{at}.{name}"),
    };
    let message = error.inner().to_string();
    let quoted = |rest: &str| rest.split('`').next().unwrap_or(rest).to_string();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let field = within(&quoted(rest));
        return Error::invalid(&field, format!("unknown field {field}"));
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = within(&quoted(rest));
        return Error::invalid(&field, format!("{field} is required"));
    }
    let field = if path == "." { "body".to_string() } else { path };
    if message.starts_with("invalid type: null") {
        return Error::invalid(&field, format!("{field} is required"));
    }
    let expected = message.rsplit_once(", expected ").map_or(message.as_str(), |(_, expected)| expected);
    let expected = match expected {
        _ if expected.starts_with("struct ") || expected == "a map" => "a JSON object",
        "a sequence" => "a list",
        "a boolean" => "true or false",
        // An enum of words (`presence`) sent as something else than a string.
        "string or map" => "a string",
        other => other,
    };
    Error::invalid(&field, format!("{field} must be {expected}"))
}

/// An integer as JSON Schema means it: `7` and `7.0` alike; a fraction or a string is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Integer(pub i64);

impl<'de> Deserialize<'de> for Integer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Number(n) => models::json_number::integer(&n).map(Integer).ok_or_else(|| {
                D::Error::invalid_type(serde::de::Unexpected::Other("a fraction or out-of-range number"), &"an integer")
            }),
            _ => Err(D::Error::invalid_type(serde::de::Unexpected::Other("not a number"), &"an integer")),
        }
    }
}

impl JsonSchema for Integer {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Integer".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "integer" })
    }
}

/// The value of an optional integer argument.
pub fn integer(value: Option<Integer>) -> Option<i64> {
    value.map(|Integer(n)| n)
}

/// Any JSON value the server can store: strings and keys without NUL, at any depth
/// (`models::storable`, checked on every body before it is read).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct StorableJson(pub Value);

impl JsonSchema for StorableJson {
    fn schema_name() -> Cow<'static, str> {
        "StorableJson".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let string = json_schema!({ "type": "string", "pattern": NO_NUL });
        let itself = generator.subschema_for::<StorableJson>();
        json_schema!({ "anyOf": [
            { "type": ["null", "boolean", "number"] },
            string,
            { "type": "array", "items": itself },
            { "type": "object", "propertyNames": string, "additionalProperties": itself },
        ] })
    }
}

/// The stored value of an optional JSON member: null and absent alike are none.
pub fn storable(value: Option<StorableJson>) -> Option<Value> {
    value.map(|StorableJson(v)| v).filter(|v| !v.is_null())
}

/// `endpoint:<slug-or-id>` or `team:<slug-or-id>` (`ScopeRef::parse`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Scope(pub String);

impl JsonSchema for Scope {
    fn schema_name() -> Cow<'static, str> {
        "Scope".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": "^(endpoint|team):[a-z0-9_-]{1,64}$",
            "description": "endpoint:<slug-or-id> or team:<slug-or-id>" })
    }
}

/// A queue name (`validate_queue_name`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct QueueName(pub String);

impl JsonSchema for QueueName {
    fn schema_name() -> Cow<'static, str> {
        "QueueName".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let max = models::identity::QUEUE_NAME_LENGTH_MAX;
        json_schema!({ "type": "string", "pattern": format!("^[a-z0-9._-]{{1,{max}}}$") })
    }
}

/// `POST /api/v1/endpoints`: vend an endpoint (`vend::check`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "VendRequest")]
pub struct VendBody {
    #[schemars(length(min = 1, max = crate::vend::ENDPOINT_NAME_LENGTH_MAX), regex(pattern = not_blank()))]
    pub name: String,
    /// Own queues by name, team queues as `team:<slug>/<queue>`.
    #[schemars(length(min = 1, max = crate::vend::GRANTED_QUEUES_MAX), inner(regex(pattern = grant_pattern())))]
    pub queues: Vec<String>,
    #[schemars(schema_with = "verbs_schema")]
    pub verbs: Option<Vec<String>>,
    #[schemars(regex(pattern = REFERENCE))]
    pub team: Option<String>,
}

fn verbs_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": ["array", "null"], "items": { "enum": models::verbs::ALL_VERBS } })
}

/// One todo of `POST /api/v1/todos` (`NewTodo::validate`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoRequest {
    pub scope: Scope,
    pub queue: QueueName,
    #[schemars(length(min = 1, max = TITLE_LENGTH_MAX), regex(pattern = not_blank()))]
    pub title: String,
    pub payload: Option<StorableJson>,
    /// At most 200 bytes; the `wh:` prefix is the webhooks'.
    #[schemars(length(min = 1, max = IDEMPOTENCY_KEY_BYTES_MAX), regex(pattern = "^(?!wh:)[^\\u0000]*$"))]
    pub idempotency_key: Option<String>,
    #[schemars(range(min = 1, max = MAX_ATTEMPTS_LIMIT))]
    pub max_attempts: Option<Integer>,
}

/// `POST /api/v1/todos`: one todo, or a batch of them in one transaction. The handler tells the
/// two apart by the body's JSON type and reads each todo as a [`TodoRequest`].
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum TodoPush {
    One(TodoRequest),
    Batch(#[schemars(length(min = 1, max = TODOS_PER_BATCH_MAX))] Vec<TodoRequest>),
}

/// `POST /api/v1/todos/{id}/claim`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Seconds, clamped to 86400.
    #[schemars(range(min = 1))]
    pub lease_ttl_seconds: Option<Integer>,
}

/// `POST /api/v1/todos/{id}/complete` and `/fail`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultRequest {
    pub result: Option<StorableJson>,
}

/// `POST /api/v1/todos/{id}/release` and `/retry`: nothing to say.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// `POST /api/v1/tokens` (`mint_operator_token`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    #[schemars(length(max = crate::api::TOKEN_LABEL_LENGTH_MAX), regex(pattern = NO_NUL))]
    pub label: Option<String>,
    #[schemars(range(min = 1, max = crate::api::MAX_TOKEN_LIFETIME_SECONDS))]
    pub expires_in_seconds: Option<Integer>,
}

/// A policy (`Policy::from_request`, which reads it and names each refused member): an in-flight
/// cap, a window limit with its window, or both.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct PolicyRequest(pub Value);

impl JsonSchema for PolicyRequest {
    fn schema_name() -> Cow<'static, str> {
        "PolicyRequest".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let window = generator.subschema_for::<WindowSpec>();
        let limit = |max: i64| json_schema!({ "type": ["integer", "null"], "minimum": 0, "maximum": max });
        let additional_windows = json_schema!({ "type": ["array", "null"], "maxItems": ADDITIONAL_WINDOWS_MAX,
            "items": { "type": "object", "additionalProperties": false, "required": ["max_claims", "window"],
                "properties": { "max_claims": { "type": "integer", "minimum": 0, "maximum": MAX_CLAIMS_PER_WINDOW_LIMIT },
                    "window": window.clone() } },
            "description": "issue #52: further windows every claim must also fit, each charged" });
        // Two complete alternatives rather than rules beside `properties`, so a generator meets
        // each: an in-flight cap alone, or a window limit with its window.
        json_schema!({ "anyOf": [
            { "type": "object", "additionalProperties": false, "required": ["max_in_flight"],
              "properties": { "max_in_flight": { "type": "integer", "minimum": 0, "maximum": MAX_IN_FLIGHT_LIMIT },
                  "max_claims_per_window": { "type": "null" }, "window": { "anyOf": [window, { "type": "null" }] } } },
            { "type": "object", "additionalProperties": false, "required": ["max_claims_per_window", "window"],
              "properties": { "max_in_flight": limit(MAX_IN_FLIGHT_LIMIT),
                  "max_claims_per_window": { "type": "integer", "minimum": 0, "maximum": MAX_CLAIMS_PER_WINDOW_LIMIT },
                  "window": window, "additional_windows": additional_windows } },
        ], "description": "max_in_flight, max_claims_per_window or both; a window whenever max_claims_per_window is set" })
    }
}

/// `POST /api/v1/webhooks` (`webhooks::register`). Targets are read leniently, in turn: a half
/// missing or not a string is refused as required, and other members are ignored.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookRequest {
    #[schemars(length(min = 1, max = 100), regex(pattern = not_blank()))]
    pub name: String,
    #[schemars(required, schema_with = "targets_schema")]
    pub targets: Value,
}

fn targets_schema(generator: &mut SchemaGenerator) -> Schema {
    let (scope, queue) = (generator.subschema_for::<Scope>(), generator.subschema_for::<QueueName>());
    let storable = generator.subschema_for::<StorableJson>();
    json_schema!({ "type": "array", "minItems": 1, "maxItems": 50, "items": { "type": "object",
        "required": ["scope", "queue"], "properties": { "scope": scope, "queue": queue },
        "propertyNames": { "type": "string", "pattern": NO_NUL }, "additionalProperties": storable,
        "description": "other members are ignored" } })
}

/// `PATCH /api/v1/todos/{id}`: a title, a payload (null clears it), or both.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = title_or_payload)]
pub struct TodoEdit {
    #[schemars(length(min = 1, max = TITLE_LENGTH_MAX), regex(pattern = not_blank()))]
    pub title: Option<String>,
    /// Null clears the payload; leaving it out leaves the payload as it is.
    #[serde(default, deserialize_with = "present")]
    pub payload: Option<StorableJson>,
}

/// A member that is there, even as null, is `Some`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<StorableJson>, D::Error> {
    StorableJson::deserialize(deserializer).map(Some)
}

/// An edit must name a title or a payload: two alternatives a generator can meet.
fn title_or_payload(schema: &mut Schema) {
    let mut with_title = schema.clone();
    with_title.insert("required".into(), serde_json::json!(["title"]));
    if let Some(title) = with_title.pointer_mut("/properties/title") {
        title["type"] = serde_json::json!("string");
    }
    let mut with_payload = schema.clone();
    with_payload.insert("required".into(), serde_json::json!(["payload"]));
    if let Some(title) = with_payload.get_mut("properties").and_then(|p| p.get_mut("title")) {
        *title = serde_json::json!({ "type": "null" });
    }
    *schema = json_schema!({ "anyOf": [with_title, with_payload], "description": "a title, a payload (null clears it), or both" });
}

/// `PATCH /api/v1/system/queue-capacity`: 0 is unlimited.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapacityRequest {
    #[schemars(range(min = 0, max = CAPACITY_SETTING_MAX))]
    pub max_pending_per_queue: Integer,
}

/// `PUT /api/v1/endpoints/{reference}/presence`: clock in for a while, or out.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = in_for_a_while_or_out)]
pub struct PresenceRequest {
    pub presence: Presence,
    pub for_seconds: Option<Integer>,
}

/// Clocking in reads `for_seconds` within its bounds; clocking out ignores it.
fn in_for_a_while_or_out(schema: &mut Schema) {
    let variant = |presence: &str, for_seconds: Value| {
        let mut variant = schema.clone();
        if let Some(properties) = variant.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert("presence".into(), serde_json::json!({ "const": presence }));
            properties.insert("for_seconds".into(), for_seconds);
        }
        variant
    };
    let clock_in = variant(
        "in",
        serde_json::json!({ "type": ["integer", "null"], "minimum": CLOCK_IN_MIN_SECONDS, "maximum": CLOCK_IN_MAX_SECONDS }),
    );
    let clock_out =
        variant("out", serde_json::json!({ "type": ["integer", "null"], "description": "ignored when clocking out" }));
    *schema = json_schema!({ "oneOf": [clock_in, clock_out] });
}

/// `PUT /api/v1/endpoints/{reference}/shift`: null or absent clears it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShiftRequest {
    /// `TZ=<IANA zone> <days> <HH:MM>-<HH:MM>`, e.g. `TZ=America/Los_Angeles Mon-Fri 09:00-17:00`
    /// (`Shift::parse`).
    #[schemars(length(max = SHIFT_TEXT_BYTES_MAX), regex(pattern = shift_pattern()))]
    pub shift: Option<String>,
}

/// `POST /api/v1/endpoints/{reference}/hooks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookRequest {
    /// http or https, resolving to a public address.
    #[schemars(url, regex(pattern = "^https?://"))]
    pub url: String,
    pub ignore_presence: Option<bool>,
}

/// `GET /api/v1/todos`'s query: each member is its own parameter; `queue` needs `scope`; other
/// parameters are ignored.
#[derive(Debug, Default, JsonSchema)]
#[serde(default)]
#[schemars(extend("dependentRequired" = { "queue": ["scope"] }))]
pub struct TodoFilter {
    #[schemars(with = "Scope")]
    pub scope: Option<String>,
    #[schemars(with = "QueueName")]
    pub queue: Option<String>,
    #[schemars(with = "models::todo::TodoState")]
    pub state: Option<String>,
    #[schemars(with = "Integer", range(min = 1, max = 200))]
    pub limit: Option<String>,
}

impl TodoFilter {
    /// The filter of a query string; parameters it does not name are ignored.
    pub fn of(mut params: std::collections::HashMap<String, String>) -> TodoFilter {
        TodoFilter {
            scope: params.remove("scope"),
            queue: params.remove("queue"),
            state: params.remove("state"),
            limit: params.remove("limit"),
        }
    }
}

/// The MCP tools' arguments, one type per tool (or per tools that read the same), published
/// as each tool's `inputSchema`.
pub mod tool;

#[cfg(test)]
mod tests {
    use super::tool::*;
    use super::*;
    use serde_json::json;

    fn refused<T: DeserializeOwned + std::fmt::Debug>(value: Value) -> (String, String) {
        let error = read::<T>(&value).expect_err("refused");
        (error.extras["field"].as_str().unwrap_or_default().to_string(), error.message)
    }

    #[test]
    fn a_refusal_names_the_field_and_says_what_it_must_be() {
        assert_eq!(refused::<TodoRequest>(json!({"scope": "endpoint:a", "queue": "q"})).0, "title");
        assert_eq!(
            refused::<TodoRequest>(json!({"scope": "endpoint:a", "queue": "q", "title": 0})),
            ("title".into(), "title must be a string".into())
        );
        assert_eq!(
            refused::<TodoRequest>(json!({"scope": "endpoint:a", "queue": "q", "title": "t", "colour": 1})),
            ("colour".into(), "unknown field colour".into())
        );
        assert_eq!(refused::<TodoRequest>(json!(7)), ("body".into(), "body must be a JSON object".into()));
        assert_eq!(
            refused::<TodoRequest>(json!({"scope": null, "queue": "q", "title": "t"})),
            ("scope".into(), "scope is required".into())
        );
        assert_eq!(
            refused::<CompleteArgs>(json!({"ids": ["td_1", 2]})),
            ("ids[1]".into(), "ids[1] must be a string".into())
        );
        assert_eq!(refused::<HookRequest>(json!({"url": "https://x", "ignore_presence": 1})).0, "ignore_presence");
    }

    #[test]
    fn an_integer_is_read_whole_or_refused() {
        let read_max = |value: Value| read::<ClaimNextArgs>(&json!({ "max": value })).map(|args| integer(args.max));
        assert_eq!(read_max(json!(7)).expect("7"), Some(7));
        assert_eq!(read_max(json!(7.0)).expect("7.0"), Some(7));
        assert_eq!(read_max(Value::Null).expect("null"), None);
        for refused in [json!(7.5), json!("7"), json!(true)] {
            let error = read_max(refused.clone()).expect_err("refused");
            assert_eq!(
                (&error.extras["field"], error.message.as_str()),
                (&json!("max"), "max must be an integer"),
                "{refused}"
            );
        }
    }

    #[test]
    fn an_edit_tells_a_cleared_payload_from_an_absent_one() {
        let cleared: TodoEdit = read(&json!({"payload": null})).expect("cleared");
        assert_eq!(cleared.payload, Some(StorableJson(Value::Null)));
        let untouched: TodoEdit = read(&json!({"title": "t"})).expect("title only");
        assert_eq!(untouched.payload, None);
    }
}
