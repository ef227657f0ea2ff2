//! The todo and its lifecycle rules (base-system §2, SPEC-0003): states, leases, attempts, the
//! retry backoff. Pure data and pure functions, shared by `PgStore` and the reference model.

use crate::error::{Error, Result};
use crate::identity::QueueIdentity;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Lease granted when a claim names none (base-system §2).
pub const LEASE_DEFAULT_SECONDS: i64 = 300;
/// Longest lease a single claim or heartbeat may ask for.
pub const LEASE_MAX_SECONDS: i64 = 86_400;
/// Attempts before a failing todo is dead-lettered, unless the creator says otherwise.
pub const MAX_ATTEMPTS_DEFAULT: i32 = 5;
/// Upper bound a creator may set for `max_attempts`.
pub const MAX_ATTEMPTS_LIMIT: i32 = 100;
/// First retry delay; it doubles per attempt up to `RETRY_BACKOFF_CAP_SECONDS`.
pub const RETRY_BACKOFF_BASE_SECONDS: i64 = 30;
pub const RETRY_BACKOFF_CAP_SECONDS: i64 = 15 * 60;
/// Longest title accepted on creation.
pub const TITLE_LENGTH_MAX: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoState {
    Pending,
    Claimed,
    Done,
    Failed,
    /// Removed by its owner while pending (terminal; keeps its dedup slot).
    Discarded,
}

impl TodoState {
    pub fn as_str(self) -> &'static str {
        match self {
            TodoState::Pending => "pending",
            TodoState::Claimed => "claimed",
            TodoState::Done => "done",
            TodoState::Failed => "failed",
            TodoState::Discarded => "discarded",
        }
    }

    pub fn parse(field: &str, raw: &str) -> Result<TodoState> {
        match raw {
            "pending" => Ok(TodoState::Pending),
            "claimed" => Ok(TodoState::Claimed),
            "done" => Ok(TodoState::Done),
            "failed" => Ok(TodoState::Failed),
            "discarded" => Ok(TodoState::Discarded),
            _ => Err(Error::invalid(field, format!("{field} must be pending, claimed, done, failed or discarded"))),
        }
    }
}

/// Who created a todo: immutable provenance (intake-capacity.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CreatedByKind {
    Human,
    Agent,
    Workflow,
    Ingest,
    System,
}

impl CreatedByKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CreatedByKind::Human => "human",
            CreatedByKind::Agent => "agent",
            CreatedByKind::Workflow => "workflow",
            CreatedByKind::Ingest => "ingest",
            CreatedByKind::System => "system",
        }
    }

    pub fn parse(raw: &str) -> Option<CreatedByKind> {
        Some(match raw {
            "human" => CreatedByKind::Human,
            "agent" => CreatedByKind::Agent,
            "workflow" => CreatedByKind::Workflow,
            "ingest" => CreatedByKind::Ingest,
            "system" => CreatedByKind::System,
            _ => return None,
        })
    }
}

/// A todo as every surface reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Todo {
    pub id: String,
    pub identity: QueueIdentity,
    pub title: String,
    pub payload: Option<Value>,
    pub idempotency_key: Option<String>,
    pub state: TodoState,
    /// The claimant's label while claimed (kept after a failure, as the base queue does).
    pub owner: Option<String>,
    pub claimed_by_endpoint_id: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub attempt: i32,
    pub max_attempts: i32,
    pub result: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub next_retry_at: Option<DateTime<Utc>>,
    pub created_by_kind: CreatedByKind,
    pub created_by_id: Option<String>,
    /// The payload's size as compact JSON text, in bytes (0 without a payload): what a listing
    /// shows in place of the payload. PgStore computes it in SQL when the todo is stored.
    pub payload_size_bytes: i64,
}

/// The size in bytes of `payload` written as compact JSON (no whitespace), 0 for none: the value
/// the `todos.payload_bytes` column computes in SQL (migration 0014) from the stored document.
pub fn payload_size_bytes(payload: Option<&Value>) -> i64 {
    payload.map_or(0, |document| i64::try_from(document.to_string().len()).unwrap_or(i64::MAX))
}

