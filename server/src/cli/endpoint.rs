//! `switchboard endpoint presence|clock-in|clock-out|shift|hook …` over
//! `/api/v1/endpoints/{ref}/presence|shift|hooks` (SPEC-0030 REQ-8 push; `docs/push.md`): whether
//! an endpoint is rung for new work now, its working hours, and the notify hooks that wake an
//! agent with no open stream. And `switchboard endpoint revoke|rotate` over
//! `/api/v1/endpoints/{ref}/revoke|rotate` (contract §3, issue #14): its MCP credential.
//!
//! A hook's signing secret is printed once, when the hook is added, and a rotated MCP credential
//! once, when it is issued; nothing can show either again.
//! The server validates every shift, duration and hook URL (the SSRF guard included), so this
//! file only shapes requests and draws answers.

use super::client::{Api, Failure};
use super::render::{Table, Viewer, emit, emit_done};
use crate::wire_types::{HookAdded, HookBody, HookTestBody, Hooks, Millis, PresenceBody, RotatedToken};
use clap::{ArgGroup, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

/// `switchboard endpoint …`: push settings of one endpoint (REF: its slug or id).
#[derive(Subcommand)]
pub enum EndpointCommand {
    /// Show whether REF is in (rung for new work) or out, why, until when, and its shift.
    Presence {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
    },
    /// Put REF in: it is rung for new work, for --for seconds or until its shift next turns.
    #[command(long_about = "Put an endpoint in: doorbells and hooks ring it for new work.\n\n\
        Lasts --for seconds (the server's default when left out), ending early at the next boundary\n\
        of the endpoint's shift, from where the shift decides again. Pending work gets one digest.\n\n\
        Examples:\n  \
        switchboard endpoint clock-in triage-bot\n  \
        switchboard endpoint clock-in triage-bot --for 3600")]
    ClockIn {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
        /// How long to stay in, in seconds (the server says which range it accepts).
        #[arg(long = "for", value_name = "SECONDS", allow_negative_numbers = true)]
        for_seconds: Option<i64>,
    },
    /// Put REF out: nothing rings it until its shift next turns (or until clock-in, with no shift).
    ClockOut {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
    },
    /// Set REF's working hours, e.g. "TZ=America/Los_Angeles Mon-Fri 09:00-17:00", or --clear them.
    #[command(long_about = "Set an endpoint's shift: the hours it is in without anyone clocking it in.\n\n\
        SHIFT is `TZ=<IANA zone> <days> <HH:MM>-<HH:MM>`; days are a comma list of Mon..Sun and\n\
        ranges such as Mon-Fri; an end before the start is an overnight shift. --clear removes the\n\
        shift, so the endpoint is in unless clocked out.\n\n\
        Examples:\n  \
        switchboard endpoint shift triage-bot \"TZ=America/Los_Angeles Mon-Fri 09:00-17:00\"\n  \
        switchboard endpoint shift triage-bot --clear")]
    #[command(group(ArgGroup::new("shift_or_clear").args(["shift", "clear"]).required(true)))]
    Shift {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
        /// `TZ=<zone> <days> <HH:MM>-<HH:MM>`.
        shift: Option<String>,
        /// Remove the shift.
        #[arg(long)]
        clear: bool,
    },
    /// Notify hooks: URLs called (Standard Webhooks signed) when work is waiting for REF.
    Hook {
        #[command(subcommand)]
        command: HookCommand,
    },
    /// Revoke REF's MCP credential (sbk_): its agent is refused (401); the endpoint and its work stay.
    #[command(long_about = "Revoke an endpoint's MCP credential (sbk_...).

        Its agent is refused (401) from then on and its open streams close; the endpoint, its
        queues and their todos stay. `switchboard endpoint rotate REF` issues a new credential and
        makes the endpoint live again.

        Examples:
          switchboard endpoint revoke triage-bot")]
    Revoke {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
    },
    /// Issue REF a new MCP credential (sbk_), printed this once only; the old one is refused at once.
    #[command(long_about = "Issue an endpoint a new MCP credential (sbk_...), printed this once only.

        The old credential is refused (401) at once and the endpoint's open streams close, so give
        the new one to its agent right away. A revoked endpoint is live again.

        Examples:
          switchboard endpoint rotate triage-bot
          switchboard endpoint rotate triage-bot --json")]
    Rotate {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
    },
}

