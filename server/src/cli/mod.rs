//! The operator CLI (contract §1): `switchboard queue budget show|set|clear` (SPEC-0030 REQ-10),
//! `switchboard queue clear` and `switchboard todo list|show|remove` (owner cancellation),
//! `switchboard system queue-capacity show|set` (intake capacity), `switchboard endpoint
//! presence|clock-in|clock-out|shift|hook` (push) and the credentials of issue #14 (`switchboard
//! token create|list|revoke`, `switchboard endpoint revoke|rotate`, `switchboard webhook
//! list|rotate|delete`), spoken over the operator API with a `sbh_` bearer.
//!
//! It owns the command-line grammar of those commands, their exit statuses (0 ok, 1 refused by
//! the server, unreachable or not confirmed, 2 usage) and how their answers read as tables
//! (REQ-11: used of limit, in flight of limit, status, and "resets at" in the policy's zone and
//! the viewer's).
//! It must never reach the database or decide anything itself: the server is the authority on
//! every rule, so the CLI only checks what it needs to build a well-formed request.

mod budget;
mod cancel;
mod capacity;
mod client;
mod endpoint;
mod render;
mod todo;
mod token;
mod webhook;

use clap::{ArgGroup, Args, Subcommand};
use client::{Api, CaFile, Failure};
use models::identity::{ScopeRef, validate_queue_name};
use std::path::PathBuf;
use std::process::ExitCode;

/// Where the operator token comes from. Never a flag, so it stays out of shell history and `ps`.
const TOKEN_VARIABLE: &str = "SWITCHBOARD_TOKEN";

/// Shown under every operator command's `--help`: what the commands read and how they exit.
const ENVIRONMENT_HELP: &str = "Environment: SWITCHBOARD_URL (default http://127.0.0.1:8080; http or \
    https), SWITCHBOARD_TOKEN (an sbh_ operator token, as `switchboard admin human add NAME` prints) \
    and SWITCHBOARD_CA_CERT (a private CA for https, PEM).\n\
    Exit status: 0 ok, 1 refused by the server (it prints `code: message`), unreachable or not \
    confirmed, 2 usage (including a removal without --yes when stdin is not a terminal).";

/// The operator commands, flattened into the binary's top-level command list.
#[derive(Subcommand)]
pub enum OperatorCommand {
    /// Queues over the operator API: admission budgets (SPEC-0030) and clearing pending todos.
    #[command(after_help = ENVIRONMENT_HELP)]
    Queue {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: QueueCommand,
    },
    /// Todos over the operator API: list them (with why pending work waits), show or remove one.
    #[command(after_help = ENVIRONMENT_HELP)]
    Todo {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: TodoCommand,
    },
    /// Install-wide settings over the operator API: the intake capacity of every queue.
    #[command(after_help = ENVIRONMENT_HELP)]
    System {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: SystemCommand,
    },
    /// An endpoint over the operator API: presence, shift, notify hooks and its MCP credential.
    #[command(after_help = ENVIRONMENT_HELP)]
    Endpoint {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: endpoint::EndpointCommand,
    },
    /// Your operator API tokens (sbh_): create, list and revoke them.
    #[command(after_help = ENVIRONMENT_HELP)]
    Token {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: token::TokenCommand,
    },
    /// Your webhooks: list them, rotate a signing secret, delete one.
    #[command(after_help = ENVIRONMENT_HELP)]
    Webhook {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: webhook::WebhookCommand,
    },
}

