//! Admission control's pure core: the policy, its validation, the decision, and the status
//! derived from what the claim transaction observed.
//!
//! Governing: SPEC-0030 REQ-1 (policy model), REQ-4 (the decision under the lock), REQ-6
//! (derived status, never stored), REQ-7 (headroom on a claim), REQ-9 (fail closed).
//!
//! `PgStore` and the reference model both call `decide` and `status`, so production and the
//! executable specification cannot drift apart.

use crate::error::{Error, Result};
use crate::forecast::RecentCharges;
use crate::shared_budget::{self, BudgetName, SharedBudgetStatus, SharedUse};
use crate::window::WindowSpec;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Largest `max_in_flight` a policy may set (REQ-1).
pub const MAX_IN_FLIGHT_LIMIT: i64 = 10_000;
/// Largest `max_claims_per_window` a policy may set (REQ-1), an additional window's and a
/// shared budget's `max_claims` (kept in `limits`, beneath both).
pub use crate::limits::MAX_CLAIMS_PER_WINDOW_LIMIT;
/// How many `additional_windows` a policy may carry beside its primary window (issue #52).
pub const ADDITIONAL_WINDOWS_MAX: usize = 4;

/// The admission settings of one queue identity. At least one limit is set; a window exists
/// whenever the window limit does, and additional windows only beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub max_in_flight: Option<i64>,
    pub max_claims_per_window: Option<i64>,
    pub window: Option<WindowSpec>,
    /// Issue #52: further windows, each with its own limit, that every claim must also fit and
    /// is charged to ("60 a minute and 5,000 a day"). At most [`ADDITIONAL_WINDOWS_MAX`].
    pub additional_windows: Vec<WindowLimit>,
}

/// One additional window of a policy and its limit (issue #52).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowLimit {
    pub max_claims: i64,
    pub window: WindowSpec,
}

/// The position of a window in its policy: 0 is the primary window (`max_claims_per_window` and
/// `window`), 1.. the additional windows in the order the policy lists them. Usage counters are
/// kept per slot; a policy write recounts every slot's current window from the ledger, so a slot
/// whose definition changed counts the claims already in its span (issue #28's rule per window).
pub type WindowSlot = usize;

/// What each window of a policy has charged in its current window: the primary's, then each
/// additional window's, in slot order (zero past the policy's windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Used {
    pub primary: i64,
    pub additional: [i64; ADDITIONAL_WINDOWS_MAX],
}

impl From<i64> for Used {
    /// The usage of a policy without additional windows.
    fn from(primary: i64) -> Used {
        Used { primary, additional: [0; ADDITIONAL_WINDOWS_MAX] }
    }
}

impl Used {
    /// The usage of the window in `slot`.
    pub fn of(&self, slot: WindowSlot) -> i64 {
        if slot == 0 { self.primary } else { self.additional.get(slot - 1).copied().unwrap_or(0) }
    }

    /// One more unit in every slot below `slots`: what one charged claim adds.
    pub fn plus_one_charge(mut self, slots: usize) -> Used {
        if slots > 0 {
            self.primary += 1;
        }
        for used in self.additional.iter_mut().take(slots.saturating_sub(1)) {
            *used += 1;
        }
        self
    }
}

/// Why a queue identity admits no claim right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    WindowExhausted,
    InFlightFull,
    Paused,
    AdmissionUnavailable,
    /// Issue #52: a shared budget the queue draws from has nothing left in its window.
    SharedBudgetExhausted,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::WindowExhausted,
        Reason::InFlightFull,
        Reason::Paused,
        Reason::AdmissionUnavailable,
        Reason::SharedBudgetExhausted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::WindowExhausted => "window_exhausted",
            Reason::InFlightFull => "in_flight_full",
            Reason::Paused => "paused",
            Reason::AdmissionUnavailable => "admission_unavailable",
            Reason::SharedBudgetExhausted => "shared_budget_exhausted",
        }
    }

    /// Why a todo waits, in the few words of the board's chip and the CLI's.
    pub fn words(self) -> &'static str {
        match self {
            Reason::WindowExhausted => "budget",
            Reason::InFlightFull => "in flight full",
            Reason::Paused => "paused",
            Reason::AdmissionUnavailable => "unavailable",
            Reason::SharedBudgetExhausted => "shared budget",
        }
    }
}

/// Whether a queue identity admits claims now (REQ-6's `admission.state`), serialised as the
/// contract's `admitted` and `deferred`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionState {
    Admitted,
    Deferred,
}

impl AdmissionState {
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionState::Admitted => "admitted",
            AdmissionState::Deferred => "deferred",
        }
    }
}

/// The `status` word of a policy status object (contract §3, REQ-6): `admitted`, or the reason
/// the identity is deferred, serialised as the contract's strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueStatus {
    Admitted,
    WindowExhausted,
    InFlightFull,
    Paused,
    AdmissionUnavailable,
    SharedBudgetExhausted,
}

impl QueueStatus {
    pub const ALL: [QueueStatus; 6] = [
        QueueStatus::Admitted,
        QueueStatus::WindowExhausted,
        QueueStatus::InFlightFull,
        QueueStatus::Paused,
        QueueStatus::AdmissionUnavailable,
        QueueStatus::SharedBudgetExhausted,
    ];

    /// The status of an identity deferred for `reason`, or admitted (None).
    pub fn of(reason: Option<Reason>) -> QueueStatus {
        match reason {
            None => QueueStatus::Admitted,
            Some(Reason::WindowExhausted) => QueueStatus::WindowExhausted,
            Some(Reason::InFlightFull) => QueueStatus::InFlightFull,
            Some(Reason::Paused) => QueueStatus::Paused,
            Some(Reason::AdmissionUnavailable) => QueueStatus::AdmissionUnavailable,
            Some(Reason::SharedBudgetExhausted) => QueueStatus::SharedBudgetExhausted,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueStatus::Admitted => "admitted",
            QueueStatus::WindowExhausted => Reason::WindowExhausted.as_str(),
            QueueStatus::InFlightFull => Reason::InFlightFull.as_str(),
            QueueStatus::Paused => Reason::Paused.as_str(),
            QueueStatus::AdmissionUnavailable => Reason::AdmissionUnavailable.as_str(),
            QueueStatus::SharedBudgetExhausted => Reason::SharedBudgetExhausted.as_str(),
        }
    }
}

