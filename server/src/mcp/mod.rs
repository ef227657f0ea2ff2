//! MCP over streamable HTTP at `/mcp/{slug}` (contract §5): JSON-RPC 2.0 `initialize`,
//! `tools/list` and `tools/call`, answered as single JSON responses.
//!
//! Written by hand rather than with an MCP framework: the server is stateless per request (any
//! replica answers any call, which the simulation relies on), and tool errors must carry the
//! contract's exact `code: message` text and `structuredContent`.
//!
//! This module is the JSON-RPC transport; `catalog` lists what may be called and `tools` runs it.

mod catalog;
mod tools;

use crate::auth::require_agent;
use crate::state::AppState;
use crate::wire::{ApiError, Args};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use catalog::{SELF_VERBS, tools_for};
use models::error::{Error, Result};
use models::store::Store;
use serde_json::{Value, json};
use tools::{after_tool, call_self_verb, call_tool};

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
