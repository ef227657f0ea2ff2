//! `switchboard token create|list|revoke` over `/api/v1/tokens` (contract §3, issue #14): the
//! caller's own operator API tokens (`sbh_`).
//!
//! A token's secret is printed once, when it is created; the server stores only its digest, so
//! nothing can show it again, and `list` shows ids, labels and expiry only. The server decides
//! which tokens are the caller's (another human's id is `not_found`) and which lifetimes it
//! accepts, so this file only shapes requests and draws answers.

use super::client::{Api, Failure};
use super::parse_id;
use super::render::{Table, Viewer, emit_done};
use crate::wire_types::{Millis, MintedToken, TokenBody, Tokens};
use clap::Subcommand;
use reqwest::Method;
use serde_json::{Map, Value, json};

/// `switchboard token …`: the operator tokens of the human whose token SWITCHBOARD_TOKEN holds.
#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create another operator token for yourself; prints it, this once only.
    #[command(long_about = "Create another operator API token (sbh_...) for yourself.\n\n\
        The token is printed this once only: the server keeps only its digest. It acts as you on\n\
        every operator route until it is revoked (`switchboard token revoke ID`) or, with\n\
        --expires-in, until it expires.\n\n\
        Examples:\n  \
        switchboard token create --label ci\n  \
        switchboard token create --label laptop --expires-in 86400")]
    Create {
        /// A name to tell the token apart in `token list` (at most 100 characters).
        #[arg(long, value_name = "LABEL")]
        label: Option<String>,
        /// Expire the token this many seconds from now (the server accepts 1 to one year).
        #[arg(long = "expires-in", value_name = "SECONDS", allow_negative_numbers = true)]
        expires_in_seconds: Option<i64>,
    },
    /// List your operator tokens (ids, labels, when created and when they expire; never secrets).
    List,
    /// Revoke one of your operator tokens: it is refused (401) from then on.
    #[command(long_about = "Revoke one of your operator tokens by its id, as `token list` shows it.\n\n\
        Every request bearing the token is refused (401 unauthenticated) from then on. Revoking the\n\
        token in SWITCHBOARD_TOKEN itself signs this shell out. Another human's token id is\n\
        not_found, exactly like an unknown one.\n\n\
        Examples:\n  \
        switchboard token revoke tk_01J9Z8")]
    Revoke {
        /// The token's id, as `token list` shows it (not the secret).
        #[arg(value_parser = parse_token_id)]
        id: String,
    },
}

/// Runs one `token` command against the API.
pub async fn run(api: &Api, command: TokenCommand, json: bool) -> Result<(), Failure> {
    match command {
        TokenCommand::Create { label, expires_in_seconds } => {
            let body = create_body(label, expires_in_seconds);
            let request = (Method::POST, api.url(&["tokens"], &[]), Some(&body));
            api.send_and_show(request, json, |answer: MintedToken| created_text(&answer, expires_in_seconds)).await
        }
        TokenCommand::List => {
            let request = (Method::GET, api.url(&["tokens"], &[]), None);
            api.send_and_show(request, json, |answer: Tokens| tokens_text(&answer.tokens, Viewer::from_env())).await
        }
        TokenCommand::Revoke { id } => {
            let raw = api.send(Method::DELETE, api.url(&["tokens", &id], &[]), None).await?;
            emit_done(&raw, json, &format!("revoked token {id}"));
            Ok(())
        }
    }
}

/// `{label?, expires_in_seconds?}`: only what the user named, so the server's defaults apply.
fn create_body(label: Option<String>, expires_in_seconds: Option<i64>) -> Value {
    let mut body = Map::new();
    if let Some(label) = label {
        body.insert("label".into(), json!(label));
    }
    if let Some(seconds) = expires_in_seconds {
        body.insert("expires_in_seconds".into(), json!(seconds));
    }
    Value::Object(body)
}

/// `{token, label}`: the secret, then the warning that it is never shown again.
fn created_text(answer: &MintedToken, expires_in_seconds: Option<i64>) -> String {
    let expiry = expires_in_seconds.map_or_else(|| "never expires".to_string(), |s| format!("expires in {s} s"));
    format!(
        "created operator token (label: {}; {expiry})\ntoken: {}\n\
         The token is shown this once only: keep it secret. `switchboard token list` shows its id for revoking.",
        answer.label.as_deref().unwrap_or("-"),
        answer.token,
    )
}

/// `[{id, label, created_at, expires_at}]` as a table, instants in the viewer's zone. (No store
/// records a token's last use, so there is no column for it.)
fn tokens_text(tokens: &[TokenBody], viewer: Viewer) -> String {
    if tokens.is_empty() {
        return "no tokens".into();
    }
    let mut table = Table::new(&["ID", "LABEL", "CREATED", "EXPIRES"]);
    for token in tokens {
        table.row(vec![
            token.id.clone(),
            token.label.clone().unwrap_or_else(|| "-".into()),
            viewer.format(token.created_at.0),
            token.expires_at.map_or_else(|| "never".into(), |Millis(at)| viewer.format(at)),
        ]);
    }
    table.render()
}

fn parse_token_id(raw: &str) -> Result<String, String> {
    parse_id(raw, "a token id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_named_options_are_sent() {
        assert_eq!(create_body(None, None), json!({}));
        assert_eq!(create_body(Some("ci".into()), Some(60)), json!({"label": "ci", "expires_in_seconds": 60}));
    }

    #[test]
    fn tokens_show_expiry_in_the_viewers_zone_and_never_without_one() {
        let tokens = [
            json!({"id": "tk_1", "label": "ci", "created_at": "2026-03-10T07:00:00Z", "expires_at": "2026-03-11T07:00:00Z"}),
            json!({"id": "tk_2", "label": null, "created_at": "2026-03-10T07:00:00Z", "expires_at": null}),
        ];
        let tokens = tokens.map(|token| serde_json::from_value(token).expect("a token"));
        let shown = tokens_text(&tokens, Viewer::Named(chrono_tz::UTC));
        let rows: Vec<&str> = shown.lines().collect();
        assert!(rows[1].starts_with("tk_1") && rows[1].contains("2026-03-11 07:00 UTC"), "{shown}");
        assert!(rows[2].starts_with("tk_2") && rows[2].contains("never"), "{shown}");
        assert_eq!(tokens_text(&[], Viewer::System), "no tokens");
    }

    #[test]
    fn the_secret_is_printed_with_its_warning() {
        let answer = MintedToken { token: "sbh_x".into(), label: Some("ci".into()), human_id: "hu_1".into() };
        let shown = created_text(&answer, Some(60));
        assert!(shown.contains("token: sbh_x") && shown.contains("expires in 60 s"), "{shown}");
        assert!(shown.contains("shown this once only"), "{shown}");
    }
}
