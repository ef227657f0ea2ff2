//! Table tests for window arithmetic: exact UTC boundaries across zones and DST transitions.
//!
//! Governing: SPEC-0030 REQ-5. Each expected instant is written in UTC, with the local wall
//! clock it stands for in a comment, so a reviewer can check it against the tz database by hand.

use chrono::{DateTime, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::TZ_VARIANTS;
use models::window::{WindowPeriod, WindowSpec};

/// A UTC instant written "YYYY-MM-DD HH:MM", optionally with ":SS" and a fraction. Every
/// instant in these tables is UTC; the local time it stands for is in the comment beside it.
fn utc(text: &str) -> DateTime<Utc> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M"))
        .expect("test instants are YYYY-MM-DD HH:MM[:SS[.f]]")
        .and_utc()
}

fn spec(period: &str, tz: &str, start: &str, weekday: Option<&str>) -> WindowSpec {
    WindowSpec::parse(period, tz, start, weekday).expect("test specs are valid")
}

/// Asserts the window containing each `t` is exactly `[start, end)`.
fn assert_window(spec: &WindowSpec, cases: &[(&str, &str, &str)]) {
    for (t, start, end) in cases {
        assert_eq!(spec.window_containing(utc(t)), (utc(start), utc(end)), "window of {t} under {spec:?}");
        assert_eq!(spec.window_start(utc(t)), utc(start));
        assert_eq!(spec.next_boundary(utc(t)), utc(end));
    }
}

fn length(spec: &WindowSpec, t: &str) -> TimeDelta {
    let (start, end) = spec.window_containing(utc(t));
    end - start
}

// SPEC-0030 REQ-5

#[test]
fn req5_pacific_day_exhausted_at_17_00_reopens_at_next_midnight_pacific() {
    let day = spec("day", "America/Los_Angeles", "00:00", None);
    assert_window(
        &day,
        &[
            // 17:00 PDT on Fri 14 June → reopens at 00:00 PDT on the 15th.
            ("2024-06-15 00:00", "2024-06-14 07:00", "2024-06-15 07:00"),
            // 17:00 PST on 10 January → 00:00 PST on the 11th.
            ("2024-01-11 01:00", "2024-01-10 08:00", "2024-01-11 08:00"),
            // Claims are admitted again from the boundary instant itself.
            ("2024-06-15 07:00", "2024-06-15 07:00", "2024-06-16 07:00"),
            ("2024-06-15 06:59:59.999", "2024-06-14 07:00", "2024-06-15 07:00"),
        ],
    );
}

#[test]
fn req5_fall_back_day_is_one_25_hour_window() {
    let los_angeles = spec("day", "America/Los_Angeles", "00:00", None);
    // 00:00 PDT on 3 Nov → 00:00 PST on 4 Nov.
    assert_window(&los_angeles, &[("2024-11-03 12:00", "2024-11-03 07:00", "2024-11-04 08:00")]);
    assert_eq!(length(&los_angeles, "2024-11-03 12:00"), TimeDelta::hours(25));

    let new_york = spec("day", "America/New_York", "00:00", None);
    // Inside the repeated 01:00–02:00 hour, both passes belong to the same day window.
    assert_window(
        &new_york,
        &[
            ("2024-11-03 05:30", "2024-11-03 04:00", "2024-11-04 05:00"),
            ("2024-11-03 06:30", "2024-11-03 04:00", "2024-11-04 05:00"),
        ],
    );
}

#[test]
fn req5_spring_forward_day_is_one_23_hour_window() {
    let los_angeles = spec("day", "America/Los_Angeles", "00:00", None);
    // 00:00 PST on 10 March → 00:00 PDT on 11 March.
    assert_window(&los_angeles, &[("2024-03-10 12:00", "2024-03-10 08:00", "2024-03-11 07:00")]);
    assert_eq!(length(&los_angeles, "2024-03-10 12:00"), TimeDelta::hours(23));
}

#[test]
fn req5_start_inside_a_gap_resolves_to_the_end_of_the_gap() {
    // 02:30 does not exist in New York on 10 March 2024 (02:00 EST → 03:00 EDT): the window
    // starts at 03:00 EDT = 07:00Z, so both neighbouring days are 23.5 h.
    let new_york = spec("day", "America/New_York", "02:30", None);
    assert_window(
        &new_york,
        &[
            // 01:59 EST, still the window that began 02:30 EST on the 9th.
            ("2024-03-10 06:59", "2024-03-09 07:30", "2024-03-10 07:00"),
            // 03:00 EDT, the first valid instant after the gap.
            ("2024-03-10 07:00", "2024-03-10 07:00", "2024-03-11 06:30"),
        ],
    );
}

