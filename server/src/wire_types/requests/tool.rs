//! The MCP tools' arguments, one type per tool (or per tools that read the same), published
//! as each tool's `inputSchema`.
//!
//! Its own module so the API's bodies (`requests`) read apart from the agents' arguments.

use super::{Integer, PolicyRequest};
use models::limits::{CLAIMS_PER_CALL_MAX, TODOS_PER_BATCH_MAX};
use models::presence::{CLOCK_IN_MAX_SECONDS, CLOCK_IN_MIN_SECONDS};
use models::todo::MAX_ATTEMPTS_LIMIT;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde_json::Value;

/// `claim_next`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimNextArgs {
    /// One of this endpoint's granted queues.
    pub queue: Option<String>,
    /// Lease in seconds (default 300).
    #[schemars(range(min = 1, max = 86400))]
    pub lease_ttl_seconds: Option<Integer>,
    /// Claims to make at most (default 1); above 1 the answer lists them as todos.
    #[schemars(range(min = 1, max = CLAIMS_PER_CALL_MAX))]
    pub max: Option<Integer>,
}

/// `claim` and `heartbeat`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseArgs {
    /// Todo id (td_...).
    pub id: String,
    /// Lease in seconds (default 300).
    #[schemars(range(min = 1, max = 86400))]
    pub lease_ttl_seconds: Option<Integer>,
}

/// `complete`: `id`, or `ids` to complete several at once (all or none); not both.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteArgs {
    /// Todo id (td_...).
    pub id: Option<String>,
    /// Todo ids you hold, completed together or not at all.
    #[schemars(length(min = 1, max = CLAIMS_PER_CALL_MAX), extend("uniqueItems" = true))]
    pub ids: Option<Vec<String>>,
    pub result: Option<Value>,
    pub summary: Option<String>,
}

/// `fail`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailArgs {
    /// Todo id (td_...).
    pub id: String,
    pub result: Option<Value>,
    pub summary: Option<String>,
}

/// `release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseArgs {
    /// Todo id (td_...).
    pub id: String,
    pub summary: Option<String>,
}

/// `list_todos`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTodosArgs {
    /// One of this endpoint's granted queues.
    pub queue: Option<String>,
    #[schemars(schema_with = "listed_states")]
    pub state: Option<String>,
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<Integer>,
}

fn listed_states(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "enum": ["pending", "claimed", "done", "failed", "discarded"] })
}

/// `get_todo`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdArgs {
    /// Todo id (td_...).
    pub id: String,
}

/// `create_todo`, and each of `create_todos`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTodoArgs {
    /// One of this endpoint's granted queues.
    pub queue: String,
    pub title: String,
    pub payload: Option<Value>,
    pub idempotency_key: Option<String>,
    #[schemars(range(min = 1, max = MAX_ATTEMPTS_LIMIT))]
    pub max_attempts: Option<Integer>,
}

/// `create_todos`: read as a list of JSON objects first (`batch_items`), each then as
/// [`CreateTodoArgs`], so a refusal names `todos[i]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTodosArgs {
    #[schemars(length(min = 1, max = TODOS_PER_BATCH_MAX), with = "Vec<CreateTodoArgs>")]
    pub todos: Vec<Value>,
}

/// `admission_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaybeQueueArgs {
    /// One of this endpoint's granted queues.
    pub queue: Option<String>,
}

/// `clear_queue` and `clear_admission_policy`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueArgs {
    /// One of this endpoint's own queues.
    pub queue: String,
}

/// `set_admission_policy`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPolicyArgs {
    /// One of this endpoint's own queues.
    pub queue: String,
    pub policy: PolicyRequest,
}

/// `discard_todo`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscardArgs {
    /// One of this endpoint's own queues.
    pub queue: String,
    /// Todo id (td_...).
    pub id: String,
}

/// `clock_in`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClockInArgs {
    /// Seconds (1 h default, 8 h max).
    #[serde(rename = "for")]
    #[schemars(range(min = CLOCK_IN_MIN_SECONDS, max = CLOCK_IN_MAX_SECONDS))]
    pub for_seconds: Option<Integer>,
}

/// `clock_out` and `presence`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}
