//! Expected instants are written in UTC with the local wall clock they stand for beside them.

use super::*;
use proptest::prelude::*;

fn utc(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).expect("test instants are RFC 3339").to_utc()
}

fn shift(text: &str) -> Shift {
    Shift::parse(text).expect("test shifts are valid")
}

fn refusal(text: &str) -> String {
    let error = Shift::parse(text).expect_err("refused");
    assert_eq!(error.code, crate::Code::InvalidArgument);
    assert_eq!(error.extras.get("field").and_then(|field| field.as_str()), Some("shift"), "{error}");
    error.message
}

/// `is_in` changes at `boundary` and not in the minute before it.
fn assert_flips_at(shift: &Shift, after: DateTime<Utc>, boundary: DateTime<Utc>) {
    assert_eq!(shift.next_boundary(after), boundary, "next boundary after {after} under {shift}");
    let before = shift.is_in(after);
    assert_eq!(shift.is_in(boundary - TimeDelta::minutes(1)), before, "{shift} flips early before {boundary}");
    assert_ne!(shift.is_in(boundary), before, "{shift} does not flip at {boundary}");
}

#[test]
fn spec0022_shift_text_round_trips_through_its_canonical_form() {
    for (text, canonical) in [
        ("TZ=America/Los_Angeles Mon-Fri 09:00-17:00", "TZ=America/Los_Angeles Mon-Fri 09:00-17:00"),
        ("TZ=Europe/London Sat,Sun 10:00-14:30", "TZ=Europe/London Sat,Sun 10:00-14:30"),
        ("TZ=UTC Mon,Wed-Fri 22:00-06:00", "TZ=UTC Mon,Wed-Fri 22:00-06:00"),
        ("TZ=UTC Mon,Wed,Thu,Fri 22:00-06:00", "TZ=UTC Mon,Wed-Fri 22:00-06:00"),
        ("TZ=UTC Sun,Mon-Tue,Wed 08:00-09:00", "TZ=UTC Mon-Wed,Sun 08:00-09:00"),
        ("  TZ=Asia/Kolkata   Mon-Sun  00:00-23:59 ", "TZ=Asia/Kolkata Mon-Sun 00:00-23:59"),
        ("TZ=UTC Mon,Mon,Tue 00:00-00:01", "TZ=UTC Mon,Tue 00:00-00:01"),
    ] {
        let parsed = shift(text);
        assert_eq!(parsed.to_string(), canonical);
        assert_eq!(shift(canonical), parsed);
        assert_eq!(serde_json::to_value(parsed).expect("serializes"), serde_json::json!(canonical));
        assert_eq!(serde_json::from_value::<Shift>(serde_json::json!(text)).expect("deserializes"), parsed);
    }
    assert!(serde_json::from_value::<Shift>(serde_json::json!("TZ=UTC Mon 09:00-09:00")).is_err());
}

#[test]
fn spec0022_shift_parse_refuses_naming_what_is_wrong() {
    for (text, complaint) in [
        ("TZ=Mars/Olympus Mon-Fri 09:00-17:00", "\"Mars/Olympus\" is not a known IANA time zone"),
        ("TZ=UTC Mon-Fry 09:00-17:00", "\"Fry\" is not a day"),
        ("TZ=UTC mon 09:00-17:00", "\"mon\" is not a day"),
        ("TZ=UTC Mon,,Tue 09:00-17:00", "\"\" is not a day"),
        ("TZ=UTC Fri-Mon 09:00-17:00", "runs backwards"),
        ("TZ=UTC Mon 25:00-17:00", "\"25:00\" is not a 24-hour HH:MM"),
        ("TZ=UTC Mon 09:00-9:30", "\"9:30\" is not a 24-hour HH:MM"),
        ("TZ=UTC Mon 09:00-24:00", "\"24:00\" is not a 24-hour HH:MM"),
        ("TZ=UTC Mon 09:00", "should be the hours"),
        ("TZ=UTC Mon 09:00-09:00", "must last some time"),
        ("America/Los_Angeles Mon 09:00-17:00", "written TZ=<IANA zone>"),
        ("TZ=UTC 09:00-17:00", "is not TZ=<zone> <days> <HH:MM>-<HH:MM>"),
        ("TZ=UTC Mon 09:00-17:00 extra", "is not TZ=<zone> <days> <HH:MM>-<HH:MM>"),
        ("", "is not TZ=<zone> <days> <HH:MM>-<HH:MM>"),
    ] {
        let message = refusal(text);
        assert!(message.contains(complaint), "{text:?} refused with {message:?}, expected {complaint:?}");
    }
    let too_long = format!("TZ=UTC Mon{} 09:00-17:00", ",Mon".repeat(60));
    assert!(refusal(&too_long).contains("at most 200"));
}

