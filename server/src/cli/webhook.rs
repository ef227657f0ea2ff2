//! `switchboard webhook list|rotate|delete` over `/api/v1/webhooks` (contract §3-§4, issue #14):
//! the webhooks the caller registered, which turn signed deliveries into todos.
//!
//! A webhook's signing secret is printed once, when it is rotated; `list` never shows it. The
//! server decides whose webhook is whose (another human's id is `not_found`), so this file only
//! shapes requests and draws answers.

use super::client::{Api, Failure};
use super::parse_id;
use super::render::{Table, emit, emit_done, text};
use clap::Subcommand;
use reqwest::Method;
use serde_json::Value;

/// `switchboard webhook …`: webhooks you registered (with `POST /api/v1/webhooks`).
#[derive(Subcommand)]
pub enum WebhookCommand {
    /// List your webhooks with the queues each delivers to (never their secrets).
    List,
    /// Give a webhook a new signing secret; prints it, this once only.
    #[command(long_about = "Give a webhook a new signing secret, printed this once only.\n\n\
        Deliveries signed with the old secret are still accepted for 24 hours (until the\n\
        previous_secret_expires_at it prints), then refused (401): give the new one to the sender\n\
        before then. Another human's webhook id is not_found, exactly like an unknown one.\n\n\
        Examples:\n  \
        switchboard webhook rotate wh_01J9Z8")]
    Rotate {
        /// The webhook's id, as `webhook list` shows it.
        #[arg(value_parser = parse_webhook_id)]
        id: String,
    },
    /// Delete a webhook: its ingest URL answers 404 from then on; todos it delivered stay.
    Delete {
        /// The webhook's id, as `webhook list` shows it.
        #[arg(value_parser = parse_webhook_id)]
        id: String,
    },
}

/// Runs one `webhook` command against the API.
pub async fn run(api: &Api, command: WebhookCommand, json: bool) -> Result<(), Failure> {
    match command {
        WebhookCommand::List => {
            let (raw, answer) = api.send_json(Method::GET, api.url(&["webhooks"], &[]), None).await?;
            let webhooks = answer.get("webhooks").and_then(Value::as_array).cloned().unwrap_or_default();
            emit(&if json { raw } else { webhooks_text(&webhooks) });
            Ok(())
        }
        WebhookCommand::Rotate { id } => {
            let (raw, answer) = api.send_json(Method::POST, api.url(&["webhooks", &id, "rotate"], &[]), None).await?;
            emit(&if json { raw } else { rotated_text(&id, &answer) });
            Ok(())
        }
        WebhookCommand::Delete { id } => {
            let raw = api.send(Method::DELETE, api.url(&["webhooks", &id], &[]), None).await?;
            emit_done(&raw, json, &format!("deleted webhook {id}"));
            Ok(())
        }
    }
}

/// `[{id, name, targets: [{scope, queue}]}]` as a table; targets as `SCOPE/QUEUE`, comma separated.
fn webhooks_text(webhooks: &[Value]) -> String {
    if webhooks.is_empty() {
        return "no webhooks".into();
    }
    let mut table = Table::new(&["ID", "NAME", "TARGETS"]);
    for webhook in webhooks {
        let targets: Vec<String> = webhook
            .get("targets")
            .and_then(Value::as_array)
            .map(|targets| {
                targets.iter().map(|t| format!("{}/{}", text(t.get("scope")), text(t.get("queue")))).collect()
            })
            .unwrap_or_default();
        table.row(vec![text(webhook.get("id")), text(webhook.get("name")), targets.join(", ")]);
    }
    table.render()
}

/// `{secret, previous_secret_expires_at}`: the new secret, then the warning that it is never
/// shown again and until when the old one still verifies.
fn rotated_text(id: &str, answer: &Value) -> String {
    format!(
        "rotated the signing secret of webhook {id}\nsecret: {}\n\
         The secret is shown this once only; deliveries signed with the old one are accepted until {}.",
        text(answer.get("secret")),
        text(answer.get("previous_secret_expires_at")),
    )
}

fn parse_webhook_id(raw: &str) -> Result<String, String> {
    parse_id(raw, "a webhook id")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn webhooks_list_their_targets_as_queue_identities() {
        let webhooks = [json!({"id": "wh_1", "name": "provider",
            "targets": [{"scope": "endpoint:bot", "queue": "inbox"}, {"scope": "team:ops", "queue": "triage"}]})];
        let shown = webhooks_text(&webhooks);
        assert_eq!(shown.lines().nth(1), Some("wh_1  provider  endpoint:bot/inbox, team:ops/triage"), "{shown}");
        assert_eq!(webhooks_text(&[]), "no webhooks");
    }

    #[test]
    fn a_rotated_secret_is_printed_with_its_warning() {
        let shown = rotated_text("wh_1", &json!({"secret": "whsec_x"}));
        assert!(shown.contains("secret: whsec_x") && shown.contains("shown this once only"), "{shown}");
    }
}
