//! The operator CLI (contract §1): `switchboard queue budget show|set|clear` (SPEC-0030 REQ-10)
//! and `switchboard todo list|show`, spoken over the operator API with a `sbh_` bearer.
//!
//! It owns the command-line grammar of those commands, their exit statuses (0 ok, 1 refused by
//! the server or unreachable, 2 usage) and how their answers read as tables (REQ-11: used of
//! limit, in flight of limit, status, and "resets at" in the policy's zone and the viewer's).
//! It must never reach the database or decide anything itself: the server is the authority on
//! every rule, so the CLI only checks what it needs to build a well-formed request.

mod budget;
mod client;
mod render;
mod todo;

use clap::{ArgGroup, Args, Subcommand};
use client::{Api, Failure};
use models::identity::{ScopeRef, validate_queue_name};
use std::process::ExitCode;

/// Where the operator token comes from. Never a flag, so it stays out of shell history and `ps`.
const TOKEN_VARIABLE: &str = "SWITCHBOARD_TOKEN";

/// Shown under `queue --help` and `todo --help`: what the commands read and how they exit.
const ENVIRONMENT_HELP: &str = "Environment: SWITCHBOARD_URL (default http://127.0.0.1:8080) and \
    SWITCHBOARD_TOKEN (an sbh_ operator token, as `switchboard admin human add NAME` prints).\n\
    Exit status: 0 ok, 1 refused by the server (it prints `code: message`) or unreachable, 2 usage.";

/// The operator commands, flattened into the binary's top-level command list.
#[derive(Subcommand)]
pub enum OperatorCommand {
    /// Queue settings over the operator API: admission budgets (SPEC-0030).
    #[command(after_help = ENVIRONMENT_HELP)]
    Queue {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: QueueCommand,
    },
    /// Todos over the operator API: list them (with why pending work waits) and show one.
    #[command(after_help = ENVIRONMENT_HELP)]
    Todo {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: TodoCommand,
    },
}

/// How to reach the server and how to print its answer; shared by every operator command.
#[derive(Args)]
pub struct Connection {
    /// Base URL of the switchboard server (plain http).
    #[arg(long, global = true, env = "SWITCHBOARD_URL", default_value = "http://127.0.0.1:8080", display_order = 100)]
    url: String,
    /// Print the API's JSON answer verbatim instead of a table.
    #[arg(long, global = true, display_order = 101)]
    json: bool,
}

#[derive(Subcommand)]
pub enum QueueCommand {
    /// A queue's admission budget: claims per window and claims in flight at once.
    Budget {
        #[command(subcommand)]
        command: BudgetCommand,
    },
}

#[derive(Subcommand)]
pub enum BudgetCommand {
    /// Show budgets: every one you manage, those of one SCOPE, or one queue in detail.
    #[command(long_about = "Show admission budgets with their usage.\n\n\
        With no argument: every budget you manage. With SCOPE: that scope's budgets. With SCOPE and\n\
        QUEUE: that queue in detail, with recent windows and the audit history.\n\
        \"Resets at\" is shown in the policy's zone and in your local time (TZ).\n\n\
        Examples:\n  \
        switchboard queue budget show\n  \
        switchboard queue budget show endpoint:triage-bot\n  \
        switchboard queue budget show endpoint:triage-bot inbox --json")]
    Show {
        /// `endpoint:<slug-or-id>` or `team:<slug-or-id>`.
        #[arg(value_parser = parse_scope)]
        scope: Option<String>,
        /// Queue name.
        #[arg(requires = "scope", value_parser = parse_queue)]
        queue: Option<String>,
    },
    /// Set a queue's budget. A full replace: any limit you leave out is removed.
    #[command(long_about = "Set a queue's admission budget.\n\n\
        This is a FULL REPLACE: the queue's budget becomes exactly what this command names, and any\n\
        limit left out is removed. Give at least one of --per-hour, --per-day, --per-week and\n\
        --max-in-flight. A limit of 0 pauses the queue. Changes apply from the next claim.\n\n\
        Examples:\n  \
        switchboard queue budget set endpoint:triage-bot inbox --per-day 100 --tz America/Los_Angeles\n  \
        switchboard queue budget set team:research investigations --per-week 500 --weekday Mon --start 09:00\n  \
        switchboard queue budget set endpoint:triage-bot inbox --max-in-flight 2")]
    Set(SetArgs),
    /// Remove a queue's budget; its audit history stays readable.
    Clear {
        /// `endpoint:<slug-or-id>` or `team:<slug-or-id>`.
        #[arg(value_parser = parse_scope)]
        scope: String,
        /// Queue name.
        #[arg(value_parser = parse_queue)]
        queue: String,
    },
}