#[test]
fn req5_ambiguous_start_takes_the_earlier_instant() {
    // 01:30 happens twice in New York on 3 Nov 2024: EDT (05:30Z) and then EST (06:30Z).
    let new_york = spec("day", "America/New_York", "01:30", None);
    assert_window(
        &new_york,
        &[
            ("2024-11-03 05:29:59", "2024-11-02 05:30", "2024-11-03 05:30"),
            ("2024-11-03 05:30", "2024-11-03 05:30", "2024-11-04 06:30"),
            // The second 01:30 (EST) does not open another window.
            ("2024-11-03 06:30", "2024-11-03 05:30", "2024-11-04 06:30"),
        ],
    );
    assert_eq!(length(&new_york, "2024-11-03 12:00"), TimeDelta::hours(25));
}

#[test]
fn req5_hourly_window_at_00_30_utc_begins_at_half_past_every_hour() {
    let hourly = spec("hour", "UTC", "00:30", None);
    assert_window(
        &hourly,
        &[
            ("2024-05-01 12:00", "2024-05-01 11:30", "2024-05-01 12:30"),
            ("2024-05-01 12:29:59.999", "2024-05-01 11:30", "2024-05-01 12:30"),
            ("2024-05-01 12:30", "2024-05-01 12:30", "2024-05-01 13:30"),
            ("2024-12-31 23:45", "2024-12-31 23:30", "2025-01-01 00:30"),
        ],
    );
    let mut t = utc("2024-05-01 00:00");
    for _ in 0..48 {
        let (start, end) = hourly.window_containing(t);
        assert_eq!(start.format("%M:%S").to_string(), "30:00");
        assert_eq!(end - start, TimeDelta::hours(1));
        t = end;
    }
}

#[test]
fn req5_hourly_window_stays_an_elapsed_hour_across_whole_hour_dst_changes() {
    let new_york = spec("hour", "America/New_York", "00:30", None);
    assert_window(
        &new_york,
        &[
            // 01:30 EST → 03:30 EDT: 02:30 never happens, the window is still 60 minutes.
            ("2024-03-10 07:00", "2024-03-10 06:30", "2024-03-10 07:30"),
            // Both 01:30s start a window on the fall-back night.
            ("2024-11-03 06:10", "2024-11-03 05:30", "2024-11-03 06:30"),
            ("2024-11-03 06:40", "2024-11-03 06:30", "2024-11-03 07:30"),
        ],
    );
}

#[test]
fn req5_weekly_window_starts_on_its_weekday_and_spans_dst_changes() {
    let berlin = spec("week", "Europe/Berlin", "09:00", Some("Mon"));
    assert_window(
        &berlin,
        &[
            // Mon 25 Mar 09:00 CET → Mon 1 Apr 09:00 CEST: 167 h across the spring change.
            ("2024-03-28 12:00", "2024-03-25 08:00", "2024-04-01 07:00"),
            // A boundary instant belongs to the new window; one second earlier does not.
            ("2024-04-01 07:00", "2024-04-01 07:00", "2024-04-08 07:00"),
            ("2024-04-01 06:59:59", "2024-03-25 08:00", "2024-04-01 07:00"),
            // Mon 21 Oct 09:00 CEST → Mon 28 Oct 09:00 CET: 169 h across the autumn change.
            ("2024-10-27 12:00", "2024-10-21 07:00", "2024-10-28 08:00"),
            // A Sunday evening still belongs to the week that began the previous Monday.
            ("2024-06-09 21:00", "2024-06-03 07:00", "2024-06-10 07:00"),
        ],
    );
    assert_eq!(length(&berlin, "2024-03-28 12:00"), TimeDelta::hours(167));
    assert_eq!(length(&berlin, "2024-10-27 12:00"), TimeDelta::hours(169));
}

