//! Property tests for window arithmetic: windows tile the timeline, and they agree with a
//! brute-force oracle near real DST transitions.
//!
//! Governing: SPEC-0030 REQ-5. Tiling alone is weak: random instants rarely land near a
//! transition, and wrong fold semantics (the later 01:30 instead of the earlier) still tile. So
//! half of the oracle cases jump to a real transition of the zone, and a fixed sweep covers the
//! oddest transitions in the database.
//!
//! The oracle never converts local time to UTC, which is where the module under test can go
//! wrong. It only asks "what does the wall clock read at instant u?" and scans.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::{TZ_VARIANTS, Tz};
use models::window::{WindowPeriod, WindowSpec};
use proptest::prelude::*;

/// Every UTC offset in the database from 1970 on is a multiple of 30 s (Africa/Monrovia kept
/// -00:44:30 until 1972), and so is every transition instant, so every window start lies on
/// this grid and a scan along it cannot step over one.
const GRID_SECONDS: i64 = 30;
/// Offsets never exceed +14 h or go below -12 h; with margins, a bound for any scan.
const OFFSET_BOUND_SECONDS: i64 = 15 * 3600;
const UNIX_1970: i64 = 0;
const UNIX_2100: i64 = 4_102_444_800;
const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

fn instant(unix_seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(unix_seconds, 0).expect("test instants are in chrono's range")
}

fn utc_offset_seconds(tz: Tz, unix_seconds: i64) -> i64 {
    let offset = tz.offset_from_utc_datetime(&instant(unix_seconds).naive_utc());
    offset.fix().local_minus_utc().into()
}

/// What the wall clock reads at `unix_seconds`, as seconds since 1970-01-01T00:00 local.
fn wall_seconds(tz: Tz, unix_seconds: i64) -> i64 {
    unix_seconds + utc_offset_seconds(tz, unix_seconds)
}

fn floor_to_grid(unix_seconds: i64) -> i64 {
    unix_seconds.div_euclid(GRID_SECONDS) * GRID_SECONDS
}

/// The first instant at which the wall clock reads `anchor_wall_seconds` or later.
fn first_reach(tz: Tz, anchor_wall_seconds: i64) -> i64 {
    // Before anchor - 15 h no offset can make the clock read the anchor yet.
    let mut u = floor_to_grid(anchor_wall_seconds - OFFSET_BOUND_SECONDS);
    assert!(wall_seconds(tz, u) < anchor_wall_seconds, "scan must start before the anchor");
    while wall_seconds(tz, u) < anchor_wall_seconds {
        u += GRID_SECONDS;
        assert!(u <= anchor_wall_seconds + OFFSET_BOUND_SECONDS, "the clock never reached it");
    }
    u
}

/// Whether the wall clock reads exactly hh:`minute`:00 at `unix_seconds`.
fn reads_minute(tz: Tz, unix_seconds: i64, minute: i64) -> bool {
    wall_seconds(tz, unix_seconds).rem_euclid(3600) == minute * 60
}

/// The window containing `t` (whole seconds), found without local-to-UTC conversion.
fn oracle_window(spec: &WindowSpec, t: i64) -> (i64, i64) {
    let scan_limit_seconds = 30 * 3600;
    if spec.period == WindowPeriod::Hour {
        let minute = i64::from(spec.start.minute());
        let mut start = floor_to_grid(t);
        while !reads_minute(spec.tz, start, minute) {
            start -= GRID_SECONDS;
            assert!(t - start < scan_limit_seconds, "no hour start before {t}");
        }
        let mut end = floor_to_grid(t) + GRID_SECONDS;
        while !reads_minute(spec.tz, end, minute) {
            end += GRID_SECONDS;
            assert!(end - t < scan_limit_seconds, "no hour start after {t}");
        }
        return (start, end);
    }
    // Day and week: anchors around t's local date, each started where the clock first reaches
    // it; the window is [latest start <= t, earliest start > t).
    let local_date = instant(t).with_timezone(&spec.tz).date_naive();
    let (first_anchor_date, days_per_period) = match spec.weekday {
        Some(weekday) => {
            let mut date = local_date;
            while date.weekday() != weekday {
                date = date.pred_opt().expect("in range");
            }
            (date, 7)
        }
        None => (local_date, 1),
    };
    let starts: Vec<i64> = (-2..=2)
        .map(|k| {
            let date = first_anchor_date + TimeDelta::days(k * days_per_period);
            first_reach(spec.tz, date.and_time(spec.start).and_utc().timestamp())
        })
        .collect();
    assert!(starts[0] <= t && t < starts[4], "anchors must bracket {t}: {starts:?}");
    let start = starts.iter().copied().filter(|s| *s <= t).max().expect("bracketed");
    let end = starts.iter().copied().filter(|s| *s > t).min().expect("bracketed");
    (start, end)
}