/// How to reach the server and how to print its answer; shared by every operator command.
#[derive(Args)]
pub struct Connection {
    /// Base URL of the switchboard server (http:// or https://).
    #[arg(long, global = true, env = "SWITCHBOARD_URL", default_value = "http://127.0.0.1:8080", display_order = 100)]
    url: String,
    /// A PEM file of CA certificates to trust for an https --url besides the public roots
    /// (a server behind a private CA).
    #[arg(long, global = true, env = "SWITCHBOARD_CA_CERT", value_name = "PATH", display_order = 102)]
    ca_cert: Option<PathBuf>,
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
    /// Remove every pending todo of a queue (deferred ones too); claimed todos are left alone.
    #[command(long_about = "Remove every pending todo of SCOPE/QUEUE, deferred ones included.\n\n\
        Removed todos become `discarded`: they stay in the audit trail and are never claimed. Claimed\n\
        todos are left alone. Asks for confirmation first unless --yes is given; without a terminal\n\
        on stdin, --yes is required. Prints how many todos were removed.\n\n\
        Examples:\n  \
        switchboard queue clear endpoint:triage-bot inbox\n  \
        switchboard queue clear team:research investigations --yes")]
    Clear {
        /// `endpoint:<slug-or-id>` or `team:<slug-or-id>`.
        #[arg(value_parser = parse_scope)]
        scope: String,
        /// Queue name.
        #[arg(value_parser = parse_queue)]
        queue: String,
        /// Remove without asking (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
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
        limit left out is removed. Give at least one of --per-minute, --per-hour, --per-day,\n\
        --per-week and --max-in-flight. --per-minute beside another per-* limit is a second window\n\
        every claim must also fit (\"60 a minute and 5,000 a day\"). A limit of 0 pauses the queue.\n\
        Changes apply from the next claim.\n\n\
        Examples:\n  \
        switchboard queue budget set endpoint:triage-bot inbox --per-day 100 --tz America/Los_Angeles\n  \
        switchboard queue budget set team:research investigations --per-week 500 --weekday Mon --start 09:00\n  \
        switchboard queue budget set endpoint:triage-bot inbox --max-in-flight 2\n  \
        switchboard queue budget set endpoint:triage-bot inbox --per-day 5000 --per-minute 60")]
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
    ArgGroup::new("any_limit")
        .args(["per_minute", "per_hour", "per_day", "per_week", "max_in_flight"])
        .multiple(true)
        .required(true)
))]
pub struct SetArgs {
    /// `endpoint:<slug-or-id>` or `team:<slug-or-id>`.
    #[arg(value_parser = parse_scope)]
    pub scope: String,
    /// Queue name.
    #[arg(value_parser = parse_queue)]
    pub queue: String,
    /// At most N claims per wall-clock minute: a second window beside --per-hour, --per-day or
    /// --per-week, or the only one.
    #[arg(long, value_name = "N")]
    pub per_minute: Option<u32>,
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
        #[arg(long, value_parser = ["pending", "claimed", "done", "failed", "discarded"])]
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
    /// Remove one pending todo from its queue; a claimed or finished todo is refused.
    #[command(long_about = "Remove one pending todo from its queue.\n\n\
        The todo becomes `discarded`: it stays in the audit trail and is never claimed. Only a\n\
        pending todo can be removed (`not_pending` otherwise). Asks for confirmation first unless\n\
        --yes is given; without a terminal on stdin, --yes is required.\n\n\
        Examples:\n  \
        switchboard todo remove td_01J9Z8\n  \
        switchboard todo remove td_01J9Z8 --yes")]
    Remove {
        /// The todo's id (td_...).
        id: String,
        /// Remove without asking (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

#[derive(Subcommand)]
pub enum SystemCommand {
    /// The intake capacity: the most pending todos any one queue may hold.
    #[command(name = "queue-capacity")]
    QueueCapacity {
        #[command(subcommand)]
        command: CapacityCommand,
    },
}

#[derive(Subcommand)]
pub enum CapacityCommand {
    /// Show the configured and the effective capacity, where the effective one comes from, and
    /// whether SWITCHBOARD_QUEUE_MAX_PENDING locks it.
    Show,
    /// Set the capacity for every queue (instance admins only); 0 is unlimited.
    #[command(long_about = "Set the intake capacity: the most pending todos any one queue may hold.\n\n\
        0 means unlimited. Instance admins only. Refused while the server's environment sets\n\
        SWITCHBOARD_QUEUE_MAX_PENDING, which overrides the setting. Applies to the next todo\n\
        created on every replica. Lowering it never removes waiting todos: it only refuses new ones\n\
        (queue_full) until a queue holds fewer pending todos than the capacity.\n\n\
        Examples:\n  \
        switchboard system queue-capacity set 100\n  \
        switchboard system queue-capacity set 0")]
    Set {
        /// Most pending todos per queue, 0 (unlimited) to 1000000.
        #[arg(value_name = "N", allow_negative_numbers = true)]
        max_pending: i64,
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
        OperatorCommand::Queue { connection, command: QueueCommand::Clear { scope, queue, yes } } => {
            let api = connect(&connection)?;
            cancel::clear(&api, &scope, &queue, yes, connection.json).await
        }
        OperatorCommand::Todo { connection, command } => {
            let api = connect(&connection)?;
            match command {
                TodoCommand::List { scope, queue, state, limit } => {
                    let filter = todo::ListFilter { scope, queue, state, limit };
                    todo::list(&api, filter, connection.json).await
                }
                TodoCommand::Show { id } => todo::show(&api, &id, connection.json).await,
                TodoCommand::Remove { id, yes } => cancel::remove(&api, &id, yes, connection.json).await,
            }
        }
        OperatorCommand::System { connection, command: SystemCommand::QueueCapacity { command } } => {
            let api = connect(&connection)?;
            match command {
                CapacityCommand::Show => capacity::show(&api, connection.json).await,
                CapacityCommand::Set { max_pending } => capacity::set(&api, max_pending, connection.json).await,
            }
        }
        OperatorCommand::Endpoint { connection, command } => {
            endpoint::run(&connect(&connection)?, command, connection.json).await
        }
        OperatorCommand::Token { connection, command } => {
            token::run(&connect(&connection)?, command, connection.json).await
        }
        OperatorCommand::Webhook { connection, command } => {
            webhook::run(&connect(&connection)?, command, connection.json).await
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
    let ca_file = connection.ca_cert.as_deref().map(CaFile::read).transpose()?;
    Api::new(&connection.url, token.trim(), ca_file.as_ref())
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

/// An id (`what`, e.g. "a token id") as one URL segment: never empty and never a path of its own,
/// so it cannot address another route.
fn parse_id(raw: &str, what: &str) -> Result<String, String> {
    if raw.is_empty() || raw == "." || raw == ".." || raw.contains('/') {
        return Err(format!("{raw:?} is not {what}"));
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

    /// The operator commands as the binary's parser sees them (flattened into its command list).
    #[derive(clap::Parser)]
    struct Operator {
        #[command(subcommand)]
        command: OperatorCommand,
    }

    fn parse(args: &[&str]) -> Result<OperatorCommand, clap::Error> {
        use clap::Parser;
        Operator::try_parse_from(std::iter::once("switchboard").chain(args.iter().copied())).map(|o| o.command)
    }

    #[test]
    fn the_operator_grammar_is_consistent() {
        use clap::CommandFactory;
        Operator::command().debug_assert();
    }

    #[test]
    fn cancellation_and_capacity_commands_parse() {
        let Ok(OperatorCommand::Queue { command: QueueCommand::Clear { scope, queue, yes }, .. }) =
            parse(&["queue", "clear", "endpoint:bot", "inbox", "--yes"])
        else {
            panic!("queue clear did not parse");
        };
        assert_eq!((scope.as_str(), queue.as_str(), yes), ("endpoint:bot", "inbox", true));
        assert!(matches!(
            parse(&["todo", "remove", "td_1"]),
            Ok(OperatorCommand::Todo { command: TodoCommand::Remove { yes: false, .. }, .. })
        ));
        // A negative capacity reaches the server, which answers with the valid range.
        assert!(matches!(
            parse(&["system", "queue-capacity", "set", "-1"]),
            Ok(OperatorCommand::System {
                command: SystemCommand::QueueCapacity { command: CapacityCommand::Set { max_pending: -1 } },
                ..
            })
        ));
        assert!(parse(&["queue", "clear", "bot", "inbox"]).is_err(), "SCOPE needs its kind");
        assert!(parse(&["system", "queue-capacity", "set", "ten"]).is_err());
        assert!(parse(&["system", "queue-capacity", "set"]).is_err());
    }

    #[test]
    fn credential_commands_parse() {
        let Ok(OperatorCommand::Token { command: token::TokenCommand::Create { label, expires_in_seconds }, .. }) =
            parse(&["token", "create", "--label", "ci", "--expires-in", "-5"])
        else {
            panic!("token create did not parse");
        };
        assert_eq!((label.as_deref(), expires_in_seconds), (Some("ci"), Some(-5)), "the server checks the range");
        assert!(matches!(
            parse(&["token", "revoke", "tk_1", "--json"]),
            Ok(OperatorCommand::Token {
                command: token::TokenCommand::Revoke { .. },
                connection: Connection { json: true, .. }
            })
        ));
        assert!(matches!(
            parse(&["endpoint", "rotate", "bot"]),
            Ok(OperatorCommand::Endpoint { command: endpoint::EndpointCommand::Rotate { .. }, .. })
        ));
        assert!(matches!(
            parse(&["webhook", "delete", "wh_1"]),
            Ok(OperatorCommand::Webhook { command: webhook::WebhookCommand::Delete { .. }, .. })
        ));
        assert!(parse(&["token", "revoke", ".."]).is_err(), "an id is one URL segment");
        assert!(parse(&["webhook", "rotate", "wh_1/x"]).is_err());
        assert!(parse(&["webhook", "rotate"]).is_err());
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