#[derive(Subcommand)]
pub enum HookCommand {
    /// Add a hook; prints its signing secret, which is shown this once only.
    #[command(long_about = "Add a notify hook to an endpoint.\n\n\
        The server POSTs `{type: \"todo.ready\", reason, todo_id, queue, source, summary, endpoint,\n\
        attempt, created_at}` to URL when work is waiting, signed per Standard Webhooks with the\n\
        secret printed here (shown once only). Hooks respect presence unless --ignore-presence.\n\
        URLs that resolve to private or loopback addresses are refused unless the server runs with\n\
        SWITCHBOARD_HOOKS_ALLOW_PRIVATE=1.\n\n\
        Examples:\n  \
        switchboard endpoint hook add triage-bot https://hooks.example.com/wake\n  \
        switchboard endpoint hook add triage-bot https://hooks.example.com/wake --ignore-presence")]
    Add {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
        /// The URL to call. (Not named `url`: that id is the global --url of the server.)
        #[arg(value_name = "URL")]
        hook_url: String,
        /// Call the hook even while the endpoint is out.
        #[arg(long)]
        ignore_presence: bool,
    },
    /// List REF's hooks, with whether each is enabled and how many calls in a row failed.
    List {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
    },
    /// Call a hook once now with a signed test body; exits 1 unless it was delivered.
    Test {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
        /// The hook's id, as `hook list` shows it.
        hook_id: String,
    },
    /// Remove a hook.
    Remove {
        /// The endpoint's slug or id (ep_...).
        #[arg(value_parser = parse_reference)]
        reference: String,
        /// The hook's id, as `hook list` shows it.
        hook_id: String,
    },
}

/// Runs one `endpoint` command against the API.
pub async fn run(api: &Api, command: EndpointCommand, json: bool) -> Result<(), Failure> {
    match command {
        EndpointCommand::Presence { reference } => {
            let request = (Method::GET, presence_url(api, &reference), None);
            api.send_and_show(request, json, |answer| presence_text(&reference, &answer, Viewer::from_env())).await
        }
        EndpointCommand::ClockIn { reference, for_seconds } => {
            let mut body = json!({ "presence": "in" });
            if let (Some(seconds), Some(map)) = (for_seconds, body.as_object_mut()) {
                map.insert("for_seconds".into(), json!(seconds));
            }
            put_presence(api, &reference, &body, json).await
        }
        EndpointCommand::ClockOut { reference } => {
            put_presence(api, &reference, &json!({ "presence": "out" }), json).await
        }
        EndpointCommand::Shift { reference, shift, clear } => {
            // clap's group makes SHIFT and --clear exclusive and one of them required.
            debug_assert!(shift.is_some() != clear);
            let url = api.url(&["endpoints", &reference, "shift"], &[]);
            let body = json!({ "shift": shift });
            let request = (Method::PUT, url, Some(&body));
            api.send_and_show(request, json, |answer| presence_text(&reference, &answer, Viewer::from_env())).await
        }
        EndpointCommand::Hook { command } => hook(api, command, json).await,
        EndpointCommand::Revoke { reference } => {
            let url = api.url(&["endpoints", &reference, "revoke"], &[]);
            let raw = api.send(Method::POST, url, None).await?;
            emit_done(&raw, json, &format!("revoked the MCP credential of endpoint {reference}"));
            Ok(())
        }
        EndpointCommand::Rotate { reference } => {
            let url = api.url(&["endpoints", &reference, "rotate"], &[]);
            api.send_and_show((Method::POST, url, None), json, |answer| rotated_text(&reference, &answer)).await
        }
    }
}