/// The outcome of the check under the policy lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Admit,
    Refuse(Reason),
}

/// REQ-1 and REQ-4: whether one more claim may commit, given the in-flight count (not counting
/// the candidate itself on a takeover) and each window's current usage, both read under the
/// lock. A zero limit pauses. An exhausted window outranks a full in-flight cap: a freed slot
/// would not admit anything before the window turns, so the window's boundary is the honest
/// answer. Issue #52: every window must admit; a policy with one window is given its usage as
/// a plain number.
pub fn decide(policy: &Policy, in_flight: i64, used: impl Into<Used>) -> Decision {
    let used = used.into();
    if policy.max_in_flight == Some(0)
        || policy.max_claims_per_window == Some(0)
        || policy.additional_windows.iter().any(|limit| limit.max_claims == 0)
    {
        return Decision::Refuse(Reason::Paused);
    }
    if policy.max_claims_per_window.is_some_and(|max| used.primary >= max)
        || policy.additional_windows.iter().zip(used.additional).any(|(limit, used)| used >= limit.max_claims)
    {
        return Decision::Refuse(Reason::WindowExhausted);
    }
    if policy.max_in_flight.is_some_and(|max| in_flight >= max) {
        return Decision::Refuse(Reason::InFlightFull);
    }
    Decision::Admit
}

/// Group admission (issue #15): [`decide`] for a transaction's claims in turn under one lock,
/// each seeing the claims admitted before it, exactly as single claims one after another would.
/// `observed.in_flight` counts every claimed todo of the queue, the candidates included;
/// `takes_over[turn]` says whether that turn's candidate is a lapsed claim, which is counted
/// there but not against its own takeover and which stays one claim when taken over. Each
/// admitted claim adds one unit of usage when the policy charges. `used_seen` is what the
/// decision is given as usage (the engine's seeded-bug hook; the identity otherwise).
pub fn decide_in_turn(
    policy: &Policy,
    observed: &Observation,
    takes_over: &[bool],
    used_seen: impl Fn(i64) -> i64,
) -> InTurn {
    let (mut in_flight, mut used) = (observed.in_flight, observed.usage());
    let slots = policy.charged_slots();
    let mut admitted = Vec::with_capacity(takes_over.len());
    for &takes_over in takes_over {
        let seen = Observation { in_flight: in_flight - i64::from(takes_over), ..observed.with_usage(used) };
        let decided = Used { primary: used_seen(used.primary), ..used };
        if let Decision::Refuse(reason) = decide(policy, seen.in_flight, decided) {
            return InTurn { admitted, refused: Some((reason, seen)) };
        }
        admitted.push(seen);
        in_flight += i64::from(!takes_over);
        used = used.plus_one_charge(slots);
    }
    InTurn { admitted, refused: None }
}

/// What [`decide_in_turn`] concluded: for each admitted claim, in turn, the observation it was
/// decided on (its in-flight count without itself, for its headroom); and for the first refused
/// one, if any, why and on what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InTurn {
    pub admitted: Vec<Observation>,
    pub refused: Option<(Reason, Observation)>,
}

impl Policy {
    /// Validates a full-replace request `{max_in_flight, max_claims_per_window, window: {period,
    /// tz, start, weekday?}}`, naming the first offending field (REQ-1).
    pub fn from_request(body: &Value) -> Result<Policy> {
        let Some(map) = body.as_object() else {
            return Err(Error::invalid("policy", "the policy must be a JSON object"));
        };
        if let Some(unknown) = map
            .keys()
            .find(|k| !["max_in_flight", "max_claims_per_window", "window", "additional_windows"].contains(&k.as_str()))
        {
            return Err(Error::invalid(unknown, format!("unknown field {unknown}")));
        }
        let max_in_flight = limit(map, "max_in_flight", MAX_IN_FLIGHT_LIMIT)?;
        let max_claims_per_window = limit(map, "max_claims_per_window", MAX_CLAIMS_PER_WINDOW_LIMIT)?;
        let window = match map.get("window") {
            None | Some(Value::Null) => None,
            Some(Value::Object(window)) => Some(WindowSpec::from_request_object(window)?),
            Some(_) => return Err(Error::invalid("window", "window must be an object {period, tz, start, weekday?}")),
        };
        if max_in_flight.is_none() && max_claims_per_window.is_none() {
            return Err(Error::invalid("max_claims_per_window", "set max_in_flight, max_claims_per_window, or both"));
        }
        if max_claims_per_window.is_some() && window.is_none() {
            return Err(Error::invalid("window", "window is required when max_claims_per_window is set"));
        }
        let additional_windows = additional_windows_from(map.get("additional_windows"))?;
        if !additional_windows.is_empty() && max_claims_per_window.is_none() {
            return Err(Error::invalid(
                "max_claims_per_window",
                "max_claims_per_window and window are required when additional_windows is set",
            ));
        }
        Ok(Policy { max_in_flight, max_claims_per_window, window, additional_windows })
    }

    /// Rebuilds a policy from its stored columns (`additional_windows` as the JSON the API
    /// writes). A row that fails validation (a zone the embedded database no longer knows, say)
    /// is an error the claim path turns into `admission_unavailable` (REQ-9), never a guess.
    pub fn from_stored(
        max_in_flight: Option<i32>,
        max_claims_per_window: Option<i32>,
        period: Option<&str>,
        tz: Option<&str>,
        start: Option<&str>,
        weekday: Option<&str>,
        additional_windows: Option<&Value>,
    ) -> std::result::Result<Policy, String> {
        let window = match (period, tz, start) {
            (Some(period), _, _) => {
                Some(WindowSpec::parse_fields(period, tz, start, weekday).map_err(|e| format!("stored {e}"))?)
            }
            (None, None, None) => None,
            _ => return Err("stored window is incomplete".into()),
        };
        let additional_windows =
            additional_windows_from(additional_windows).map_err(|e| format!("stored {}", e.message))?;
        let policy = Policy {
            max_in_flight: max_in_flight.map(i64::from),
            max_claims_per_window: max_claims_per_window.map(i64::from),
            window,
            additional_windows,
        };
        let in_range = |value: Option<i64>, max: i64| value.is_none_or(|v| (0..=max).contains(&v));
        if !in_range(policy.max_in_flight, MAX_IN_FLIGHT_LIMIT)
            || !in_range(policy.max_claims_per_window, MAX_CLAIMS_PER_WINDOW_LIMIT)
            || (policy.max_in_flight.is_none() && policy.max_claims_per_window.is_none())
            || (policy.max_claims_per_window.is_some() && policy.window.is_none())
            || (!policy.additional_windows.is_empty() && policy.max_claims_per_window.is_none())
        {
            return Err("stored limits are invalid".into());
        }
        Ok(policy)
    }

