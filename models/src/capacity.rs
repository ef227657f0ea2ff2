//! Intake capacity (intake-capacity.md): the most pending todos one queue identity may hold.
//! One install-wide value, by precedence: a valid `SWITCHBOARD_QUEUE_MAX_PENDING` > the persisted
//! install setting > the built-in default 0 (= unlimited).
//!
//! Called "intake" so it is never confused with SPEC-0030's claim-time admission: a refusal here
//! is `queue_full`, never `deferred`, and it never charges or refunds window usage.

use crate::error::{Code, Error, Result};
use crate::identity::QueueIdentity;
use crate::limits::QUEUE_FULL_RETRY_AFTER_SECONDS;
use serde_json::Value;

/// The environment variable that overrides (and locks) the setting.
pub const CAPACITY_ENV: &str = "SWITCHBOARD_QUEUE_MAX_PENDING";
/// Built-in default: unlimited. (The ADR's 10 would refuse ordinary webhook bursts.)
pub const CAPACITY_DEFAULT: i64 = 0;
/// Largest value the persisted setting accepts.
pub const CAPACITY_SETTING_MAX: i64 = 1_000_000;
/// The settings row's key.
pub const CAPACITY_SETTING_KEY: &str = "queue_max_pending_per_queue";

/// What the environment says, parsed once at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapacityEnv {
    /// Unset, blank or unparseable: the lower sources apply.
    Unset,
    /// A valid integer: it wins and locks the setting. Values ≤ 0 mean 0 (unlimited).
    Locked(i64),
}

/// Parses the environment value. An unparseable value is ignored, with a warning to log that
/// names the variable.
pub fn parse_env(raw: Option<&str>) -> (CapacityEnv, Option<String>) {
    let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
        return (CapacityEnv::Unset, None);
    };
    match raw.parse::<i64>() {
        Ok(value) => (CapacityEnv::Locked(value.max(0)), None),
        Err(_) => (
            CapacityEnv::Unset,
            Some(format!(
                "{CAPACITY_ENV}={raw:?} is not an integer; ignoring it (the persisted setting or the default applies)"
            )),
        ),
    }
}

/// A persisted value as stored; anything but an integer in range is corrupt and ignored.
pub fn parse_setting(stored: Option<&Value>) -> Option<i64> {
    stored.and_then(Value::as_i64).filter(|v| (0..=CAPACITY_SETTING_MAX).contains(v))
}

/// The effective capacity and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// The persisted setting, when valid.
    pub setting: Option<i64>,
    pub effective: i64,
    pub source: &'static str,
    pub locked: bool,
}

pub fn effective(env: CapacityEnv, setting: Option<i64>) -> Capacity {
    match (env, setting) {
        (CapacityEnv::Locked(value), _) => Capacity { setting, effective: value, source: "environment", locked: true },
        (CapacityEnv::Unset, Some(value)) => Capacity { setting, effective: value, source: "setting", locked: false },
        (CapacityEnv::Unset, None) => {
            Capacity { setting, effective: CAPACITY_DEFAULT, source: "default", locked: false }
        }
    }
}

/// Whether the setting may be set to `max_pending`: not while the environment locks it
/// (`conflict`, state `locked`), and only within 0 (unlimited) to `CAPACITY_SETTING_MAX`.
pub fn check_settable(env: CapacityEnv, max_pending: i64) -> Result<()> {
    if let CapacityEnv::Locked(_) = env {
        return Err(
            Error::new(Code::Conflict, format!("the capacity is locked by {CAPACITY_ENV}")).with("state", "locked")
        );
    }
    if !(0..=CAPACITY_SETTING_MAX).contains(&max_pending) {
        return Err(Error::invalid(
            "max_pending_per_queue",
            format!("max_pending_per_queue must be 0 (unlimited) to {CAPACITY_SETTING_MAX}"),
        ));
    }
    Ok(())
}

/// `queue_full` when `identity` already holds `pending` todos and its capacity is `max` (> 0):
/// the refusal names the queue, the count and the capacity, and when to try again.
pub fn check_room(identity: &QueueIdentity, pending: i64, max: i64) -> Result<()> {
    if pending >= max {
        return Err(Error::new(
            Code::QueueFull,
            format!("queue {} holds {pending} pending todos, its capacity is {max}", identity.queue),
        )
        .with("queue", identity.queue.clone())
        .with("pending", pending)
        .with("max", max)
        .with("retry_after_seconds", QUEUE_FULL_RETRY_AFTER_SECONDS));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // intake scenario 19: env 20 over persisted 6 → 20, environment, locked.
    #[test]
    fn environment_wins_and_locks() {
        let (env, warning) = parse_env(Some("20"));
        assert_eq!((env, warning), (CapacityEnv::Locked(20), None));
        assert_eq!(
            effective(env, Some(6)),
            Capacity { setting: Some(6), effective: 20, source: "environment", locked: true }
        );
    }

    // intake scenario 20: `many` warns and is ignored; `-3` is 0 and locks; nothing set is 0.
    #[test]
    fn environment_parsing_rules() {
        let (env, warning) = parse_env(Some("many"));
        assert_eq!(env, CapacityEnv::Unset);
        assert!(warning.is_some_and(|w| w.contains(CAPACITY_ENV)));
        assert_eq!(effective(env, Some(6)).effective, 6);
        assert_eq!(parse_env(Some("-3")).0, CapacityEnv::Locked(0));
        assert_eq!(parse_env(Some("  ")).0, CapacityEnv::Unset);
        assert_eq!(
            effective(CapacityEnv::Unset, None),
            Capacity { setting: None, effective: 0, source: "default", locked: false }
        );
    }

    // intake scenario 22: a corrupt stored value falls back to the default.
    #[test]
    fn corrupt_settings_are_ignored() {
        for corrupt in [json!("ten"), json!(-1), json!(2_000_000), json!(1.5), json!(null)] {
            assert_eq!(parse_setting(Some(&corrupt)), None, "{corrupt}");
        }
        assert_eq!(parse_setting(Some(&json!(7))), Some(7));
    }
}
