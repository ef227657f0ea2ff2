//! Shared budgets (issue #52 item 2): one window limit that several queue identities of one owner
//! draw from, the way a provider limits a key across everything that uses it ("5,000 claims a
//! day across research, triage and digest"). A claim on a member queue is admitted only if its
//! own policy, if any, and every shared budget it belongs to admit it, and charges each.
//!
//! This module is the pure core the engine and the reference model will share, as they share
//! `admission`: the definition and its validation (every error names its field, as a policy's
//! do), and the decision over the budgets a claim's queue belongs to. The storage, the claim
//! transaction's lock order (todo, then the queue's policy, then its shared budgets in name
//! order) and the surfaces are not built yet; `docs/requirements.md` ("X-2") says what is.

use crate::error::{Error, Result};
use crate::identity::{QueueIdentity, ScopeRef, validate_queue_name, well_formed_name};
use crate::limits::MAX_CLAIMS_PER_WINDOW_LIMIT;
use crate::window::WindowSpec;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// How many shared budgets one queue identity may belong to.
pub const SHARED_BUDGETS_PER_QUEUE_MAX: usize = 4;
/// How many queues one shared budget may name.
pub const SHARED_BUDGET_QUEUES_MAX: usize = 100;
/// The longest name a shared budget may have, in bytes (names are ASCII).
pub const SHARED_BUDGET_NAME_LENGTH_MAX: usize = 64;

/// A shared budget as its owner writes it (`PUT /api/v1/shared-budgets/{name}`), its queues
/// not yet resolved against what the writer may manage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedBudget {
    pub name: String,
    pub max_claims: i64,
    pub window: WindowSpec,
    /// The member queues, each once, in the order written.
    pub queues: Vec<MemberQueue>,
    /// The team that owns the budget (`tm_…`), or None for the writing human.
    pub team: Option<String>,
}

/// One member queue as written: its scope and queue name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberQueue {
    pub scope: ScopeRef,
    pub queue: String,
}

/// A shared budget's name: 1 to [`SHARED_BUDGET_NAME_LENGTH_MAX`] characters of `[a-z0-9._-]`,
/// the same alphabet as a queue's, so it reads the same in a URL, a metric label and the CLI.
pub fn validate_name(name: &str) -> Result<()> {
    if well_formed_name(name, SHARED_BUDGET_NAME_LENGTH_MAX) {
        Ok(())
    } else {
        Err(Error::invalid("name", format!("name must be 1-{SHARED_BUDGET_NAME_LENGTH_MAX} characters of [a-z0-9._-]")))
    }
}

impl SharedBudget {
    /// Validates a request body `{"max_claims", "window", "queues": [{"scope", "queue"}],
    /// "team"?}` for the budget `name`. The first invalid field is named (`queues[2].scope`,
    /// `window.period`); nothing is half-accepted.
    pub fn from_request(name: &str, body: &Value) -> Result<SharedBudget> {
        validate_name(name)?;
        let Some(map) = body.as_object() else {
            return Err(Error::invalid("shared_budget", "the shared budget must be a JSON object"));
        };
        if let Some(unknown) = map.keys().find(|k| !["max_claims", "window", "queues", "team"].contains(&k.as_str())) {
            return Err(Error::invalid(unknown, format!("unknown field {unknown}")));
        }
        let max_claims = match map.get("max_claims") {
            Some(Value::Number(n)) => {
                crate::json_number::integer(n).filter(|v| (0..=MAX_CLAIMS_PER_WINDOW_LIMIT).contains(v))
            }
            _ => None,
        }
        .ok_or_else(|| {
            Error::invalid(
                "max_claims",
                format!("max_claims must be an integer from 0 to {MAX_CLAIMS_PER_WINDOW_LIMIT}"),
            )
        })?;
        let window = match map.get("window") {
            Some(Value::Object(window)) => WindowSpec::from_request_object(window)?,
            None | Some(Value::Null) => return Err(Error::invalid("window", "window is required")),
            Some(_) => {
                return Err(Error::invalid("window", "window must be an object {period, tz?, start?, weekday?}"));
            }
        };
        let queues = queues_from(map.get("queues"))?;
        let team = match map.get("team") {
            None | Some(Value::Null) => None,
            Some(Value::String(team)) if team.starts_with("tm_") && team.len() > 3 => Some(team.clone()),
            Some(_) => return Err(Error::invalid("team", "team must be a team id (tm_…) or null")),
        };
        Ok(SharedBudget { name: name.to_string(), max_claims, window, queues, team })
    }
}

