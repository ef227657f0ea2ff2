//! One enum of error codes for every surface (contract §3), so the API envelope, the MCP tool
//! error and the HTTP status all come from a single table.

use serde_json::{Map, Value};
use std::fmt;

/// The codes of `contract.md` §3. Their wire names are fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    InvalidArgument,
    Unauthenticated,
    Forbidden,
    NotFound,
    Conflict,
    NotPending,
    Deferred,
    QueueFull,
    RateLimited,
    PayloadTooLarge,
    Unavailable,
    Internal,
}

impl Code {
    /// Every code, in the table's order.
    pub const ALL: [Code; 12] = [
        Code::InvalidArgument,
        Code::Unauthenticated,
        Code::Forbidden,
        Code::NotFound,
        Code::Conflict,
        Code::NotPending,
        Code::Deferred,
        Code::QueueFull,
        Code::RateLimited,
        Code::PayloadTooLarge,
        Code::Unavailable,
        Code::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArgument => "invalid_argument",
            Code::Unauthenticated => "unauthenticated",
            Code::Forbidden => "forbidden",
            Code::NotFound => "not_found",
            Code::Conflict => "conflict",
            Code::NotPending => "not_pending",
            Code::Deferred => "deferred",
            Code::QueueFull => "queue_full",
            Code::RateLimited => "rate_limited",
            Code::PayloadTooLarge => "payload_too_large",
            Code::Unavailable => "unavailable",
            Code::Internal => "internal",
        }
    }

    /// The HTTP status of the operator API for this code (contract §3).
    pub fn http_status(self) -> u16 {
        match self {
            Code::InvalidArgument => 400,
            Code::Unauthenticated => 401,
            Code::Forbidden => 403,
            Code::NotFound => 404,
            Code::Conflict | Code::NotPending => 409,
            Code::PayloadTooLarge => 413,
            Code::Deferred | Code::QueueFull | Code::RateLimited => 429,
            Code::Internal => 500,
            Code::Unavailable => 503,
        }
    }
}

/// An error a caller may see: a code, a human sentence and named extras (`field`, `state`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub code: Code,
    pub message: String,
    pub extras: Map<String, Value>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), extras: Map::new() }
    }

    /// `invalid_argument` naming the offending field, as REQ-1 and the contract require.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Error::new(Code::InvalidArgument, message).with("field", field)
    }

    /// An `invalid_argument` about one item of a list field: its `field` becomes
    /// `list[index].field` (or `list[index]` when it named none). Other errors pass unchanged.
    pub fn within_item(mut self, list: &str, index: usize) -> Self {
        if self.code == Code::InvalidArgument {
            let field = match self.extras.get("field").and_then(serde_json::Value::as_str) {
                Some(field) => format!("{list}[{index}].{field}"),
                None => format!("{list}[{index}]"),
            };
            self.extras.insert("field".into(), field.into());
        }
        self
    }

    /// The one answer for anything the caller may not see: identical for "foreign" and "absent".
    pub fn not_found() -> Self {
        Error::new(Code::NotFound, "not found")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Error::new(Code::Forbidden, message)
    }

    pub fn conflict_state(message: impl Into<String>, state: &str) -> Self {
        Error::new(Code::Conflict, message).with("state", state)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(Code::Internal, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Error::new(Code::Unavailable, message)
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extras.insert(key.to_string(), value.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Error {}
