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

/// A shift as it is written, for refusals and for the hints that show the syntax.
pub const SHIFT_EXAMPLE: &str = "TZ=America/Los_Angeles Mon-Fri 09:00-17:00";
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
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
mod tests;
