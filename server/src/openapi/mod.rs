//! The OpenAPI 3.1 document of `/api/v1`, served at `GET /api/v1/openapi.json`.
//!
//! Generated from one route table (`routes::ROUTES`), which names each operation's request and
//! answer types, and those types' JSON Schemas (`schemars`, the same derive that gives the MCP
//! tools their schemas; issue #30 item 2). The handlers read their bodies as those types
//! (`wire_types::requests::read`) and answer with them, so the document cannot describe a body
//! the server does not read. Paths, statuses and links stay a table: they are the router's, not a
//! type's.
//! Three checks keep the document true: a unit test that every `/api/v1` route the router
//! declares is in the table (and nothing else is), a black-box test that every documented
//! operation is served and refuses a caller without credentials, and `ci/schemathesis`, which
//! sends the served binary what the document allows and what it forbids and checks each answer
//! against it (issue 30).

mod routes;

use crate::wire_types::ErrorBody;
use crate::wire_types::requests::{ClaimRequest, EmptyRequest, QueueName, ResultRequest, Scope};
pub use routes::{Body, Link, ROUTES, Route};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// A type's schema as the document uses it: a `$ref` into `components/schemas` for a named type
/// (the generator records its definition), or the schema itself for an inlined one.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// [`SchemaFn`] of `T`.
pub fn of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// The owner actions of `POST /api/v1/todos/{id}/{action}` and the body each reads; the document
/// lists each as its own path, since their bodies differ.
const TODO_ACTIONS: [(&str, SchemaFn); 5] = [
    ("claim", of::<ClaimRequest>),
    ("complete", of::<ResultRequest>),
    ("fail", of::<ResultRequest>),
    ("release", of::<EmptyRequest>),
    ("retry", of::<EmptyRequest>),
];

/// Answers every authenticated route can give before its handler runs.
const AUTH_ERRORS: [(u16, &str); 3] = [
    (401, "unauthenticated: no or wrong bearer"),
    (429, "rate_limited: the credential's request rate or concurrency is over its limit (Retry-After)"),
    (
        503,
        "unavailable: the server is at its request limit or the database did not answer in time; on a change to \
         what a credential may do, not every replica confirmed it within 8 s (the change is saved, and repeating \
         the call is harmless)",
    ),
];

/// An id the server made: `<prefix>_` and 32 hex digits.
fn id(prefix: &str) -> Value {
    json!({ "type": "string", "pattern": format!("^{prefix}_[0-9a-f]{{32}}$") })
}

/// The schema of a path parameter, from what the server makes and accepts.
fn path_parameter(generator: &mut SchemaGenerator, path: &str, name: &str) -> Value {
    match name {
        "scope" => of::<Scope>(generator).to_value(),
        "queue" => json!({ "type": "string", "pattern": format!("^(?!\\.{{1,2}}$)[a-z0-9._-]{{1,{}}}$",
            models::identity::QUEUE_NAME_LENGTH_MAX), "description": "a queue name (. and .. cannot be a path segment)" }),
        "reference" => json!({ "type": "string", "pattern": crate::wire_types::requests::REFERENCE,
            "description": "endpoint slug or id" }),
        "hook_id" => id("nh"),
        "action" => json!({ "enum": TODO_ACTIONS.map(|(action, _)| action) }),
        "id" if path.starts_with("/api/v1/tokens") => id("tk"),
        "id" if path.starts_with("/api/v1/webhooks") => id("wh"),
        _ => id("td"),
    }
}

/// `#/paths/<path>/<method>` as a JSON pointer (`/` escaped as `~1`).
fn operation_ref(method: &str, path: &str) -> String {
    format!("#/paths/{}/{method}", path.replace('~', "~0").replace('/', "~1"))
}

/// The JSON content of a request or an answer.
fn json_content(schema: Schema) -> Value {
    json!({ "application/json": { "schema": schema } })
}