impl Todo {
    /// The todo as a listing returns it: without its payload and result, which only a read of
    /// the one todo carries (`payload_size_bytes` stays).
    pub fn listed(self) -> Todo {
        Todo { payload: None, result: None, ..self }
    }

    /// "Dead letter" is `failed` with no retry scheduled (base-system §2).
    pub fn dead_letter(&self) -> bool {
        self.state == TodoState::Failed && self.next_retry_at.is_none()
    }

    /// The claimable predicate shared by `claim`, `claim_next` and the owner's claim: pending; or
    /// claimed with a lapsed lease and attempts left (takeover); or a failed todo whose retry is due.
    pub fn claimable_at(&self, now: DateTime<Utc>) -> bool {
        match self.state {
            TodoState::Pending => true,
            TodoState::Claimed => {
                self.lease_expires_at.is_some_and(|lease| lease < now) && self.attempt < self.max_attempts
            }
            TodoState::Failed => self.next_retry_at.is_some_and(|due| due <= now) && self.attempt < self.max_attempts,
            TodoState::Done | TodoState::Discarded => false,
        }
    }

    /// Whether claiming this todo now would take over a lapsed lease.
    pub fn is_takeover_at(&self, now: DateTime<Utc>) -> bool {
        self.state == TodoState::Claimed && self.lease_expires_at.is_some_and(|lease| lease < now)
    }

    /// Whether this todo occupies its idempotency key's slot (the partial unique index on live
    /// keys): it has a key, and is neither done nor dead-lettered. Discarded todos keep theirs
    /// (intake-capacity.md).
    pub fn holds_dedup_slot(&self) -> bool {
        self.idempotency_key.is_some() && self.state != TodoState::Done && !self.dead_letter()
    }
}

/// What a creation path hands the store. The identity is already resolved and authorised.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTodo {
    pub identity: QueueIdentity,
    pub title: String,
    pub payload: Option<Value>,
    pub idempotency_key: Option<String>,
    pub max_attempts: i32,
    pub created_by_kind: CreatedByKind,
    pub created_by_id: Option<String>,
}