#[test]
fn req5_lord_howe_half_hour_shift_in_hour_windows() {
    // Lord Howe shifts by 30 minutes: 02:00 LHST (+10:30) → 02:30 LHDT (+11) on 6 Oct 2024
    // (15:30Z), and 02:00 LHDT → 01:30 LHST on 7 Apr 2024 (15:00Z). Hour windows start whenever
    // the clock reads hh:MM:00, so a half-hour gap either swallows one hh:MM (a 90-minute
    // window) or lets the next hh:MM come 30 minutes early (a 30-minute window), and the
    // half-hour fold does the reverse. Hour windows are elapsed hours everywhere else.
    let quarter_past = spec("hour", "Australia/Lord_Howe", "00:15", None);
    let quarter_to = spec("hour", "Australia/Lord_Howe", "00:45", None);
    assert_window(
        &quarter_past,
        &[
            // 01:15 LHST → 03:15 LHDT (02:15 never happens): 90 minutes.
            ("2024-10-05 15:30", "2024-10-05 14:45", "2024-10-05 16:15"),
            // 01:15 LHDT → 02:15 LHST (01:15 falls before the repeated half hour): 90 minutes.
            ("2024-04-06 15:00", "2024-04-06 14:15", "2024-04-06 15:45"),
        ],
    );
    assert_window(
        &quarter_to,
        &[
            // 01:45 LHST → 02:45 LHDT, half an hour later: 30 minutes.
            ("2024-10-05 15:30", "2024-10-05 15:15", "2024-10-05 15:45"),
            // 01:45 LHDT → 01:45 LHST, read again after the clock fell back: 30 minutes.
            ("2024-04-06 15:00", "2024-04-06 14:45", "2024-04-06 15:15"),
            ("2024-04-06 15:15", "2024-04-06 15:15", "2024-04-06 16:15"),
        ],
    );
}

#[test]
fn req5_lord_howe_half_hour_shift_in_day_windows() {
    let midnight = spec("day", "Australia/Lord_Howe", "00:00", None);
    assert_window(
        &midnight,
        &[
            // 00:00 LHST on 6 Oct → 00:00 LHDT on 7 Oct: 23.5 h.
            ("2024-10-06 00:00", "2024-10-05 13:30", "2024-10-06 13:00"),
            // 00:00 LHDT on 7 Apr → 00:00 LHST on 8 Apr: 24.5 h.
            ("2024-04-07 00:00", "2024-04-06 13:00", "2024-04-07 13:30"),
        ],
    );
    // 02:15 on 6 Oct is inside the half-hour gap and resolves to 02:30 LHDT (15:30Z).
    let in_gap = spec("day", "Australia/Lord_Howe", "02:15", None);
    assert_window(
        &in_gap,
        &[
            ("2024-10-05 15:29:59", "2024-10-04 15:45", "2024-10-05 15:30"),
            ("2024-10-05 15:30", "2024-10-05 15:30", "2024-10-06 15:15"),
        ],
    );
    // 01:45 on 7 Apr happens twice; the earlier (LHDT) one starts the window: 24.5 h.
    let in_fold = spec("day", "Australia/Lord_Howe", "01:45", None);
    assert_window(&in_fold, &[("2024-04-06 15:20", "2024-04-06 14:45", "2024-04-07 15:15")]);
}

#[test]
fn req5_apia_skipped_day_has_no_window_of_its_own() {
    // Samoa went from 23:59:59 on 29 Dec 2011 (-10) straight to 00:00 on 31 Dec (+14) at
    // 2011-12-30T10:00Z. The 30th's midnight falls in the gap and resolves to the same instant
    // as the 31st's, so the 29th's window is 24 h of elapsed time and the next one starts at
    // 00:00 on the 31st.
    let midnight = spec("day", "Pacific/Apia", "00:00", None);
    assert_window(
        &midnight,
        &[
            ("2011-12-29 22:00", "2011-12-29 10:00", "2011-12-30 10:00"),
            ("2011-12-30 10:00", "2011-12-30 10:00", "2011-12-31 10:00"),
        ],
    );
    let boundary_local = midnight.next_boundary(utc("2011-12-29 22:00")).with_timezone(&midnight.tz);
    assert_eq!(boundary_local.to_rfc3339(), "2011-12-31T00:00:00+14:00");

    // A noon start splits the jump: noon on the 30th resolves to the end of the gap, between
    // the 29th's noon and the 31st's, so the two windows around the jump are 12 h each.
    let noon = spec("day", "Pacific/Apia", "12:00", None);
    assert_window(
        &noon,
        &[
            ("2011-12-30 05:00", "2011-12-29 22:00", "2011-12-30 10:00"),
            ("2011-12-30 15:00", "2011-12-30 10:00", "2011-12-30 22:00"),
        ],
    );

    // Hour windows step over the missing day: 23:30 on the 29th → 00:30 on the 31st.
    let hourly = spec("hour", "Pacific/Apia", "00:30", None);
    assert_window(
        &hourly,
        &[
            ("2011-12-30 09:50", "2011-12-30 09:30", "2011-12-30 10:30"),
            ("2011-12-30 10:10", "2011-12-30 09:30", "2011-12-30 10:30"),
        ],
    );
}

