//! The wire's types: one `serde` type per surface concept the API and the MCP tools answer with
//! (a todo, a claim, an admission hint, status, headroom and deferred entry, a created todo, the
//! claim answers), written once and serialised as contract §3 names them.
//!
//! Exists so an answer's shape is a type, not a `json!` literal repeated per handler: the
//! operator API and MCP build the same struct for the same concept, and a client of this crate
//! (the CLI, the simulation) can read it back with the same type.

use chrono::{DateTime, Utc};
use models::admission::{AdmissionHint, AdmissionState, Headroom, PolicyStatus, QueueStatus, Reason};
use models::identity::{Owner, QueueIdentity};
use models::store::{Claimed, ClaimedMany, DeferredQueue};
use models::todo::{Created, CreatedByKind, Todo, TodoState};
use models::window::WindowSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

mod admission;
mod intake;
mod principals;
mod push;
pub mod requests;
mod text_schemas;

pub use admission::*;
pub use intake::*;
pub use principals::*;
pub use push::*;

/// An instant as the wire writes it: RFC 3339 in UTC, to the millisecond (`…T09:30:00.000Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Millis(pub DateTime<Utc>);

impl Serialize for Millis {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&crate::wire::rfc3339(self.0))
    }
}

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DateTime::parse_from_rfc3339(&text).map(|t| Millis(t.to_utc())).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Millis {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Instant".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "date-time" })
    }
}

fn millis(instant: Option<DateTime<Utc>>) -> Option<Millis> {
    instant.map(Millis)
}

/// `endpoint:<id>` or `team:<id>`: the scope half of a queue identity as the contract writes it.
pub fn scope_string(identity: &QueueIdentity) -> String {
    match &identity.owner {
        Owner::Endpoint(id) => format!("endpoint:{id}"),
        Owner::Team(id) => format!("team:{id}"),
    }
}

/// A todo as every surface shows it. A listing leaves `payload` and `result` out (its
/// `payload_size` says how big the payload is); a single todo carries both, null when unset. A
/// pending todo of a budgeted queue carries its `admission` hint in listings (REQ-6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TodoBody {
    pub id: String,
    pub scope: String,
    pub queue: String,
    pub title: String,
    pub state: TodoState,
    pub owner: Option<String>,
    pub attempt: i32,
    pub max_attempts: i32,
    pub lease_expires_at: Option<Millis>,
    pub next_retry_at: Option<Millis>,
    pub dead_letter: bool,
    pub idempotency_key: Option<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
    pub claimed_at: Option<Millis>,
    pub completed_at: Option<Millis>,
    pub created_by_kind: CreatedByKind,
    pub created_by_id: Option<String>,
    pub payload_size: i64,
    /// `Some(Value::Null)` is a todo without a payload; None leaves the field out (a listing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<HintBody>,
}

/// Whether a todo's answer carries its payload and result (a single todo) or not (a listing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    Full,
    Listed,
}

impl TodoBody {
    pub fn of(todo: &Todo, detail: Detail) -> TodoBody {
        let full = |value: &Option<Value>| (detail == Detail::Full).then(|| value.clone().unwrap_or(Value::Null));
        TodoBody {
            id: todo.id.clone(),
            scope: scope_string(&todo.identity),
            queue: todo.identity.queue.clone(),
            title: todo.title.clone(),
            state: todo.state,
            owner: todo.owner.clone(),
            attempt: todo.attempt,
            max_attempts: todo.max_attempts,
            lease_expires_at: millis(todo.lease_expires_at),
            next_retry_at: millis(todo.next_retry_at),
            dead_letter: todo.dead_letter(),
            idempotency_key: todo.idempotency_key.clone(),
            created_at: Millis(todo.created_at),
            updated_at: Millis(todo.updated_at),
            claimed_at: millis(todo.claimed_at),
            completed_at: millis(todo.completed_at),
            created_by_kind: todo.created_by_kind,
            created_by_id: todo.created_by_id.clone(),
            payload_size: todo.payload_size_bytes,
            payload: full(&todo.payload),
            result: full(&todo.result),
            admission: None,
        }
    }
}

/// The status a pending todo of a budgeted queue carries (REQ-6): `{state}` when admitted,
/// `{state, reason, next_eligible_at, exact}` when deferred.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HintBody {
    pub state: AdmissionState,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<DeferredHint>,
}

