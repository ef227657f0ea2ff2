//! Admission control's pure core: the policy, its validation, the decision, and the status
//! derived from what the claim transaction observed.
//!
//! Governing: SPEC-0030 REQ-1 (policy model), REQ-4 (the decision under the lock), REQ-6
//! (derived status, never stored), REQ-7 (headroom on a claim), REQ-9 (fail closed).
//!
//! `PgStore` and the reference model both call `decide` and `status`, so production and the
//! executable specification cannot drift apart.

use crate::error::{Error, Result};
use crate::window::WindowSpec;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Largest `max_in_flight` a policy may set (REQ-1).
pub const MAX_IN_FLIGHT_LIMIT: i64 = 10_000;
/// Largest `max_claims_per_window` a policy may set (REQ-1).
pub const MAX_CLAIMS_PER_WINDOW_LIMIT: i64 = 1_000_000;

/// The admission settings of one queue identity. At least one limit is set; a window exists
/// whenever the window limit does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub max_in_flight: Option<i64>,
    pub max_claims_per_window: Option<i64>,
    pub window: Option<WindowSpec>,
}

/// Why a queue identity admits no claim right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    WindowExhausted,
    InFlightFull,
    Paused,
    AdmissionUnavailable,
}

impl Reason {
    pub const ALL: [Reason; 4] =
        [Reason::WindowExhausted, Reason::InFlightFull, Reason::Paused, Reason::AdmissionUnavailable];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::WindowExhausted => "window_exhausted",
            Reason::InFlightFull => "in_flight_full",
            Reason::Paused => "paused",
            Reason::AdmissionUnavailable => "admission_unavailable",
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
}

impl QueueStatus {
    pub const ALL: [QueueStatus; 5] = [
        QueueStatus::Admitted,
        QueueStatus::WindowExhausted,
        QueueStatus::InFlightFull,
        QueueStatus::Paused,
        QueueStatus::AdmissionUnavailable,
    ];