#[test]
fn spec0022_weekday_shift_is_in_on_weekdays_only() {
    let office = shift("TZ=America/Los_Angeles Mon-Fri 09:00-17:00");
    assert!(office.is_in(utc("2026-03-11T17:00:00Z"))); // Wed 10:00 PDT
    assert!(!office.is_in(utc("2026-03-11T15:59:00Z"))); // Wed 08:59 PDT
    assert!(office.is_in(utc("2026-03-11T16:00:00Z"))); // Wed 09:00 PDT
    assert!(!office.is_in(utc("2026-03-12T00:00:00Z"))); // Wed 17:00 PDT
    assert!(!office.is_in(utc("2026-03-14T17:00:00Z"))); // Sat 10:00 PDT
    assert!(!office.is_in(utc("2026-03-15T17:00:00Z"))); // Sun 10:00 PDT
    assert!(office.is_in(utc("2026-01-16T17:00:00Z"))); // Fri 09:00 PST
    // Fri 17:00 PDT to Mon 09:00 PDT.
    assert_flips_at(&office, utc("2026-03-13T20:00:00Z"), utc("2026-03-14T00:00:00Z"));
    assert_flips_at(&office, utc("2026-03-14T00:00:00Z"), utc("2026-03-16T16:00:00Z"));
}

#[test]
fn spec0022_overnight_shift_ends_the_next_day() {
    let night = shift("TZ=UTC Fri 22:00-06:00");
    assert!(night.is_overnight());
    assert!(night.is_in(utc("2026-03-14T03:00:00Z"))); // Sat 03:00
    assert!(night.is_in(utc("2026-03-13T22:00:00Z"))); // Fri 22:00
    assert!(!night.is_in(utc("2026-03-13T21:59:00Z"))); // Fri 21:59
    assert!(!night.is_in(utc("2026-03-14T06:00:00Z"))); // Sat 06:00
    assert!(!night.is_in(utc("2026-03-14T23:00:00Z"))); // Sat 23:00: Sat is not listed
    assert!(!night.is_in(utc("2026-03-13T03:00:00Z"))); // Fri 03:00: Thu is not listed
    assert_flips_at(&night, utc("2026-03-14T03:00:00Z"), utc("2026-03-14T06:00:00Z"));
    assert_flips_at(&night, utc("2026-03-14T06:00:00Z"), utc("2026-03-20T22:00:00Z"));
}

#[test]
fn spec0022_intervals_meeting_in_a_gap_are_one_stretch() {
    // 2026-03-08: Saturday's interval ends at 02:10, which the gap moves to 03:00 PDT, the
    // instant Sunday's 02:30 start also resolves to. Presence does not change there.
    let overnight = shift("TZ=America/Los_Angeles Mon-Sun 02:30-02:10");
    assert!(overnight.is_in(utc("2026-03-08T09:59:00Z"))); // Sun 01:59 PST
    assert!(overnight.is_in(utc("2026-03-08T10:00:00Z"))); // Sun 03:00 PDT
    assert_flips_at(&overnight, utc("2026-03-07T11:00:00Z"), utc("2026-03-09T09:10:00Z")); // Mon 02:10 PDT
    // On an ordinary day the 20 minutes between end and start remain.
    assert_flips_at(&overnight, utc("2026-03-10T09:00:00Z"), utc("2026-03-10T09:10:00Z"));
    assert_flips_at(&overnight, utc("2026-03-10T09:10:00Z"), utc("2026-03-10T09:30:00Z"));
}

#[test]
fn spec0022_start_in_spring_forward_gap_starts_when_the_gap_ends() {
    // 2026-03-08, Sun: Los Angeles skips 02:00-03:00 PST→PDT.
    let early = shift("TZ=America/Los_Angeles Sun 02:30-05:00");
    assert!(!early.is_in(utc("2026-03-08T09:59:00Z"))); // 01:59 PST
    assert!(early.is_in(utc("2026-03-08T10:00:00Z"))); // 03:00 PDT
    assert_flips_at(&early, utc("2026-03-08T08:00:00Z"), utc("2026-03-08T10:00:00Z"));
    assert_flips_at(&early, utc("2026-03-08T10:00:00Z"), utc("2026-03-08T12:00:00Z")); // 05:00 PDT
    // A shift wholly inside the gap has no time that day, and resumes the next week.
    let skipped = shift("TZ=America/Los_Angeles Sun 02:10-02:50");
    assert_flips_at(&skipped, utc("2026-03-08T08:00:00Z"), utc("2026-03-15T09:10:00Z")); // 02:10 PDT
}

