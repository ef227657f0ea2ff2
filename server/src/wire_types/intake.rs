//! Intake's answers: webhooks (listed, created, rotated), a delivery's answer, the queue
//! capacity, and an owner's clear and purge.

use super::{Millis, scope_string};
use models::capacity::Capacity;
use models::identity::QueueIdentity;
use models::store::{Ingested, WebhookSummary};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A queue a webhook fans out to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TargetBody {
    pub scope: String,
    pub queue: String,
}

impl From<&QueueIdentity> for TargetBody {
    fn from(target: &QueueIdentity) -> TargetBody {
        TargetBody { scope: scope_string(target), queue: target.queue.clone() }
    }
}

/// A webhook as its owner lists it: never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookBody {
    pub id: String,
    pub name: String,
    pub targets: Vec<TargetBody>,
}

impl From<&WebhookSummary> for WebhookBody {
    fn from(webhook: &WebhookSummary) -> WebhookBody {
        WebhookBody {
            id: webhook.id.clone(),
            name: webhook.name.clone(),
            targets: webhook.targets.iter().map(TargetBody::from).collect(),
        }
    }
}

/// `{webhooks}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Webhooks {
    pub webhooks: Vec<WebhookBody>,
}

/// A created webhook: where to deliver and the signing secret, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookCreated {
    pub id: String,
    pub name: String,
    pub ingest_url: String,
    pub secret: String,
    pub targets: Vec<TargetBody>,
}

/// A new signing secret, shown once, and when the replaced one stops verifying.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretRotated {
    pub secret: String,
    pub previous_secret_expires_at: Option<Millis>,
}

/// A delivery's answer: the todos it made (or made before, `deduped`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IngestedBody {
    pub todos: Vec<String>,
    pub deduped: bool,
}

impl From<&Ingested> for IngestedBody {
    fn from(ingested: &Ingested) -> IngestedBody {
        IngestedBody { todos: ingested.todo_ids.clone(), deduped: ingested.deduped }
    }
}

/// The install-wide pending cap per queue: what is set, and what is in force and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapacityBody {
    pub setting: CapacitySetting,
    pub effective: CapacityEffective,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapacitySetting {
    pub max_pending_per_queue: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapacityEffective {
    pub max_pending_per_queue: i64,
    pub source: String,
    pub locked: bool,
}

impl From<&Capacity> for CapacityBody {
    fn from(capacity: &Capacity) -> CapacityBody {
        CapacityBody {
            setting: CapacitySetting { max_pending_per_queue: capacity.setting },
            effective: CapacityEffective {
                max_pending_per_queue: capacity.effective,
                source: capacity.source.into(),
                locked: capacity.locked,
            },
        }
    }
}

/// An owner's clear of a queue's pending todos.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClearedBody {
    pub removed: u64,
}

/// An owner's purge of a queue: every todo, whatever its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PurgedBody {
    pub purged: u64,
}
