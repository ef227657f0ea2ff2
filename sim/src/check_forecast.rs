//! Issue #52's forecast (`forecast_exhausted_at`), judged on every status an agent read in the
//! run: a forecast is owed only for a window that still has units left and would run out before
//! it resets, so a non-null forecast must fall inside such a window (after it began, before its
//! reset). Computed from the answer's own `windows`, not from `models::forecast`, so a bug in the
//! rule both stores share is still seen.

use crate::trace::{StatusReply, TraceEvent, TraceLine};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// One violation per queue entry whose forecast no window of the entry can hold.
pub fn forecast_violations(trace: &[TraceLine]) -> Vec<String> {
    let mut violations = Vec::new();
    for line in trace {
        let TraceEvent::AdmissionStatus(StatusReply::Ok(body)) = &line.event else { continue };
        for entry in body["queues"].as_array().into_iter().flatten() {
            if let Some(problem) = forecast_problem(entry) {
                violations.push(format!("{problem} (queue {}): {line}", entry["queue"]));
            }
        }
    }
    violations
}

/// Why an entry's forecast is wrong, if it is.
fn forecast_problem(entry: &Value) -> Option<String> {
    let forecast = instant(&entry["forecast_exhausted_at"])?;
    let windows = entry["windows"].as_array().map(Vec::as_slice).unwrap_or_default();
    let held = windows.iter().any(|window| {
        let left = window["remaining"].as_i64().is_some_and(|remaining| remaining > 0);
        let began = instant(&window["window_start"]).is_some_and(|start| start < forecast);
        let resets_after = instant(&window["window_resets_at"]).is_some_and(|reset| forecast < reset);
        left && began && resets_after
    });
    (!held).then(|| format!("the forecast {forecast} is not before the reset of any window with units left"))
}

fn instant(value: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(value.as_str()?).ok().map(|at| at.to_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(forecast: &str, remaining: i64) -> Value {
        json!({"queue": "q", "forecast_exhausted_at": forecast, "windows": [{
            "remaining": remaining, "window_start": "2026-12-07T15:00:00Z", "window_resets_at": "2026-12-07T16:00:00Z"
        }]})
    }

    // Issue #52: null is owed when the window resets first, or has nothing left.
    #[test]
    fn ext52_a_forecast_past_the_reset_or_of_a_spent_window_is_a_violation() {
        assert_eq!(forecast_problem(&entry("2026-12-07T15:40:00Z", 3)), None);
        assert!(forecast_problem(&entry("2026-12-07T16:10:00Z", 3)).is_some());
        assert!(forecast_problem(&entry("2026-12-07T15:40:00Z", 0)).is_some());
        assert_eq!(forecast_problem(&json!({"queue": "q", "forecast_exhausted_at": null})), None);
    }
}
