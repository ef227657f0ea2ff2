//! Owner cancellation from the command line (intake-capacity.md, "Owner cancellation"):
//! `switchboard queue clear SCOPE QUEUE` and `switchboard todo remove TODO_ID`.
//!
//! Both discard waiting work for good, so both ask first: `--yes` answers the question in
//! advance, a terminal on stdin lets a person answer it, and with neither the command refuses as
//! a usage error (exit 2) before sending anything, rather than hang on a pipe or guess. The server
//! decides everything else (who may remove, which todos are still pending, the exact count).

use super::client::{Api, Failure};
use super::render::{clip, emit_done, one_line};
use crate::wire_types::{ClearedBody, OneTodo, TodoBody, Todos};
use reqwest::Method;
use std::io::{BufRead, IsTerminal, Write};

/// Most todos one list request returns (the server's own ceiling); the count in the question is
/// "N or more" past it.
const COUNT_LIMIT: usize = 200;
/// Longest title quoted in `todo remove`'s question.
const TITLE_CHARS_MAX: usize = 60;

/// How many pending todos the question can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Exactly(usize),
    AtLeast(usize),
    Unknown,
}

/// `queue clear`: every pending todo of SCOPE/QUEUE (deferred ones included) is discarded.
pub async fn clear(api: &Api, scope: &str, queue: &str, yes: bool, json: bool) -> Result<(), Failure> {
    require_someone_to_ask(yes)?;
    if !yes {
        let pending = count_pending(api, scope, queue).await;
        ask(&clear_question(scope, queue, pending))?;
    }
    let url = api.url(&["queues", scope, queue, "clear"], &[]);
    api.send_and_show((Method::POST, url, None), json, |answer: ClearedBody| format!("removed {}", answer.removed))
        .await
}

/// `todo remove`: reads the todo for its queue identity, then removes it from that queue.
pub async fn remove(api: &Api, id: &str, yes: bool, json: bool) -> Result<(), Failure> {
    require_someone_to_ask(yes)?;
    let (_, OneTodo { todo }) = api.send_and_read(Method::GET, api.url(&["todos", id], &[]), None).await?;
    let (scope, queue) = (todo.scope.as_str(), todo.queue.as_str());
    if queue == "." || queue == ".." {
        return Err(Failure::Trouble(format!(
            "todo {id} is in a queue named {queue:?}, which cannot be addressed in a URL; remove it in the web UI"
        )));
    }
    if !yes {
        ask(&remove_question(id, &todo.title, todo.state.as_str(), scope, queue))?;
    }
    let raw = api.send(Method::DELETE, api.url(&["queues", scope, queue, "todos", id], &[]), None).await?;
    emit_done(&raw, json, &format!("removed {id}"));
    Ok(())
}

/// Without `--yes` someone must answer the question; with no terminal on stdin nobody can.
fn require_someone_to_ask(yes: bool) -> Result<(), Failure> {
    if yes || std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(Failure::Usage(
        "this removes todos for good and asks for confirmation first, but stdin is not a terminal; \
         pass --yes to remove without asking"
            .into(),
    ))
}

/// The pending count for the question. Only a nicety: if the list cannot be read, the question
/// goes without a number, and the clear itself reports any refusal.
async fn count_pending(api: &Api, scope: &str, queue: &str) -> Pending {
    let limit = COUNT_LIMIT.to_string();
    let query = [("scope", scope), ("queue", queue), ("state", "pending"), ("limit", limit.as_str())];
    match api.send_and_read::<Todos<TodoBody>>(Method::GET, api.url(&["todos"], &query), None).await {
        Ok((_, listed)) if listed.todos.len() >= COUNT_LIMIT => Pending::AtLeast(listed.todos.len()),
        Ok((_, listed)) => Pending::Exactly(listed.todos.len()),
        Err(_) => Pending::Unknown,
    }
}

fn clear_question(scope: &str, queue: &str, pending: Pending) -> String {
    let name = one_line(&format!("{scope}/{queue}"));
    match pending {
        Pending::Exactly(0) => format!("Remove all pending todos of {name} (none right now)? [y/N] "),
        Pending::Exactly(1) => format!("Remove the 1 pending todo of {name}? [y/N] "),
        Pending::Exactly(n) => format!("Remove all {n} pending todos of {name}? [y/N] "),
        Pending::AtLeast(n) => format!("Remove all {n} or more pending todos of {name}? [y/N] "),
        Pending::Unknown => format!("Remove all pending todos of {name}? [y/N] "),
    }
}

fn remove_question(id: &str, title: &str, state: &str, scope: &str, queue: &str) -> String {
    format!(
        "Remove todo {} \"{}\" ({}) from {}/{}? [y/N] ",
        one_line(id),
        clip(title, TITLE_CHARS_MAX),
        one_line(state),
        one_line(scope),
        one_line(queue),
    )
}

/// Puts the question on stderr (stdout stays the command's answer, `--json` included) and
/// waits for the reply. A one-shot CLI, so blocking its runtime on stdin costs nothing.
fn ask(question: &str) -> Result<(), Failure> {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(question.as_bytes()).and_then(|()| stderr.flush());
    if confirmed(&mut std::io::stdin().lock()) {
        Ok(())
    } else {
        Err(Failure::Trouble("not confirmed; nothing was removed".into()))
    }
}

/// `y` or `yes` (any case) confirms; anything else, an empty line or end of input declines.
fn confirmed(input: &mut impl BufRead) -> bool {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(_) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clear_question_names_the_queue_and_how_many_todos_go() {
        let ask = |pending| clear_question("endpoint:triage-bot", "inbox", pending);
        assert_eq!(ask(Pending::Exactly(12)), "Remove all 12 pending todos of endpoint:triage-bot/inbox? [y/N] ");
        assert_eq!(ask(Pending::Exactly(1)), "Remove the 1 pending todo of endpoint:triage-bot/inbox? [y/N] ");
        assert_eq!(
            ask(Pending::Exactly(0)),
            "Remove all pending todos of endpoint:triage-bot/inbox (none right now)? [y/N] "
        );
        assert_eq!(
            ask(Pending::AtLeast(200)),
            "Remove all 200 or more pending todos of endpoint:triage-bot/inbox? [y/N] "
        );
        assert_eq!(ask(Pending::Unknown), "Remove all pending todos of endpoint:triage-bot/inbox? [y/N] ");
    }

    #[test]
    fn the_remove_question_quotes_the_title_on_one_line() {
        assert_eq!(
            remove_question("td_1", "look\u{1b}[2J at\nthis", "pending", "endpoint:ep_1", "inbox"),
            "Remove todo td_1 \"look [2J at this\" (pending) from endpoint:ep_1/inbox? [y/N] "
        );
    }

    #[test]
    fn only_y_or_yes_confirms() {
        for (typed, expected) in
            [("y\n", true), ("YES\n", true), (" yes \n", true), ("\n", false), ("n\n", false), ("yess\n", false)]
        {
            assert_eq!(confirmed(&mut typed.as_bytes()), expected, "{typed:?}");
        }
        assert!(!confirmed(&mut "".as_bytes()), "end of input declines");
    }
}
