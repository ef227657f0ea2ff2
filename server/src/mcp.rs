//! MCP over streamable HTTP at `/mcp/{slug}` (contract §5): JSON-RPC 2.0 `initialize`,
//! `tools/list` and `tools/call`, answered as single JSON responses.
//!
//! Written by hand rather than with an MCP framework: the server is stateless per request (any
//! replica answers any call, which the simulation relies on), and tool errors must carry the
//! contract's exact `code: message` text and `structuredContent`.

use crate::api::{parse_limit, parse_max_attempts};
use crate::app::AppState;
use crate::auth::require_agent;
use crate::wire::{
    ApiError, Args, claimed_json, deferred_json, scope_string, status_json, todo_json, todos_with_admission,
};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use models::admission::Policy;
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::presence::Presence;
use models::scope::{Actor, AgentScope};
use models::store::{ClaimNext, OverrideBy, PolicyActor, Store, TodoQuery, TodoSet};
use models::todo::{CreatedByKind, NewTodo, TodoState, lease_seconds};
use serde_json::{Value, json};

/// The protocol revision this server speaks when the client asks for one it does not know.
const PROTOCOL_VERSION: &str = "2025-06-18";
const SUPPORTED_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

pub async fn handle<S: Store>(
    State(state): State<AppState<S>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let agent = match require_agent(&state.store, &headers, &slug).await {
        Ok(agent) => agent,
        Err(error) => return ApiError(error).into_response(),
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return rpc_error(Value::Null, PARSE_ERROR, &format!("parse error: {e}"), StatusCode::BAD_REQUEST),
    };
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return rpc_error(
            Value::Null,
            INVALID_REQUEST,
            "a single JSON-RPC request object is required",
            StatusCode::BAD_REQUEST,
        );
    };
    // A notification (no id) gets no answer, only an acknowledgement.
    let Some(id) = request.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let params = request.get("params").cloned().unwrap_or(json!({}));
    match method {
        "initialize" => {
            // Streamable HTTP: the session id names this client's stream (`GET`) later.
            let session = match state.store.open_session(&agent.endpoint_id).await {
                Ok(session) => session,
                Err(error) => return ApiError(error).into_response(),
            };
            let mut response = rpc_result(id, initialize(&params));
            if let Ok(value) = session.parse() {
                response.headers_mut().insert(crate::push::stream::SESSION_HEADER, value);
            }
            response
        }
        "ping" => rpc_result(id, json!({})),
        "tools/list" => rpc_result(id, json!({ "tools": tools_for(&agent) })),
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return rpc_error(id, INVALID_PARAMS, "params.name is required", StatusCode::OK);
            };
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            let outcome = match arguments.as_object() {
                Some(_) if let Err(error) = models::storable::check_members(&arguments) => Err(error),
                Some(map) if SELF_VERBS.contains(&name) => call_self_verb(&state, &agent, name, &Args::new(map)).await,
                Some(map) => call_tool(&state, &agent, name, &Args::new(map)).await,
                None => Err(Error::invalid("arguments", "arguments must be an object")),
            };
            after_tool(&state, name, &outcome);
            if let Err(error) = &outcome {
                tracing::debug!(endpoint = %agent.endpoint_id, tool = name, %error, "tool refused");
            }
            rpc_result(id, tool_result(outcome))
        }
        other => rpc_error(id, METHOD_NOT_FOUND, &format!("unknown method {other}"), StatusCode::OK),
    }
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or(PROTOCOL_VERSION);
    let version = if SUPPORTED_VERSIONS.contains(&asked) { asked } else { PROTOCOL_VERSION };
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "switchboard", "version": env!("CARGO_PKG_VERSION") },
        "instructions": "Drain this endpoint's queues: claim_next, then complete or fail the todo before its lease lapses.",
    })
}

fn rpc_result(id: Value, result: Value) -> Response {
    axum::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
}

fn rpc_error(id: Value, code: i64, message: &str, status: StatusCode) -> Response {
    (status, axum::Json(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })))
        .into_response()
}

