//! `switchboard todo list|show` over `/api/v1/todos`. A pending todo of a budgeted queue carries
//! its admission (SPEC-0030 REQ-6); the table shows it as the board's chip does (REQ-11):
//! `deferred · budget · eligible <time>`, so an operator sees why work waits.

use super::client::{Api, Failure};
use super::render::{Table, Viewer, clip, one_line};
use crate::wire_types::{HintBody, Millis, OneTodo, TodoBody, Todos};
use reqwest::Method;

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
    let request = (Method::GET, api.url(&["todos"], &query), None);
    api.send_and_show(request, json, |listed: Todos<TodoBody>| list_text(&listed.todos, Viewer::from_env())).await
}

pub async fn show(api: &Api, id: &str, json: bool) -> Result<(), Failure> {
    let request = (Method::GET, api.url(&["todos", id], &[]), None);
    api.send_and_show(request, json, |answer: OneTodo| show_text(&answer.todo, Viewer::from_env())).await
}

fn list_text(todos: &[TodoBody], viewer: Viewer) -> String {
    if todos.is_empty() {
        return "no todos".into();
    }
    let mut table = Table::new(&["ID", "QUEUE", "STATE", "ATTEMPT", "TITLE", "ADMISSION"]);
    for todo in todos {
        table.row(vec![
            todo.id.clone(),
            format!("{}/{}", todo.scope, todo.queue),
            todo.state.as_str().into(),
            format!("{}/{}", todo.attempt, todo.max_attempts),
            clip(&todo.title, TITLE_CHARS_MAX),
            todo.admission.as_ref().map_or(String::new(), |admission| chip(admission, viewer)),
        ]);
    }
    table.render()
}

/// The board's chip for a pending todo: `admitted`, or `deferred · <reason> · eligible <when>`.
/// An inexact time (an in-flight slot freeing up) is marked `~`; paused work has no time at all.
fn chip(admission: &HintBody, viewer: Viewer) -> String {
    let state = admission.state.as_str();
    let Some(deferred) = &admission.deferred else { return state.into() };
    let reason = deferred.reason.words();
    match deferred.next_eligible_at {
        Some(Millis(when)) => {
            let approximately = if deferred.exact == Some(false) { "~" } else { "" };
            format!("{state} · {reason} · eligible {approximately}{}", viewer.format(when))
        }
        None => format!("{state} · {reason}"),
    }
}

fn show_text(todo: &TodoBody, viewer: Viewer) -> String {
    let when = |instant: Option<Millis>| instant.map(|Millis(t)| viewer.format(t));
    let mut lines: Vec<(&str, String)> = vec![
        ("id", todo.id.clone()),
        ("queue", format!("{}/{}", todo.scope, todo.queue)),
        ("title", todo.title.clone()),
        ("state", todo.state.as_str().into()),
        ("attempt", format!("{} of {}", todo.attempt, todo.max_attempts)),
    ];
    if let Some(admission) = &todo.admission {
        lines.push(("admission", chip(admission, viewer)));
    }
    let created_by = format!("{} {}", todo.created_by_kind.as_str(), todo.created_by_id.as_deref().unwrap_or("-"));
    let optional = [
        ("owner", todo.owner.clone()),
        ("created", when(Some(todo.created_at))),
        ("claimed", when(todo.claimed_at)),
        ("lease expires", when(todo.lease_expires_at)),
        ("next retry", when(todo.next_retry_at)),
        ("completed", when(todo.completed_at)),
        ("created by", Some(created_by)),
        ("idempotency", todo.idempotency_key.clone()),
    ];
    lines.extend(optional.into_iter().filter_map(|(label, value)| value.map(|value| (label, value))));
    if todo.dead_letter {
        lines.push(("dead letter", "yes: out of attempts".into()));
    }
    let mut out = String::new();
    for (label, value) in lines {
        out.push_str(&format!("{label:<14} {}\n", one_line(&value)));
    }
    for (name, value) in [("payload", &todo.payload), ("result", &todo.result)] {
        if let Some(value) = value.as_ref().filter(|v| !v.is_null()) {
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

    fn hint(value: serde_json::Value) -> HintBody {
        serde_json::from_value(value).expect("an admission hint")
    }

    // SPEC-0030 REQ-11: each deferred pending todo carries a chip with the reason and the time.
    #[test]
    fn req11_deferred_todos_carry_a_chip_with_reason_and_eligibility() {
        let budget = json!({"state": "deferred", "reason": "window_exhausted",
                            "next_eligible_at": "2026-03-10T07:00:00.000Z", "exact": true});
        assert_eq!(chip(&hint(budget), BERLIN), "deferred · budget · eligible 2026-03-10 08:00 CET");
        let in_flight = json!({"state": "deferred", "reason": "in_flight_full",
                               "next_eligible_at": "2026-03-10T07:00:00.000Z", "exact": false});
        assert_eq!(chip(&hint(in_flight), BERLIN), "deferred · in flight full · eligible ~2026-03-10 08:00 CET");
        let paused = json!({"state": "deferred", "reason": "paused", "next_eligible_at": null, "exact": null});
        assert_eq!(chip(&hint(paused), BERLIN), "deferred · paused");
        assert_eq!(chip(&hint(json!({"state": "admitted"})), BERLIN), "admitted");
    }

    #[test]
    fn the_list_shows_one_row_per_todo_with_its_chip() {
        let todos = [serde_json::from_value(json!({"id": "td_1", "scope": "endpoint:ep_1", "queue": "inbox",
            "title": "look\nat it", "state": "pending", "owner": null, "attempt": 0, "max_attempts": 3,
            "lease_expires_at": null, "next_retry_at": null, "dead_letter": false, "idempotency_key": null,
            "created_at": "2026-03-10T07:00:00.000Z", "updated_at": "2026-03-10T07:00:00.000Z",
            "claimed_at": null, "completed_at": null, "created_by_kind": "human", "created_by_id": null,
            "payload_size": 0,
            "admission": {"state": "deferred", "reason": "paused", "next_eligible_at": null, "exact": null}}))
        .expect("a listed todo")];
        let table = list_text(&todos, BERLIN);
        assert!(table.contains("td_1"), "{table}");
        assert!(table.contains("endpoint:ep_1/inbox"), "{table}");
        assert!(table.contains("look at it"), "{table}");
        assert!(table.contains("deferred · paused"), "{table}");
    }
}
