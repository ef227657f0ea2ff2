//! `switchboard todo list|show` over `/api/v1/todos`. A pending todo of a budgeted queue carries
//! its admission (SPEC-0030 REQ-6); the table shows it as the board's chip does (REQ-11):
//! `deferred · budget · eligible <time>`, so an operator sees why work waits.

use super::client::{Api, Failure};
use super::render::{Table, Viewer, clip, emit, instant, one_line, text};
use reqwest::Method;
use serde_json::Value;

/// Longest title the list prints; `todo show` prints it whole.
const TITLE_CHARS_MAX: usize = 40;

/// The server-side filters of `todo list`.
pub struct ListFilter {
    pub scope: Option<String>,
    pub queue: Option<String>,
    pub state: Option<String>,
    pub limit: Option<u32>,
}

pub async fn list(api: &Api, filter: ListFilter, json: bool) -> Result<(), Failure> {
    let limit = filter.limit.map(|n| n.to_string());
    let query: Vec<(&str, &str)> = [
        ("scope", filter.scope.as_deref()),
        ("queue", filter.queue.as_deref()),
        ("state", filter.state.as_deref()),
        ("limit", limit.as_deref()),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.map(|value| (key, value)))
    .collect();
    let (raw, listed) = api.send_json(Method::GET, api.url(&["todos"], &query), None).await?;
    if json {
        emit(&raw);
        return Ok(());
    }
    let todos = listed.get("todos").and_then(Value::as_array).cloned().unwrap_or_default();
    emit(&list_text(&todos, Viewer::from_env()));
    Ok(())
}

pub async fn show(api: &Api, id: &str, json: bool) -> Result<(), Failure> {
    let (raw, answer) = api.send_json(Method::GET, api.url(&["todos", id], &[]), None).await?;
    if json {
        emit(&raw);
    } else {
        emit(&show_text(answer.get("todo").unwrap_or(&Value::Null), Viewer::from_env()));
    }
    Ok(())
}

fn list_text(todos: &[Value], viewer: Viewer) -> String {
    if todos.is_empty() {
        return "no todos".into();
    }
    let mut table = Table::new(&["ID", "QUEUE", "STATE", "ATTEMPT", "TITLE", "ADMISSION"]);
    for todo in todos {
        table.row(vec![
            text(todo.get("id")),
            format!("{}/{}", text(todo.get("scope")), text(todo.get("queue"))),
            text(todo.get("state")),
            format!("{}/{}", text(todo.get("attempt")), text(todo.get("max_attempts"))),
            clip(&text(todo.get("title")), TITLE_CHARS_MAX),
            todo.get("admission").map_or(String::new(), |admission| chip(admission, viewer)),
        ]);
    }
    table.render()
}

/// The board's chip for a pending todo: `admitted`, or `deferred · <reason> · eligible <when>`.
/// An inexact time (an in-flight slot freeing up) is marked `~`; paused work has no time at all.
fn chip(admission: &Value, viewer: Viewer) -> String {
    let state = text(admission.get("state"));
    let Some(reason) = admission.get("reason").and_then(Value::as_str) else { return state };
    let reason = match reason {
        "window_exhausted" => "budget",
        "in_flight_full" => "in flight full",
        "paused" => "paused",
        "admission_unavailable" => "unavailable",
        other => other,
    };
    match instant(admission.get("next_eligible_at")) {
        Some(when) => {
            let approximately = if admission.get("exact").and_then(Value::as_bool) == Some(false) { "~" } else { "" };
            format!("{state} · {reason} · eligible {approximately}{}", viewer.format(when))
        }
        None => format!("{state} · {reason}"),
    }
}

fn show_text(todo: &Value, viewer: Viewer) -> String {
    let when = |name: &str| instant(todo.get(name)).map(|t| viewer.format(t));
    let mut lines: Vec<(&str, String)> = vec![
        ("id", text(todo.get("id"))),
        ("queue", format!("{}/{}", text(todo.get("scope")), text(todo.get("queue")))),
        ("title", text(todo.get("title"))),
        ("state", text(todo.get("state"))),
        ("attempt", format!("{} of {}", text(todo.get("attempt")), text(todo.get("max_attempts")))),
    ];
    if let Some(admission) = todo.get("admission") {
        lines.push(("admission", chip(admission, viewer)));
    }
    let optional = [
        ("owner", todo.get("owner").filter(|o| !o.is_null()).map(|o| text(Some(o)))),
        ("created", when("created_at")),
        ("claimed", when("claimed_at")),
        ("lease expires", when("lease_expires_at")),
        ("next retry", when("next_retry_at")),
        ("completed", when("completed_at")),
        ("created by", Some(format!("{} {}", text(todo.get("created_by_kind")), text(todo.get("created_by_id"))))),
        ("idempotency", todo.get("idempotency_key").filter(|k| !k.is_null()).map(|k| text(Some(k)))),
    ];
    lines.extend(optional.into_iter().filter_map(|(label, value)| value.map(|value| (label, value))));
    if todo.get("dead_letter").and_then(Value::as_bool) == Some(true) {
        lines.push(("dead letter", "yes: out of attempts".into()));
    }
    let mut out = String::new();
    for (label, value) in lines {
        out.push_str(&format!("{label:<14} {}\n", one_line(&value)));
    }
    for name in ["payload", "result"] {
        if let Some(value) = todo.get(name).filter(|v| !v.is_null()) {
            let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
            out.push_str(&format!("\n{name}:\n{pretty}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BERLIN: Viewer = Viewer::Named(chrono_tz::Europe::Berlin);

    // SPEC-0030 REQ-11: each deferred pending todo carries a chip with the reason and the time.
    #[test]
    fn req11_deferred_todos_carry_a_chip_with_reason_and_eligibility() {
        let budget = json!({"state": "deferred", "reason": "window_exhausted",
                            "next_eligible_at": "2026-03-10T07:00:00.000Z", "exact": true});
        assert_eq!(chip(&budget, BERLIN), "deferred · budget · eligible 2026-03-10 08:00 CET");
        let in_flight = json!({"state": "deferred", "reason": "in_flight_full",
                               "next_eligible_at": "2026-03-10T07:00:00.000Z", "exact": false});
        assert_eq!(chip(&in_flight, BERLIN), "deferred · in flight full · eligible ~2026-03-10 08:00 CET");
        assert_eq!(chip(&json!({"state": "deferred", "reason": "paused"}), BERLIN), "deferred · paused");
        assert_eq!(chip(&json!({"state": "admitted"}), BERLIN), "admitted");
    }

    #[test]
    fn the_list_shows_one_row_per_todo_with_its_chip() {
        let todos = [json!({"id": "td_1", "scope": "endpoint:ep_1", "queue": "inbox", "state": "pending",
                            "attempt": 0, "max_attempts": 3, "title": "look\nat it",
                            "admission": {"state": "deferred", "reason": "paused"}})];
        let table = list_text(&todos, BERLIN);
        assert!(table.contains("td_1"), "{table}");
        assert!(table.contains("endpoint:ep_1/inbox"), "{table}");
        assert!(table.contains("look at it"), "{table}");
        assert!(table.contains("deferred · paused"), "{table}");
    }
}