/// The first offset change of `tz` after `from`, to the second, if one comes within ~3 years.
fn next_transition(tz: Tz, from: i64) -> Option<i64> {
    let day_seconds = 86_400;
    let offset_before = utc_offset_seconds(tz, from);
    let mut after = from;
    for _ in 0..1100 {
        after += day_seconds;
        if utc_offset_seconds(tz, after) != offset_before {
            let mut before = after - day_seconds;
            // Bisect on "offset still the old one"; the first day step that changed holds it.
            while after - before > 1 {
                let middle = before + (after - before) / 2;
                if utc_offset_seconds(tz, middle) == offset_before {
                    before = middle;
                } else {
                    after = middle;
                }
            }
            return Some(after);
        }
    }
    None
}

fn build_spec(zone_index: usize, period: u8, hour: u32, minute: u32, weekday: usize) -> WindowSpec {
    let period_name = ["hour", "day", "week"][usize::from(period)];
    let weekday_name = (period_name == "week").then_some(WEEKDAYS[weekday]);
    let start = format!("{hour:02}:{minute:02}");
    WindowSpec::parse(period_name, TZ_VARIANTS[zone_index].name(), &start, weekday_name)
        .expect("generated specs are valid")
}

fn assert_matches_oracle(spec: &WindowSpec, t: i64) {
    let (oracle_start, oracle_end) = oracle_window(spec, t);
    assert_eq!(
        spec.window_containing(instant(t)),
        (instant(oracle_start), instant(oracle_end)),
        "{spec:?} at {} ({})",
        instant(t),
        instant(t).with_timezone(&spec.tz)
    );
}

// SPEC-0030 REQ-5

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 3000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn req5_windows_tile_the_timeline(
        zone_index in 0..TZ_VARIANTS.len(),
        period in 0..3u8,
        hour in 0..24u32,
        minute in 0..60u32,
        weekday in 0..7usize,
        t_seconds in UNIX_1970..UNIX_2100,
        t_nanos in prop_oneof![Just(0u32), 0..1_000_000_000u32],
    ) {
        let spec = build_spec(zone_index, period, hour, minute, weekday);
        let t = DateTime::from_timestamp(t_seconds, t_nanos).expect("in range");
        let (start, end) = spec.window_containing(t);
        prop_assert!(start <= t && t < end, "{:?}: {} not in {}..{}", spec, t, start, end);
        prop_assert_eq!(spec.window_start(t), start);
        prop_assert_eq!(spec.next_boundary(t), end);
        let one_second = TimeDelta::seconds(1);
        prop_assert_eq!(spec.window_containing(start), (start, end));
        prop_assert_eq!(spec.window_containing(end - one_second), (start, end));
        prop_assert_eq!(spec.window_containing(end).0, end);
        prop_assert_eq!(spec.window_containing(start - one_second).1, start);
        // Generous bounds: a skipped day or a 7-hour fold changes lengths by up to a day.
        let length_max = match spec.period {
            WindowPeriod::Minute => TimeDelta::minutes(1),
            WindowPeriod::Hour => TimeDelta::hours(2),
            WindowPeriod::Day => TimeDelta::hours(48),
            WindowPeriod::Week => TimeDelta::days(8),
        };
        prop_assert!(end - start <= length_max, "{:?}: {}..{} too long", spec, start, end);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn req5_windows_match_the_brute_force_oracle_near_transitions(
        zone_index in 0..TZ_VARIANTS.len(),
        period in 0..3u8,
        hour in 0..24u32,
        minute in 0..60u32,
        weekday in 0..7usize,
        // Leave room for the ±50 h jump and the oracle's scans inside 1970..2100.
        base_seconds in (UNIX_1970 + 400_000)..(UNIX_2100 - 100_000_000),
        near_transition in any::<bool>(),
        // Half within the hours where fold and gap semantics differ, half anywhere in ±50 h.
        offset_from_transition_seconds in prop_oneof![-3 * 3600..=3 * 3600i64, -50 * 3600..=50 * 3600i64],
        aim_start_at_transition in any::<bool>(),
        start_from_transition_minutes in -90..=90i64,
    ) {
        let tz = TZ_VARIANTS[zone_index];
        let transition = if near_transition { next_transition(tz, base_seconds) } else { None };
        // A random start rarely falls inside the gap or fold, which is where the semantics
        // differ; so half the time put it there, next to what the clock read just before the
        // jump.
        let (hour, minute, weekday) = match transition {
            Some(transition) if aim_start_at_transition => {
                let wall_before_jump = wall_seconds(tz, transition - 1) + 1;
                let start = instant(wall_before_jump + start_from_transition_minutes * 60).naive_utc();
                (start.hour(), start.minute(), start.weekday().num_days_from_monday() as usize)
            }
            _ => (hour, minute, weekday),
        };
        let spec = build_spec(zone_index, period, hour, minute, weekday);
        let t = transition.map_or(base_seconds, |transition| transition + offset_from_transition_seconds);
        assert_matches_oracle(&spec, t);
    }
}

