//! What goes over the wire: reading a request body (a JSON object within the storable rules;
//! its members are read as a `wire_types::requests` type, every refusal naming its field), the
//! listing's limits, the todo as JSON, and the one mapping from an error code to an HTTP response
//! (contract §3).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use models::error::{Code, Error, Result};
use models::identity::QueueIdentity;
use models::todo::{MAX_ATTEMPTS_DEFAULT, Todo};
use serde_json::Value;

use crate::wire_types::requests::Integer;
pub use crate::wire_types::scope_string;
use crate::wire_types::{Detail, HintBody, TodoBody};

/// Default and largest page of a todo listing, on the API and MCP alike.
const LIST_LIMIT_DEFAULT: i64 = 50;
const LIST_LIMIT_MAX: i64 = 200;

/// A listing's `limit` (query string or tool argument): 1-200, 50 when absent.
pub fn parse_limit(raw: Option<i64>) -> Result<i64> {
    match raw {
        None => Ok(LIST_LIMIT_DEFAULT),
        Some(n) if (1..=LIST_LIMIT_MAX).contains(&n) => Ok(n),
        Some(_) => Err(Error::invalid("limit", format!("limit must be 1-{LIST_LIMIT_MAX}"))),
    }
}

/// A new todo's `max_attempts` (API body or tool argument), the default when absent; the range
/// itself is the model's rule (`NewTodo::validate`).
pub fn max_attempts(requested: Option<Integer>) -> Result<i32> {
    match requested {
        None => Ok(MAX_ATTEMPTS_DEFAULT),
        Some(Integer(n)) => i32::try_from(n).map_err(|_| Error::invalid("max_attempts", "max_attempts must be 1-100")),
    }
}

/// Parses a request body as a JSON object; anything else is `invalid_argument` on `body`.
pub fn parse_body(bytes: &[u8]) -> Result<Value> {
    let value = parse_json(bytes)?;
    if !value.is_object() {
        return Err(Error::invalid("body", "body must be a JSON object"));
    }
    models::storable::check_members(&value)?;
    Ok(value)
}

/// Parses a request body that is one JSON object or a list of them (a batch, whose items a
/// refusal names as `list[index]`); anything else is `invalid_argument` on `body`.
pub fn parse_body_or_list(bytes: &[u8], list: &str) -> Result<Value> {
    let value = parse_json(bytes)?;
    match &value {
        Value::Object(_) => models::storable::check_members(&value)?,
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                models::storable::check_members(item).map_err(|error| error.within_item(list, index))?;
            }
        }
        _ => return Err(Error::invalid("body", "body must be a JSON object or a list of them")),
    }
    Ok(value)
}

/// The items of a batch named `list`: 1..=`TODOS_PER_BATCH_MAX` JSON objects, a refusal naming
/// the list (`todos`) or the item (`todos[3]`).
pub fn batch_items<'v>(items: &'v [Value], list: &str) -> Result<&'v [Value]> {
    let max = models::limits::TODOS_PER_BATCH_MAX;
    if !(1..=max).contains(&items.len()) {
        return Err(Error::invalid(list, format!("a batch holds 1-{max} todos")));
    }
    match items.iter().position(|item| !item.is_object()) {
        Some(index) => Err(Error::invalid(&format!("{list}[{index}]"), "each item must be a JSON object")),
        None => Ok(items),
    }
}

fn parse_json(bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::invalid("body", format!("body is not valid JSON: {e}")))
}

/// An instant on the wire: `models::window::wire_instant`, the one format every answer uses.
pub fn rfc3339(instant: DateTime<Utc>) -> String {
    models::window::wire_instant(instant)
}

/// An error as an operator-API response: the status from the code table and the envelope.
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        ApiError(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(crate::wire_types::ErrorBody::from(&self.0))).into_response();
        match self.0.code {
            Code::Unauthenticated => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"switchboard\""));
            }
            Code::RateLimited | Code::QueueFull | Code::Deferred | Code::Unavailable => {
                let seconds = self.0.extras.get("retry_after_seconds").and_then(Value::as_i64).unwrap_or(1).max(1);
                if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
            }
            _ => {}
        }
        response
    }
}

pub type ApiResult = std::result::Result<Response, ApiError>;

/// Todos as a listing shows them, each pending todo of a budgeted queue with its admission
/// status (REQ-6). The statuses come from one read for all the listed queues.
pub async fn todos_with_admission<S: models::store::Store>(
    store: &S,
    todos: &[Todo],
    detail: Detail,
) -> Result<Vec<TodoBody>> {
    let mut identities: Vec<QueueIdentity> =
        todos.iter().filter(|t| t.state == models::todo::TodoState::Pending).map(|t| t.identity.clone()).collect();
    identities.sort();
    identities.dedup();
    let admissions = store.queue_admissions(&identities).await?;
    Ok(todos
        .iter()
        .map(|todo| {
            let mut body = TodoBody::of(todo, detail);
            if todo.state == models::todo::TodoState::Pending {
                let admission = admissions.iter().find(|a| a.identity == todo.identity);
                body.admission = admission.map(|admission| HintBody::from(&admission.status.hint));
            }
            body
        })
        .collect())
}