/// One operation of the document.
fn operation(generator: &mut SchemaGenerator, route: &Route, path: &str, body: Option<(SchemaFn, bool)>) -> Value {
    let public = route.path == "/api/v1/openapi.json";
    let params: Vec<&str> =
        path.split('/').filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect();
    let error: Option<SchemaFn> = Some(of::<ErrorBody<'static>>);
    let mut statuses: Vec<(u16, &str, Option<SchemaFn>)> = route.responses.to_vec();
    let mut add = |status: u16, description: &'static str| {
        if !statuses.iter().any(|(known, ..)| *known == status) {
            statuses.push((status, description, error));
        }
    };
    if body.is_some() {
        add(400, "invalid_argument naming the field");
        add(413, "payload_too_large: the body is over the route's size cap");
    }
    if !params.is_empty() {
        add(400, "invalid_argument: a path parameter the server cannot store (a NUL character)");
        add(404, "not_found: nothing by that name in the caller's reach");
    }
    if !public {
        AUTH_ERRORS.iter().for_each(|(status, description)| add(*status, description));
    }
    let mut responses = Map::new();
    for (status, description, schema) in statuses {
        let mut response = json!({ "description": description });
        if let Some(schema) = schema {
            response["content"] = json_content(schema(generator));
        }
        let links: Map<String, Value> = route
            .links
            .iter()
            .filter(|link| link.status == status)
            .map(|link| {
                let parameters: Map<String, Value> =
                    link.parameters.iter().map(|(name, expression)| (name.to_string(), json!(expression))).collect();
                let target = json!({ "operationRef": operation_ref(link.method, link.path), "parameters": parameters });
                (link.name.to_string(), target)
            })
            .collect();
        if !links.is_empty() {
            response["links"] = Value::Object(links);
        }
        responses.insert(status.to_string(), response);
    }
    let mut parameters: Vec<Value> = params
        .iter()
        .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": path_parameter(generator, path, name) }))
        .collect();
    parameters.extend(route.query.map(|schema| {
        json!({ "name": "filter", "in": "query", "style": "form", "explode": true, "schema": schema(generator) })
    }));
    let mut operation = json!({ "summary": route.summary, "responses": responses, "parameters": parameters });
    if let Some((schema, required)) = body {
        operation["requestBody"] = json!({ "required": required, "content": json_content(schema(generator)) });
    }
    if public {
        operation["security"] = json!([]);
    }
    operation
}

/// The generator of the document's schemas: JSON Schema 2020-12 (OpenAPI 3.1's dialect), every
/// named type defined once under `components/schemas`.
fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.definitions_path = "/components/schemas".into();
            settings.meta_schema = None;
        })
        .into_generator()
}

/// The document, built from `ROUTES` and the types they name.
pub fn document() -> Value {
    let mut generator = generator();
    let mut paths: Map<String, Value> = Map::new();
    let mut put = |path: String, method: &str, operation: Value| {
        let item = paths.entry(path).or_insert_with(|| json!({}));
        item[method] = operation;
    };
    for route in ROUTES {
        let body = match route.body {
            Body::None => None,
            Body::Required(schema) => Some((schema, true)),
            Body::Optional(schema) => Some((schema, false)),
        };
        if route.path.ends_with("/{action}") {
            for (action, schema) in TODO_ACTIONS {
                let path = route.path.replace("{action}", action);
                put(path.clone(), route.method, operation(&mut generator, route, &path, Some((schema, false))));
            }
        } else {
            put(route.path.to_string(), route.method, operation(&mut generator, route, route.path, body));
        }
    }
    // Path parameters name the queue by its own rule (`.` and `..` excluded); bodies by this one.
    let _ = of::<QueueName>(&mut generator);
    let components = generator.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Switchboard operator API", "version": env!("CARGO_PKG_VERSION"),
            "description": "Errors answer {error, code, ...extras}; anything outside the caller's reach is 404 \
                not_found. No string the server stores may hold the NUL character (400 naming the field)." },
        "servers": [{ "url": "/" }],
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": { "schemas": components,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer", "description": "operator token sbh_..." } } },
    })
}

/// `GET /api/v1/openapi.json`: public metadata, no tenant data.
pub async fn serve() -> axum::Json<Value> {
    axum::Json(document())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every `/api/v1` path the router declares is documented, and nothing undeclared is.
    #[test]
    fn the_document_covers_exactly_the_routed_api_paths() {
        let router_source = include_str!("../app.rs");
        let routed: BTreeSet<&str> = router_source
            .split(".route(")
            .skip(1)
            .filter_map(|rest| rest.trim_start().strip_prefix('"').and_then(|r| r.split('"').next()))
            .filter(|path| path.starts_with("/api/v1"))
            .collect();
        let documented: BTreeSet<&str> = ROUTES.iter().map(|r| r.path).collect();
        assert_eq!(routed, documented);
        // Every `$ref` names a schema and every link an operation of the document.
        let doc = document();
        let mut references = Vec::new();
        collect_references(&doc, &mut references);
        assert!(references.len() > 50, "{references:?}");
        for reference in references {
            let pointer = reference.strip_prefix('#').expect("a local reference");
            assert!(doc.pointer(pointer).is_some(), "{reference} names nothing in the document");
        }
    }

    fn collect_references(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, member) in map {
                    match (key.as_str(), member) {
                        ("$ref" | "operationRef", Value::String(reference)) => found.push(reference.clone()),
                        _ => collect_references(member, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| collect_references(item, found)),
            _ => {}
        }
    }
}