fn queues_from(value: Option<&Value>) -> Result<Vec<MemberQueue>> {
    let Some(Value::Array(items)) = value else {
        return Err(Error::invalid("queues", "queues must be a list of {scope, queue}"));
    };
    if items.is_empty() || items.len() > SHARED_BUDGET_QUEUES_MAX {
        return Err(Error::invalid("queues", format!("queues must list 1 to {SHARED_BUDGET_QUEUES_MAX} queues")));
    }
    let mut queues: Vec<MemberQueue> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("queues[{i}]");
        let Some(map) = item.as_object() else {
            return Err(Error::invalid(&at, format!("{at} must be an object {{scope, queue}}")));
        };
        if let Some(unknown) = map.keys().find(|k| !["scope", "queue"].contains(&k.as_str())) {
            return Err(Error::invalid(&format!("{at}.{unknown}"), format!("unknown field {at}.{unknown}")));
        }
        let text = |key: &str| -> Result<&str> {
            let field = format!("{at}.{key}");
            map.get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| Error::invalid(&field, format!("{field} must be a string")))
        };
        let scope = ScopeRef::parse(&format!("{at}.scope"), text("scope")?)?;
        let queue = text("queue")?;
        validate_queue_name(&format!("{at}.queue"), queue)?;
        let member = MemberQueue { scope, queue: queue.to_string() };
        if queues.contains(&member) {
            return Err(Error::invalid(&at, format!("{at} names a queue already listed")));
        }
        queues.push(member);
    }
    Ok(queues)
}

/// Who owns a shared budget: a human, or a team (managed through its configuring roles).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BudgetOwner {
    Human(String),
    Team(String),
}

impl BudgetOwner {
    pub fn id(&self) -> &str {
        match self {
            BudgetOwner::Human(id) | BudgetOwner::Team(id) => id,
        }
    }
}

/// A shared budget as a store writes it: its members resolved to queue identities the writer
/// may manage (the caller checks that, REQ-10's rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedBudgetSpec {
    pub name: String,
    pub max_claims: i64,
    pub window: WindowSpec,
    /// Each once, in the order written.
    pub members: Vec<QueueIdentity>,
}

impl SharedBudgetSpec {
    /// The definition as its audit records it (`before` and `after`).
    pub fn to_json(&self) -> Value {
        let queues: Vec<Value> = self
            .members
            .iter()
            .map(|member| serde_json::json!({"scope": member.scope_text(), "queue": member.queue}))
            .collect();
        serde_json::json!({"max_claims": self.max_claims, "window": self.window.to_json(), "queues": queues})
    }
}

/// A stored shared budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedBudgetView {
    pub owner: BudgetOwner,
    pub spec: SharedBudgetSpec,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The refusal of the member at `index` of a budget being written, already in as many other
/// budgets as a queue may belong to.
pub fn too_many_budgets(index: usize) -> Error {
    let field = format!("queues[{index}]");
    Error::invalid(&field, format!("{field} already belongs to {SHARED_BUDGETS_PER_QUEUE_MAX} shared budgets"))
}

/// A budget's name in a form that copies, so the admission hint that names the budget deferring
/// a queue stays `Copy` (names are at most [`SHARED_BUDGET_NAME_LENGTH_MAX`] ASCII bytes).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BudgetName {
    bytes: [u8; SHARED_BUDGET_NAME_LENGTH_MAX],
    len: u8,
}

