//! Endpoint presence: whether pushes may go to an endpoint right now, and until when.
//!
//! Governing: SPEC-0022 (Shift Schedule; effective presence; `clock_in` / `clock_out`).
//!
//! Presence is decided in one order everywhere: a live override (the agent's `clock_in` /
//! `clock_out`, or its owner's), then the endpoint's shift, then the default `in`. Doorbells, the
//! heartbeat sweep, notify hooks and the `presence` verb must agree on that answer and on when it
//! next changes (the out→in digest is timed by it), so the rules live here, once, as pure
//! functions. Like `window`, this module must never read a clock or the host's zoneinfo: the
//! instant is handed in, and chrono-tz compiles the IANA database into the binary.
//!
//! A shift is wall-clock time in its zone. An interval starts at the first instant the clock reads
//! the start time or later on a listed day, and ends at the first instant it reads the end time or
//! later on the same day, or on the next day when the end is earlier than the start (overnight).
//! A time inside a DST gap therefore resolves to the end of the gap and one inside a fold to its
//! earlier pass: the rule budget windows use, through the same helper.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, TimeDelta, Timelike, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::window::first_instant_reading;

/// Longest shift text accepted, matching the `endpoints.shift` column's check.
pub const SHIFT_TEXT_BYTES_MAX: usize = 200;
/// How long `clock_in` lasts when the caller names no duration.
pub const CLOCK_IN_DEFAULT_SECONDS: i64 = 3600;
/// Shortest `clock_in` a caller may ask for.
pub const CLOCK_IN_MIN_SECONDS: i64 = 60;
/// Longest `clock_in` a caller may ask for.
pub const CLOCK_IN_MAX_SECONDS: i64 = 8 * 3600;

const SHIFT_EXAMPLE: &str = "TZ=America/Los_Angeles Mon-Fri 09:00-17:00";
/// The only day spellings accepted, indexed by days from Monday (the bit in `days_mask`).
const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const DAYS_PER_WEEK: u32 = 7;

/// Local dates scanned around an instant for intervals that may contain it. An interval begins on
/// its listed date and ends at most a day later; the extra days cover offset jumps of up to a day
/// (Pacific/Apia skipped 2011-12-30), where an instant's local date and its interval's drift apart.
const SCAN_DAYS_BEFORE: i64 = 3;
const SCAN_DAYS_AFTER_FOR_IS_IN: i64 = 2;
/// Local dates scanned ahead for the next boundary. A listed weekday recurs within 7 days, and its
/// interval is empty only when start and end fall into one DST gap, which the following week's
/// cannot also do: two weeks plus the slack above always reach a boundary.
const SCAN_DAYS_AFTER_FOR_BOUNDARY: i64 = 16;

/// A validated shift schedule. Build it with [`Shift::parse`]; its [`fmt::Display`] is the
/// canonical text, which parses back to the same shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Shift {
    tz: Tz,
    /// Listed days, bit `n` for `n` days after Monday. Never zero.
    days_mask: u8,
    start: NaiveTime,
    /// Never equal to `start`; earlier than it for an overnight shift.
    end: NaiveTime,
}

