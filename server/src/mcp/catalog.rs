//! What an endpoint may call over MCP: the tool catalog (descriptions, and input and output
//! schemas generated from the types the tools read and answer, in the order `tools/list` shows
//! them) and the grant check every call passes.
//!
//! Its own module so the transport (`mcp`) and the tool bodies (`tools`) share one list; it must
//! not run a tool.

use crate::wire_types::requests::tool::{
    ClaimNextArgs, ClockInArgs, CompleteArgs, CreateTodoArgs, CreateTodosArgs, DiscardArgs, FailArgs, IdArgs,
    LeaseArgs, ListTodosArgs, MaybeQueueArgs, NoArgs, QueueArgs, ReleaseArgs, SetPolicyArgs,
};
use crate::wire_types::{
    ClaimNextBody, ClaimedBody, Completed, CreatedBody, PolicyCleared, PolicySaved, PresenceBody, QueueAdmissions,
    Removed, TodoBody, Todos, ToolErrorBody,
};
use models::scope::AgentScope;
use models::verbs::Verb;
use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, ReplaceBoolSchemas};
use schemars::{JsonSchema, Schema, SchemaGenerator};
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
        tool_catalog().iter().map(|entry| entry.tool).find(|tool| tool.as_str() == name)
    }
}

/// A tool, its description, and the JSON Schemas of its arguments and of its answer.
pub(super) struct Entry {
    pub tool: Tool,
    pub description: &'static str,
    pub input_schema: Value,
    pub output_schema: Value,
}

/// Tool descriptions and schemas, in the order `tools/list` shows them. Built once: every
/// `tools/call` checks the name against it.
pub(super) fn tool_catalog() -> &'static [Entry] {
    static CATALOG: LazyLock<Vec<Entry>> = LazyLock::new(build_tool_catalog);
    &CATALOG
}

/// The schemas' generator: JSON Schema 2020-12 with every subschema inlined, so a tool's schema
/// stands alone (no `$ref` for a client to resolve), and every boolean schema written as the
/// object it means (`true` as `{}`, `false` as `{"not": {}}`). A boolean schema is valid JSON
/// Schema, but the official TypeScript SDK refuses a whole tool list that holds one (issue #50):
/// an "any JSON value" field such as `complete.result` generates `true`.
fn generator() -> SchemaGenerator {
    let mut no_booleans = ReplaceBoolSchemas::default();
    no_booleans.skip_additional_properties = false;
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .with_transform(no_booleans)
        .with_transform(RecursiveTransform(drop_unknown_format))
        .into_generator()
}

/// The `format` values JSON Schema 2020-12 defines. schemars also writes formats of its own
/// (`uint64`, `int32`, `double`, ...) that a client's validator does not know and warns about
/// on every tool list (Ajv in the TypeScript SDK does); the range they imply is already in
/// `minimum` / `maximum`.
const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

fn drop_unknown_format(schema: &mut Schema) {
    if schema.get("format").and_then(Value::as_str).is_some_and(|format| !STANDARD_FORMATS.contains(&format)) {
        schema.remove("format");
    }
}