#[test]
fn spec0022_end_in_fall_back_fold_ends_at_the_first_pass() {
    // 2026-11-01, Sun: Los Angeles reads 01:00-02:00 twice, PDT then PST.
    let late = shift("TZ=America/Los_Angeles Sun 00:00-01:30");
    assert!(late.is_in(utc("2026-11-01T08:29:00Z"))); // 01:29 PDT
    assert!(!late.is_in(utc("2026-11-01T08:30:00Z"))); // 01:30 PDT
    assert!(!late.is_in(utc("2026-11-01T09:15:00Z"))); // 01:15 PST, the second pass
    assert_flips_at(&late, utc("2026-11-01T07:00:00Z"), utc("2026-11-01T08:30:00Z"));
    // A start in the fold takes the earlier pass too.
    let folded = shift("TZ=America/Los_Angeles Sun 01:30-03:00");
    assert_flips_at(&folded, utc("2026-11-01T07:00:00Z"), utc("2026-11-01T08:30:00Z")); // 01:30 PDT
    assert_flips_at(&folded, utc("2026-11-01T08:30:00Z"), utc("2026-11-01T11:00:00Z")); // 03:00 PST
}

#[test]
fn spec0022_effective_prefers_live_override_then_shift_then_default() {
    let office = shift("TZ=UTC Mon-Fri 09:00-17:00");
    let now = utc("2026-03-11T10:00:00Z"); // Wed
    let shift_end = utc("2026-03-11T17:00:00Z");
    assert_eq!(
        effective(None, None, now),
        Effective { presence: Presence::In, source: PresenceSource::Default, until: None }
    );
    assert_eq!(
        effective(Some(&office), None, now),
        Effective { presence: Presence::In, source: PresenceSource::Shift, until: Some(shift_end) }
    );
    assert_eq!(
        effective(Some(&office), None, utc("2026-03-14T10:00:00Z")),
        Effective { presence: Presence::Out, source: PresenceSource::Shift, until: Some(utc("2026-03-16T09:00:00Z")) }
    );
    let out_for_now = Override { presence: Presence::Out, until: Some(utc("2026-03-11T11:00:00Z")) };
    assert_eq!(
        effective(Some(&office), Some(&out_for_now), now),
        Effective { presence: Presence::Out, source: PresenceSource::Override, until: out_for_now.until }
    );
    // Expired at its until, the shift answers again.
    assert_eq!(effective(Some(&office), Some(&out_for_now), utc("2026-03-11T11:00:00Z")).source, PresenceSource::Shift);
    assert_eq!(effective(None, Some(&out_for_now), utc("2026-03-11T12:00:00Z")).source, PresenceSource::Default);
    let out_until_cleared = Override { presence: Presence::Out, until: None };
    assert_eq!(
        effective(None, Some(&out_until_cleared), utc("2030-01-01T00:00:00Z")),
        Effective { presence: Presence::Out, source: PresenceSource::Override, until: None }
    );
}

#[test]
fn spec0022_clock_in_lasts_an_hour_by_default_within_bounds_and_the_shift() {
    let now = utc("2026-03-11T10:00:00Z");
    let in_until = |seconds: i64| Override { presence: Presence::In, until: Some(now + TimeDelta::seconds(seconds)) };
    assert_eq!(clock_in(None, now, None), Ok(in_until(CLOCK_IN_DEFAULT_SECONDS)));
    assert_eq!(clock_in(None, now, Some(CLOCK_IN_MAX_SECONDS)), Ok(in_until(8 * 3600)));
    assert_eq!(clock_in(None, now, Some(CLOCK_IN_MIN_SECONDS)), Ok(in_until(60)));
    for refused_seconds in [59, CLOCK_IN_MAX_SECONDS + 1, 0, -3600, i64::MAX] {
        let error = clock_in(None, now, Some(refused_seconds)).expect_err("out of range");
        assert_eq!(error.extras.get("field").and_then(|field| field.as_str()), Some("for"));
    }
    // Inside a shift ending in 30 minutes, the override ends with it.
    let office = shift("TZ=UTC Mon-Fri 09:00-10:30");
    assert_eq!(
        clock_in(Some(&office), now, None),
        Ok(Override { presence: Presence::In, until: Some(utc("2026-03-11T10:30:00Z")) })
    );
    // Off shift, it ends where the shift would bring the endpoint in anyway.
    assert_eq!(
        clock_in(Some(&office), utc("2026-03-11T08:30:00Z"), Some(CLOCK_IN_MAX_SECONDS)),
        Ok(Override { presence: Presence::In, until: Some(utc("2026-03-11T09:00:00Z")) })
    );
    assert_eq!(clock_in(Some(&office), utc("2026-03-11T12:00:00Z"), None), Ok(in_until(3 * 3600)));
}

