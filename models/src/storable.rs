//! What PostgreSQL can store: `text` and `jsonb` refuse the NUL character (U+0000), in a string
//! value or an object key at any depth. Input carrying one is refused at the edge with
//! `invalid_argument` naming the field, so it never reaches the database as a 500 and changes
//! nothing (issue #14: bad input gets a clear error). The one exception is a verified webhook
//! delivery, which the provider cannot correct: its NULs are replaced (`storable_value`).
//!
//! Exists apart from the validators of each field (titles, keys, payloads) because the rule is
//! the storage's, not the domain's: one walk over the parsed request covers every field at once.

use crate::error::{Error, Result};
use serde_json::Value;

/// Refuses `value` if any string or key in it, at any depth, holds a NUL. `field` names `value`
/// itself; the error names the path to the first offending part (`payload.items[2].name`).
pub fn check_value(field: &str, value: &Value) -> Result<()> {
    match first_nul(value, field.to_string()) {
        Some(path) => Err(refused(&path)),
        None => Ok(()),
    }
}

/// Refuses each member of a request object as [`check_value`] does, naming the member.
pub fn check_members(body: &Value) -> Result<()> {
    let Some(members) = body.as_object() else { return check_value("body", body) };
    for (name, value) in members {
        if name.contains('\0') {
            return Err(refused("body"));
        }
        check_value(name, value)?;
    }
    Ok(())
}

/// Refuses a text parameter (a path segment, a header value) that holds a NUL.
pub fn check_text(field: &str, text: &str) -> Result<()> {
    if text.contains('\0') { Err(refused(field)) } else { Ok(()) }
}

/// What stands in for a NUL where input must be kept rather than refused (a verified webhook
/// delivery is never refused for its content): U+FFFD, the replacement character.
pub const NUL_REPLACEMENT: char = '\u{FFFD}';

/// `text` with every NUL replaced by [`NUL_REPLACEMENT`], so PostgreSQL can store it.
pub fn storable_text(text: &str) -> String {
    text.replace('\0', &NUL_REPLACEMENT.to_string())
}

/// `value` with every NUL in a string or key, at any depth, replaced by [`NUL_REPLACEMENT`].
pub fn storable_value(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(storable_text(&text)),
        Value::Array(items) => Value::Array(items.into_iter().map(storable_value).collect()),
        Value::Object(members) => Value::Object(
            members.into_iter().map(|(name, member)| (storable_text(&name), storable_value(member))).collect(),
        ),
        other => other,
    }
}

fn refused(path: &str) -> Error {
    let field = path.split(['.', '[']).next().unwrap_or(path).to_string();
    Error::invalid(&field, format!("{path} must not contain the NUL character (\\u0000)"))
}

fn first_nul(value: &Value, path: String) -> Option<String> {
    match value {
        Value::String(text) => text.contains('\0').then_some(path),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| first_nul(item, format!("{path}[{i}]"))),
        Value::Object(members) => members.iter().find_map(|(name, member)| {
            if name.contains('\0') { Some(path.clone()) } else { first_nul(member, format!("{path}.{name}")) }
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use serde_json::json;

    #[test]
    fn storable_value_replaces_every_nul_and_keeps_the_rest() {
        let value = json!({"a\0": ["x\0y", 1, null, {"k": "\0"}], "b": true});
        let kept = storable_value(value);
        assert_eq!(kept, json!({"a\u{FFFD}": ["x\u{FFFD}y", 1, null, {"k": "\u{FFFD}"}], "b": true}));
        assert!(check_value("payload", &kept).is_ok());
        assert_eq!(storable_text("plain"), "plain");
    }

    #[test]
    fn a_nul_anywhere_is_refused_naming_the_top_field_and_the_path() {
        let body = json!({"title": "ok", "payload": {"items": [1, {"name": "a\u{0}b"}]}});
        let error = check_members(&body).expect_err("refused");
        assert_eq!(error.code, Code::InvalidArgument);
        assert_eq!(error.extras["field"], "payload");
        assert!(error.message.starts_with("payload.items[1].name must not contain"), "{}", error.message);
    }

    #[test]
    fn a_nul_in_a_key_or_a_top_level_string_is_refused() {
        assert_eq!(check_members(&json!({"title": "\u{0}"})).expect_err("title").extras["field"], "title");
        assert_eq!(check_members(&json!({"payload": {"k\u{0}": 1}})).expect_err("key").extras["field"], "payload");
        assert_eq!(check_members(&json!({"x\u{0}": 1})).expect_err("member name").extras["field"], "body");
        assert!(check_text("delivery_id", "abc\u{0}").is_err());
    }

    #[test]
    fn everything_else_passes() {
        let body = json!({"title": "naïve ☃ \u{1}", "payload": {"list": [null, true, 1.5, "x"]}});
        check_members(&body).expect("storable");
        check_text("slug", "worker-1").expect("storable");
    }
}
