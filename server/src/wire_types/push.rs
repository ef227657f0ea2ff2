//! Push's answers: an endpoint's presence and its notify hooks.

use super::Millis;
use models::presence::Shift;
use models::push::NotifyHook;
use models::store::PresenceView;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{presence, source, until, shift, pending}` (SPEC-0022's `presence` answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PresenceBody {
    pub presence: String,
    pub source: String,
    pub until: Option<Millis>,
    pub shift: Option<String>,
    pub pending: i64,
}

impl From<&PresenceView> for PresenceBody {
    fn from(view: &PresenceView) -> PresenceBody {
        PresenceBody {
            presence: view.effective.presence.as_str().into(),
            source: view.effective.source.as_str().into(),
            until: view.effective.until.map(Millis),
            shift: view.shift.as_ref().map(Shift::to_string),
            pending: view.pending,
        }
    }
}

/// A notify hook of an endpoint: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookBody {
    pub id: String,
    pub url: String,
    pub ignore_presence: bool,
    pub enabled: bool,
    pub consecutive_failures: i32,
    pub disabled_reason: Option<String>,
    pub created_at: Millis,
}

impl From<&NotifyHook> for HookBody {
    fn from(hook: &NotifyHook) -> HookBody {
        HookBody {
            id: hook.id.clone(),
            url: hook.url.clone(),
            ignore_presence: hook.ignore_presence,
            enabled: hook.enabled,
            consecutive_failures: hook.consecutive_failures,
            disabled_reason: hook.disabled_reason.clone(),
            created_at: Millis(hook.created_at),
        }
    }
}

/// `{hooks}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Hooks {
    pub hooks: Vec<HookBody>,
}

/// A hook added: the hook and its signing secret, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookAdded {
    pub hook: HookBody,
    pub secret: String,
}

/// A test call's outcome: delivered (with the receiver's status), failed or refused (why).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum HookTestBody {
    Delivered { status: u16 },
    Failed { reason: String },
    Refused { reason: String },
}
