//! When a budget will run out at the rate it is being spent (issue #52, `forecast_exhausted_at`):
//! the rule the status of every surface applies, from the charge ledger's recent minutes.
//!
//! A window's rate is the units charged over the last [`FORECAST_SPAN`] (or since the window
//! began, if later) divided by that span's length; at that rate its remaining units run out at
//! `now + remaining / rate`. That instant is the forecast unless the window resets first (then
//! the budget does not run out in this window, and there is nothing to warn of), nothing was
//! charged in the span (no rate), or nothing remains (the status already says exhausted). With
//! several windows the binding one is the one that runs out first (`admission::status` takes the
//! earliest over a policy's windows). The span starts on a whole minute so the ledger's
//! per-minute units count exactly the claims inside it.
//!
//! Pure, as `admission` is, and a leaf beneath it: the engine and the model store hand in the
//! ledger's recent minutes.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

/// How far back the rate looks.
pub const FORECAST_SPAN: TimeDelta = TimeDelta::minutes(15);
/// How many ledger minutes a forecast reads: the span's, and the current minute's.
pub const RECENT_MINUTES: usize = 16;

/// The ledger's units in the [`RECENT_MINUTES`] whole minutes ending with the one containing
/// `now`: `units[k]` is the minute `k` minutes before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecentCharges {
    pub units: [i64; RECENT_MINUTES],
}

impl RecentCharges {
    /// From ledger rows `(minute, units)`; rows outside the recent minutes are ignored.
    pub fn from_ledger(now: DateTime<Utc>, ledger: impl IntoIterator<Item = (DateTime<Utc>, i64)>) -> RecentCharges {
        let current = minute_of(now);
        let mut recent = RecentCharges::default();
        for (minute, units) in ledger {
            let back = (current - minute).num_minutes();
            if let Ok(back) = usize::try_from(back)
                && back < RECENT_MINUTES
            {
                recent.units[back] += units;
            }
        }
        recent
    }

    /// The first ledger minute a forecast at `now` reads.
    pub fn oldest_minute(now: DateTime<Utc>) -> DateTime<Utc> {
        minute_of(now) - TimeDelta::minutes(RECENT_MINUTES as i64 - 1)
    }

    /// Units charged at or after the whole minute `since`.
    fn since(&self, now: DateTime<Utc>, since: DateTime<Utc>) -> i64 {
        let back = (minute_of(now) - since).num_minutes().clamp(-1, RECENT_MINUTES as i64 - 1);
        self.units.iter().take(usize::try_from(back + 1).unwrap_or(0)).sum()
    }
}

fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(at)
}