/// `queue budget set`: the per-* limits exclude one another, and at least one limit is named.
#[derive(Args)]
#[command(group(ArgGroup::new("window_limit").args(["per_hour", "per_day", "per_week"])))]
#[command(group(
    ArgGroup::new("any_limit").args(["per_hour", "per_day", "per_week", "max_in_flight"]).multiple(true).required(true)
))]
pub struct SetArgs {
    /// `endpoint:<slug-or-id>` or `team:<slug-or-id>`.
    #[arg(value_parser = parse_scope)]
    pub scope: String,
    /// Queue name.
    #[arg(value_parser = parse_queue)]
    pub queue: String,
    /// At most N claims per hour.
    #[arg(long, value_name = "N")]
    pub per_hour: Option<u32>,
    /// At most N claims per day.
    #[arg(long, value_name = "N")]
    pub per_day: Option<u32>,
    /// At most N claims per week (needs --weekday).
    #[arg(long, value_name = "N", requires = "weekday")]
    pub per_week: Option<u32>,
    /// IANA zone the window follows, e.g. America/Los_Angeles [default: UTC].
    #[arg(long, value_name = "ZONE", requires = "window_limit")]
    pub tz: Option<String>,
    /// Wall-clock time the window starts, in --tz; hourly windows use the minutes [default: 00:00].
    #[arg(long, value_name = "HH:MM", requires = "window_limit")]
    pub start: Option<String>,
    /// Day a weekly window starts: Mon, Tue, Wed, Thu, Fri, Sat or Sun.
    // `conflicts_with_all` as well as `requires`: clap waives a requirement that conflicts with
    // an argument present, so `--per-day N --weekday D` would otherwise slip through.
    #[arg(long, value_name = "DAY", requires = "per_week", conflicts_with_all = ["per_hour", "per_day"], value_parser = parse_weekday)]
    pub weekday: Option<String>,
    /// At most N todos of the queue claimed at once.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u32>,
}

#[derive(Subcommand)]
pub enum TodoCommand {
    /// List todos, newest first; pending todos of a budgeted queue say whether they may be claimed.
    #[command(long_about = "List todos, newest first.\n\n\
        A pending todo of a queue with a budget carries its admission: admitted, or deferred with\n\
        the reason and when it becomes eligible.\n\n\
        Examples:\n  \
        switchboard todo list\n  \
        switchboard todo list --scope endpoint:triage-bot --queue inbox --state pending")]
    List {
        /// Only this scope: `endpoint:<slug-or-id>` or `team:<slug-or-id>`.
        #[arg(long, value_parser = parse_scope)]
        scope: Option<String>,
        /// Only this queue of --scope.
        #[arg(long, requires = "scope", value_parser = parse_queue)]
        queue: Option<String>,
        /// Only todos in this state.
        #[arg(long, value_parser = ["pending", "claimed", "done", "failed"])]
        state: Option<String>,
        /// At most N todos (the server allows 1-200; default 50).
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
    },
    /// Show one todo in full: payload, result and admission.
    Show {
        /// The todo's id (td_...).
        id: String,
    },
}