    /// The policy as the API shows it and as the audit records it. `additional_windows` only
    /// when there are some, so a policy of SPEC-0030's fields answers exactly as it always did.
    pub fn to_json(&self) -> Value {
        let mut policy = json!({
            "max_in_flight": self.max_in_flight,
            "max_claims_per_window": self.max_claims_per_window,
            "window": self.window.as_ref().map(WindowSpec::to_json),
        });
        if let (Some(additional), false) = (self.additional_windows_json(), self.additional_windows.is_empty())
            && let Some(map) = policy.as_object_mut()
        {
            map.insert("additional_windows".into(), additional);
        }
        policy
    }

    /// The additional windows as the request writes them and storage keeps them; None when the
    /// policy has none.
    pub fn additional_windows_json(&self) -> Option<Value> {
        (!self.additional_windows.is_empty()).then(|| {
            Value::Array(
                self.additional_windows
                    .iter()
                    .map(|limit| json!({ "max_claims": limit.max_claims, "window": limit.window.to_json() }))
                    .collect(),
            )
        })
    }

    /// Whether a committed claim charges a unit (REQ-3: only with a window limit).
    pub fn charges(&self) -> bool {
        self.max_claims_per_window.is_some()
    }

    /// The window a claim admitted at `now` is charged to, as (start, end): the one containing
    /// `now`, when the policy charges at all (REQ-3, REQ-5). The primary window's; see
    /// [`Policy::charged_windows`] for every window's.
    pub fn charged_window(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        self.window.as_ref().filter(|_| self.charges()).map(|w| w.window_containing(now))
    }

    /// How many windows a charged claim adds a unit to: the primary and every additional window,
    /// or none when the policy charges nothing.
    pub fn charged_slots(&self) -> usize {
        if self.charges() { 1 + self.additional_windows.len() } else { 0 }
    }

    /// Every window with its limit, in slot order: the primary first (when the policy has a
    /// window limit), then the additional windows.
    pub fn windows(&self) -> impl Iterator<Item = (WindowSlot, i64, WindowSpec)> + '_ {
        let primary = self.max_claims_per_window.zip(self.window).map(|(max, window)| (0, max, window));
        primary.into_iter().chain(
            self.additional_windows
                .iter()
                .enumerate()
                .filter(|_| self.charges())
                .map(|(index, limit)| (index + 1, limit.max_claims, limit.window)),
        )
    }

    /// Issue #52: the window each slot charges a claim admitted at `now`, as (slot, start, end).
    pub fn charged_windows(&self, now: DateTime<Utc>) -> Vec<(WindowSlot, DateTime<Utc>, DateTime<Utc>)> {
        self.windows()
            .map(|(slot, _, window)| {
                let (start, end) = window.window_containing(now);
                (slot, start, end)
            })
            .collect()
    }
}

/// `additional_windows` of a request (or of a stored row), naming the offending field as
/// `additional_windows[2].window.period`.
fn additional_windows_from(value: Option<&Value>) -> Result<Vec<WindowLimit>> {
    let field = "additional_windows";
    let items = match value {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(Error::invalid(field, "additional_windows must be a list of {max_claims, window}")),
    };
    if items.len() > ADDITIONAL_WINDOWS_MAX {
        return Err(Error::invalid(
            &format!("{field}[{ADDITIONAL_WINDOWS_MAX}]"),
            format!(
                "{field}[{ADDITIONAL_WINDOWS_MAX}]: a policy takes at most {ADDITIONAL_WINDOWS_MAX} additional windows"
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let at = format!("{field}[{index}]");
            let Some(map) = item.as_object() else {
                return Err(Error::invalid(&at, format!("{at} must be an object {{max_claims, window}}")));
            };
            if let Some(unknown) = map.keys().find(|k| !["max_claims", "window"].contains(&k.as_str())) {
                return Err(Error::invalid(&format!("{at}.{unknown}"), format!("unknown field {at}.{unknown}")));
            }
            let max_claims = limit(map, "max_claims", MAX_CLAIMS_PER_WINDOW_LIMIT)
                .map_err(|e| Error::invalid(&format!("{at}.max_claims"), format!("{at}.{}", e.message)))?
                .ok_or_else(|| Error::invalid(&format!("{at}.max_claims"), format!("{at}.max_claims is required")))?;
            let window = match map.get("window") {
                Some(Value::Object(window)) => WindowSpec::from_request_object(window).map_err(|e| {
                    let inner = e.extras["field"].as_str().unwrap_or("window").to_owned();
                    Error::invalid(&format!("{at}.{inner}"), format!("{at}.{inner}: {}", e.message))
                })?,
                _ => {
                    return Err(Error::invalid(
                        &format!("{at}.window"),
                        format!("{at}.window must be an object {{period, tz?, start?, weekday?}}"),
                    ));
                }
            };
            Ok(WindowLimit { max_claims, window })
        })
        .collect()
}

fn limit(map: &Map<String, Value>, field: &str, max: i64) -> Result<Option<i64>> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match crate::json_number::integer(n) {
            Some(v) if (0..=max).contains(&v) => Ok(Some(v)),
            _ => Err(Error::invalid(field, format!("{field} must be an integer from 0 to {max}, or null"))),
        },
        Some(_) => Err(Error::invalid(field, format!("{field} must be an integer from 0 to {max}, or null"))),
    }
}