async fn put_presence(api: &Api, reference: &str, body: &Value, json: bool) -> Result<(), Failure> {
    let request = (Method::PUT, presence_url(api, reference), Some(body));
    api.send_and_show(request, json, |answer| presence_text(reference, &answer, Viewer::from_env())).await
}

async fn hook(api: &Api, command: HookCommand, json: bool) -> Result<(), Failure> {
    match command {
        HookCommand::Add { reference, hook_url, ignore_presence } => {
            let body = json!({ "url": hook_url, "ignore_presence": ignore_presence });
            let request = (Method::POST, hooks_url(api, &reference, &[]), Some(&body));
            api.send_and_show(request, json, |answer| added_text(&answer)).await
        }
        HookCommand::List { reference } => {
            let request = (Method::GET, hooks_url(api, &reference, &[]), None);
            api.send_and_show(request, json, |answer: Hooks| hooks_text(&answer.hooks)).await
        }
        HookCommand::Test { reference, hook_id } => {
            let url = hooks_url(api, &reference, &[&hook_id, "test"]);
            let (raw, answer) = api.send_and_read(Method::POST, url, None).await?;
            let (delivered, line) = test_text(&answer);
            emit(if json { &raw } else { &line });
            if delivered { Ok(()) } else { Err(Failure::Trouble(format!("hook {hook_id} was not delivered"))) }
        }
        HookCommand::Remove { reference, hook_id } => {
            let raw = api.send(Method::DELETE, hooks_url(api, &reference, &[&hook_id]), None).await?;
            emit_done(&raw, json, &format!("removed hook {hook_id}"));
            Ok(())
        }
    }
}

fn presence_url(api: &Api, reference: &str) -> reqwest::Url {
    api.url(&["endpoints", reference, "presence"], &[])
}

/// `…/endpoints/{ref}/hooks[/<rest>…]`.
fn hooks_url(api: &Api, reference: &str, rest: &[&str]) -> reqwest::Url {
    let mut segments = vec!["endpoints", reference, "hooks"];
    segments.extend_from_slice(rest);
    api.url(&segments, &[])
}

/// The presence answer `{presence, source, until, shift, pending}` as a one-row table.
fn presence_text(reference: &str, answer: &PresenceBody, viewer: Viewer) -> String {
    let until = answer.until.map_or_else(|| "-".to_string(), |Millis(at)| viewer.format(at));
    let mut table = Table::new(&["ENDPOINT", "PRESENCE", "SOURCE", "UNTIL", "SHIFT", "PENDING"]);
    table.row(vec![
        reference.to_string(),
        answer.presence.clone(),
        answer.source.clone(),
        until,
        answer.shift.clone().unwrap_or_else(|| "-".into()),
        answer.pending.to_string(),
    ]);
    table.render()
}

/// `{hook, secret}`: the hook, then the secret with the warning that it is never shown again.
fn added_text(answer: &HookAdded) -> String {
    format!(
        "added hook {} -> {}\nsecret: {}\nThe secret is shown this once only: keep it to verify the webhook-signature header.",
        answer.hook.id, answer.hook.url, answer.secret,
    )
}

fn hooks_text(hooks: &[HookBody]) -> String {
    if hooks.is_empty() {
        return "no hooks".into();
    }
    let mut table = Table::new(&["ID", "URL", "ENABLED", "FAILURES", "IGNORE PRESENCE", "CREATED"]);
    for hook in hooks {
        let enabled = match (hook.enabled, &hook.disabled_reason) {
            (true, _) => "yes".to_string(),
            (false, Some(reason)) => format!("no ({reason})"),
            (false, None) => "no".to_string(),
        };
        let ignore = if hook.ignore_presence { "yes" } else { "no" };
        table.row(vec![
            hook.id.clone(),
            hook.url.clone(),
            enabled,
            hook.consecutive_failures.to_string(),
            ignore.to_string(),
            crate::wire::rfc3339(hook.created_at.0),
        ]);
    }
    table.render()
}