/// Why and until when a deferred todo waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeferredHint {
    pub reason: Reason,
    pub next_eligible_at: Option<Millis>,
    pub exact: Option<bool>,
}

impl From<&AdmissionHint> for HintBody {
    fn from(hint: &AdmissionHint) -> HintBody {
        HintBody {
            state: hint.state(),
            deferred: hint.reason.map(|reason| DeferredHint {
                reason,
                next_eligible_at: millis(hint.next_eligible_at),
                exact: hint.exact,
            }),
        }
    }
}

/// The policy status object of contract §3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusBody {
    pub status: QueueStatus,
    pub max_in_flight: Option<i64>,
    pub in_flight: Option<i64>,
    pub max_claims_per_window: Option<i64>,
    pub used: Option<i64>,
    pub remaining: Option<i64>,
    pub window_start: Option<Millis>,
    pub window_resets_at: Option<Millis>,
    pub next_eligible_at: Option<Millis>,
    pub exact: Option<bool>,
    /// Issue #52: for `window_exhausted`, the window that defers the queue longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowSpec>,
    /// Issue #52: every window with its usage, the primary first; empty without a window limit.
    #[serde(default)]
    pub windows: Vec<WindowStatusBody>,
    /// Issue #52: when the first window to run out would, at the rate of the last 15 minutes;
    /// null when it resets first, nothing was claimed lately, or nothing is left.
    #[serde(default)]
    pub forecast_exhausted_at: Option<Millis>,
    /// Issue #52: for `shared_budget_exhausted`, the budget that defers the queue longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_budget: Option<String>,
    /// Issue #52: each shared budget the queue draws from, in name order; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_budgets: Vec<SharedBudgetStatusBody>,
}

/// One shared budget of a status's `shared_budgets` (issue #52).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SharedBudgetStatusBody {
    pub name: String,
    pub window: WindowSpec,
    pub max_claims: i64,
    pub used: i64,
    pub remaining: i64,
    pub window_start: Millis,
    pub window_resets_at: Millis,
}

/// One window of a status's `windows` (issue #52).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowStatusBody {
    pub window: WindowSpec,
    pub max_claims: i64,
    pub used: i64,
    pub remaining: i64,
    pub window_start: Millis,
    pub window_resets_at: Millis,
}

impl From<&PolicyStatus> for StatusBody {
    fn from(status: &PolicyStatus) -> StatusBody {
        StatusBody {
            status: status.status,
            max_in_flight: status.max_in_flight,
            in_flight: status.in_flight,
            max_claims_per_window: status.max_claims_per_window,
            used: status.used,
            remaining: status.remaining,
            window_start: millis(status.window_start),
            window_resets_at: millis(status.window_resets_at),
            next_eligible_at: millis(status.hint.next_eligible_at),
            exact: status.hint.exact,
            window: status.hint.window,
            windows: status
                .windows
                .iter()
                .map(|w| WindowStatusBody {
                    window: w.window,
                    max_claims: w.max_claims,
                    used: w.used,
                    remaining: w.remaining,
                    window_start: Millis(w.window_start),
                    window_resets_at: Millis(w.window_resets_at),
                })
                .collect(),
            forecast_exhausted_at: millis(status.forecast_exhausted_at),
            shared_budget: status.hint.shared_budget.map(|name| name.to_string()),
            shared_budgets: status
                .shared_budgets
                .iter()
                .map(|b| SharedBudgetStatusBody {
                    name: b.name.clone(),
                    window: b.window,
                    max_claims: b.max_claims,
                    used: b.used,
                    remaining: b.remaining,
                    window_start: Millis(b.window_start),
                    window_resets_at: Millis(b.window_resets_at),
                })
                .collect(),
        }
    }
}

/// Headroom on a successful budgeted claim (REQ-7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HeadroomBody {
    pub max_in_flight: Option<i64>,
    pub in_flight: i64,
    pub max_claims_per_window: Option<i64>,
    pub used: Option<i64>,
    pub remaining: Option<i64>,
    pub window_resets_at: Option<Millis>,
}

impl From<&Headroom> for HeadroomBody {
    fn from(headroom: &Headroom) -> HeadroomBody {
        HeadroomBody {
            max_in_flight: headroom.max_in_flight,
            in_flight: headroom.in_flight,
            max_claims_per_window: headroom.max_claims_per_window,
            used: headroom.used,
            remaining: headroom.remaining,
            window_resets_at: millis(headroom.window_resets_at),
        }
    }
}