#[test]
fn req5_hour_window_across_vostoks_seven_hour_fold() {
    // Antarctica/Vostok fell back 7 hours (+07 → +00) at 1994-01-31T17:00Z: the clock read
    // 23:30 on its first pass at 16:30Z and 17:30 on its second at 17:30Z. The neighbouring
    // starts are 6 local hours apart, so this exercises the wide candidate set.
    let hourly = spec("hour", "Antarctica/Vostok", "00:30", None);
    assert_window(
        &hourly,
        &[
            ("1994-01-31 16:50", "1994-01-31 16:30", "1994-01-31 17:30"),
            ("1994-01-31 17:10", "1994-01-31 16:30", "1994-01-31 17:30"),
        ],
    );
    // A day window whose start (20:00) the fold repeats opens only on the first pass: 31 h.
    let evening = spec("day", "Antarctica/Vostok", "20:00", None);
    assert_window(&evening, &[("1994-01-31 18:00", "1994-01-31 13:00", "1994-02-01 20:00")]);
}

#[test]
fn req5_offsets_with_seconds_keep_their_seconds() {
    // Africa/Monrovia kept -00:44:30 until 1972-01-07T00:44:30Z, when 00:00 became 00:44:30.
    let midnight = spec("day", "Africa/Monrovia", "00:00", None);
    assert_window(&midnight, &[("1971-06-01 12:00", "1971-06-01 00:44:30", "1971-06-02 00:44:30")]);
    // 00:30 on the 7th is inside the 44.5-minute gap: the window starts where the gap ends.
    let half_past = spec("day", "Africa/Monrovia", "00:30", None);
    assert_window(&half_past, &[("1972-01-07 12:00", "1972-01-07 00:44:30", "1972-01-08 00:30")]);
}

#[test]
fn req5_every_zone_gives_a_window_at_the_edges_of_the_range() {
    let instants = [
        "1970-01-01 00:00",
        "1999-12-31 23:59:59.999999999",
        "2038-01-19 03:14:08",
        "2099-12-31 23:59:59",
        "0001-01-01 00:00",
        "9999-12-31 23:59:59",
    ];
    let specs = [("hour", "00:45", None), ("day", "23:59", None), ("week", "00:00", Some("Sun"))];
    for tz in TZ_VARIANTS {
        for (period, start, weekday) in specs {
            let window_spec = spec(period, tz.name(), start, weekday);
            for t in instants.map(utc) {
                let (start_utc, end_utc) = window_spec.window_containing(t);
                assert!(start_utc <= t && t < end_utc, "{window_spec:?} at {t}");
            }
        }
    }
}

// SPEC-0030 REQ-5 — validation of the raw policy fields

#[test]
fn req5_parse_accepts_every_period_and_keeps_the_stored_spelling() {
    let weekly = spec("week", "Europe/Berlin", "09:05", Some("Sun"));
    assert_eq!(weekly.period, WindowPeriod::Week);
    assert_eq!(weekly.tz, chrono_tz::Europe::Berlin);
    assert_eq!(
        (weekly.period_name(), weekly.tz.name(), weekly.start_hhmm().as_str(), weekly.weekday_name()),
        ("week", "Europe/Berlin", "09:05", Some("Sun"))
    );
    let hourly = spec("hour", "UTC", "23:59", None);
    assert_eq!((hourly.period_name(), hourly.weekday_name()), ("hour", None));
    assert_eq!(spec("day", "Asia/Kolkata", "00:00", None).start_hhmm(), "00:00");
}