/// One catalog entry: `A` is the tool's arguments as `tools::call_tool` reads them, `R` its
/// answer as it writes it (the `structuredContent`). MCP wants an object schema for both. A
/// refused call carries the error envelope as its `structuredContent` too, so the output schema
/// admits either: a client that checks every result against it never fails on a refusal.
fn entry<A: JsonSchema, R: JsonSchema>(tool: Tool, description: &'static str) -> Entry {
    let bare = |mut schema: Schema| {
        schema.remove("title");
        schema
    };
    let mut input = bare(generator().into_root_schema_for::<A>());
    input.insert("type".into(), json!("object"));
    let answer = bare(generator().into_root_schema_for::<R>());
    let refusal = bare(generator().into_root_schema_for::<ToolErrorBody<'static>>());
    let output = json!({ "type": "object", "anyOf": [answer, refusal] });
    Entry { tool, description, input_schema: input.to_value(), output_schema: output }
}

fn build_tool_catalog() -> Vec<Entry> {
    vec![
        entry::<ClaimNextArgs, ClaimNextBody>(
            Tool::Granted(Verb::ClaimNext),
            "Claim the oldest claimable todo across your granted queues (or one named queue); with max, up to that many in one call, each admitted and charged in turn.",
        ),
        entry::<LeaseArgs, ClaimedBody>(Tool::Granted(Verb::Claim), "Claim a specific todo by id."),
        entry::<LeaseArgs, TodoBody>(Tool::Granted(Verb::Heartbeat), "Extend the lease on a todo you hold."),
        entry::<CompleteArgs, Completed>(
            Tool::Granted(Verb::Complete),
            "Mark a todo you hold as done, with an optional result. Give id, or ids to complete several at once (all or none); not both.",
        ),
        entry::<FailArgs, TodoBody>(
            Tool::Granted(Verb::Fail),
            "Fail a todo you hold; it retries with backoff until max_attempts.",
        ),
        entry::<ReleaseArgs, TodoBody>(
            Tool::Granted(Verb::Release),
            "Give a todo you hold back to the queue without using an attempt.",
        ),
        entry::<ListTodosArgs, Todos<TodoBody>>(
            Tool::Granted(Verb::ListTodos),
            "List todos in your granted queues, newest first.",
        ),
        entry::<IdArgs, TodoBody>(Tool::Granted(Verb::GetTodo), "Read one todo, with its payload and result."),
        entry::<CreateTodoArgs, CreatedBody>(
            Tool::Granted(Verb::CreateTodo),
            "Add a todo to one of your granted queues.",
        ),
        entry::<CreateTodosArgs, Todos<CreatedBody>>(
            Tool::CreateTodos,
            "Add several todos to your granted queues in one transaction (up to 1000): each as create_todo \
             would, answered in order; if one is refused, none is created.",
        ),
        entry::<MaybeQueueArgs, QueueAdmissions>(
            Tool::Granted(Verb::AdmissionStatus),
            "Read the admission policy, usage and status of your granted queues (read-only).",
        ),
        entry::<SetPolicyArgs, PolicySaved>(
            Tool::Granted(Verb::SetAdmissionPolicy),
            "Create or replace the admission policy (your budget) of one of your own queues. Only when your owner opted you in.",
        ),
        entry::<DiscardArgs, Removed>(
            Tool::Granted(Verb::DiscardTodo),
            "Remove one pending todo of one of your own queues, whatever created it. Only when your owner opted you in.",
        ),
        entry::<QueueArgs, Removed>(
            Tool::Granted(Verb::ClearQueue),
            "Remove every pending todo of one of your own queues. Only when your owner opted you in.",
        ),
        entry::<QueueArgs, PolicyCleared>(
            Tool::Granted(Verb::ClearAdmissionPolicy),
            "Remove the admission policy of one of your own queues. Only when your owner opted you in.",
        ),
        entry::<ClockInArgs, PresenceBody>(
            Tool::ClockIn,
            "Say you are available for doorbells now, for a while (seconds; 1 h default, 8 h max).",
        ),
        entry::<NoArgs, PresenceBody>(
            Tool::ClockOut,
            "Stop doorbells until your shift's next boundary (pulls keep working).",
        ),
        entry::<NoArgs, PresenceBody>(
            Tool::Presence,
            "Read your presence: in or out, why, until when, your shift and the pending work.",
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
    #[serde(rename = "outputSchema")]
    output_schema: &'a Value,
}

/// Only the tools this endpoint may call are listed.
pub(super) fn tools_for(agent: &AgentScope) -> Vec<ToolListing<'static>> {
    tool_catalog()
        .iter()
        .filter(|entry| granted(agent, entry.tool))
        .map(|entry| ToolListing {
            name: entry.tool.as_str(),
            description: entry.description,
            input_schema: &entry.input_schema,
            output_schema: &entry.output_schema,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The escapes ECMA-262's unicode mode refuses outside a class (`\-`, and any letter it does
    /// not define), which would stop a JavaScript client from compiling a tool's schema.
    fn javascript_refuses(pattern: &str) -> bool {
        let (mut chars, mut in_class) = (pattern.chars(), false);
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    let escaped = chars.next().unwrap_or('\\');
                    if !in_class && !"\\^$.|?*+()[]{}/dDwWsSbBtnrfvux0123456789pPk".contains(escaped) {
                        return true;
                    }
                }
                '[' => in_class = true,
                ']' => in_class = false,
                _ => {}
            }
        }
        false
    }

    fn patterns<'v>(value: &'v Value, found: &mut Vec<&'v str>) {
        match value {
            Value::Object(map) => map.iter().for_each(|(key, member)| match (key.as_str(), member) {
                ("pattern", Value::String(pattern)) => found.push(pattern),
                _ => patterns(member, found),
            }),
            Value::Array(items) => items.iter().for_each(|item| patterns(item, found)),
            _ => {}
        }
    }

    /// The keywords whose value is a subschema, a list of them, or a map of them (JSON Schema
    /// 2020-12's applicators and `contentSchema`).
    const ONE_SCHEMA: [&str; 10] = [
        "additionalProperties",
        "items",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    ];
    const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
    const SCHEMA_MAPS: [&str; 4] = ["properties", "patternProperties", "$defs", "dependentSchemas"];

    /// The JSON paths of every boolean schema under `schema` (itself included).
    fn boolean_schemas(schema: &Value, path: String, found: &mut Vec<String>) {
        let Value::Object(map) = schema else {
            if schema.is_boolean() {
                found.push(path);
            }
            return;
        };
        for (key, member) in map {
            let here = format!("{path}/{key}");
            match (key.as_str(), member) {
                (key, _) if ONE_SCHEMA.contains(&key) || key == "contentSchema" => boolean_schemas(member, here, found),
                (key, Value::Array(items)) if SCHEMA_LISTS.contains(&key) => {
                    for (i, item) in items.iter().enumerate() {
                        boolean_schemas(item, format!("{here}/{i}"), found);
                    }
                }
                (key, Value::Object(members)) if SCHEMA_MAPS.contains(&key) => {
                    for (name, item) in members {
                        boolean_schemas(item, format!("{here}/{name}"), found);
                    }
                }
                _ => {}
            }
        }
    }

    // Issue #50: the official TypeScript SDK refuses a tool list whose schemas hold a boolean
    // schema anywhere, so no field, today's or a future one, may generate one.
    #[test]
    fn no_tool_schema_holds_a_boolean_schema_anywhere() {
        let mut found = Vec::new();
        for entry in tool_catalog() {
            let name = entry.tool.as_str();
            boolean_schemas(&entry.input_schema, format!("{name}.inputSchema"), &mut found);
            boolean_schemas(&entry.output_schema, format!("{name}.outputSchema"), &mut found);
        }
        assert!(found.is_empty(), "boolean schemas in the tool catalog: {found:?}");
        let mut formats = Vec::new();
        for entry in tool_catalog() {
            collect_formats(&entry.input_schema, &mut formats);
            collect_formats(&entry.output_schema, &mut formats);
        }
        assert!(formats.contains(&"date-time".to_string()), "the walk sees formats: {formats:?}");
        formats.retain(|format| !STANDARD_FORMATS.contains(&format.as_str()));
        assert!(formats.is_empty(), "formats a client's validator does not know: {formats:?}");
        // The fields that used to generate `true` are now the empty object schema.
        let complete = &tool_catalog().iter().find(|e| e.tool == Tool::Granted(Verb::Complete)).expect("complete");
        assert_eq!(complete.input_schema["properties"]["result"], json!({}), "{}", complete.input_schema);
    }

    fn collect_formats(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => map.iter().for_each(|(key, member)| match (key.as_str(), member) {
                ("format", Value::String(format)) => found.push(format.clone()),
                _ => collect_formats(member, found),
            }),
            Value::Array(items) => items.iter().for_each(|item| collect_formats(item, found)),
            _ => {}
        }
    }

    #[test]
    fn the_boolean_schema_walk_finds_what_it_looks_for() {
        let mut found = Vec::new();
        let schema = json!({"type": "object", "properties": {"a": true, "b": {"items": false}},
                            "anyOf": [{"additionalProperties": true}], "default": false});
        boolean_schemas(&schema, "s".into(), &mut found);
        found.sort();
        assert_eq!(found, ["s/anyOf/0/additionalProperties", "s/properties/a", "s/properties/b/items"]);
    }

    #[test]
    fn every_output_schema_admits_the_answer_or_the_refusal_and_every_pattern_compiles_in_javascript() {
        let mut found = Vec::new();
        for entry in tool_catalog() {
            let either = entry.output_schema["anyOf"].as_array().expect("answer or refusal");
            assert_eq!(either.len(), 2, "{}", entry.tool.as_str());
            assert_eq!(either[1]["required"], json!(["message", "code"]), "{}", entry.tool.as_str());
            assert_eq!(entry.input_schema["type"], "object", "{}", entry.tool.as_str());
            patterns(&entry.input_schema, &mut found);
            patterns(&entry.output_schema, &mut found);
        }
        let document = crate::openapi::document();
        patterns(&document, &mut found);
        assert!(found.iter().any(|pattern| pattern.contains("Etc/GMT\\+1")), "the zones are in a pattern");
        let refused: Vec<&&str> = found.iter().filter(|pattern| javascript_refuses(pattern)).collect();
        assert!(refused.is_empty(), "{} patterns a JavaScript validator refuses", refused.len());
    }
}