/// Runs an operator command and turns its outcome into the contract's exit status.
pub async fn run(command: OperatorCommand) -> ExitCode {
    match dispatch(command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Refused { code, message }) => {
            eprintln!("{code}: {message}");
            ExitCode::FAILURE
        }
        Err(Failure::Trouble(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: OperatorCommand) -> Result<(), Failure> {
    match command {
        OperatorCommand::Queue { connection, command: QueueCommand::Budget { command } } => {
            let api = connect(&connection)?;
            match command {
                BudgetCommand::Show { scope, queue } => budget::show(&api, scope, queue, connection.json).await,
                BudgetCommand::Set(args) => budget::set(&api, args, connection.json).await,
                BudgetCommand::Clear { scope, queue } => budget::clear(&api, &scope, &queue, connection.json).await,
            }
        }
        OperatorCommand::Todo { connection, command } => {
            let api = connect(&connection)?;
            match command {
                TodoCommand::List { scope, queue, state, limit } => {
                    let filter = todo::ListFilter { scope, queue, state, limit };
                    todo::list(&api, filter, connection.json).await
                }
                TodoCommand::Show { id } => todo::show(&api, &id, connection.json).await,
            }
        }
    }
}

/// The API client from the connection flags and the token in the environment.
fn connect(connection: &Connection) -> Result<Api, Failure> {
    let token = std::env::var(TOKEN_VARIABLE).unwrap_or_default();
    if token.trim().is_empty() {
        return Err(Failure::Usage(format!(
            "{TOKEN_VARIABLE} is not set; export an operator token (sbh_...), which \
             `switchboard admin human add NAME` prints"
        )));
    }
    Api::new(&connection.url, token.trim())
}

/// SCOPE as the server parses it, so a malformed one is a usage error before any request.
fn parse_scope(raw: &str) -> Result<String, String> {
    ScopeRef::parse("SCOPE", raw).map(|_| raw.to_string()).map_err(|e| e.message)
}

/// QUEUE as the server validates it. `.` and `..` are legal names but a URL path cannot carry
/// them (clients normalise them away), so the CLI says so rather than address another route.
fn parse_queue(raw: &str) -> Result<String, String> {
    validate_queue_name("QUEUE", raw).map_err(|e| e.message)?;
    if raw == "." || raw == ".." {
        return Err(format!("a queue named {raw:?} cannot be addressed in a URL; use the web UI"));
    }
    Ok(raw.to_string())
}

/// Accepts `mon`, `Monday`, `MON` …; sends the one spelling the server stores (`Mon`).
fn parse_weekday(raw: &str) -> Result<String, String> {
    const DAYS: [(&str, &str); 7] = [
        ("Mon", "monday"),
        ("Tue", "tuesday"),
        ("Wed", "wednesday"),
        ("Thu", "thursday"),
        ("Fri", "friday"),
        ("Sat", "saturday"),
        ("Sun", "sunday"),
    ];
    let lower = raw.trim().to_ascii_lowercase();
    DAYS.iter()
        .find(|(short, long)| short.to_ascii_lowercase() == lower || *long == lower)
        .map(|(short, _)| short.to_string())
        .ok_or_else(|| format!("{raw:?} is not a weekday; use Mon, Tue, Wed, Thu, Fri, Sat or Sun"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weekdays_normalise_to_the_stored_spelling() {
        assert_eq!(parse_weekday("mon"), Ok("Mon".to_string()));
        assert_eq!(parse_weekday("SUNDAY"), Ok("Sun".to_string()));
        assert_eq!(parse_weekday("Thu"), Ok("Thu".to_string()));
        assert!(parse_weekday("Mo").is_err());
        assert!(parse_weekday("Mondays").is_err());
        assert!(parse_weekday("Tuesdayx").is_err());
    }

    #[test]
    fn scopes_and_queues_follow_the_server_grammar() {
        assert!(parse_scope("endpoint:triage-bot").is_ok());
        assert!(parse_scope("team:tm_123").is_ok());
        assert!(parse_scope("triage-bot").is_err());
        assert!(parse_scope("endpoint:").is_err());
        assert!(parse_queue("inbox.v2").is_ok());
        assert!(parse_queue("Inbox").is_err());
        assert!(parse_queue("..").is_err());
    }
}