impl NewTodo {
    /// Field checks every creation path shares; names the field it refuses.
    pub fn validate(&self) -> Result<()> {
        crate::identity::validate_queue_name("queue", &self.identity.queue)?;
        validate_title(&self.title)?;
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&self.max_attempts) {
            return Err(Error::invalid("max_attempts", format!("max_attempts must be 1-{MAX_ATTEMPTS_LIMIT}")));
        }
        if let Some(key) = &self.idempotency_key {
            if key.is_empty() || key.len() > IDEMPOTENCY_KEY_BYTES_MAX {
                return Err(Error::invalid(
                    "idempotency_key",
                    format!("idempotency_key must be 1-{IDEMPOTENCY_KEY_BYTES_MAX} bytes"),
                ));
            }
            if key.starts_with(INGEST_KEY_PREFIX) && self.created_by_kind != CreatedByKind::Ingest {
                return Err(Error::invalid(
                    "idempotency_key",
                    format!(
                        "idempotency_key must not start with {INGEST_KEY_PREFIX:?}: webhook deliveries own that prefix"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Longest idempotency key, in bytes (the `todos.idempotency_key` column's check).
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 200;

/// The key prefix of todos a webhook delivery made (`wh:{webhook}:{delivery}`). Only ingest may
/// use it, so no human or agent can pre-empt a delivery's dedup slot by guessing its key.
pub const INGEST_KEY_PREFIX: &str = "wh:";

/// The checks of a batched create before anything is written: 1..=`TODOS_PER_BATCH_MAX` todos,
/// each valid as `NewTodo::validate` says, a refusal naming the item (`todos[3].title`).
pub fn validate_batch(todos: &[NewTodo]) -> Result<()> {
    let max = crate::limits::TODOS_PER_BATCH_MAX;
    if !(1..=max).contains(&todos.len()) {
        return Err(Error::invalid("todos", format!("a batch holds 1-{max} todos")));
    }
    for (index, todo) in todos.iter().enumerate() {
        todo.validate().map_err(|error| error.within_item("todos", index))?;
    }
    Ok(())
}

/// The checks of a `complete {ids}` before anything is read: 1..=`CLAIMS_PER_CALL_MAX` ids,
/// none twice (a refusal names `ids`).
pub fn validate_ids(ids: &[String]) -> Result<()> {
    let max = crate::limits::CLAIMS_PER_CALL_MAX;
    if !(1..=max).contains(&ids.len()) {
        return Err(Error::invalid("ids", format!("ids holds 1-{max} todo ids")));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = ids.iter().find(|id| !seen.insert(id.as_str())) {
        return Err(Error::invalid("ids", format!("todo {twice} is listed twice")));
    }
    Ok(())
}

/// The check of `claim_next`'s `max`: 1..=`CLAIMS_PER_CALL_MAX`, 1 when absent.
pub fn claims_max(max: Option<i64>) -> Result<usize> {
    let limit = crate::limits::CLAIMS_PER_CALL_MAX;
    match max {
        None => Ok(1),
        Some(max) if (1..=limit as i64).contains(&max) => Ok(max as usize),
        Some(_) => Err(Error::invalid("max", format!("max must be 1-{limit}"))),
    }
}

/// The title rule of every path that sets one (create, webhook fan-out, edit): not blank, at most
/// `TITLE_LENGTH_MAX` characters (characters, not bytes: a title is read by people).
pub fn validate_title(title: &str) -> Result<()> {
    if title.trim().is_empty() || title.chars().count() > TITLE_LENGTH_MAX {
        return Err(Error::invalid("title", format!("title must be 1-{TITLE_LENGTH_MAX} characters")));
    }
    Ok(())
}

/// The answer of a create: the todo, and whether an existing live row was returned instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub todo: Todo,
    pub deduped: bool,
}

/// The lease a claim or heartbeat gets: the caller's request clamped to 1..=86400 s, or 300 s.
pub fn lease_seconds(requested: Option<i64>) -> Result<i64> {
    match requested {
        None => Ok(LEASE_DEFAULT_SECONDS),
        Some(seconds) if seconds >= 1 => Ok(seconds.min(LEASE_MAX_SECONDS)),
        Some(_) => Err(Error::invalid("lease_ttl_seconds", "lease_ttl_seconds must be at least 1")),
    }
}

/// Delay before a failed todo is retried, given the attempt that just failed:
/// 30 s · 2^(attempt−1), capped at 15 min (1→30 s, 2→1 min, … 6+→15 min).
pub fn retry_backoff(attempt_failed: i32) -> Duration {
    let doublings = attempt_failed.saturating_sub(1).clamp(0, 16) as u32;
    let seconds = RETRY_BACKOFF_BASE_SECONDS.saturating_mul(1_i64 << doublings);
    Duration::seconds(seconds.min(RETRY_BACKOFF_CAP_SECONDS))
}

/// Why "Retry now" refuses a dead letter whose idempotency key a newer live todo holds: the old
/// todo cannot come back to life under a key that now names other work (`conflict`).
pub fn retry_slot_taken() -> crate::error::Error {
    crate::error::Error::conflict_state("a newer live todo holds this todo's idempotency key", "failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap() {
        let seconds: Vec<i64> = (1..=8).map(|a| retry_backoff(a).num_seconds()).collect();
        assert_eq!(seconds, vec![30, 60, 120, 240, 480, 900, 900, 900]);
        assert_eq!(retry_backoff(0).num_seconds(), 30);
        assert_eq!(retry_backoff(i32::MAX).num_seconds(), 900);
    }

    #[test]
    fn lease_is_clamped() {
        assert_eq!(lease_seconds(None).ok(), Some(300));
        assert_eq!(lease_seconds(Some(90_000)).ok(), Some(86_400));
        assert_eq!(lease_seconds(Some(0)).map_err(|e| e.extras["field"].clone()), Err("lease_ttl_seconds".into()));
    }
}