/// One window's forecast: when `max - used` more units run out at the recent rate, if before
/// `resets_at`.
pub fn window_exhausted_at(
    now: DateTime<Utc>,
    (window_start, resets_at): (DateTime<Utc>, DateTime<Utc>),
    max: i64,
    used: i64,
    recent: &RecentCharges,
) -> Option<DateTime<Utc>> {
    let remaining = max - used;
    let span_start = minute_of(now - FORECAST_SPAN).max(window_start);
    let span_ms = (now - span_start).num_milliseconds();
    let units = recent.since(now, span_start);
    if remaining <= 0 || units <= 0 || span_ms <= 0 {
        return None;
    }
    // remaining / (units / span) in milliseconds, rounded up: the instant the last unit goes.
    let (numerator, units) = (i128::from(remaining) * i128::from(span_ms), i128::from(units));
    let until_ms = (numerator + units - 1) / units; // all positive: the ceiling
    let at = i64::try_from(until_ms).ok().and_then(|ms| now.checked_add_signed(TimeDelta::milliseconds(ms)))?;
    (at < resets_at || crate::mutants::hooks::forecast_ignores_the_reset()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowSpec;
    use proptest::prelude::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("instant").to_utc()
    }

    // Issue #52 "when it will run out": 10 claims in the last 10 minutes of a 100-a-day window
    // with 40 left run out in 40 more minutes.
    #[test]
    fn ext52_a_budget_spent_steadily_runs_out_at_its_rate() {
        let now = at("2026-12-07T15:00:00Z");
        let day = (at("2026-12-07T08:00:00Z"), at("2026-12-08T08:00:00Z"));
        let ledger = (1..=10).map(|k| (now - TimeDelta::minutes(k), 1));
        let recent = RecentCharges::from_ledger(now, ledger);
        // The span is the last 15 minutes: 10 units in 15 minutes, 40 left → 60 minutes.
        assert_eq!(window_exhausted_at(now, day, 100, 60, &recent), Some(at("2026-12-07T16:00:00Z")));
        // Nothing left: the status already says exhausted. No claim in the span: no rate.
        assert_eq!(window_exhausted_at(now, day, 100, 100, &recent), None);
        assert_eq!(window_exhausted_at(now, day, 100, 60, &RecentCharges::default()), None);
        // A reset before the forecast: nothing to warn of.
        let hour = (at("2026-12-07T14:30:00Z"), at("2026-12-07T15:30:00Z"));
        assert_eq!(window_exhausted_at(now, hour, 1000, 10, &recent), None);
    }

    // Issue #52: the span starts at the window's start when that is later.
    #[test]
    fn ext52_a_young_window_takes_its_rate_since_it_began() {
        let now = at("2026-12-07T15:05:00Z");
        let hour = (at("2026-12-07T15:00:00Z"), at("2026-12-07T16:00:00Z"));
        let recent =
            RecentCharges::from_ledger(now, [(at("2026-12-07T14:58:00Z"), 50), (at("2026-12-07T15:01:00Z"), 5)]);
        // 5 units in 5 minutes; 20 left → 20 minutes.
        assert_eq!(window_exhausted_at(now, hour, 30, 10, &recent), Some(at("2026-12-07T15:25:00Z")));
    }

    proptest! {
        // Issue #52: the forecast agrees with a replay that keeps charging at the recent rate,
        // one unit at a time, until the window runs out or resets.
        #[test]
        fn ext52_the_forecast_agrees_with_a_replay_at_the_recent_rate(
            minutes in prop::collection::vec(0_i64..4, RECENT_MINUTES),
            second in 0_i64..60,
            max in 1_i64..200,
            used in 0_i64..200,
            hour_start_back in 0_i64..120,
        ) {
            let now = at("2026-12-07T15:00:00Z") + TimeDelta::seconds(second);
            let start = minute_of(now) - TimeDelta::minutes(hour_start_back % 60);
            let window = WindowSpec::parse("hour", "UTC", &format!("00:{:02}", start.format("%M")), None).expect("valid");
            let span = window.window_containing(now);
            prop_assert_eq!(span.0, start);
            let ledger: Vec<(DateTime<Utc>, i64)> =
                minutes.iter().enumerate().map(|(k, units)| (minute_of(now) - TimeDelta::minutes(k as i64), *units)).collect();
            let recent = RecentCharges::from_ledger(now, ledger.iter().copied());
            let forecast = window_exhausted_at(now, span, max, used, &recent);
            // The replay: the span's units and length, then one unit every span/units.
            let span_start = minute_of(now - FORECAST_SPAN).max(span.0);
            let units: i64 = ledger.iter().filter(|(m, _)| *m >= span_start).map(|(_, u)| u).sum();
            let span_ms = (now - span_start).num_milliseconds();
            let replayed = if used >= max || units == 0 || span_ms == 0 {
                None
            } else {
                let mut left = max - used;
                let mut t_ms: i128 = 0;
                let mut charged: i128 = 0;
                while left > 0 {
                    charged += 1;
                    // The instant of the charged-th unit at the rate, rounded up.
                    let exact = charged * i128::from(span_ms);
                    t_ms = exact / i128::from(units) + i128::from(exact % i128::from(units) != 0);
                    left -= 1;
                }
                let at = now + TimeDelta::milliseconds(i64::try_from(t_ms).expect("fits"));
                (at < span.1).then_some(at)
            };
            prop_assert_eq!(forecast, replayed);
        }
    }
}
