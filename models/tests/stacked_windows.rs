//! Issue #52: `next_eligible_at` over stacked windows, across DST changes, against a brute-force
//! answer. A policy with a primary window in a zone that changes its clocks and up to two
//! additional windows (a minute window among them) is observed near a transition with each
//! window's usage drawn at, below or over its limit; the status must say the first instant, on
//! the minute, at which every window admits again, assuming no claim in between, and name a
//! window whose boundary that is.
//!
//! The brute force steps minute by minute (every window boundary is a whole minute) and asks of
//! each exhausted window only whether the window containing that minute is a new one, through
//! `window_containing`, whose own DST behaviour `windows_oracle.rs` proves against an oracle.

use chrono::{DateTime, Duration, Utc};
use models::admission::{Observation, Policy, QueueStatus, Used, WindowLimit, status};
use models::window::WindowSpec;
use proptest::prelude::*;

/// Instants within a day of a DST change: Europe/Berlin's spring-forward (2026-03-29 01:00 UTC)
/// and fall-back (2026-10-25 01:00 UTC), America/Los_Angeles's (2026-03-08 10:00 UTC,
/// 2026-11-01 09:00 UTC).
const TRANSITIONS: [(&str, &str); 4] = [
    ("Europe/Berlin", "2026-03-29T01:00:00Z"),
    ("Europe/Berlin", "2026-10-25T01:00:00Z"),
    ("America/Los_Angeles", "2026-03-08T10:00:00Z"),
    ("America/Los_Angeles", "2026-11-01T09:00:00Z"),
];

fn window(period: usize, zone: &str, start: &str) -> WindowSpec {
    match period % 3 {
        0 => WindowSpec::MINUTE,
        1 => WindowSpec::parse("hour", zone, start, None).expect("valid"),
        _ => WindowSpec::parse("day", zone, start, None).expect("valid"),
    }
}

/// The first whole minute after `now` at which no window spent at `now` is still in the window
/// it was spent in.
fn brute_force(policy: &Policy, used: Used, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let spent: Vec<(DateTime<Utc>, WindowSpec)> = policy
        .windows()
        .filter(|(slot, max, _)| used.of(*slot) >= *max)
        .map(|(_, _, window)| (window.window_start(now), window))
        .collect();
    if spent.is_empty() {
        return None;
    }
    let first_minute = now - Duration::seconds(now.timestamp().rem_euclid(60)) + Duration::minutes(1);
    (0..3 * 24 * 60)
        .map(|k| first_minute + Duration::minutes(k))
        .find(|t| spent.iter().all(|(start, window)| window.window_start(*t) != *start))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    // Issue #52: next_eligible_at is the first instant at which every window admits again.
    #[test]
    fn ext52_next_eligible_at_over_stacked_windows_is_the_first_instant_every_window_admits(
        transition in 0..TRANSITIONS.len(),
        offset_seconds in -86_400_i64..86_400,
        primary_period in 1_usize..3,
        start_hour in 0_u32..24,
        start_minute in prop::sample::select(vec![0_u32, 30]),
        additional in prop::collection::vec((0_usize..3, 1_i64..4), 0..3),
        over in prop::collection::vec(-1_i64..2, 3),
    ) {
        let (zone, at) = TRANSITIONS[transition];
        let now = DateTime::parse_from_rfc3339(at).expect("instant").to_utc() + Duration::seconds(offset_seconds);
        let start = format!("{start_hour:02}:{start_minute:02}");
        let policy = Policy {
            max_in_flight: None,
            max_claims_per_window: Some(3),
            window: Some(window(primary_period, zone, &start)),
            additional_windows: additional
                .iter()
                .map(|(period, max_claims)| WindowLimit { max_claims: *max_claims, window: window(*period, zone, &start) })
                .collect(),
        };
        // Each window's usage its limit plus -1, 0 or 1: below it, at it, or over it (a lowered limit).
        let mut used = Used { primary: 3 + over[0], additional: [0; 4] };
        for (index, limit) in policy.additional_windows.iter().enumerate() {
            used.additional[index] = (limit.max_claims + over[(index + 1) % over.len()]).max(0);
        }
        let observed = Observation {
            now,
            in_flight: 0,
            used: used.primary,
            additional_used: used.additional,
            recent: Default::default(),
            earliest_lease_expiry: None,
            reaper_interval: Duration::seconds(30),
        };
        let answer = status(&policy, &observed);
        let expected = brute_force(&policy, used, now);
        prop_assert_eq!(answer.hint.next_eligible_at, expected, "{:?} at {}", policy.to_json(), now);
        prop_assert_eq!(answer.status == QueueStatus::WindowExhausted, expected.is_some());
        if let (Some(next), Some(named)) = (expected, answer.hint.window) {
            prop_assert_eq!(answer.hint.exact, Some(true));
            prop_assert!(policy.windows().any(|(_, _, w)| w == named && w.next_boundary(now) == next));
        }
    }
}

// Issue #52: the board names each window's usage chart in words.
#[test]
fn ext52_each_window_reads_in_words() {
    let words = |period: &str, tz: Option<&str>, start: Option<&str>, weekday: Option<&str>| {
        models::window::WindowSpec::parse_fields(period, tz, start, weekday).expect("valid").in_words()
    };
    assert_eq!(words("minute", None, None, None), "per minute");
    assert_eq!(words("hour", Some("Asia/Kolkata"), Some("00:30"), None), "per hour from :30 Asia/Kolkata");
    assert_eq!(words("day", Some("Europe/Paris"), Some("09:00"), None), "per day from 09:00 Europe/Paris");
    assert_eq!(words("week", Some("UTC"), Some("08:15"), Some("Mon")), "per week from Mon 08:15 UTC");
}