impl BudgetName {
    /// None for a name no budget can have (empty, too long, outside the alphabet).
    pub fn new(name: &str) -> Option<BudgetName> {
        validate_name(name).ok()?;
        let mut bytes = [0; SHARED_BUDGET_NAME_LENGTH_MAX];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Some(BudgetName { bytes, len: name.len() as u8 })
    }

    pub fn as_str(&self) -> &str {
        // Only `new` builds one, from a validated ASCII name.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for BudgetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for BudgetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for BudgetName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One shared budget of a member queue's status (issue #52), as a window of its `windows` is
/// shown, with the budget's name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SharedBudgetStatus {
    pub name: String,
    pub window: WindowSpec,
    pub max_claims: i64,
    pub used: i64,
    pub remaining: i64,
    pub window_start: DateTime<Utc>,
    pub window_resets_at: DateTime<Utc>,
}

/// Each budget's status at `now`, in the order given (name order).
pub fn statuses(budgets: &[SharedUse], now: DateTime<Utc>) -> Vec<SharedBudgetStatus> {
    budgets
        .iter()
        .map(|budget| {
            let (window_start, window_resets_at) = budget.window.window_containing(now);
            SharedBudgetStatus {
                name: budget.name.clone(),
                window: budget.window,
                max_claims: budget.max_claims,
                used: budget.used,
                remaining: (budget.max_claims - budget.used).max(0),
                window_start,
                window_resets_at,
            }
        })
        .collect()
}

/// A shared budget as a claim or a status read of one member queue sees it: its limit, its
/// window, and what was charged in the window containing the instant of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedUse {
    pub name: String,
    pub max_claims: i64,
    pub window: WindowSpec,
    pub used: i64,
}

/// The shared budget that refuses a claim now, if one does: the first in name order with nothing
/// left (a claim charges every budget its queue belongs to, so each must have a unit left).
pub fn exhausted(budgets: &[SharedUse]) -> Option<&SharedUse> {
    debug_assert!(budgets.windows(2).all(|pair| pair[0].name < pair[1].name), "budgets come in name order");
    budgets.iter().find(|budget| budget.used >= budget.max_claims)
}

