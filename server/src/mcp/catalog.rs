//! What an endpoint may call over MCP: the tool catalog (descriptions and input schemas, in the
//! order `tools/list` shows them) and the grant check every call passes.
//!
//! Its own module so the transport (`mcp`) and the tool bodies (`tools`) share one list; it must
//! not run a tool.

use models::limits::CLAIMS_PER_CALL_MAX;
use models::scope::AgentScope;
use models::verbs::Verb;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::LazyLock;

/// A tool an endpoint may call over MCP: a verb of its grant; `create_todos`, the batched
/// `create_todo` (no grant of its own); or a verb every endpoint may call about itself, outside
/// its grant (base-system §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tool {
    Granted(Verb),
    CreateTodos,
    ClockIn,
    ClockOut,
    Presence,
}

impl Tool {
    /// The name `tools/list` shows and `tools/call` names.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Tool::Granted(verb) => verb.as_str(),
            Tool::CreateTodos => "create_todos",
            Tool::ClockIn => "clock_in",
            Tool::ClockOut => "clock_out",
            Tool::Presence => "presence",
        }
    }

    /// The catalog's tool of that name; None for a name no tool has.
    pub(super) fn parse(name: &str) -> Option<Tool> {
        tool_catalog().iter().map(|(tool, _, _)| *tool).find(|tool| tool.as_str() == name)
    }
}

/// A tool, its description and its input schema.
type Entry = (Tool, &'static str, Value);

/// Tool descriptions and input schemas, in the order `tools/list` shows them. Built once: every
/// `tools/call` checks the name against it.
pub(super) fn tool_catalog() -> &'static [Entry] {
    static CATALOG: LazyLock<Vec<Entry>> = LazyLock::new(build_tool_catalog);
    &CATALOG
}