/// One entry of an empty `claim_next`'s `deferred` list (REQ-7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeferredBody {
    pub queue: String,
    pub scope: String,
    pub reason: Reason,
    pub pending: i64,
    pub next_eligible_at: Option<Millis>,
    pub exact: Option<bool>,
    /// Issue #52: for `window_exhausted`, the window that defers the queue longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowSpec>,
    /// Issue #52: for `shared_budget_exhausted`, the budget that defers the queue longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_budget: Option<String>,
}

impl From<&DeferredQueue> for DeferredBody {
    fn from(deferred: &DeferredQueue) -> DeferredBody {
        DeferredBody {
            queue: deferred.identity.queue.clone(),
            scope: scope_string(&deferred.identity),
            reason: deferred.reason,
            pending: deferred.pending,
            next_eligible_at: millis(deferred.next_eligible_at),
            exact: deferred.exact,
            window: deferred.window,
            shared_budget: deferred.shared_budget.map(|name| name.to_string()),
        }
    }
}

/// A claim's answer: the todo, and the headroom when the queue has a policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimedBody {
    pub todo: TodoBody,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<HeadroomBody>,
}

impl From<&Claimed> for ClaimedBody {
    fn from(claimed: &Claimed) -> ClaimedBody {
        ClaimedBody {
            todo: TodoBody::of(&claimed.todo, Detail::Full),
            admission: claimed.admission.as_ref().map(HeadroomBody::from),
        }
    }
}

/// A create's answer: the todo made, or the live one holding the idempotency key (`deduped`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CreatedBody {
    pub todo: TodoBody,
    pub deduped: bool,
}

impl From<&Created> for CreatedBody {
    fn from(created: &Created) -> CreatedBody {
        CreatedBody { todo: TodoBody::of(&created.todo, Detail::Full), deduped: created.deduped }
    }
}

/// `{todo}`: one todo, in full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OneTodo {
    pub todo: TodoBody,
}

impl OneTodo {
    pub fn of(todo: &Todo) -> OneTodo {
        OneTodo { todo: TodoBody::of(todo, Detail::Full) }
    }
}

/// `{todos}`: a listing, or the answers of a batch, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "Todos_{T}")]
pub struct Todos<T> {
    pub todos: Vec<T>,
}

/// `claim_next`'s answer over MCP: one claim (`empty: false`), several (`todos`, with `max`
/// over 1), or none (`empty: true`, with the deferred list when a granted queue holds pending
/// work it cannot admit now; a bare `empty: true` means no pending work at all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ClaimNextBody {
    One {
        #[serde(flatten)]
        claimed: Box<ClaimedBody>,
        empty: bool,
    },
    Many {
        todos: Vec<ClaimedBody>,
        empty: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        deferred: Vec<DeferredBody>,
    },
    Empty {
        empty: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        deferred: Vec<DeferredBody>,
    },
}

impl ClaimNextBody {
    pub fn one(claimed: &Claimed) -> ClaimNextBody {
        ClaimNextBody::One { claimed: Box::new(ClaimedBody::from(claimed)), empty: false }
    }

    pub fn empty(deferred: &[DeferredQueue]) -> ClaimNextBody {
        ClaimNextBody::Empty { empty: true, deferred: deferred.iter().map(DeferredBody::from).collect() }
    }

    /// `claim_next {max > 1}`: the claims in turn, or the empty answer when none was made.
    pub fn many(many: &ClaimedMany) -> ClaimNextBody {
        if many.claimed.is_empty() {
            return ClaimNextBody::empty(&many.deferred);
        }
        ClaimNextBody::Many {
            todos: many.claimed.iter().map(ClaimedBody::from).collect(),
            empty: false,
            deferred: many.deferred.iter().map(DeferredBody::from).collect(),
        }
    }
}

/// `POST /api/v1/todos`'s answer: one create's, or a batch's, in order.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum TodoPushAnswer {
    One(Box<CreatedBody>),
    Batch(Todos<CreatedBody>),
}

/// `complete`'s answer over MCP: the todo, or with `ids` the todos completed together.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Completed {
    One(Box<TodoBody>),
    Many(Todos<TodoBody>),
}