/// What the status of a queue identity is derived from: observations, never stored state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub now: DateTime<Utc>,
    /// Claimed todos of the identity, live or lapsed-but-not-reaped.
    pub in_flight: i64,
    /// Units charged in the primary window containing `now`.
    pub used: i64,
    /// Issue #52: units charged in each additional window's current window, in slot order.
    pub additional_used: [i64; ADDITIONAL_WINDOWS_MAX],
    /// Issue #52: the ledger's recent minutes, for `forecast_exhausted_at` (empty where no
    /// status is shown, as on the claim path).
    pub recent: RecentCharges,
    /// The earliest lease expiry among the in-flight todos.
    pub earliest_lease_expiry: Option<DateTime<Utc>>,
    /// The lease reaper's tick, for the in-flight hint.
    pub reaper_interval: Duration,
}

impl Observation {
    /// Every window's usage, the primary's first.
    pub fn usage(&self) -> Used {
        Used { primary: self.used, additional: self.additional_used }
    }

    /// The same observation with `used` as every window's usage.
    pub fn with_usage(&self, used: Used) -> Observation {
        Observation { used: used.primary, additional_used: used.additional, ..*self }
    }
}

/// One window of a queue identity's status (issue #52's `windows`, primary first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowStatus {
    pub window: WindowSpec,
    pub max_claims: i64,
    pub used: i64,
    pub remaining: i64,
    pub window_start: DateTime<Utc>,
    pub window_resets_at: DateTime<Utc>,
}

/// A queue identity's admission status (contract §3 "Policy status object", REQ-6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyStatus {
    pub status: QueueStatus,
    pub max_in_flight: Option<i64>,
    pub in_flight: Option<i64>,
    pub max_claims_per_window: Option<i64>,
    pub used: Option<i64>,
    pub remaining: Option<i64>,
    pub window_start: Option<DateTime<Utc>>,
    pub window_resets_at: Option<DateTime<Utc>>,
    /// Issue #52: every window with its usage, the primary first; empty without a window limit.
    pub windows: Vec<WindowStatus>,
    /// Issue #52: when the first window to run out would, at the recent rate (`forecast`).
    pub forecast_exhausted_at: Option<DateTime<Utc>>,
    /// Issue #52: each shared budget the queue draws from, in name order (`with_shared_budgets`).
    pub shared_budgets: Vec<SharedBudgetStatus>,
    #[serde(skip)]
    pub hint: AdmissionHint,
}

/// The status carried by each pending todo of a budgeted queue (REQ-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AdmissionHint {
    /// Why the todo waits; None when it is admitted.
    pub reason: Option<Reason>,
    pub next_eligible_at: Option<DateTime<Utc>>,
    pub exact: Option<bool>,
    /// Issue #52: for `window_exhausted`, the window that defers the queue longest (whose
    /// boundary is `next_eligible_at`).
    pub window: Option<WindowSpec>,
    /// Issue #52: for `shared_budget_exhausted`, the budget that defers the queue longest.
    pub shared_budget: Option<BudgetName>,
}

impl AdmissionHint {
    pub const ADMITTED: AdmissionHint =
        AdmissionHint { reason: None, next_eligible_at: None, exact: None, window: None, shared_budget: None };

    pub fn is_deferred(&self) -> bool {
        self.reason.is_some()
    }

    /// Deferred exactly when there is a reason: the state is derived, so the two cannot disagree.
    pub fn state(&self) -> AdmissionState {
        if self.is_deferred() { AdmissionState::Deferred } else { AdmissionState::Admitted }
    }
}

/// REQ-6: the status derived from a policy and what was observed. For `window_exhausted` the next
/// boundary, exactly; for `in_flight_full` a hint (earliest live lease expiry plus the reaper
/// interval), marked inexact because a completion may free a slot sooner and a heartbeat later;
/// for `paused` no time at all.
///
/// Issue #52: with several windows, `next_eligible_at` is the first instant every window admits
/// again: the latest boundary among the exhausted windows (while one is exhausted nothing is
/// admitted, so the others' next windows begin unspent), exact as each boundary is; `window`
/// names the window whose boundary that is.
pub fn status(policy: &Policy, observed: &Observation) -> PolicyStatus {
    let window = policy.window.as_ref().map(|w| w.window_containing(observed.now));
    let windowed = policy.max_claims_per_window.is_some();
    let used = observed.usage();
    let windows: Vec<WindowStatus> = policy
        .windows()
        .map(|(slot, max_claims, window)| {
            let (window_start, window_resets_at) = window.window_containing(observed.now);
            let used = used.of(slot);
            WindowStatus {
                window,
                max_claims,
                used,
                remaining: (max_claims - used).max(0),
                window_start,
                window_resets_at,
            }
        })
        .collect();
    let hint = match decide(policy, observed.in_flight, used) {
        Decision::Admit => AdmissionHint::ADMITTED,
        Decision::Refuse(reason) => {
            let (next_eligible_at, exact, binding) = match reason {
                Reason::WindowExhausted => {
                    let binding = windows
                        .iter()
                        .filter(|w| w.used >= w.max_claims)
                        .max_by_key(|w| w.window_resets_at)
                        .map(|w| (w.window_resets_at, w.window));
                    (binding.map(|(end, _)| end), Some(true), binding.map(|(_, window)| window))
                }
                Reason::InFlightFull => {
                    let expiry = observed.earliest_lease_expiry.unwrap_or(observed.now).max(observed.now);
                    (Some(expiry + observed.reaper_interval), Some(false), None)
                }
                // `decide` never refuses for a shared budget (`with_shared_budgets` does).
                Reason::Paused | Reason::AdmissionUnavailable | Reason::SharedBudgetExhausted => (None, None, None),
            };
            AdmissionHint { reason: Some(reason), next_eligible_at, exact, window: binding, shared_budget: None }
        }
    };
    PolicyStatus {
        status: QueueStatus::of(hint.reason),
        max_in_flight: policy.max_in_flight,
        in_flight: Some(observed.in_flight),
        max_claims_per_window: policy.max_claims_per_window,
        used: windowed.then_some(observed.used),
        remaining: policy.max_claims_per_window.map(|max| (max - observed.used).max(0)),
        window_start: window.filter(|_| windowed).map(|(start, _)| start),
        window_resets_at: window.filter(|_| windowed).map(|(_, end)| end),
        windows,
        forecast_exhausted_at: forecast_exhausted_at(policy, observed.now, used, &observed.recent),
        shared_budgets: vec![],
        hint,
    }
}