impl Shift {
    /// Parses `TZ=<IANA zone> <days> <HH:MM>-<HH:MM>`, days being a comma list of `Mon`..`Sun`
    /// and ranges such as `Mon-Fri`.
    ///
    /// # Errors
    ///
    /// `invalid_argument` on field `shift`, naming the first part that is wrong: text over
    /// [`SHIFT_TEXT_BYTES_MAX`], a missing part, a zone the embedded database does not know, an
    /// unknown day or a backwards range, a time that is not `HH:MM`, or start equal to end.
    pub fn parse(text: &str) -> Result<Shift> {
        // Checked first, so every piece echoed below is bounded too.
        if text.len() > SHIFT_TEXT_BYTES_MAX {
            return Err(invalid(format!("is {} bytes long; at most {SHIFT_TEXT_BYTES_MAX} are allowed", text.len())));
        }
        let parts: Vec<&str> = text.split_ascii_whitespace().collect();
        let [zone_part, days_part, times_part] = parts[..] else {
            return Err(invalid(format!("{text:?} is not TZ=<zone> <days> <HH:MM>-<HH:MM>, e.g. {SHIFT_EXAMPLE}")));
        };
        let zone_name = zone_part
            .strip_prefix("TZ=")
            .ok_or_else(|| invalid(format!("{zone_part:?} should be the zone, written TZ=<IANA zone>")))?;
        // Tz's FromStr looks the name up in the compiled-in table, never on the host.
        let tz: Tz = zone_name
            .parse()
            .map_err(|_| invalid(format!("{zone_name:?} is not a known IANA time zone (e.g. America/Los_Angeles)")))?;
        let days_mask = parse_days(days_part)?;
        let (start_text, end_text) = times_part
            .split_once('-')
            .ok_or_else(|| invalid(format!("{times_part:?} should be the hours, written <HH:MM>-<HH:MM>")))?;
        let start = parse_hhmm(start_text)?;
        let end = parse_hhmm(end_text)?;
        if start == end {
            return Err(invalid(format!("starts and ends at {start_text}; a shift must last some time")));
        }
        Ok(Shift { tz, days_mask, start, end })
    }

    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// Local wall-clock start.
    pub fn start(&self) -> NaiveTime {
        self.start
    }

    /// Local wall-clock end, on the next day when [`Shift::is_overnight`].
    pub fn end(&self) -> NaiveTime {
        self.end
    }

    /// Whether each interval ends on the day after the listed one.
    pub fn is_overnight(&self) -> bool {
        self.end < self.start
    }

    /// Whether `at` lies inside one of the shift's intervals.
    pub fn is_in(&self, at: DateTime<Utc>) -> bool {
        self.intervals_utc(at, SCAN_DAYS_AFTER_FOR_IS_IN)
            .iter()
            .any(|(start_utc, end_utc)| *start_utc <= at && at < *end_utc)
    }

    /// The first instant strictly after `after` at which [`Shift::is_in`] changes.
    pub fn next_boundary(&self, after: DateTime<Utc>) -> DateTime<Utc> {
        // Touching intervals are one stretch of `in`: is_in does not change where they meet.
        let mut stretches_utc: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
        for (start_utc, end_utc) in self.intervals_utc(after, SCAN_DAYS_AFTER_FOR_BOUNDARY) {
            match stretches_utc.last_mut() {
                Some(last) if start_utc <= last.1 => last.1 = last.1.max(end_utc),
                _ => stretches_utc.push((start_utc, end_utc)),
            }
        }
        // Disjoint, sorted stretches: is_in changes exactly at their edges.
        let boundary =
            stretches_utc.iter().flat_map(|(start_utc, end_utc)| [*start_utc, *end_utc]).find(|edge| *edge > after);
        // None only within days of chrono's representable limits (about ±262,000 years), far
        // outside any instant the queue stores; answer without panicking.
        let boundary = boundary.unwrap_or(DateTime::<Utc>::MAX_UTC);
        debug_assert!(boundary > after || after == DateTime::<Utc>::MAX_UTC, "boundary {boundary} not after {after}");
        boundary
    }

    /// The non-empty intervals that begin on local dates around `around`'s, in order. Starts grow
    /// with the date (the first instant reading a later wall time is never earlier), which
    /// `next_boundary`'s merge relies on.
    fn intervals_utc(&self, around: DateTime<Utc>, scan_days_after: i64) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        let local_date = around.with_timezone(&self.tz).date_naive();
        let intervals_utc: Vec<_> = (-SCAN_DAYS_BEFORE..=scan_days_after)
            .filter_map(|offset_days| local_date.checked_add_signed(TimeDelta::days(offset_days)))
            .filter_map(|date| self.interval_on(date))
            .collect();
        debug_assert!(intervals_utc.is_sorted(), "shift intervals out of order: {intervals_utc:?}");
        intervals_utc
    }

    /// The interval beginning on local `date`, if the date is listed and the interval not empty.
    fn interval_on(&self, date: NaiveDate) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        if !self.lists(date.weekday().num_days_from_monday()) {
            return None;
        }
        let end_date = if self.is_overnight() { date.succ_opt()? } else { date };
        let start_utc = first_instant_reading(self.tz, date.and_time(self.start))?;
        let end_utc = first_instant_reading(self.tz, end_date.and_time(self.end))?;
        // Empty when start and end fall into one DST gap: the clock never read a time between.
        (start_utc < end_utc).then_some((start_utc, end_utc))
    }

    fn lists(&self, days_from_monday: u32) -> bool {
        days_from_monday < DAYS_PER_WEEK && self.days_mask & (1 << days_from_monday) != 0
    }
}

