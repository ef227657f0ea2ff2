//! The admission answers: a policy, its status and detail, its audit records, and the agents'
//! policy and cancellation verbs' answers (SPEC-0030 REQ-10, REQ-7).

use super::{Millis, StatusBody, scope_string};
use models::admission::{Policy, QueueStatus};
use models::identity::QueueIdentity;
use models::store::{AuditRecord, QueueAdmission};
use models::window::WindowSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An admission policy as the wire writes it (contract §3): the limits and the window, and
/// issue #52's additional windows when there are some.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyBody {
    pub max_in_flight: Option<i64>,
    pub max_claims_per_window: Option<i64>,
    pub window: Option<WindowSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub additional_windows: Vec<WindowLimitBody>,
}

/// One additional window of a policy and its limit (issue #52).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WindowLimitBody {
    #[schemars(range(min = 0, max = 1_000_000))]
    pub max_claims: i64,
    pub window: WindowSpec,
}

impl From<&Policy> for PolicyBody {
    fn from(policy: &Policy) -> PolicyBody {
        PolicyBody {
            max_in_flight: policy.max_in_flight,
            max_claims_per_window: policy.max_claims_per_window,
            window: policy.window,
            additional_windows: policy
                .additional_windows
                .iter()
                .map(|limit| WindowLimitBody { max_claims: limit.max_claims, window: limit.window })
                .collect(),
        }
    }
}

/// One policy the caller manages, with its status (REQ-10); a single policy's read adds its
/// `detail` (usage, recent windows, audit tail).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdmissionBody {
    pub scope: String,
    pub queue: String,
    /// None when the stored row cannot be evaluated (REQ-9; the status then says why).
    pub policy: Option<PolicyBody>,
    pub status: StatusBody,
    pub pending: i64,
    pub created_at: Millis,
    pub updated_at: Millis,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<PolicyDetailBody>,
}

impl From<&QueueAdmission> for AdmissionBody {
    fn from(admission: &QueueAdmission) -> AdmissionBody {
        AdmissionBody {
            scope: scope_string(&admission.identity),
            queue: admission.identity.queue.clone(),
            policy: admission.policy.as_ref().map(PolicyBody::from),
            status: StatusBody::from(&admission.status),
            pending: admission.pending,
            created_at: Millis(admission.created_at),
            updated_at: Millis(admission.updated_at),
            detail: None,
        }
    }
}

/// What a single policy's read adds: the current window's usage, the recent windows (newest
/// first) and the audit tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyDetailBody {
    pub usage: UsageBody,
    pub windows: Vec<WindowUsageBody>,
    pub audit: Vec<AuditBody>,
}

/// The current window's start and usage, both null without a window limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageBody {
    pub window_start: Option<Millis>,
    pub used: Option<i64>,
}

/// One window's usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowUsageBody {
    pub window_start: Millis,
    pub used: i64,
}

/// One audit record of a policy or a queue: who, when, and from what to what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditBody {
    pub actor_human_id: Option<String>,
    pub actor_endpoint_id: Option<String>,
    pub at: Millis,
    pub action: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

impl From<&AuditRecord> for AuditBody {
    fn from(record: &AuditRecord) -> AuditBody {
        AuditBody {
            actor_human_id: record.actor_human_id.clone(),
            actor_endpoint_id: record.actor_endpoint_id.clone(),
            at: Millis(record.at),
            action: record.action.clone(),
            before: record.before.clone(),
            after: record.after.clone(),
        }
    }
}

/// `{policies}`: every policy the caller manages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Policies {
    pub policies: Vec<AdmissionBody>,
}

/// `{records}`: a policy's audit records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditRecords {
    pub records: Vec<AuditBody>,
}

/// One queue of MCP's `admission_status`: its policy and status, or `admitted` with no policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueAdmissionEntry {
    pub queue: String,
    pub scope: String,
    pub policy: Option<PolicyBody>,
    #[serde(flatten)]
    pub admission: EntryAdmission,
}

/// A queue's admission in `admission_status`: a policy's status and pending count, or the bare
/// `admitted` of a queue without one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum EntryAdmission {
    Budgeted {
        pending: i64,
        #[serde(flatten)]
        status: Box<StatusBody>,
    },
    Unbudgeted {
        status: QueueStatus,
    },
}

impl QueueAdmissionEntry {
    pub fn of(identity: &QueueIdentity, admission: Option<&QueueAdmission>) -> QueueAdmissionEntry {
        QueueAdmissionEntry {
            queue: identity.queue.clone(),
            scope: scope_string(identity),
            policy: admission.and_then(|a| a.policy.as_ref()).map(PolicyBody::from),
            admission: match admission {
                Some(admission) => EntryAdmission::Budgeted {
                    pending: admission.pending,
                    status: Box::new(StatusBody::from(&admission.status)),
                },
                None => EntryAdmission::Unbudgeted { status: QueueStatus::Admitted },
            },
        }
    }
}

/// `{queues}`: MCP's `admission_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueAdmissions {
    pub queues: Vec<QueueAdmissionEntry>,
}

/// An agent's policy write (`set_admission_policy`): the queue, the policy saved, its status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicySaved {
    pub queue: String,
    pub policy: Option<PolicyBody>,
    pub status: StatusBody,
}

/// An agent's policy removal (`clear_admission_policy`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyCleared {
    pub queue: String,
    pub cleared: bool,
}

/// Pending todos removed from a queue by its owner (`discard_todo`, `clear_queue`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Removed {
    pub queue: String,
    pub removed: u64,
}
