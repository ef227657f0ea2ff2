//! `switchboard webhook list|rotate|delete` over `/api/v1/webhooks` (contract §3-§4, issue #14):
//! the webhooks the caller registered, which turn signed deliveries into todos.
//!
//! A webhook's signing secret is printed once, when it is rotated; `list` never shows it. The
//! server decides whose webhook is whose (another human's id is `not_found`), so this file only
//! shapes requests and draws answers.

use super::client::{Api, Failure};
use super::parse_id;
use super::render::{Table, emit_done};
use crate::wire_types::{Millis, SecretRotated, WebhookBody, Webhooks};
use clap::Subcommand;
use reqwest::Method;

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
            let request = (Method::GET, api.url(&["webhooks"], &[]), None);
            api.send_and_show(request, json, |answer: Webhooks| webhooks_text(&answer.webhooks)).await
        }
        WebhookCommand::Rotate { id } => {
            let request = (Method::POST, api.url(&["webhooks", &id, "rotate"], &[]), None);
            api.send_and_show(request, json, |answer: SecretRotated| rotated_text(&id, &answer)).await
        }
        WebhookCommand::Delete { id } => {
            let raw = api.send(Method::DELETE, api.url(&["webhooks", &id], &[]), None).await?;
            emit_done(&raw, json, &format!("deleted webhook {id}"));
            Ok(())
        }
    }
}

/// `[{id, name, targets: [{scope, queue}]}]` as a table; targets as `SCOPE/QUEUE`, comma separated.
fn webhooks_text(webhooks: &[WebhookBody]) -> String {
    if webhooks.is_empty() {
        return "no webhooks".into();
    }
    let mut table = Table::new(&["ID", "NAME", "TARGETS"]);
    for webhook in webhooks {
        let targets: Vec<String> = webhook.targets.iter().map(|t| format!("{}/{}", t.scope, t.queue)).collect();
        table.row(vec![webhook.id.clone(), webhook.name.clone(), targets.join(", ")]);
    }
    table.render()
}

/// `{secret, previous_secret_expires_at}`: the new secret, then the warning that it is never
/// shown again and until when the old one still verifies.
fn rotated_text(id: &str, answer: &SecretRotated) -> String {
    let until = answer.previous_secret_expires_at.map_or("-".into(), |Millis(at)| crate::wire::rfc3339(at));
    format!(
        "rotated the signing secret of webhook {id}\nsecret: {}\n\
         The secret is shown this once only; deliveries signed with the old one are accepted until {until}.",
        answer.secret,
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
        let webhooks = [serde_json::from_value(json!({"id": "wh_1", "name": "provider",
            "targets": [{"scope": "endpoint:bot", "queue": "inbox"}, {"scope": "team:ops", "queue": "triage"}]}))
        .expect("a listed webhook")];
        let shown = webhooks_text(&webhooks);
        assert_eq!(shown.lines().nth(1), Some("wh_1  provider  endpoint:bot/inbox, team:ops/triage"), "{shown}");
        assert_eq!(webhooks_text(&[]), "no webhooks");
    }

    #[test]
    fn a_rotated_secret_is_printed_with_its_warning() {
        let rotated = SecretRotated { secret: "whsec_x".into(), previous_secret_expires_at: None };
        let shown = rotated_text("wh_1", &rotated);
        assert!(shown.contains("secret: whsec_x") && shown.contains("shown this once only"), "{shown}");
    }
}