/// Issue #52: a queue's status with the shared budgets it draws from (in name order, as read at
/// `now`). A spent budget defers the queue unless its policy already pauses it or cannot be read
/// (those say so without a time); `next_eligible_at` is then the first instant every window and
/// every budget admits again, the latest of their boundaries, and the reason names whichever
/// defers longest (a spent budget outranks a full in-flight cap, as a spent window does: a freed
/// slot admits nothing before the budget turns). A budget of zero admits nothing ever: it names
/// itself without a time.
pub fn with_shared_budgets(mut status: PolicyStatus, budgets: &[SharedUse], now: DateTime<Utc>) -> PolicyStatus {
    status.shared_budgets = shared_budget::statuses(budgets, now);
    let Some(spent) = shared_budget::exhausted(budgets) else { return status };
    let hint = &mut status.hint;
    if matches!(hint.reason, Some(Reason::Paused | Reason::AdmissionUnavailable)) {
        return status;
    }
    let zero = budgets.iter().find(|budget| budget.max_claims == 0);
    let longest = if zero.is_some() { None } else { shared_budget::admits_again_at(budgets, now) };
    let defers_longer = match (hint.reason, longest) {
        (Some(Reason::WindowExhausted), Some((at, _))) => hint.next_eligible_at.is_none_or(|window| at > window),
        _ => true,
    };
    if defers_longer {
        let budget = zero.or(longest.map(|(_, budget)| budget)).unwrap_or(spent);
        *hint = AdmissionHint {
            reason: Some(Reason::SharedBudgetExhausted),
            next_eligible_at: longest.map(|(at, _)| at),
            exact: longest.map(|_| true),
            window: None,
            shared_budget: BudgetName::new(&budget.name),
        };
        status.status = QueueStatus::SharedBudgetExhausted;
    }
    status
}

/// Issue #52: [`decide`] with the shared budgets a queue draws from: admitted only when the
/// policy (if any) and every budget admit. The reason an answer gives comes from
/// [`with_shared_budgets`], which weighs the times; this only says whether and, roughly, why.
pub fn decide_with_shared(policy: Option<&Policy>, in_flight: i64, used: Used, budgets: &[SharedUse]) -> Decision {
    match policy.map(|policy| decide(policy, in_flight, used)) {
        Some(Decision::Refuse(reason)) => Decision::Refuse(reason),
        _ if shared_budget::exhausted(budgets).is_some() => Decision::Refuse(Reason::SharedBudgetExhausted),
        _ => Decision::Admit,
    }
}

/// Issue #52: the policy's forecast, the earliest of its windows' (`forecast`).
pub fn forecast_exhausted_at(
    policy: &Policy,
    now: DateTime<Utc>,
    used: Used,
    recent: &RecentCharges,
) -> Option<DateTime<Utc>> {
    policy
        .windows()
        .filter_map(|(slot, max, window)| {
            crate::forecast::window_exhausted_at(now, window.window_containing(now), max, used.of(slot), recent)
        })
        .min()
}

/// REQ-9: the status of a policy that cannot be read or evaluated.
pub fn unavailable_status() -> PolicyStatus {
    PolicyStatus {
        status: QueueStatus::AdmissionUnavailable,
        max_in_flight: None,
        in_flight: None,
        max_claims_per_window: None,
        used: None,
        remaining: None,
        window_start: None,
        window_resets_at: None,
        windows: vec![],
        forecast_exhausted_at: None,
        shared_budgets: vec![],
        hint: AdmissionHint {
            reason: Some(Reason::AdmissionUnavailable),
            next_eligible_at: None,
            exact: None,
            window: None,
            shared_budget: None,
        },
    }
}

/// REQ-7: the headroom a successful budgeted claim reports, after its own charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Headroom {
    pub max_in_flight: Option<i64>,
    pub in_flight: i64,
    pub max_claims_per_window: Option<i64>,
    pub used: Option<i64>,
    pub remaining: Option<i64>,
    pub window_resets_at: Option<DateTime<Utc>>,
    /// Issue #52: whether the claim spent one of the additional windows (the headroom's numbers
    /// stay the primary window's).
    #[serde(skip)]
    pub additional_spent: bool,
}

impl Headroom {
    /// The headroom after an admitted claim: `in_flight_before` did not count the claimed todo,
    /// `used` is every window's usage after its charge (None when nothing was charged), and
    /// `charged_window` is [`Policy::charged_window`] at the clock of the claim.
    pub fn after_claim(
        policy: &Policy,
        in_flight_before: i64,
        used: Option<Used>,
        charged_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    ) -> Headroom {
        let primary = used.map(|used| used.primary);
        Headroom {
            max_in_flight: policy.max_in_flight,
            in_flight: in_flight_before + 1,
            max_claims_per_window: policy.max_claims_per_window,
            used: primary,
            remaining: policy.max_claims_per_window.zip(primary).map(|(max, used)| (max - used).max(0)),
            window_resets_at: charged_window.map(|(_, end)| end),
            additional_spent: used
                .is_some_and(|used| policy.windows().any(|(slot, max, _)| slot > 0 && used.of(slot) >= max)),
        }
    }