impl fmt::Display for Shift {
    /// Canonical text: runs of three or more days as ranges (`Mon-Fri`), shorter runs listed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TZ={} ", self.tz.name())?;
        let mut items: Vec<String> = Vec::new();
        let mut day = 0;
        while day < DAYS_PER_WEEK {
            if !self.lists(day) {
                day += 1;
                continue;
            }
            let run_first = day;
            while self.lists(day + 1) {
                day += 1;
            }
            if day - run_first >= 2 {
                items.push(format!("{}-{}", day_name(run_first), day_name(day)));
            } else {
                items.extend((run_first..=day).map(|listed| day_name(listed).to_owned()));
            }
            day += 1;
        }
        write!(f, "{} {}-{}", items.join(","), hhmm(self.start), hhmm(self.end))
    }
}

impl FromStr for Shift {
    type Err = Error;

    fn from_str(text: &str) -> Result<Shift> {
        Shift::parse(text)
    }
}

/// Stored and wire form is the text, re-validated on the way in.
impl TryFrom<String> for Shift {
    type Error = Error;

    fn try_from(text: String) -> Result<Shift> {
        Shift::parse(&text)
    }
}

impl From<Shift> for String {
    fn from(shift: Shift) -> String {
        shift.to_string()
    }
}

/// Whether pushes may go to an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    In,
    Out,
}

impl Presence {
    /// The wire and storage spelling, the same one serde uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Presence::In => "in",
            Presence::Out => "out",
        }
    }
}

impl FromStr for Presence {
    type Err = Error;

    fn from_str(text: &str) -> Result<Presence> {
        match text {
            "in" => Ok(Presence::In),
            "out" => Ok(Presence::Out),
            _ => Err(Error::invalid("presence", "must be in or out")),
        }
    }
}

/// Which rule decided the effective presence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PresenceSource {
    Default,
    Shift,
    Override,
}

impl PresenceSource {
    /// The wire spelling, the same one serde uses.
    pub fn as_str(self) -> &'static str {
        match self {
            PresenceSource::Default => "default",
            PresenceSource::Shift => "shift",
            PresenceSource::Override => "override",
        }
    }
}

/// A presence set by hand, live while `until` is absent (until cleared) or still ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    pub presence: Presence,
    pub until: Option<DateTime<Utc>>,
}

impl Override {
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.until.is_none_or(|until| until > now)
    }
}

/// The presence in force, which rule decided it, and when it next changes if that is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effective {
    pub presence: Presence,
    pub source: PresenceSource,
    pub until: Option<DateTime<Utc>>,
}

/// The presence in force at `now`: a live override, else the shift, else `in`.
pub fn effective(shift: Option<&Shift>, override_: Option<&Override>, now: DateTime<Utc>) -> Effective {
    if let Some(live) = override_.filter(|candidate| candidate.is_live(now)) {
        return Effective { presence: live.presence, source: PresenceSource::Override, until: live.until };
    }
    match shift {
        Some(shift) => Effective {
            presence: if shift.is_in(now) { Presence::In } else { Presence::Out },
            source: PresenceSource::Shift,
            until: Some(shift.next_boundary(now)),
        },
        None => Effective { presence: Presence::In, source: PresenceSource::Default, until: None },
    }
}