/// `{token}`: the new credential, then the warning that it is never shown again.
fn rotated_text(reference: &str, answer: &RotatedToken) -> String {
    format!(
        "rotated the MCP credential of endpoint {reference}\ntoken: {}\n\
         The token is shown this once only; the old one is refused from now on.",
        answer.token,
    )
}

/// `{outcome, status?|reason?}` as one line, and whether the call was delivered.
fn test_text(answer: &HookTestBody) -> (bool, String) {
    match answer {
        HookTestBody::Delivered { status } => (true, format!("delivered (HTTP {status})")),
        HookTestBody::Failed { reason } => (false, format!("failed: {reason}")),
        HookTestBody::Refused { reason } => (false, format!("refused: {reason}")),
    }
}

/// REF as a URL segment: a slug or an id, never empty and never a path of its own.
fn parse_reference(raw: &str) -> Result<String, String> {
    super::parse_id(raw, "an endpoint slug or id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presence_reads_as_one_row() {
        let answer = json!({"presence": "in", "source": "override", "until": "2026-03-10T17:00:00Z",
                            "shift": "TZ=UTC Mon-Fri 09:00-17:00", "pending": 2});
        let answer = serde_json::from_value(answer).expect("a presence answer");
        let table = presence_text("bot", &answer, Viewer::Named(chrono_tz::UTC));
        assert_eq!(
            table.lines().nth(1),
            Some("bot       in        override  2026-03-10 17:00 UTC  TZ=UTC Mon-Fri 09:00-17:00  2")
        );
    }

    #[test]
    fn a_test_call_is_delivered_only_when_the_server_says_so() {
        let read = |answer: Value| serde_json::from_value::<HookTestBody>(answer).expect("a test outcome");
        assert_eq!(
            test_text(&read(json!({"outcome": "delivered", "status": 204}))),
            (true, "delivered (HTTP 204)".into())
        );
        assert_eq!(
            test_text(&read(json!({"outcome": "refused", "reason": "private address"}))),
            (false, "refused: private address".into())
        );
    }

    #[test]
    fn hooks_show_why_they_are_disabled() {
        let hooks = [json!({"id": "hk_1", "url": "https://x.test/h", "enabled": false, "consecutive_failures": 10,
                            "disabled_reason": "10 failures", "ignore_presence": true, "created_at": "2026-01-01T00:00:00Z"})];
        let hooks = hooks.map(|hook| serde_json::from_value(hook).expect("a hook"));
        assert!(hooks_text(&hooks).contains("no (10 failures)"));
        assert_eq!(hooks_text(&[]), "no hooks");
    }

    /// The operator commands as the binary parses them, global --url included.
    #[derive(clap::Parser)]
    struct Operator {
        #[command(subcommand)]
        command: super::super::OperatorCommand,
    }

    #[test]
    fn a_hook_url_is_not_taken_for_the_server_url() {
        use clap::Parser;
        let args = ["switchboard", "endpoint", "hook", "add", "bot", "https://x.test/h", "--url", "http://sb:8080"];
        let Ok(Operator { command: super::super::OperatorCommand::Endpoint { connection, command } }) =
            Operator::try_parse_from(args)
        else {
            panic!("hook add did not parse");
        };
        assert_eq!(connection.url, "http://sb:8080");
        let EndpointCommand::Hook { command: HookCommand::Add { hook_url, ignore_presence: false, .. } } = command
        else {
            panic!("not hook add");
        };
        assert_eq!(hook_url, "https://x.test/h");
        let negative = ["switchboard", "endpoint", "clock-in", "bot", "--for", "-5"];
        assert!(Operator::try_parse_from(negative).is_ok(), "the server, not clap, says which range it accepts");
    }

    #[test]
    fn references_are_single_segments() {
        assert!(parse_reference("triage-bot").is_ok());
        assert!(parse_reference("a/b").is_err());
        assert!(parse_reference("..").is_err());
    }
}