    /// Whether the claim left the queue with no room: a window spent or its in-flight cap
    /// reached. The next claim is deferred, so the store watches the queue for its reopening
    /// (REQ-8, issue #28).
    pub fn leaves_no_room(&self) -> bool {
        self.remaining == Some(0)
            || self.additional_spent
            || self.max_in_flight.is_some_and(|max| self.in_flight >= max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    fn daily(max: i64) -> Policy {
        Policy::from_request(
            &json!({"max_claims_per_window": max, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
        )
        .expect("valid")
    }

    // SPEC-0030 REQ-1
    #[test]
    fn req1_zero_pauses_and_limits_refuse_at_the_cap() {
        let paused =
            Policy { max_in_flight: Some(0), max_claims_per_window: None, window: None, additional_windows: vec![] };
        assert_eq!(decide(&paused, 0, 0), Decision::Refuse(Reason::Paused));
        assert_eq!(decide(&daily(0), 0, 0), Decision::Refuse(Reason::Paused));
        assert_eq!(decide(&daily(10), 0, 9), Decision::Admit);
        assert_eq!(decide(&daily(10), 0, 10), Decision::Refuse(Reason::WindowExhausted));
        let capped =
            Policy { max_in_flight: Some(2), max_claims_per_window: None, window: None, additional_windows: vec![] };
        assert_eq!(decide(&capped, 1, 0), Decision::Admit);
        assert_eq!(decide(&capped, 2, 0), Decision::Refuse(Reason::InFlightFull));
        let both = Policy { max_in_flight: Some(1), ..daily(1) };
        assert_eq!(decide(&both, 1, 1), Decision::Refuse(Reason::WindowExhausted));
    }

    // SPEC-0030 REQ-1
    #[test]
    fn req1_invalid_requests_name_the_field() {
        let cases = [
            (json!({"max_in_flight": 10001}), "max_in_flight"),
            (json!({"max_in_flight": -1}), "max_in_flight"),
            (json!({"max_in_flight": "3"}), "max_in_flight"),
            (
                json!({"max_claims_per_window": 1_000_001, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
                "max_claims_per_window",
            ),
            (json!({"max_claims_per_window": 5}), "window"),
            (json!({}), "max_claims_per_window"),
            (json!({"max_in_flight": null, "max_claims_per_window": null}), "max_claims_per_window"),
            (
                json!({"max_claims_per_window": 5, "window": {"period": "day", "tz": "Mars/Olympus", "start": "00:00"}}),
                "window.tz",
            ),
            (
                json!({"max_claims_per_window": 5, "window": {"period": "day", "tz": "UTC", "start": "00:00", "weekday": "Mon"}}),
                "window.weekday",
            ),
            (
                json!({"max_claims_per_window": 5, "window": {"period": "week", "tz": "UTC", "start": "00:00"}}),
                "window.weekday",
            ),
            (
                json!({"max_claims_per_window": 5, "window": {"period": "month", "tz": "UTC", "start": "00:00"}}),
                "window.period",
            ),
            (
                json!({"max_claims_per_window": 5, "window": {"period": "day", "tz": "UTC", "start": "25:00"}}),
                "window.start",
            ),
            (json!({"max_claims_per_window": 5, "window": {"period": "day", "tz": "UTC"}}), "window.start"),
            (json!({"max_claims_per_window": 5, "window": "daily"}), "window"),
            (json!({"max_in_flight": 1, "burst": 3}), "burst"),
        ];
        for (body, field) in cases {
            let error = Policy::from_request(&body).expect_err(&body.to_string());
            assert_eq!((error.code, error.extras["field"].as_str()), (Code::InvalidArgument, Some(field)), "{body}");
        }
    }

    #[test]
    fn req1_a_policy_round_trips_through_its_json() {
        let weekly = json!({"max_in_flight": 3, "max_claims_per_window": 100,
            "window": {"period": "week", "tz": "Europe/Berlin", "start": "09:00", "weekday": "Mon"}});
        assert_eq!(Policy::from_request(&weekly).expect("valid").to_json(), weekly);
    }

    // SPEC-0030 REQ-9
    #[test]
    fn req9_a_stored_row_that_fails_validation_is_an_error() {
        assert!(
            Policy::from_stored(None, Some(5), Some("day"), Some("Mars/Olympus"), Some("00:00"), None, None).is_err()
        );
        assert!(Policy::from_stored(None, Some(5), None, None, None, None, None).is_err());
        assert!(Policy::from_stored(None, None, None, None, None, None, None).is_err());
        assert!(Policy::from_stored(Some(20_000), None, None, None, None, None, None).is_err());
        assert!(Policy::from_stored(Some(2), None, None, None, None, None, None).is_ok());
    }

    // SPEC-0030 REQ-6
    #[test]
    fn req6_status_says_why_and_until_when() {
        let now = DateTime::parse_from_rfc3339("2026-11-30T17:00:00Z").expect("instant").to_utc();
        let observed = |in_flight, used, lease: Option<&str>| Observation {
            now,
            in_flight,
            used,
            additional_used: [0; ADDITIONAL_WINDOWS_MAX],
            recent: Default::default(),
            earliest_lease_expiry: lease.map(|l| DateTime::parse_from_rfc3339(l).expect("instant").to_utc()),
            reaper_interval: Duration::seconds(30),
        };
        let exhausted = status(&daily(100), &observed(0, 100, None));
        assert_eq!(
            (exhausted.status, exhausted.remaining, exhausted.used),
            (QueueStatus::WindowExhausted, Some(0), Some(100))
        );
        assert_eq!(exhausted.hint.next_eligible_at.map(|t| t.to_rfc3339()), Some("2026-12-01T00:00:00+00:00".into()));
        assert_eq!(exhausted.hint.exact, Some(true));

        let capped =
            Policy { max_in_flight: Some(2), max_claims_per_window: None, window: None, additional_windows: vec![] };
        let full = status(&capped, &observed(2, 0, Some("2026-11-30T17:04:00Z")));
        assert_eq!((full.status, full.used, full.window_resets_at), (QueueStatus::InFlightFull, None, None));
        assert_eq!(full.hint.next_eligible_at.map(|t| t.to_rfc3339()), Some("2026-11-30T17:04:30+00:00".into()));
        assert_eq!(full.hint.exact, Some(false));

        // Every lease lapsed: no live lease to wait for, so the next reap (one interval) frees one.
        let lapsed_only = status(&capped, &observed(2, 0, None));
        assert_eq!(lapsed_only.hint.next_eligible_at.map(|t| t.to_rfc3339()), Some("2026-11-30T17:00:30+00:00".into()));

        let open = status(&daily(100), &observed(0, 73, None));
        assert_eq!(
            (open.status, open.remaining, open.hint),
            (QueueStatus::Admitted, Some(27), AdmissionHint::ADMITTED)
        );
        let paused = status(&Policy { max_in_flight: Some(0), ..daily(5) }, &observed(0, 0, None));
        assert_eq!((paused.status, paused.hint.next_eligible_at), (QueueStatus::Paused, None));
    }

    fn minute_and_daily(per_minute: i64, per_day: i64) -> Policy {
        Policy::from_request(&json!({"max_claims_per_window": per_day,
            "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"},
            "additional_windows": [{"max_claims": per_minute, "window": {"period": "minute"}}]}))
        .expect("valid")
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("instant").to_utc()
    }

    fn observed_with(now: &str, used: Used) -> Observation {
        Observation {
            now: at(now),
            in_flight: 0,
            used: used.primary,
            additional_used: used.additional,
            recent: Default::default(),
            earliest_lease_expiry: None,
            reaper_interval: Duration::seconds(30),
        }
    }

    // Issue #52: several windows on one policy
    #[test]
    fn ext52_a_minute_window_defers_the_third_quick_claim() {
        let policy = minute_and_daily(2, 100);
        let used = |day, minute| Used { primary: day, additional: [minute, 0, 0, 0] };
        assert_eq!(decide(&policy, 0, used(1, 1)), Decision::Admit);
        assert_eq!(decide(&policy, 0, used(2, 2)), Decision::Refuse(Reason::WindowExhausted));
        let deferred = status(&policy, &observed_with("2026-12-07T17:03:20Z", used(2, 2)));
        assert_eq!(deferred.status, QueueStatus::WindowExhausted);
        assert_eq!(deferred.hint.next_eligible_at, Some(at("2026-12-07T17:04:00Z")));
        assert_eq!((deferred.hint.exact, deferred.hint.window), (Some(true), Some(WindowSpec::MINUTE)));
        // The primary window's fields keep their meaning; `windows` has both, the primary first.
        assert_eq!((deferred.used, deferred.remaining), (Some(2), Some(98)));
        let windows: Vec<(&str, i64, i64, i64)> =
            deferred.windows.iter().map(|w| (w.window.period_name(), w.max_claims, w.used, w.remaining)).collect();
        assert_eq!(windows, [("day", 100, 2, 98), ("minute", 2, 2, 0)]);
        assert_eq!(deferred.windows[1].window_start, at("2026-12-07T17:03:00Z"));
        assert_eq!(deferred.windows[0].window_resets_at, at("2026-12-08T08:00:00Z"));
    }

    // Issue #52: next_eligible_at is the first instant every window admits again
    #[test]
    fn ext52_next_eligible_at_waits_for_every_exhausted_window() {
        let policy = minute_and_daily(2, 3);
        let both =
            status(&policy, &observed_with("2026-12-07T17:03:20Z", Used { primary: 3, additional: [2, 0, 0, 0] }));
        assert_eq!(both.hint.next_eligible_at, Some(at("2026-12-08T08:00:00Z")));
        assert_eq!(both.hint.window, policy.window);
        let day_only = status(&policy, &observed_with("2026-12-07T17:03:20Z", Used { primary: 3, additional: [0; 4] }));
        assert_eq!((day_only.hint.next_eligible_at, day_only.hint.window), (both.hint.next_eligible_at, policy.window));
        // A zero limit in any window pauses, with no time at all.
        let paused = status(&minute_and_daily(0, 3), &observed_with("2026-12-07T17:03:20Z", Used::default()));
        assert_eq!((paused.status, paused.hint.next_eligible_at), (QueueStatus::Paused, None));
    }

    // Issue #52: a group's claims in turn are charged to every window
    #[test]
    fn ext52_claims_in_turn_count_against_every_window() {
        let policy = minute_and_daily(2, 100);
        let observed = observed_with("2026-12-07T17:03:20Z", Used { primary: 40, additional: [0; 4] });
        let in_turn = decide_in_turn(&policy, &observed, &[false, false, false], |used| used);
        assert_eq!(in_turn.admitted.len(), 2);
        let (reason, seen) = in_turn.refused.expect("the third is refused");
        assert_eq!((reason, seen.used, seen.additional_used[0]), (Reason::WindowExhausted, 42, 2));
        let headroom = Headroom::after_claim(&policy, 0, Some(seen.usage()), policy.charged_window(observed.now));
        assert!(headroom.leaves_no_room() && headroom.remaining == Some(58));
    }

    // Issue #52: bad input names the field
    #[test]
    fn ext52_invalid_additional_windows_name_the_field() {
        let daily = json!({"period": "day", "tz": "UTC", "start": "00:00"});
        let minute = json!({"max_claims": 5, "window": {"period": "minute"}});
        let with =
            |additional: Value| json!({"max_claims_per_window": 10, "window": daily, "additional_windows": additional});
        let cases = [
            (
                with(json!([minute, minute, {"max_claims": 5, "window": {"period": "month"}}])),
                "additional_windows[2].window.period",
            ),
            (with(json!([minute, minute, minute, minute, minute])), "additional_windows[4]"),
            (
                with(json!([{"max_claims": 5, "window": {"period": "minute", "tz": "UTC"}}])),
                "additional_windows[0].window.tz",
            ),
            (
                with(json!([{"max_claims": 1_000_001, "window": {"period": "minute"}}])),
                "additional_windows[0].max_claims",
            ),
            (with(json!([{"window": {"period": "minute"}}])), "additional_windows[0].max_claims"),
            (with(json!([{"max_claims": 5}])), "additional_windows[0].window"),
            (
                with(json!([{"max_claims": 5, "window": {"period": "hour", "tz": "UTC"}}])),
                "additional_windows[0].window.start",
            ),
            (
                with(json!([{"max_claims": 5, "window": {"period": "minute"}, "burst": 1}])),
                "additional_windows[0].burst",
            ),
            (with(json!({"max_claims": 5})), "additional_windows"),
            (json!({"max_in_flight": 2, "additional_windows": [minute]}), "max_claims_per_window"),
            (json!({"max_claims_per_window": 5, "window": {"period": "minute", "tz": "UTC"}}), "window.tz"),
            (json!({"max_claims_per_window": 5, "window": {"period": "minute", "start": "00:00"}}), "window.start"),
        ];
        for (body, field) in cases {
            let error = Policy::from_request(&body).expect_err(&body.to_string());
            assert_eq!((error.code, error.extras["field"].as_str()), (Code::InvalidArgument, Some(field)), "{body}");
            assert!(error.message.contains(field), "{} does not name {field}", error.message);
        }
    }

    // Issue #52: the policy with several windows round trips, and a stored one evaluates
    #[test]
    fn ext52_a_policy_with_several_windows_round_trips_through_its_json() {
        let body = json!({"max_in_flight": null, "max_claims_per_window": 5000,
            "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"},
            "additional_windows": [{"max_claims": 60, "window": {"period": "minute"}},
                {"max_claims": 900, "window": {"period": "hour", "tz": "UTC", "start": "00:30"}}]});
        let policy = Policy::from_request(&body).expect("valid");
        assert_eq!(policy.to_json(), body);
        let stored = Policy::from_stored(
            None,
            Some(5000),
            Some("day"),
            Some("America/Los_Angeles"),
            Some("00:00"),
            None,
            policy.additional_windows_json().as_ref(),
        );
        assert_eq!(stored, Ok(policy));
        let minute = Policy::from_stored(None, Some(5), Some("minute"), None, None, None, None).expect("minute");
        assert_eq!(minute.to_json()["window"], json!({"period": "minute"}));
    }
    // Issue #52: with several windows the first to run out is the forecast.
    #[test]
    fn ext52_the_binding_window_is_the_first_to_run_out() {
        let policy = Policy::from_request(&json!({"max_claims_per_window": 1000,
            "window": {"period": "day", "tz": "UTC", "start": "00:00"},
            "additional_windows": [{"max_claims": 70, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}}]}))
        .expect("valid");
        let now = DateTime::parse_from_rfc3339("2026-12-07T15:15:00Z").expect("instant").to_utc();
        let recent = RecentCharges::from_ledger(now, (1..=15).map(|k| (now - chrono::TimeDelta::minutes(k), 4)));
        let used = Used { primary: 500, additional: [60, 0, 0, 0] };
        // 60 units in 15 minutes: the hour's 10 left go in 2.5 minutes, the day's 500 in 125.
        assert_eq!(
            forecast_exhausted_at(&policy, now, used, &recent),
            Some(DateTime::parse_from_rfc3339("2026-12-07T15:17:30Z").expect("instant").to_utc())
        );
    }

    fn shared(name: &str, max_claims: i64, used: i64, period: &str) -> SharedUse {
        let window = match period {
            "minute" => WindowSpec::parse_fields("minute", None, None, None),
            other => WindowSpec::parse(other, "UTC", "00:00", None),
        }
        .expect("window");
        SharedUse { name: name.into(), max_claims, window, used }
    }

    // Issue #52 "two queues share one daily budget": a member queue whose own window admits is
    // deferred by the spent budget until it resets, named, exactly; the budgets are listed.
    #[test]
    fn ext52_a_spent_shared_budget_defers_its_member_until_it_resets() {
        let observed = observed_with("2026-12-07T15:00:30Z", Used::from(3));
        let budgets = [shared("key", 100, 100, "day")];
        let spent = with_shared_budgets(status(&daily(10), &observed), &budgets, observed.now);
        assert_eq!(spent.status, QueueStatus::SharedBudgetExhausted);
        assert_eq!(spent.hint.reason, Some(Reason::SharedBudgetExhausted));
        assert_eq!(spent.hint.next_eligible_at, Some(at("2026-12-08T00:00:00Z")));
        assert_eq!((spent.hint.exact, spent.hint.window), (Some(true), None));
        assert_eq!(spent.hint.shared_budget.map(|name| name.to_string()), Some("key".into()));
        assert_eq!(spent.shared_budgets.len(), 1);
        assert_eq!((spent.shared_budgets[0].used, spent.shared_budgets[0].remaining), (100, 0));
        assert_eq!(
            decide_with_shared(Some(&daily(10)), 0, Used::from(3), &budgets),
            Decision::Refuse(Reason::SharedBudgetExhausted)
        );
        assert_eq!(
            decide_with_shared(None, 0, Used::from(0), &budgets),
            Decision::Refuse(Reason::SharedBudgetExhausted)
        );
        let open = [shared("key", 100, 99, "day")];
        assert_eq!(decide_with_shared(None, 0, Used::from(0), &open), Decision::Admit);
        let admitted = with_shared_budgets(status(&daily(10), &observed), &open, observed.now);
        assert_eq!((admitted.status, admitted.hint), (QueueStatus::Admitted, AdmissionHint::ADMITTED));
    }

    // Issue #52: next_eligible_at is the first instant every window and budget admits: the
    // latest boundary, named by whichever defers longest; a pause keeps its word.
    #[test]
    fn ext52_the_window_or_budget_that_defers_longest_names_the_wait() {
        let observed = observed_with("2026-12-07T15:00:30Z", Used::from(10));
        // The queue's day is spent too, until midnight; a minute budget turns first.
        let minute = [shared("burst", 5, 5, "minute")];
        let by_window = with_shared_budgets(status(&daily(10), &observed), &minute, observed.now);
        assert_eq!(by_window.hint.reason, Some(Reason::WindowExhausted));
        assert_eq!(by_window.hint.next_eligible_at, Some(at("2026-12-08T00:00:00Z")));
        // A week's budget outlasts the day.
        let week = [SharedUse {
            window: WindowSpec::parse("week", "UTC", "00:00", Some("Mon")).expect("week"),
            ..shared("weekly", 5, 5, "day")
        }];
        let by_budget = with_shared_budgets(status(&daily(10), &observed), &week, observed.now);
        assert_eq!(by_budget.hint.reason, Some(Reason::SharedBudgetExhausted));
        assert_eq!(by_budget.hint.next_eligible_at, Some(at("2026-12-14T00:00:00Z")));
        // A spent budget outranks a full in-flight cap, as a spent window does.
        let capped = Policy::from_request(&json!({"max_in_flight": 1})).expect("valid");
        let full = Observation { in_flight: 1, ..observed_with("2026-12-07T15:00:30Z", Used::from(0)) };
        let spent = with_shared_budgets(status(&capped, &full), &minute, full.now);
        assert_eq!(
            (spent.hint.reason, spent.hint.next_eligible_at),
            (Some(Reason::SharedBudgetExhausted), Some(at("2026-12-07T15:01:00Z")))
        );
        // A paused policy stays paused; a budget of zero admits nothing, without a time.
        let paused = with_shared_budgets(status(&daily(0), &observed), &minute, observed.now);
        assert_eq!(paused.hint.reason, Some(Reason::Paused));
        let zero = [shared("a-zero", 0, 0, "day"), shared("b-burst", 5, 5, "minute")];
        let none = with_shared_budgets(status(&daily(100), &observed), &zero, observed.now);
        assert_eq!((none.hint.reason, none.hint.next_eligible_at), (Some(Reason::SharedBudgetExhausted), None));
        assert_eq!(none.hint.shared_budget.map(|name| name.to_string()), Some("a-zero".into()));
    }
}