/// The override `clock_in` sets: `in` for `for_seconds` (default [`CLOCK_IN_DEFAULT_SECONDS`]),
/// ending early at the shift's next boundary so the schedule takes over again from there.
///
/// # Errors
///
/// `invalid_argument` on field `for` when `for_seconds` is outside
/// [`CLOCK_IN_MIN_SECONDS`]..=[`CLOCK_IN_MAX_SECONDS`].
pub fn clock_in(shift: Option<&Shift>, now: DateTime<Utc>, for_seconds: Option<i64>) -> Result<Override> {
    let for_seconds = for_seconds.unwrap_or(CLOCK_IN_DEFAULT_SECONDS);
    if !(CLOCK_IN_MIN_SECONDS..=CLOCK_IN_MAX_SECONDS).contains(&for_seconds) {
        return Err(Error::invalid(
            "for",
            format!("must be from {CLOCK_IN_MIN_SECONDS} to {CLOCK_IN_MAX_SECONDS} seconds, not {for_seconds}"),
        ));
    }
    // Overflows only at chrono's representable limit; saturate rather than panic.
    let requested_until = now.checked_add_signed(TimeDelta::seconds(for_seconds)).unwrap_or(DateTime::<Utc>::MAX_UTC);
    let until = match shift {
        Some(shift) => requested_until.min(shift.next_boundary(now)),
        None => requested_until,
    };
    Ok(Override { presence: Presence::In, until: Some(until) })
}

/// The override `clock_out` sets: `out` until the shift's next boundary, or until cleared when
/// the endpoint has no shift.
pub fn clock_out(shift: Option<&Shift>, now: DateTime<Utc>) -> Override {
    Override { presence: Presence::Out, until: shift.map(|shift| shift.next_boundary(now)) }
}

fn parse_days(text: &str) -> Result<u8> {
    let mut days_mask = 0u8;
    for item in text.split(',') {
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (day_index(first)?, day_index(last)?),
            None => {
                let day = day_index(item)?;
                (day, day)
            }
        };
        if first > last {
            return Err(invalid(format!(
                "day range {item:?} runs backwards; weeks run Mon to Sun (write Fri-Sun,Mon)"
            )));
        }
        for day in first..=last {
            days_mask |= 1 << day;
        }
    }
    debug_assert!(days_mask != 0, "split always yields an item, and each lists a day");
    Ok(days_mask)
}

fn day_index(name: &str) -> Result<u32> {
    DAY_NAMES
        .iter()
        .zip(0..DAYS_PER_WEEK)
        .find_map(|(known, index)| (*known == name).then_some(index))
        .ok_or_else(|| invalid(format!("{name:?} is not a day; expected Mon, Tue, Wed, Thu, Fri, Sat or Sun")))
}

fn day_name(days_from_monday: u32) -> &'static str {
    DAY_NAMES.get(days_from_monday as usize).copied().unwrap_or("?")
}

/// Exactly `HH:MM`, read as budget windows read it.
fn parse_hhmm(text: &str) -> Result<NaiveTime> {
    crate::window::parse_hhmm(text)
        .ok_or_else(|| invalid(format!("{text:?} is not a 24-hour HH:MM time from 00:00 to 23:59")))
}

fn hhmm(time: NaiveTime) -> String {
    format!("{:02}:{:02}", time.hour(), time.minute())
}

fn invalid(message: String) -> Error {
    Error::invalid("shift", message)
}

#[cfg(test)]
mod tests {
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
            Effective {
                presence: Presence::Out,
                source: PresenceSource::Shift,
                until: Some(utc("2026-03-16T09:00:00Z"))
            }
        );
        let out_for_now = Override { presence: Presence::Out, until: Some(utc("2026-03-11T11:00:00Z")) };
        assert_eq!(
            effective(Some(&office), Some(&out_for_now), now),
            Effective { presence: Presence::Out, source: PresenceSource::Override, until: out_for_now.until }
        );
        // Expired at its until, the shift answers again.
        assert_eq!(
            effective(Some(&office), Some(&out_for_now), utc("2026-03-11T11:00:00Z")).source,
            PresenceSource::Shift
        );
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
        let in_until =
            |seconds: i64| Override { presence: Presence::In, until: Some(now + TimeDelta::seconds(seconds)) };
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
}