/// When every shared budget among `budgets` admits again, assuming no claim in between: the
/// latest reset among the exhausted ones (None when none is exhausted). Exact, as a window's
/// boundary is; the budget whose reset it is comes with it.
pub fn admits_again_at(budgets: &[SharedUse], now: DateTime<Utc>) -> Option<(DateTime<Utc>, &SharedUse)> {
    budgets
        .iter()
        .filter(|budget| budget.used >= budget.max_claims)
        .map(|budget| (budget.window.window_containing(now).1, budget))
        .max_by_key(|(reset, _)| *reset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({"max_claims": 5000, "window": {"period": "day", "tz": "UTC", "start": "00:00"},
               "queues": [{"scope": "endpoint:research", "queue": "inbox"}, {"scope": "team:ops", "queue": "triage"}]})
    }

    // Issue #52 item 2: a shared budget names its queues, its limit and its window.
    #[test]
    fn ext52_a_shared_budget_reads_its_queues_limit_and_window() {
        let budget = SharedBudget::from_request("openai-key", &body()).expect("valid");
        assert_eq!(budget.max_claims, 5000);
        assert_eq!(budget.window.in_words(), "per day from 00:00 UTC");
        assert_eq!(
            budget.queues,
            vec![
                MemberQueue { scope: ScopeRef::Endpoint("research".into()), queue: "inbox".into() },
                MemberQueue { scope: ScopeRef::Team("ops".into()), queue: "triage".into() },
            ]
        );
        assert_eq!(budget.team, None);
        let mut owned = body();
        owned["team"] = json!("tm_1");
        assert_eq!(SharedBudget::from_request("k", &owned).expect("valid").team.as_deref(), Some("tm_1"));
    }

    // Issue #52: bad input gets an error naming the field, and nothing is accepted.
    #[test]
    fn ext52_invalid_shared_budgets_name_the_field() {
        let field = |name: &str, change: &dyn Fn(&mut Value)| {
            let mut body = body();
            change(&mut body);
            let error = SharedBudget::from_request(name, &body).expect_err("invalid");
            error.extras.get("field").and_then(Value::as_str).map(str::to_string)
        };
        assert_eq!(field("Bad Name", &|_| {}), Some("name".into()));
        assert_eq!(field(&"k".repeat(65), &|_| {}), Some("name".into()));
        assert_eq!(field("k", &|b| b["max_claims"] = json!(-1)), Some("max_claims".into()));
        assert_eq!(field("k", &|b| b["max_claims"] = json!(1.5)), Some("max_claims".into()));
        assert_eq!(field("k", &|b| b["window"] = Value::Null), Some("window".into()));
        assert_eq!(field("k", &|b| b["window"]["period"] = json!("fortnight")), Some("window.period".into()));
        assert_eq!(field("k", &|b| b["window"] = json!({"period": "minute", "tz": "UTC"})), Some("window.tz".into()));
        assert_eq!(field("k", &|b| b["queues"] = json!([])), Some("queues".into()));
        assert_eq!(field("k", &|b| b["queues"][1]["scope"] = json!("human:me")), Some("queues[1].scope".into()));
        assert_eq!(field("k", &|b| b["queues"][0]["queue"] = json!("In Box")), Some("queues[0].queue".into()));
        assert_eq!(field("k", &|b| b["queues"][1] = b["queues"][0].clone()), Some("queues[1]".into()));
        assert_eq!(field("k", &|b| b["queues"][0]["extra"] = json!(1)), Some("queues[0].extra".into()));
        assert_eq!(field("k", &|b| b["team"] = json!("ops")), Some("team".into()));
        assert_eq!(field("k", &|b| b["colour"] = json!("red")), Some("colour".into()));
        let many: Vec<Value> =
            (0..=SHARED_BUDGET_QUEUES_MAX).map(|i| json!({"scope": "endpoint:e", "queue": format!("q{i}")})).collect();
        assert_eq!(field("k", &|b| b["queues"] = json!(many)), Some("queues".into()));
    }

    fn daily(name: &str, max_claims: i64, used: i64) -> SharedUse {
        let window = WindowSpec::parse("day", "UTC", "00:00", None).expect("window");
        SharedUse { name: name.into(), max_claims, window, used }
    }

    fn minutely(name: &str, max_claims: i64, used: i64) -> SharedUse {
        let window = WindowSpec::parse_fields("minute", None, None, None).expect("window");
        SharedUse { name: name.into(), max_claims, window, used }
    }

    // Issue #52: a claim needs a unit in every budget its queue draws from; the first spent one,
    // in name order, is the one a refusal names, and the queue admits again once every spent
    // budget has reset.
    #[test]
    fn ext52_two_queues_sharing_a_spent_budget_wait_for_its_reset() {
        let now = DateTime::parse_from_rfc3339("2026-12-07T15:00:30Z").expect("instant").to_utc();
        let open = [daily("a-day", 10, 3), minutely("b-minute", 2, 1)];
        assert_eq!(exhausted(&open), None);
        assert_eq!(admits_again_at(&open, now), None);

        let spent = [daily("a-day", 10, 10), minutely("b-minute", 2, 2)];
        assert_eq!(exhausted(&spent).map(|b| b.name.as_str()), Some("a-day"));
        let (at, budget) = admits_again_at(&spent, now).expect("spent");
        assert_eq!((at.to_rfc3339(), budget.name.as_str()), ("2026-12-08T00:00:00+00:00".into(), "a-day"));

        let minute_only = [daily("a-day", 10, 4), minutely("b-minute", 2, 2)];
        assert_eq!(exhausted(&minute_only).map(|b| b.name.as_str()), Some("b-minute"));
        let (at, _) = admits_again_at(&minute_only, now).expect("spent");
        assert_eq!(at.to_rfc3339(), "2026-12-07T15:01:00+00:00");
        // A budget of zero admits nothing: a pause shared by every member queue.
        assert_eq!(exhausted(&[daily("z", 0, 0)]).map(|b| b.name.as_str()), Some("z"));
    }
}