/// A single todo's answer on the API: a claim's (with its headroom), or the todo.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum TodoAnswer {
    Claimed(ClaimedBody),
    Todo(OneTodo),
}

/// The error envelope of contract §3: `{error, code, ...extras}` (`field` names a refused
/// member, `state` a todo's state, and so on).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorBody<'a> {
    pub error: &'a str,
    #[schemars(schema_with = "error_codes")]
    pub code: &'static str,
    #[serde(flatten)]
    pub extras: &'a serde_json::Map<String, Value>,
}

impl<'a> From<&'a models::error::Error> for ErrorBody<'a> {
    fn from(error: &'a models::error::Error) -> ErrorBody<'a> {
        ErrorBody { error: &error.message, code: error.code.as_str(), extras: &error.extras }
    }
}

/// A refused MCP tool call's `structuredContent`: the error envelope with `error` named
/// `message` (contract §4).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ToolErrorBody<'a> {
    pub message: &'a str,
    #[schemars(schema_with = "error_codes")]
    pub code: &'static str,
    #[serde(flatten)]
    pub extras: &'a serde_json::Map<String, Value>,
}

impl<'a> From<&'a models::error::Error> for ToolErrorBody<'a> {
    fn from(error: &'a models::error::Error) -> ToolErrorBody<'a> {
        ToolErrorBody { message: &error.message, code: error.code.as_str(), extras: &error.extras }
    }
}

fn error_codes(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let codes: Vec<&str> = models::error::Code::ALL.iter().map(|code| code.as_str()).collect();
    schemars::json_schema!({ "enum": codes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_instant_is_written_to_the_millisecond_in_utc_and_read_back() {
        let at = DateTime::parse_from_rfc3339("2026-11-01T01:30:00.5-07:00").expect("instant").to_utc();
        let written = serde_json::to_value(Millis(at)).expect("serialise");
        assert_eq!(written, json!("2026-11-01T08:30:00.500Z"));
        assert_eq!(serde_json::from_value::<Millis>(written).expect("deserialise"), Millis(at));
    }

    #[test]
    fn a_hint_says_only_its_state_when_admitted_and_why_and_when_when_deferred() {
        assert_eq!(
            serde_json::to_value(HintBody::from(&AdmissionHint::ADMITTED)).expect("json"),
            json!({"state": "admitted"})
        );
        let at = DateTime::parse_from_rfc3339("2026-11-02T09:30:00Z").expect("instant").to_utc();
        let deferred = AdmissionHint {
            reason: Some(Reason::WindowExhausted),
            next_eligible_at: Some(at),
            exact: Some(true),
            window: None,
            shared_budget: None,
        };
        let written = serde_json::to_value(HintBody::from(&deferred)).expect("json");
        assert_eq!(
            written,
            json!({"state": "deferred", "reason": "window_exhausted", "next_eligible_at": "2026-11-02T09:30:00.000Z", "exact": true})
        );
        assert_eq!(serde_json::from_value::<HintBody>(written).expect("read back"), HintBody::from(&deferred));
    }

    #[test]
    fn the_empty_claim_answer_lists_deferred_queues_only_when_there_are_some() {
        assert_eq!(serde_json::to_value(ClaimNextBody::empty(&[])).expect("json"), json!({"empty": true}));
        let identity = QueueIdentity { owner: Owner::Team("tm_1".into()), queue: "inbox".into() };
        let deferred = DeferredQueue {
            identity,
            reason: Reason::Paused,
            pending: 2,
            next_eligible_at: None,
            exact: None,
            window: None,
            shared_budget: None,
        };
        assert_eq!(
            serde_json::to_value(ClaimNextBody::empty(std::slice::from_ref(&deferred))).expect("json"),
            json!({"empty": true, "deferred": [{"queue": "inbox", "scope": "team:tm_1", "reason": "paused",
                "pending": 2, "next_eligible_at": null, "exact": null}]})
        );
        // Issue #52: a queue deferred by a shared budget names it.
        let by_budget = DeferredQueue {
            reason: Reason::SharedBudgetExhausted,
            shared_budget: models::shared_budget::BudgetName::new("openai-key"),
            ..deferred
        };
        let written = serde_json::to_value(ClaimNextBody::empty(&[by_budget])).expect("json");
        assert_eq!(written["deferred"][0]["reason"], "shared_budget_exhausted");
        assert_eq!(written["deferred"][0]["shared_budget"], "openai-key");
    }
}
