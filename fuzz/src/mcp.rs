//! Target `mcp`: JSON-RPC decoding and tool arguments on `POST /mcp/{slug}` (contract §5).
//!
//! The decoder is the handler itself (`server::mcp::handle`, no pure parser behind it), so the
//! bytes go through the production router with the endpoint's valid bearer. The first byte
//! picks the shape: even, the rest is the whole request body; odd, the rest is the `arguments`
//! of a `tools/call` of the tool the second byte names (every verb is granted), so the fuzzer
//! spends its time inside the tools rather than rediscovering the envelope.
//!
//! Laws: never 5xx; a notification (no id) is 202; every 200 or 400 is a JSON-RPC 2.0 object
//! with a `result` or an `error` (any other refusal is the API's error envelope); a well-formed
//! `tools/call` is 200 with `isError` a boolean and its text content a string (a refusal's text
//! starts with its code, `code: message`).

use crate::world::{AGENT_TOKEN, World, assert_not_server_error};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};

pub fn run(data: &[u8]) {
    let Some((&shape, rest)) = data.split_first() else { return };
    let tool_call = shape % 2 == 1;
    let (body, tool) = if tool_call {
        let Some((&pick, arguments)) = rest.split_first() else { return };
        let tool = models::verbs::ALL_VERBS[usize::from(pick) % models::verbs::ALL_VERBS.len()];
        let arguments = serde_json::from_slice::<Value>(arguments)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(arguments).into_owned()));
        let call = json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": { "name": tool, "arguments": arguments },
        });
        (call.to_string().into_bytes(), Some(tool))
    } else {
        (rest.to_vec(), None)
    };

    let world = World::new();
    let request = Request::post(format!("/mcp/{}", world.endpoint_slug))
        .header(header::AUTHORIZATION, format!("Bearer {AGENT_TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .body(Body::from(body.clone()))
        .unwrap_or_else(|e| panic!("harness: request: {e}"));
    let answer = world.send(request);
    assert_not_server_error("MCP", &answer);

    let sent: Option<Value> = serde_json::from_slice(&body).ok();
    let notification =
        sent.as_ref().is_some_and(|v| v.get("method").is_some_and(Value::is_string) && v.get("id").is_none());
    if notification {
        assert_eq!(answer.status, StatusCode::ACCEPTED, "a notification gets only an acknowledgement");
        return;
    }
    if answer.status != StatusCode::OK && answer.status != StatusCode::BAD_REQUEST {
        // Refused before JSON-RPC began (the bearer, a body over the cap): the API's envelope.
        crate::world::assert_error_envelope("MCP", &answer);
        return;
    }
    let Some(reply) = answer.json() else {
        panic!("MCP answered {} with a body that is not JSON: {}", answer.status, String::from_utf8_lossy(&answer.body))
    };
    assert_eq!(reply.get("jsonrpc"), Some(&json!("2.0")), "not a JSON-RPC 2.0 answer: {reply}");
    assert!(reply.get("result").is_some() != reply.get("error").is_some(), "exactly one of result and error: {reply}");
    if let Some(tool) = tool {
        assert_eq!(answer.status, StatusCode::OK, "tools/call {tool} answered {}: {reply}", answer.status);
        let result = &reply["result"];
        let is_error = result.get("isError").and_then(Value::as_bool);
        let text = result.pointer("/content/0/text").and_then(Value::as_str);
        assert!(is_error.is_some() && text.is_some(), "tools/call {tool}: malformed tool result {reply}");
        if is_error == Some(true) {
            let code = result.pointer("/structuredContent/code").and_then(Value::as_str).unwrap_or("<none>");
            assert!(
                text.is_some_and(|t| t.starts_with(&format!("{code}: "))),
                "tools/call {tool}: a refusal's text must start `{code}: `: {reply}"
            );
        }
    }
}