#[test]
fn spec0022_clock_out_lasts_until_the_shift_changes_or_until_cleared() {
    let now = utc("2026-03-11T10:00:00Z");
    assert_eq!(clock_out(None, now), Override { presence: Presence::Out, until: None });
    let office = shift("TZ=UTC Mon-Fri 09:00-17:00");
    assert_eq!(
        clock_out(Some(&office), now),
        Override { presence: Presence::Out, until: Some(utc("2026-03-11T17:00:00Z")) }
    );
    let overnight_out = clock_out(Some(&office), utc("2026-03-11T18:00:00Z"));
    assert_eq!(overnight_out.until, Some(utc("2026-03-12T09:00:00Z")));
    assert_eq!(effective(Some(&office), Some(&overnight_out), utc("2026-03-12T09:00:00Z")).presence, Presence::In);
}

#[test]
fn spec0022_presence_and_source_spell_as_serde_does() {
    for presence in [Presence::In, Presence::Out] {
        assert_eq!(serde_json::to_value(presence).expect("serializes"), serde_json::json!(presence.as_str()));
        assert_eq!(presence.as_str().parse::<Presence>(), Ok(presence));
    }
    for source in [PresenceSource::Default, PresenceSource::Shift, PresenceSource::Override] {
        assert_eq!(serde_json::to_value(source).expect("serializes"), serde_json::json!(source.as_str()));
    }
    assert!("IN".parse::<Presence>().is_err());
}

/// Shifts across zones with whole-hour, half-hour (Lord Howe) and no DST, overnight ones
/// included, and starts or ends that fall into gaps and folds.
const PROPERTY_SHIFTS: [&str; 7] = [
    "TZ=America/Los_Angeles Mon-Fri 09:00-17:00",
    "TZ=America/Los_Angeles Sun 02:30-01:30",
    "TZ=Europe/London Sat,Sun 01:15-02:45",
    "TZ=Australia/Lord_Howe Mon,Wed-Fri 01:45-02:15",
    "TZ=Asia/Kolkata Mon-Sun 22:00-06:00",
    "TZ=Pacific/Apia Thu-Sat 09:00-17:00",
    "TZ=UTC Tue 00:00-23:59",
];
const YEAR_2026_UTC_SECONDS: i64 = 1_767_225_600;
const YEAR_SECONDS: i64 = 365 * 86_400;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn spec0022_is_in_is_constant_until_next_boundary_and_flips_there(
        shift_index in 0..PROPERTY_SHIFTS.len(),
        offset_seconds in 0..YEAR_SECONDS,
        year in prop_oneof![Just(0i64), Just(-15), 1..5i64],
        fractions_per_mille in [1i64..1000, 1i64..1000, 1i64..1000],
    ) {
        let shift = shift(PROPERTY_SHIFTS[shift_index]);
        let t = utc("2026-01-01T00:00:00Z") + TimeDelta::seconds(year * YEAR_SECONDS + offset_seconds);
        prop_assert_eq!(t.timestamp(), YEAR_2026_UTC_SECONDS + year * YEAR_SECONDS + offset_seconds);
        let boundary = shift.next_boundary(t);
        prop_assert!(boundary > t && boundary - t <= TimeDelta::days(16), "{} after {}: {}", shift, t, boundary);
        let state = shift.is_in(t);
        let span = boundary - t;
        for per_mille in fractions_per_mille {
            let sample = t + span * i32::try_from(per_mille).expect("below 1000") / 1000;
            prop_assert_eq!(shift.is_in(sample), state, "{} changes at {} before {}", shift, sample, boundary);
        }
        prop_assert_eq!(shift.is_in(boundary - TimeDelta::seconds(1)), state, "{} before {}", shift, boundary);
        prop_assert_ne!(shift.is_in(boundary), state, "{} does not flip at {}", shift, boundary);
    }
}