fn build_tool_catalog() -> Vec<Entry> {
    let id = json!({ "type": "string", "description": "todo id (td_...)" });
    let lease =
        json!({ "type": "integer", "minimum": 1, "maximum": 86400, "description": "lease in seconds (default 300)" });
    let queue = json!({ "type": "string", "description": "one of this endpoint's granted queues" });
    let ids = json!({ "type": "array", "items": { "type": "string" }, "minItems": 1, "maxItems": CLAIMS_PER_CALL_MAX,
        "uniqueItems": true, "description": "todo ids you hold, completed together or not at all" });
    vec![
        (
            Tool::Granted(Verb::ClaimNext),
            "Claim the oldest claimable todo across your granted queues (or one named queue); with max, up to that many in one call, each admitted and charged in turn.",
            json!({ "type": "object", "properties": { "queue": queue, "lease_ttl_seconds": lease,
                "max": { "type": "integer", "minimum": 1, "maximum": CLAIMS_PER_CALL_MAX, "description": "claims to make at most (default 1); above 1 the answer lists them as todos" } },
                "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::Claim),
            "Claim a specific todo by id.",
            json!({ "type": "object", "properties": { "id": id, "lease_ttl_seconds": lease }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::Heartbeat),
            "Extend the lease on a todo you hold.",
            json!({ "type": "object", "properties": { "id": id, "lease_ttl_seconds": lease }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::Complete),
            "Mark a todo you hold as done, with an optional result. Give id, or ids to complete several at once (all or none); not both.",
            json!({ "type": "object", "properties": { "id": id, "ids": ids, "result": {}, "summary": { "type": "string" } },
                "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::Fail),
            "Fail a todo you hold; it retries with backoff until max_attempts.",
            json!({ "type": "object", "properties": { "id": id, "result": {}, "summary": { "type": "string" } }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::Release),
            "Give a todo you hold back to the queue without using an attempt.",
            json!({ "type": "object", "properties": { "id": id, "summary": { "type": "string" } }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::ListTodos),
            "List todos in your granted queues, newest first.",
            json!({ "type": "object", "properties": { "queue": queue, "state": { "enum": ["pending", "claimed", "done", "failed"] },
                "limit": { "type": "integer", "minimum": 1, "maximum": 200 } }, "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::GetTodo),
            "Read one todo, with its payload and result.",
            json!({ "type": "object", "properties": { "id": id }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::CreateTodo),
            "Add a todo to one of your granted queues.",
            json!({ "type": "object", "properties": { "queue": queue, "title": { "type": "string" }, "payload": {},
                "idempotency_key": { "type": "string" }, "max_attempts": { "type": "integer", "minimum": 1, "maximum": 100 } },
                "required": ["queue", "title"], "additionalProperties": false }),
        ),
        (
            Tool::CreateTodos,
            "Add several todos to your granted queues in one transaction (up to 1000): each as create_todo \
             would, answered in order; if one is refused, none is created.",
            json!({ "type": "object", "properties": { "todos": { "type": "array", "minItems": 1, "maxItems": 1000,
                "items": { "type": "object", "properties": { "queue": queue, "title": { "type": "string" }, "payload": {},
                    "idempotency_key": { "type": "string" }, "max_attempts": { "type": "integer", "minimum": 1, "maximum": 100 } },
                    "required": ["queue", "title"], "additionalProperties": false } } },
                "required": ["todos"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::AdmissionStatus),
            "Read the admission policy, usage and status of your granted queues (read-only).",
            json!({ "type": "object", "properties": { "queue": queue }, "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::SetAdmissionPolicy),
            "Create or replace the admission policy (your budget) of one of your own queues. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue, "policy": { "type": "object", "properties": {
                "max_in_flight": { "type": ["integer", "null"], "minimum": 0, "maximum": 10000 },
                "max_claims_per_window": { "type": ["integer", "null"], "minimum": 0, "maximum": 1000000 },
                "window": { "type": ["object", "null"] } } } }, "required": ["queue", "policy"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::DiscardTodo),
            "Remove one pending todo of one of your own queues, whatever created it. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue, "id": id }, "required": ["queue", "id"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::ClearQueue),
            "Remove every pending todo of one of your own queues. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue }, "required": ["queue"], "additionalProperties": false }),
        ),
        (
            Tool::Granted(Verb::ClearAdmissionPolicy),
            "Remove the admission policy of one of your own queues. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue }, "required": ["queue"], "additionalProperties": false }),
        ),
        (
            Tool::ClockIn,
            "Say you are available for doorbells now, for a while (seconds; 1 h default, 8 h max).",
            json!({ "type": "object", "properties": { "for": { "type": "integer", "minimum": 60, "maximum": 28800 } }, "additionalProperties": false }),
        ),
        (
            Tool::ClockOut,
            "Stop doorbells until your shift's next boundary (pulls keep working).",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
        (
            Tool::Presence,
            "Read your presence: in or out, why, until when, your shift and the pending work.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
    ]
}

/// Whether the endpoint may call `tool`: granted verbs, plus the read-only `admission_status`
/// for every endpoint that may claim (REQ-7), `create_todos` for every endpoint that may
/// `create_todo` (the same act, batched), and the verbs about itself for every endpoint.
pub(super) fn granted(agent: &AgentScope, tool: Tool) -> bool {
    let has = |verb: Verb| agent.verbs.iter().any(|v| v == verb.as_str());
    match tool {
        Tool::Granted(Verb::AdmissionStatus) => has(Verb::AdmissionStatus) || has(Verb::Claim) || has(Verb::ClaimNext),
        Tool::Granted(verb) => has(verb),
        Tool::CreateTodos => has(Verb::CreateTodo),
        Tool::ClockIn | Tool::ClockOut | Tool::Presence => true,
    }
}

/// One tool as `tools/list` shows it.
#[derive(Serialize)]
pub(super) struct ToolListing<'a> {
    name: &'static str,
    description: &'static str,
    #[serde(rename = "inputSchema")]
    input_schema: &'a Value,
}

/// Only the tools this endpoint may call are listed.
pub(super) fn tools_for(agent: &AgentScope) -> Vec<ToolListing<'static>> {
    tool_catalog()
        .iter()
        .filter(|(tool, _, _)| granted(agent, *tool))
        .map(|(tool, description, schema)| ToolListing { name: tool.as_str(), description, input_schema: schema })
        .collect()
}