    /// The status of an identity deferred for `reason`, or admitted (None).
    pub fn of(reason: Option<Reason>) -> QueueStatus {
        match reason {
            None => QueueStatus::Admitted,
            Some(Reason::WindowExhausted) => QueueStatus::WindowExhausted,
            Some(Reason::InFlightFull) => QueueStatus::InFlightFull,
            Some(Reason::Paused) => QueueStatus::Paused,
            Some(Reason::AdmissionUnavailable) => QueueStatus::AdmissionUnavailable,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueStatus::Admitted => "admitted",
            QueueStatus::WindowExhausted => Reason::WindowExhausted.as_str(),
            QueueStatus::InFlightFull => Reason::InFlightFull.as_str(),
            QueueStatus::Paused => Reason::Paused.as_str(),
            QueueStatus::AdmissionUnavailable => Reason::AdmissionUnavailable.as_str(),
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
/// the candidate itself on a takeover) and the current window's usage, both read under the lock.
/// A zero limit pauses. An exhausted window outranks a full in-flight cap: a freed slot would not
/// admit anything before the window turns, so the window's boundary is the honest answer.
pub fn decide(policy: &Policy, in_flight: i64, used: i64) -> Decision {
    if policy.max_in_flight == Some(0) || policy.max_claims_per_window == Some(0) {
        return Decision::Refuse(Reason::Paused);
    }
    if policy.max_claims_per_window.is_some_and(|max| used >= max) {
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
    let (mut in_flight, mut used) = (observed.in_flight, observed.used);
    let mut admitted = Vec::with_capacity(takes_over.len());
    for &takes_over in takes_over {
        let seen = Observation { in_flight: in_flight - i64::from(takes_over), used, ..*observed };
        if let Decision::Refuse(reason) = decide(policy, seen.in_flight, used_seen(seen.used)) {
            return InTurn { admitted, refused: Some((reason, seen)) };
        }
        admitted.push(seen);
        in_flight += i64::from(!takes_over);
        used += i64::from(policy.charges());
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
        if let Some(unknown) =
            map.keys().find(|k| !["max_in_flight", "max_claims_per_window", "window"].contains(&k.as_str()))
        {
            return Err(Error::invalid(unknown, format!("unknown field {unknown}")));
        }
        let max_in_flight = limit(map, "max_in_flight", MAX_IN_FLIGHT_LIMIT)?;
        let max_claims_per_window = limit(map, "max_claims_per_window", MAX_CLAIMS_PER_WINDOW_LIMIT)?;
        let window = match map.get("window") {
            None | Some(Value::Null) => None,
            Some(Value::Object(window)) => Some(window_from(window)?),
            Some(_) => return Err(Error::invalid("window", "window must be an object {period, tz, start, weekday?}")),
        };
        if max_in_flight.is_none() && max_claims_per_window.is_none() {
            return Err(Error::invalid("max_claims_per_window", "set max_in_flight, max_claims_per_window, or both"));
        }
        if max_claims_per_window.is_some() && window.is_none() {
            return Err(Error::invalid("window", "window is required when max_claims_per_window is set"));
        }
        Ok(Policy { max_in_flight, max_claims_per_window, window })
    }

    /// Rebuilds a policy from its stored columns. A row that fails validation (a zone the
    /// embedded database no longer knows, say) is an error the claim path turns into
    /// `admission_unavailable` (REQ-9), never a guess.
    pub fn from_stored(
        max_in_flight: Option<i32>,
        max_claims_per_window: Option<i32>,
        period: Option<&str>,
        tz: Option<&str>,
        start: Option<&str>,
        weekday: Option<&str>,
    ) -> std::result::Result<Policy, String> {
        let window = match (period, tz, start) {
            (Some(period), Some(tz), Some(start)) => {
                Some(WindowSpec::parse(period, tz, start, weekday).map_err(|e| format!("stored {e}"))?)
            }
            (None, None, None) => None,
            _ => return Err("stored window is incomplete".into()),
        };
        let policy = Policy {
            max_in_flight: max_in_flight.map(i64::from),
            max_claims_per_window: max_claims_per_window.map(i64::from),
            window,
        };
        let in_range = |value: Option<i64>, max: i64| value.is_none_or(|v| (0..=max).contains(&v));
        if !in_range(policy.max_in_flight, MAX_IN_FLIGHT_LIMIT)
            || !in_range(policy.max_claims_per_window, MAX_CLAIMS_PER_WINDOW_LIMIT)
            || (policy.max_in_flight.is_none() && policy.max_claims_per_window.is_none())
            || (policy.max_claims_per_window.is_some() && policy.window.is_none())
        {
            return Err("stored limits are invalid".into());
        }
        Ok(policy)
    }

    /// The policy as the API shows it and as the audit records it.
    pub fn to_json(&self) -> Value {
        json!({
            "max_in_flight": self.max_in_flight,
            "max_claims_per_window": self.max_claims_per_window,
            "window": self.window.as_ref().map(|w| {
                let mut window = json!({ "period": w.period_name(), "tz": w.tz.name(), "start": w.start_hhmm() });
                if let (Some(day), Some(map)) = (w.weekday_name(), window.as_object_mut()) {
                    map.insert("weekday".into(), Value::String(day.into()));
                }
                window
            }),
        })
    }

    /// Whether a committed claim charges a unit (REQ-3: only with a window limit).
    pub fn charges(&self) -> bool {
        self.max_claims_per_window.is_some()
    }

    /// The window a claim admitted at `now` is charged to, as (start, end): the one containing
    /// `now`, when the policy charges at all (REQ-3, REQ-5).
    pub fn charged_window(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        self.window.as_ref().filter(|_| self.charges()).map(|w| w.window_containing(now))
    }
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

fn window_from(window: &Map<String, Value>) -> Result<WindowSpec> {
    if let Some(unknown) = window.keys().find(|k| !["period", "tz", "start", "weekday"].contains(&k.as_str())) {
        return Err(Error::invalid(&format!("window.{unknown}"), format!("unknown field window.{unknown}")));
    }
    let text = |key: &str| -> Result<Option<&str>> {
        match window.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Error::invalid(&format!("window.{key}"), format!("window.{key} must be a string"))),
        }
    };
    let required = |key: &str| -> Result<&str> {
        text(key)?.ok_or_else(|| Error::invalid(&format!("window.{key}"), format!("window.{key} is required")))
    };
    let (period, tz, start) = (required("period")?, required("tz")?, required("start")?);
    WindowSpec::parse(period, tz, start, text("weekday")?).map_err(|e| Error::invalid(e.field, e.message))
}

/// What the status of a queue identity is derived from: observations, never stored state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub now: DateTime<Utc>,
    /// Claimed todos of the identity, live or lapsed-but-not-reaped.
    pub in_flight: i64,
    /// Units charged in the window containing `now`.
    pub used: i64,
    /// The earliest lease expiry among the in-flight todos.
    pub earliest_lease_expiry: Option<DateTime<Utc>>,
    /// The lease reaper's tick, for the in-flight hint.
    pub reaper_interval: Duration,
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
}

impl AdmissionHint {
    pub const ADMITTED: AdmissionHint = AdmissionHint { reason: None, next_eligible_at: None, exact: None };

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
pub fn status(policy: &Policy, observed: &Observation) -> PolicyStatus {
    let window = policy.window.as_ref().map(|w| w.window_containing(observed.now));
    let windowed = policy.max_claims_per_window.is_some();
    let hint = match decide(policy, observed.in_flight, observed.used) {
        Decision::Admit => AdmissionHint::ADMITTED,
        Decision::Refuse(reason) => {
            let (next_eligible_at, exact) = match reason {
                Reason::WindowExhausted => (window.map(|(_, end)| end), Some(true)),
                Reason::InFlightFull => {
                    let expiry = observed.earliest_lease_expiry.unwrap_or(observed.now).max(observed.now);
                    (Some(expiry + observed.reaper_interval), Some(false))
                }
                Reason::Paused | Reason::AdmissionUnavailable => (None, None),
            };
            AdmissionHint { reason: Some(reason), next_eligible_at, exact }
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
        hint,
    }
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
        hint: AdmissionHint { reason: Some(Reason::AdmissionUnavailable), next_eligible_at: None, exact: None },
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
}

impl Headroom {
    /// The headroom after an admitted claim: `in_flight_before` did not count the claimed todo,
    /// `used` is the window's usage after its charge (None when nothing was charged), and
    /// `charged_window` is [`Policy::charged_window`] at the clock of the claim.
    pub fn after_claim(
        policy: &Policy,
        in_flight_before: i64,
        used: Option<i64>,
        charged_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    ) -> Headroom {
        Headroom {
            max_in_flight: policy.max_in_flight,
            in_flight: in_flight_before + 1,
            max_claims_per_window: policy.max_claims_per_window,
            used,
            remaining: policy.max_claims_per_window.zip(used).map(|(max, used)| (max - used).max(0)),
            window_resets_at: charged_window.map(|(_, end)| end),
        }
    }

    /// Whether the claim left the queue with no room: its window spent or its in-flight cap
    /// reached. The next claim is deferred, so the store watches the queue for its reopening
    /// (REQ-8, issue #28).
    pub fn leaves_no_room(&self) -> bool {
        self.remaining == Some(0) || self.max_in_flight.is_some_and(|max| self.in_flight >= max)
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
        let paused = Policy { max_in_flight: Some(0), max_claims_per_window: None, window: None };
        assert_eq!(decide(&paused, 0, 0), Decision::Refuse(Reason::Paused));
        assert_eq!(decide(&daily(0), 0, 0), Decision::Refuse(Reason::Paused));
        assert_eq!(decide(&daily(10), 0, 9), Decision::Admit);
        assert_eq!(decide(&daily(10), 0, 10), Decision::Refuse(Reason::WindowExhausted));
        let capped = Policy { max_in_flight: Some(2), max_claims_per_window: None, window: None };
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
        assert!(Policy::from_stored(None, Some(5), Some("day"), Some("Mars/Olympus"), Some("00:00"), None).is_err());
        assert!(Policy::from_stored(None, Some(5), None, None, None, None).is_err());
        assert!(Policy::from_stored(None, None, None, None, None, None).is_err());
        assert!(Policy::from_stored(Some(20_000), None, None, None, None, None).is_err());
        assert!(Policy::from_stored(Some(2), None, None, None, None, None).is_ok());
    }

    // SPEC-0030 REQ-6
    #[test]
    fn req6_status_says_why_and_until_when() {
        let now = DateTime::parse_from_rfc3339("2026-11-30T17:00:00Z").expect("instant").to_utc();
        let observed = |in_flight, used, lease: Option<&str>| Observation {
            now,
            in_flight,
            used,
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

        let capped = Policy { max_in_flight: Some(2), max_claims_per_window: None, window: None };
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
}