#[test]
fn req5_parse_names_the_offending_field() {
    let cases: [(&str, &str, &str, Option<&str>, &str); 17] = [
        ("day", "Mars/Olympus", "00:00", None, "window.tz"),
        ("day", "america/los_angeles", "00:00", None, "window.tz"),
        ("day", "", "00:00", None, "window.tz"),
        ("day", "UTC", "00:00", Some("Mon"), "window.weekday"),
        ("hour", "UTC", "00:30", Some("Mon"), "window.weekday"),
        ("week", "UTC", "00:00", None, "window.weekday"),
        ("week", "UTC", "00:00", Some("Monday"), "window.weekday"),
        ("week", "UTC", "00:00", Some("mon"), "window.weekday"),
        ("day", "UTC", "24:00", None, "window.start"),
        ("day", "UTC", "7:00", None, "window.start"),
        ("day", "UTC", "07:60", None, "window.start"),
        ("day", "UTC", "07:00:00", None, "window.start"),
        ("day", "UTC", "+7:00", None, "window.start"),
        ("day", "UTC", "07-00", None, "window.start"),
        ("month", "UTC", "00:00", None, "window.period"),
        ("Day", "UTC", "00:00", None, "window.period"),
        ("", "UTC", "00:00", None, "window.period"),
    ];
    for (period, tz, start, weekday, field) in cases {
        let error = WindowSpec::parse(period, tz, start, weekday).expect_err("invalid window must be refused");
        assert_eq!(error.field, field, "{period:?} {tz:?} {start:?} {weekday:?}: {error}");
        assert!(!error.message.is_empty());
    }
    let error = WindowSpec::parse("day", "Mars/Olympus", "00:00", None).expect_err("unknown zone");
    assert!(error.to_string().contains("Mars/Olympus"), "{error}");
    let long = "x".repeat(10_000);
    let error = WindowSpec::parse("day", &long, "00:00", None).expect_err("unknown zone");
    assert!(error.message.len() < 200, "echoed input must be bounded: {}", error.message.len());
}

#[test]
fn req5_spec_round_trips_through_its_stored_json() {
    let weekly = spec("week", "America/Los_Angeles", "07:30", Some("Fri"));
    let json = serde_json::to_value(weekly).expect("serialises");
    assert_eq!(
        json,
        serde_json::json!({"period": "week", "tz": "America/Los_Angeles", "start": "07:30", "weekday": "Fri"})
    );
    assert_eq!(serde_json::from_value::<WindowSpec>(json).expect("deserialises"), weekly);

    let daily = spec("day", "UTC", "00:00", None);
    let json = serde_json::to_value(daily).expect("serialises");
    assert_eq!(json, serde_json::json!({"period": "day", "tz": "UTC", "start": "00:00"}));
    assert_eq!(serde_json::from_value::<WindowSpec>(json).expect("deserialises"), daily);

    let refused =
        serde_json::from_value::<WindowSpec>(serde_json::json!({"period": "day", "tz": "UTC", "start": "24:00"}));
    assert!(refused.expect_err("stored rows are re-validated").to_string().contains("window.start"));
    assert_eq!(serde_json::to_value(WindowPeriod::Hour).expect("serialises"), "hour");
}

#[test]
fn req5_window_does_not_depend_on_the_utc_offset_of_the_input() {
    // The same instant expressed through another zone is the same DateTime<Utc>; this guards
    // against any accidental use of the host's local zone.
    let day = spec("day", "Asia/Tokyo", "00:00", None);
    let t = chrono_tz::America::Los_Angeles
        .with_ymd_and_hms(2024, 6, 14, 17, 0, 0)
        .single()
        .expect("not a transition")
        .to_utc();
    assert_eq!(day.window_containing(t), (utc("2024-06-14 15:00"), utc("2024-06-15 15:00")));
}

// SPEC-0030 REQ-11 "eligible 00:00 PT" (issue #51): the board names a zone as people say a time,
// PT the whole year rather than PST in winter and PDT in summer; zones without an XST/XDT pair
// keep the abbreviation in force.
#[test]
fn req11_a_zone_is_named_generically_where_it_has_a_generic_name() {
    use chrono_tz::{America, Asia, Australia, Europe, UTC};
    use models::window::generic_zone_name;
    let (winter, summer) = (utc("2026-12-08 08:00"), utc("2026-07-01 07:00"));
    for (zone, winter_name, summer_name) in [
        (America::Los_Angeles, "PT", "PT"),
        (America::New_York, "ET", "ET"),
        (Australia::Sydney, "AET", "AET"),
        (Europe::Berlin, "CET", "CEST"),
        (Europe::London, "GMT", "BST"),
        (Asia::Tokyo, "JST", "JST"),
        (UTC, "UTC", "UTC"),
    ] {
        assert_eq!(generic_zone_name(zone, winter), winter_name, "{zone} in winter");
        assert_eq!(generic_zone_name(zone, summer), summer_name, "{zone} in summer");
    }
}