/// The oddest transitions in the database, swept densely rather than sampled: every kind of
/// jump the algorithm has a branch for.
#[test]
fn req5_windows_match_the_oracle_across_the_oddest_transitions() {
    let transitions: [(Tz, &str); 9] = [
        (chrono_tz::America::New_York, "2024-03-01"),    // 1 h gap at 02:00
        (chrono_tz::America::New_York, "2024-11-01"),    // 1 h fold at 02:00
        (chrono_tz::Australia::Lord_Howe, "2024-04-01"), // 30 min fold
        (chrono_tz::Australia::Lord_Howe, "2024-10-01"), // 30 min gap
        (chrono_tz::Pacific::Apia, "2011-12-20"),        // skipped day
        (chrono_tz::Pacific::Kwajalein, "1993-08-15"),   // skipped day, -12 → +12
        (chrono_tz::Antarctica::Vostok, "1994-01-25"),   // 7 h fold
        (chrono_tz::Africa::Monrovia, "1972-01-01"),     // offset with seconds, 44.5 min gap
        (chrono_tz::Asia::Kathmandu, "1985-12-25"),      // 15 min gap
    ];
    let specs: [(&str, &str, Option<&str>); 7] = [
        ("hour", "00:00", None),
        ("hour", "00:15", None),
        ("hour", "00:45", None),
        ("day", "00:00", None),
        ("day", "02:15", None),
        ("day", "23:45", None),
        ("week", "01:30", Some("Sun")),
    ];
    for (tz, search_from) in transitions {
        let from = NaiveDate::parse_from_str(search_from, "%Y-%m-%d")
            .expect("valid date")
            .and_hms_opt(0, 0, 0)
            .expect("valid time")
            .and_utc()
            .timestamp();
        let transition = next_transition(tz, from).expect("a transition follows the date");
        for (period, start, weekday) in specs {
            let spec = WindowSpec::parse(period, tz.name(), start, weekday).expect("valid spec");
            // 30 h either side in 97-minute steps lands on every phase of the hour.
            let mut t = transition - 30 * 3600;
            while t <= transition + 30 * 3600 {
                assert_matches_oracle(&spec, t);
                t += 97 * 60;
            }
            for edge in [transition - 1, transition, transition + 1] {
                assert_matches_oracle(&spec, edge);
            }
        }
    }
}

/// The oracle must itself reject the wrong semantics; otherwise agreeing with it proves little.
#[test]
fn req5_oracle_takes_the_earlier_instant_in_a_fold_and_the_gap_end_in_a_gap() {
    let new_york = chrono_tz::America::New_York;
    let wall = |text: &str| {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").expect("valid wall time").and_utc().timestamp()
    };
    // 01:30 on 3 Nov 2024 first happens in EDT (05:30Z); 02:30 on 10 Mar 2024 never happens
    // and the clock first reads later than it at 03:00 EDT (07:00Z).
    assert_eq!(instant(first_reach(new_york, wall("2024-11-03 01:30"))).to_rfc3339(), "2024-11-03T05:30:00+00:00");
    assert_eq!(instant(first_reach(new_york, wall("2024-03-10 02:30"))).to_rfc3339(), "2024-03-10T07:00:00+00:00");
}
