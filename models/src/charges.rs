//! The charge ledger: the rule that makes a charge a property of the queue identity, not of the
//! policy row that was in force when it was made (SPEC-0030 REQ-3, issue #28).
//!
//! Every charged claim is entered twice, in the same transaction: in the counter of the window
//! that charged it (what the next claim reads under the policy lock, one row) and in the ledger,
//! units per (identity, whole minute). No policy write, delete or re-create removes either. A
//! policy write rebuilds the counter of the window its new definition places `now` in from the
//! ledger, so a redefinition counts the claims already committed in that window's span.
//!
//! Why minutes: every window boundary is a whole minute (starts are `HH:MM`, and every zone's
//! offset since 1972 is a whole number of minutes), so the ledger's units within any window's
//! span are an exact sum, for any period, zone or start an owner may choose later, while a busy
//! queue adds at most one ledger row a minute. Both stores apply these functions.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

/// The ledger row a claim committed at `at` is entered in: `at` truncated to its whole minute.
pub fn charge_minute(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(at)
}

/// The units of a window `[start, end)` in ledger rows `(minute, units)`. Both bounds are whole
/// minutes, so a row is inside the span exactly when its charges are.
pub fn units_within(
    ledger: impl IntoIterator<Item = (DateTime<Utc>, i64)>,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> i64 {
    ledger.into_iter().filter(|(minute, _)| *minute >= start && *minute < end).map(|(_, units)| units).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowSpec;
    use quickcheck::quickcheck;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).expect("in range")
    }

    #[test]
    fn a_charge_is_entered_at_its_whole_minute() {
        assert_eq!(charge_minute(at(1_800_000_059)), at(1_800_000_000));
        assert_eq!(charge_minute(at(120)), at(120));
        assert_eq!(charge_minute(at(179)), at(120));
    }

    quickcheck! {
        // Issue #28: the minute ledger loses nothing to a redefinition. For any charges and any
        // day window (any zone, any start), the ledger's units within the window containing a
        // later instant equal the charges committed inside that window, counted one by one.
        fn ledger_units_equal_the_charges_inside_any_window(offsets: Vec<u32>, start_minute: u16, zone: u8) -> bool {
            const ZONES: [&str; 4] = ["UTC", "America/Los_Angeles", "Asia/Kathmandu", "Australia/Lord_Howe"];
            let start = format!("{:02}:{:02}", (start_minute / 60) % 24, start_minute % 60);
            let spec = WindowSpec::parse("day", ZONES[zone as usize % ZONES.len()], &start, None).expect("valid");
            let base = 1_790_000_000_i64;
            let charges: Vec<DateTime<Utc>> = offsets.iter().map(|o| at(base + i64::from(*o % 200_000))).collect();
            let mut ledger = std::collections::BTreeMap::<DateTime<Utc>, i64>::new();
            for charge in &charges {
                *ledger.entry(charge_minute(*charge)).or_default() += 1;
            }
            let (window_start, window_end) = spec.window_containing(at(base + 200_000));
            let counted = charges.iter().filter(|c| **c >= window_start && **c < window_end).count() as i64;
            units_within(ledger, window_start, window_end) == counted
        }
    }
}
