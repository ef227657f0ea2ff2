//! Webhooks (contract §4): registration by their owner, and ingest, which turns one delivery into
//! one todo per target queue identity, once per delivery id.

use crate::error::Result;
use crate::identity::QueueIdentity;
use crate::todo::NewTodo;
use chrono::{DateTime, Utc};
use std::future::Future;

/// What verifying and routing a webhook delivery needs.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookRoute {
    pub name: String,
    pub secret: String,
    /// The secret the last rotation replaced, only while its grace runs (issue #14): a delivery
    /// the current secret does not verify is tried with it.
    pub previous_secret: Option<PreviousSecret>,
    pub targets: Vec<QueueIdentity>,
}

/// A replaced webhook secret that still verifies deliveries until `expires_at` (issue #14).
#[derive(Debug, Clone, PartialEq)]
pub struct PreviousSecret {
    pub secret: String,
    pub expires_at: DateTime<Utc>,
}

impl PreviousSecret {
    /// When a secret replaced at `rotated_at` stops verifying.
    pub fn grace_end(rotated_at: DateTime<Utc>) -> DateTime<Utc> {
        rotated_at + chrono::Duration::seconds(crate::limits::WEBHOOK_SECRET_GRACE_SECONDS)
    }

    /// The stored previous secret as ingest may use it at `now`: offered strictly before its
    /// expiry, never from the expiry on. Both stores apply this one rule to what they hold.
    pub fn offered_at(
        secret: Option<String>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<PreviousSecret> {
        match (secret, expires_at) {
            (Some(secret), Some(expires_at)) if now < expires_at => Some(PreviousSecret { secret, expires_at }),
            _ => None,
        }
    }
}

/// A webhook as its owner lists it: never the secret.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSummary {
    pub id: String,
    pub name: String,
    pub targets: Vec<QueueIdentity>,
}

/// The answer to one delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Ingested {
    pub todo_ids: Vec<String>,
    pub deduped: bool,
}

/// The webhooks role: a human's webhooks (create, list, delete, rotate the secret), the system
/// read that verifies a delivery, and the ingest transaction.
pub trait Webhooks: Send + Sync {
    /// Registers a webhook owned by a human, fanning out to `targets` (already authorised).
    fn create_webhook(
        &self,
        owner_human_id: &str,
        name: &str,
        secret: &str,
        targets: &[QueueIdentity],
    ) -> impl Future<Output = Result<String>> + Send;
    /// The webhooks a human owns, oldest first.
    fn list_webhooks(&self, owner_human_id: &str) -> impl Future<Output = Result<Vec<WebhookSummary>>> + Send;
    /// Deletes one of the human's webhooks with its delivery records; anything else `not_found`.
    fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Replaces one of the human's webhooks' signing secret; anything else `not_found`.
    fn rotate_webhook_secret(
        &self,
        owner_human_id: &str,
        webhook_id: &str,
        secret: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// A webhook's signing secret, name and targets, for verifying a delivery: a system read
    /// keyed by the webhook id in the ingest URL.
    fn webhook_for_ingest_unscoped(
        &self,
        webhook_id: &str,
    ) -> impl Future<Output = Result<Option<WebhookRoute>>> + Send;
    /// One delivery, one transaction: records the delivery id and creates one todo per target;
    /// a delivery id seen before creates nothing and answers the todos it created (deduped).
    fn ingest(
        &self,
        webhook_id: &str,
        delivery_id: &str,
        todos: Vec<NewTodo>,
    ) -> impl Future<Output = Result<Ingested>> + Send;
}