/// A tool's answer: structured content plus the same as text; errors as `isError` results
/// whose text starts `code: message` (contract §5).
fn tool_result(outcome: Result<Value>) -> Value {
    match outcome {
        Ok(structured) => json!({
            "content": [{ "type": "text", "text": structured.to_string() }],
            "structuredContent": structured,
            "isError": false,
        }),
        Err(error) => {
            let mut structured = error.envelope();
            if let Some(map) = structured.as_object_mut()
                && let Some(message) = map.remove("error")
            {
                map.insert("message".into(), message);
            }
            json!({
                "content": [{ "type": "text", "text": error.to_string() }],
                "structuredContent": structured,
                "isError": true,
            })
        }
    }
}

/// Tool descriptions and input schemas, in the order `tools/list` shows them.
fn tool_catalog() -> Vec<(&'static str, &'static str, Value)> {
    let id = json!({ "type": "string", "description": "todo id (td_...)" });
    let lease =
        json!({ "type": "integer", "minimum": 1, "maximum": 86400, "description": "lease in seconds (default 300)" });
    let queue = json!({ "type": "string", "description": "one of this endpoint's granted queues" });
    vec![
        (
            "claim_next",
            "Claim the oldest claimable todo across your granted queues (or one named queue).",
            json!({ "type": "object", "properties": { "queue": queue, "lease_ttl_seconds": lease }, "additionalProperties": false }),
        ),
        (
            "claim",
            "Claim a specific todo by id.",
            json!({ "type": "object", "properties": { "id": id, "lease_ttl_seconds": lease }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            "heartbeat",
            "Extend the lease on a todo you hold.",
            json!({ "type": "object", "properties": { "id": id, "lease_ttl_seconds": lease }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            "complete",
            "Mark a todo you hold as done, with an optional result.",
            json!({ "type": "object", "properties": { "id": id, "result": {}, "summary": { "type": "string" } }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            "fail",
            "Fail a todo you hold; it retries with backoff until max_attempts.",
            json!({ "type": "object", "properties": { "id": id, "result": {}, "summary": { "type": "string" } }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            "release",
            "Give a todo you hold back to the queue without using an attempt.",
            json!({ "type": "object", "properties": { "id": id, "summary": { "type": "string" } }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            "list_todos",
            "List todos in your granted queues, newest first.",
            json!({ "type": "object", "properties": { "queue": queue, "state": { "enum": ["pending", "claimed", "done", "failed"] },
                "limit": { "type": "integer", "minimum": 1, "maximum": 200 } }, "additionalProperties": false }),
        ),
        (
            "get_todo",
            "Read one todo, with its payload and result.",
            json!({ "type": "object", "properties": { "id": id }, "required": ["id"], "additionalProperties": false }),
        ),
        (
            "create_todo",
            "Add a todo to one of your granted queues.",
            json!({ "type": "object", "properties": { "queue": queue, "title": { "type": "string" }, "payload": {},
                "idempotency_key": { "type": "string" }, "max_attempts": { "type": "integer", "minimum": 1, "maximum": 100 } },
                "required": ["queue", "title"], "additionalProperties": false }),
        ),
        (
            "admission_status",
            "Read the admission policy, usage and status of your granted queues (read-only).",
            json!({ "type": "object", "properties": { "queue": queue }, "additionalProperties": false }),
        ),
        (
            "set_admission_policy",
            "Create or replace the admission policy (your budget) of one of your own queues. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue, "policy": { "type": "object", "properties": {
                "max_in_flight": { "type": ["integer", "null"], "minimum": 0, "maximum": 10000 },
                "max_claims_per_window": { "type": ["integer", "null"], "minimum": 0, "maximum": 1000000 },
                "window": { "type": ["object", "null"] } } } }, "required": ["queue", "policy"], "additionalProperties": false }),
        ),
        (
            "discard_todo",
            "Remove one pending todo of one of your own queues, whatever created it. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue, "id": id }, "required": ["queue", "id"], "additionalProperties": false }),
        ),
        (
            "clear_queue",
            "Remove every pending todo of one of your own queues. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue }, "required": ["queue"], "additionalProperties": false }),
        ),
        (
            "clear_admission_policy",
            "Remove the admission policy of one of your own queues. Only when your owner opted you in.",
            json!({ "type": "object", "properties": { "queue": queue }, "required": ["queue"], "additionalProperties": false }),
        ),
        (
            "clock_in",
            "Say you are available for doorbells now, for a while (seconds; 1 h default, 8 h max).",
            json!({ "type": "object", "properties": { "for": { "type": "integer", "minimum": 60, "maximum": 28800 } }, "additionalProperties": false }),
        ),
        (
            "clock_out",
            "Stop doorbells until your shift's next boundary (pulls keep working).",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
        (
            "presence",
            "Read your presence: in or out, why, until when, your shift and the pending work.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
    ]
}

/// Whether the endpoint may call `name`: granted verbs, plus the read-only `admission_status`
/// for every endpoint that may claim (REQ-7).
fn granted(agent: &AgentScope, name: &str) -> bool {
    let has = |verb: &str| agent.verbs.iter().any(|v| v == verb);
    has(name) || (name == "admission_status" && (has("claim") || has("claim_next")))
}

/// Only the verbs this endpoint may call are listed.
fn tools_for(agent: &AgentScope) -> Vec<Value> {
    tool_catalog()
        .into_iter()
        .filter(|(name, _, _)| granted(agent, name) || SELF_VERBS.contains(name))
        .map(|(name, description, schema)| json!({ "name": name, "description": description, "inputSchema": schema }))
        .collect()
}

async fn call_tool<S: Store>(state: &AppState<S>, agent: &AgentScope, name: &str, args: &Args<'_>) -> Result<Value> {
    let store = &state.store;
    if !tool_catalog().iter().any(|(tool, _, _)| *tool == name) {
        return Err(Error::invalid("name", format!("unknown tool {name}")));
    }
    if !granted(agent, name) {
        return Err(Error::forbidden(format!("{name} is not in this endpoint's grant")));
    }
    let actor = Actor::Agent(agent.clone());
    match name {
        "claim_next" => claim_next_tool(state, agent, &actor, args).await,
        "claim" => claim_tool(state, &actor, args).await,
        "heartbeat" => {
            args.only(&["id", "lease_ttl_seconds"])?;
            let lease = lease_seconds(args.opt_i64("lease_ttl_seconds")?)?;
            Ok(todo_json(&store.heartbeat(&actor, args.str("id")?, lease).await?, false))
        }
        "complete" | "fail" => {
            args.only(&["id", "result", "summary"])?;
            let result = outcome_value(args)?;
            let id = args.str("id")?;
            let todo = if name == "complete" {
                store.complete(&actor, id, result).await?
            } else {
                store.fail(&actor, id, result).await?
            };
            Ok(todo_json(&todo, false))
        }
        "release" => {
            args.only(&["id", "summary"])?;
            args.opt_str("summary")?;
            Ok(todo_json(&store.release(&actor, args.str("id")?).await?, false))
        }
        "list_todos" => {
            args.only(&["queue", "state", "limit"])?;
            let queues = agent.narrow(args.opt_str("queue")?)?;
            let state = args.opt_str("state")?.map(|s| TodoState::parse("state", s)).transpose()?;
            let limit = parse_limit(args.opt_i64("limit")?)?;
            let todos = store.list_todos(TodoQuery { set: TodoSet::Queues(queues), state, limit }).await?;
            Ok(json!({ "todos": todos_with_admission(store, &todos, false).await? }))
        }
        "get_todo" => {
            args.only(&["id"])?;
            Ok(todo_json(&store.get_todo(&actor, args.str("id")?).await?, true))
        }
        "create_todo" => {
            args.only(&["queue", "title", "payload", "idempotency_key", "max_attempts"])?;
            let identity = creation_target(agent, args.str("queue")?)?;
            let created = store
                .create_todo(NewTodo {
                    identity,
                    title: args.str("title")?.to_string(),
                    payload: args.opt_value("payload"),
                    idempotency_key: args.opt_str("idempotency_key")?.map(str::to_string),
                    max_attempts: parse_max_attempts(args)?,
                    created_by_kind: CreatedByKind::Agent,
                    created_by_id: Some(agent.endpoint_id.clone()),
                })
                .await?;
            Ok(json!({ "todo": todo_json(&created.todo, true), "deduped": created.deduped }))
        }
        // SPEC-0030 REQ-10: only with the verb granted (checked above), only on a queue this
        // endpoint may manage (else not_found), audited with the endpoint and its human.
        "set_admission_policy" | "clear_admission_policy" => {
            let known: &[&str] = if name == "set_admission_policy" { &["queue", "policy"] } else { &["queue"] };
            args.only(known)?;
            // The same write limiter as the operator API, keyed per endpoint (Security Requirements).
            state.admission_writes.check(&format!("endpoint:{}", agent.endpoint_id))?;
            let identity = agent.managed_queue(args.str("queue")?)?;
            let actor = PolicyActor {
                human_id: agent.acting_for_human_id.clone(),
                endpoint_id: Some(agent.endpoint_id.clone()),
            };
            if name == "clear_admission_policy" {
                store.clear_policy(&identity, &actor).await?;
                return Ok(json!({ "queue": identity.queue, "cleared": true }));
            }
            let policy = Policy::from_request(&args.opt_value("policy").unwrap_or(Value::Null))?;
            let saved = store.set_policy(&identity, &policy, &actor).await?;
            Ok(json!({
                "queue": identity.queue,
                "policy": saved.policy.as_ref().map_or(Value::Null, Policy::to_json),
                "status": status_json(&saved.status),
            }))
        }
        // Owner cancellation for agents (intake-capacity.md): opt-in verbs only, on queues the
        // endpoint manages (else not_found); claimed work is never touched.
        "discard_todo" | "clear_queue" => {
            let known: &[&str] = if name == "discard_todo" { &["queue", "id"] } else { &["queue"] };
            args.only(known)?;
            let identity = agent.managed_queue(args.str("queue")?)?;
            let by = PolicyActor {
                human_id: agent.acting_for_human_id.clone(),
                endpoint_id: Some(agent.endpoint_id.clone()),
            };
            if name == "discard_todo" {
                store.discard_todo(&identity, args.str("id")?, &by).await?;
                return Ok(json!({ "queue": identity.queue, "removed": 1 }));
            }
            let removed = store.clear_queue(&identity, &by).await?;
            Ok(json!({ "queue": identity.queue, "removed": removed }))
        }
        "admission_status" => {
            args.only(&["queue"])?;
            let queues = agent.narrow(args.opt_str("queue")?)?;
            let admissions = store.queue_admissions(&queues).await?;
            let entries: Vec<Value> = queues
                .iter()
                .map(|identity| {
                    let mut entry = json!({ "queue": identity.queue, "scope": scope_string(identity) });
                    if let Some(map) = entry.as_object_mut() {
                        match admissions.iter().find(|a| &a.identity == identity) {
                            Some(admission) => {
                                map.insert(
                                    "policy".into(),
                                    admission.policy.as_ref().map_or(Value::Null, |p| p.to_json()),
                                );
                                map.insert("pending".into(), json!(admission.pending));
                                if let Value::Object(status) = status_json(&admission.status) {
                                    map.extend(status);
                                }
                            }
                            None => {
                                map.insert("policy".into(), Value::Null);
                                map.insert("status".into(), json!("admitted"));
                            }
                        }
                    }
                    entry
                })
                .collect();
            Ok(json!({ "queues": entries }))
        }
        _ => Err(Error::invalid("name", format!("unknown tool {name}"))),
    }
}

async fn claim_next_tool<S: Store>(
    state: &AppState<S>,
    agent: &AgentScope,
    actor: &Actor,
    args: &Args<'_>,
) -> Result<Value> {
    args.only(&["queue", "lease_ttl_seconds"])?;
    let lease = lease_seconds(args.opt_i64("lease_ttl_seconds")?)?;
    let queues = agent.narrow(args.opt_str("queue")?)?;
    let outcome = state.store.claim_next(actor, &queues, lease).await?;
    // Who was told to wait (an empty answer's deferred queues, a queue this claim filled) is
    // watched, so the reopen sweep rings once when their queue admits claims again (REQ-8).
    state.push.after_claim_next(&state.store, &outcome).await;
    match outcome {
        ClaimNext::Claimed(claimed) => {
            let mut body = claimed_json(&claimed);
            if let Some(map) = body.as_object_mut() {
                map.insert("empty".into(), json!(false));
            }
            Ok(body)
        }
        // `deferred` appears only when a granted queue holds pending work it cannot admit
        // now; a bare `empty: true` still means there is no pending work at all.
        ClaimNext::Empty { deferred } if deferred.is_empty() => Ok(json!({ "empty": true })),
        ClaimNext::Empty { deferred } => {
            Ok(json!({ "empty": true, "deferred": deferred.iter().map(deferred_json).collect::<Vec<_>>() }))
        }
    }
}

async fn claim_tool<S: Store>(state: &AppState<S>, actor: &Actor, args: &Args<'_>) -> Result<Value> {
    args.only(&["id", "lease_ttl_seconds"])?;
    let lease = lease_seconds(args.opt_i64("lease_ttl_seconds")?)?;
    let id = args.str("id")?;
    match state.store.claim(actor, id, lease).await {
        Ok(claimed) => {
            state.push.after_claim(&state.store, Ok(&claimed)).await;
            Ok(claimed_json(&claimed))
        }
        Err(error) => {
            if error.code == models::error::Code::Deferred {
                let identity = state.store.get_todo(actor, id).await.ok().map(|todo| todo.identity);
                state.push.after_claim(&state.store, Err((&error, identity))).await;
            }
            Err(error)
        }
    }
}

/// Verbs every endpoint may call about itself, outside its grant (base-system §1).
const SELF_VERBS: &[&str] = &["clock_in", "clock_out", "presence"];

/// `clock_in {for?}` (seconds; 1 h default, 8 h max), `clock_out`, `presence` (SPEC-0022).
async fn call_self_verb<S: Store>(
    state: &AppState<S>,
    agent: &AgentScope,
    name: &str,
    args: &Args<'_>,
) -> Result<Value> {
    let store = &state.store;
    let view = match name {
        "clock_in" | "clock_out" => {
            args.only(&["for"])?;
            let (presence, for_seconds) = if name == "clock_in" {
                (Presence::In, args.opt_i64("for")?)
            } else {
                args.only(&[])?;
                (Presence::Out, None)
            };
            let view = crate::push::api::set_presence_from(
                store,
                &agent.endpoint_id,
                presence,
                for_seconds,
                OverrideBy::Agent,
            )
            .await?;
            // The clock-in digest may have rung a stream on this replica.
            state.push.capacity_changed();
            view
        }
        _ => {
            args.only(&[])?;
            store.presence(&agent.endpoint_id).await?
        }
    };
    Ok(crate::push::api::presence_json(&view))
}

/// Nudges the push loops after a verb that changed what may be pushed.
fn after_tool<S: Store>(state: &AppState<S>, name: &str, outcome: &Result<Value>) {
    if outcome.is_err() {
        return;
    }
    match name {
        "create_todo" => state.push.work_added(),
        "complete" | "fail" | "release" | "set_admission_policy" | "clear_admission_policy" | "discard_todo" => {
            state.push.capacity_changed()
        }
        _ => {}
    }
}

/// `result` as given, or `{summary}` when only a summary is given.
fn outcome_value(args: &Args<'_>) -> Result<Option<Value>> {
    let summary = args.opt_str("summary")?;
    Ok(args.opt_value("result").or_else(|| summary.map(|s| json!({ "summary": s }))))
}

/// The queue a `create_todo` names: the endpoint's own queue of that name if granted, else the
/// one team queue of that name; anything else is outside the grant.
fn creation_target(agent: &AgentScope, queue: &str) -> Result<QueueIdentity> {
    models::identity::validate_queue_name("queue", queue)?;
    let matching = agent.narrow(Some(queue))?;
    let own = matching.iter().find(|q| q.endpoint_id().is_some());
    own.or(matching.first())
        .cloned()
        .ok_or_else(|| Error::forbidden(format!("queue {queue} is outside this endpoint's grant")))
}
