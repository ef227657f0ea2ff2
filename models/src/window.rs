//! Window arithmetic: which budget window an instant belongs to, and when the next one begins.
//!
//! Governing: SPEC-0030 REQ-5 (Windows).
//!
//! Usage is stored per (policy, window_start), and a deferred todo reports the next boundary as
//! its `next_eligible_at`. The claim path, the admission status and the reference model must
//! therefore agree on every boundary to the second, so the definition lives here, once, as pure
//! functions. This module must never read a clock or the host's zoneinfo: the instant is handed
//! in, and chrono-tz compiles the IANA database into the binary.
//!
//! A window starts at the first instant at which the wall clock in the policy's zone reads the
//! declared start (day: every day; week: every week on the weekday; hour: every hour at the start
//! minute). For day and week windows a start inside a DST gap therefore resolves to the end of
//! the gap, and a start inside a fold takes the earlier instant, so the fall-back day is one
//! 25-hour window and the spring-forward day a 23-hour one. Hour windows start at every instant
//! whose wall clock reads `hh:MM:00`, both passes of a fold included and none inside a gap, so
//! they stay elapsed hours except where a zone shifts by a fraction of an hour. Minute windows
//! (issue #52) are the minutes of UTC, which are every zone's wall-clock minutes: no offset in
//! the database since 1972 has a seconds part.

use std::fmt;

use chrono::offset::LocalResult;
use chrono::{
    DateTime, Datelike, DurationRound, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeDelta, TimeZone, Timelike, Utc,
    Weekday,
};
use chrono_tz::{GapInfo, Tz};
use serde::{Deserialize, Serialize};

/// An instant as every answer writes it (contract §7, "Times"): RFC 3339 in UTC, milliseconds,
/// a `Z` suffix. The one format for the API, MCP and error extras alike (issue #51: the
/// `deferred` error wrote `+00:00`).
pub fn wire_instant(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The zone's generic name where it has one, as people say a time ("00:00 PT", SPEC-0030
/// REQ-11's chip): a zone whose standard and daylight abbreviations are `XST` and `XDT` in
/// `at`'s year is `XT` the whole year (PST/PDT: PT; EST/EDT: ET; AEST/AEDT: AET). Any other zone
/// keeps its abbreviation at `at` (CET or CEST, GMT or BST, JST, UTC, "+09"), which names it
/// unambiguously.
pub fn generic_zone_name(zone: Tz, at: DateTime<Utc>) -> String {
    let at_month = |month: u32| {
        let instant = Utc.with_ymd_and_hms(at.year(), month, 1, 12, 0, 0).single().unwrap_or(at);
        instant.with_timezone(&zone).format("%Z").to_string()
    };
    let (january, july) = (at_month(1), at_month(7));
    let (standard, daylight) = if january.ends_with("ST") { (january, july) } else { (july, january) };
    match (standard.strip_suffix("ST"), daylight.strip_suffix("DT")) {
        (Some(prefix), Some(same)) if prefix == same && !prefix.is_empty() => format!("{prefix}T"),
        _ => at.with_timezone(&zone).format("%Z").to_string(),
    }
}

/// How often a window repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WindowPeriod {
    /// Each wall-clock minute (issue #52): no zone or start, every zone offset being whole
    /// minutes since 1972.
    Minute,
    Hour,
    Day,
    Week,
}

impl WindowPeriod {
    /// The wire and storage spelling, the same one serde uses.
    pub fn as_str(self) -> &'static str {
        match self {
            WindowPeriod::Minute => "minute",
            WindowPeriod::Hour => "hour",
            WindowPeriod::Day => "day",
            WindowPeriod::Week => "week",
        }
    }
}

/// A validated window declaration. Build it with [`WindowSpec::parse`]: the computations assume
/// what `parse` guarantees (a weekday exactly when the period is a week, whole-minute start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "WindowSpecWire", into = "WindowSpecWire")]
pub struct WindowSpec {
    pub period: WindowPeriod,
    /// The zone; UTC, unused, for a minute window.
    pub tz: Tz,
    /// Local wall-clock start. Hour windows use only its minute; minute windows none of it.
    pub start: NaiveTime,
    /// Present exactly when `period` is `Week`.
    pub weekday: Option<Weekday>,
}

/// A rejected window field, named as the policy request names it (e.g. `window.tz`), so the API
/// can point at the offending field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowFieldError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for WindowFieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for WindowFieldError {}

/// The only spellings accepted, so storage round trips through one form.
const WEEKDAY_NAMES: [(&str, Weekday); 7] = [
    ("Mon", Weekday::Mon),
    ("Tue", Weekday::Tue),
    ("Wed", Weekday::Wed),
    ("Thu", Weekday::Thu),
    ("Fri", Weekday::Fri),
    ("Sat", Weekday::Sat),
    ("Sun", Weekday::Sun),
];

/// Candidate radii, in periods, around the local time of `t`. The narrow set answers whenever no
/// transition is near; the wide one must reach across the largest offset jump in the database
/// (24 h: Pacific/Apia 2011, Kwajalein 1993) plus two elapsed hours of hour-window slack.
const NARROW_RADIUS_PERIODS: i64 = 1;
const WIDE_RADIUS_HOURS: i64 = 27;
const WIDE_RADIUS_DAYS_OR_WEEKS: i64 = 3;

impl WindowSpec {
    /// Validates the raw strings of a policy request.
    ///
    /// # Errors
    ///
    /// The first invalid field, checked in the order period, tz, start, weekday: a period other
    /// than `hour`/`day`/`week`; a zone missing from the compiled-in IANA table; a start that is
    /// not `HH:MM` from 00:00 to 23:59; a weekday other than `Mon`..`Sun`, or one missing on a
    /// week window or present on any other.
    pub fn parse(period: &str, tz: &str, start: &str, weekday: Option<&str>) -> Result<WindowSpec, WindowFieldError> {
        WindowSpec::parse_fields(period, Some(tz), Some(start), weekday)
    }

    /// [`WindowSpec::parse`] for a request whose `tz` and `start` may be absent: a minute window
    /// (issue #52) takes neither, and refuses either; every other period requires both.
    ///
    /// # Errors
    ///
    /// As [`WindowSpec::parse`], and `window.tz` or `window.start` present on a minute window
    /// or absent on any other.
    pub fn parse_fields(
        period: &str,
        tz: Option<&str>,
        start: Option<&str>,
        weekday: Option<&str>,
    ) -> Result<WindowSpec, WindowFieldError> {
        let period = match period {
            "minute" => WindowPeriod::Minute,
            "hour" => WindowPeriod::Hour,
            "day" => WindowPeriod::Day,
            "week" => WindowPeriod::Week,
            other => {
                return Err(field_error(
                    "window.period",
                    format!("{} is not a period; expected minute, hour, day or week", quoted(other)),
                ));
            }
        };
        if period == WindowPeriod::Minute {
            let refused = |field: &'static str| field_error(field, "is not allowed when period is minute".into());
            return match (tz, start, weekday) {
                (Some(_), _, _) => Err(refused("window.tz")),
                (_, Some(_), _) => Err(refused("window.start")),
                (_, _, Some(_)) => Err(refused("window.weekday")),
                (None, None, None) => Ok(WindowSpec::MINUTE),
            };
        }
        let tz = tz.ok_or_else(|| field_error("window.tz", "is required".into()))?;
        let start = start.ok_or_else(|| field_error("window.start", "is required".into()))?;
        // Tz's FromStr looks the name up in the compiled-in table, never on the host.
        let tz: Tz = tz.parse().map_err(|_| {
            field_error("window.tz", format!("{} is not a known IANA time zone (e.g. America/Los_Angeles)", quoted(tz)))
        })?;
        let start = parse_hhmm(start).ok_or_else(|| {
            field_error("window.start", format!("{} is not a 24-hour HH:MM time from 00:00 to 23:59", quoted(start)))
        })?;
        let weekday = match (period, weekday) {
            (WindowPeriod::Week, None) => {
                return Err(field_error("window.weekday", "is required when period is week".into()));
            }
            (WindowPeriod::Week, Some(name)) => {
                Some(WEEKDAY_NAMES.iter().find(|(known, _)| *known == name).map(|(_, day)| *day).ok_or_else(|| {
                    field_error(
                        "window.weekday",
                        format!("{} is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun", quoted(name)),
                    )
                })?)
            }
            // Refused rather than ignored: a weekday on a daily policy is a client mistake.
            (_, Some(_)) => {
                return Err(field_error(
                    "window.weekday",
                    format!("is only allowed when period is week, not {}", period.as_str()),
                ));
            }
            (_, None) => None,
        };
        Ok(WindowSpec { period, tz, start, weekday })
    }

    /// The minute window: each wall-clock minute, the same instant in every zone.
    pub const MINUTE: WindowSpec =
        WindowSpec { period: WindowPeriod::Minute, tz: Tz::UTC, start: NaiveTime::MIN, weekday: None };

    /// The window containing `t`: `(start, end)` with `start <= t < end`, both absolute instants.
    pub fn window_containing(&self, t: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        if self.period == WindowPeriod::Minute {
            let start = t.duration_trunc(TimeDelta::minutes(1)).unwrap_or(t);
            return (start, start + TimeDelta::minutes(1));
        }
        let wide_radius_periods = match self.period {
            WindowPeriod::Minute | WindowPeriod::Hour => WIDE_RADIUS_HOURS,
            WindowPeriod::Day | WindowPeriod::Week => WIDE_RADIUS_DAYS_OR_WEEKS,
        };
        let window = window_around(&self.candidate_starts_utc(t, NARROW_RADIUS_PERIODS), t)
            .filter(|window| self.narrow_window_is_complete(*window))
            .or_else(|| window_around(&self.candidate_starts_utc(t, wide_radius_periods), t))
            .or_else(|| self.window_at_fixed_offset(t));
        // Every path above fails only within a week of chrono's representable limits (about
        // ±262,000 years), far outside any instant the queue stores; answer without panicking.
        let (window_start_utc, window_end_utc) = window.unwrap_or((t, DateTime::<Utc>::MAX_UTC));
        debug_assert!(
            window_start_utc <= t && t < window_end_utc,
            "window {window_start_utc}..{window_end_utc} does not contain {t}"
        );
        (window_start_utc, window_end_utc)
    }

    /// The absolute instant the window containing `t` began: the usage key.
    pub fn window_start(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        self.window_containing(t).0
    }

    /// The first instant after `t` that belongs to the next window: `next_eligible_at`.
    pub fn next_boundary(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        self.window_containing(t).1
    }

    /// The start as stored and accepted by [`WindowSpec::parse`], e.g. `"09:00"`.
    pub fn start_hhmm(&self) -> String {
        format!("{:02}:{:02}", self.start.hour(), self.start.minute())
    }

    /// The weekday as stored and accepted by [`WindowSpec::parse`], e.g. `"Mon"`.
    pub fn weekday_name(&self) -> Option<&'static str> {
        let weekday = self.weekday?;
        WEEKDAY_NAMES.iter().find(|(_, day)| *day == weekday).map(|(name, _)| *name)
    }

    /// The window in words, as the board's charts name it: "per minute", "per hour from :30
    /// UTC", "per day from 09:00 Europe/Paris", "per week from Mon 09:00 Europe/Paris".
    pub fn in_words(&self) -> String {
        let (start, zone) = (self.start.format("%H:%M"), self.tz.name());
        match (self.period, self.weekday) {
            (WindowPeriod::Minute, _) => "per minute".to_string(),
            (WindowPeriod::Hour, _) => format!("per hour from :{} {zone}", self.start.format("%M")),
            (WindowPeriod::Week, Some(day)) => format!("per week from {day} {start} {zone}"),
            (WindowPeriod::Day | WindowPeriod::Week, _) => format!("per day from {start} {zone}"),
        }
    }

    /// A request's `window` object (`{period, tz?, start?, weekday?}`), each error naming its
    /// field as the request names it (`window.tz`): what a policy's windows and a shared
    /// budget's window are read with.
    pub fn from_request_object(
        window: &serde_json::Map<String, serde_json::Value>,
    ) -> crate::error::Result<WindowSpec> {
        if let Some(unknown) = window.keys().find(|k| !["period", "tz", "start", "weekday"].contains(&k.as_str())) {
            return Err(crate::error::Error::invalid(
                &format!("window.{unknown}"),
                format!("unknown field window.{unknown}"),
            ));
        }
        let text = |key: &str| -> crate::error::Result<Option<&str>> {
            match window.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(crate::error::Error::invalid(
                    &format!("window.{key}"),
                    format!("window.{key} must be a string"),
                )),
            }
        };
        let required = |key: &str| -> crate::error::Result<&str> {
            text(key)?.ok_or_else(|| {
                crate::error::Error::invalid(&format!("window.{key}"), format!("window.{key} is required"))
            })
        };
        let period = required("period")?;
        WindowSpec::parse_fields(period, text("tz")?, text("start")?, text("weekday")?).map_err(|e| {
            let message = if e.message.starts_with("is ") { format!("{} {}", e.field, e.message) } else { e.message };
            crate::error::Error::invalid(e.field, message)
        })
    }

    pub fn period_name(&self) -> &'static str {
        self.period.as_str()
    }

    /// The zone as stored and shown; None for a minute window, which has none.
    pub fn tz_name(&self) -> Option<&'static str> {
        (self.period != WindowPeriod::Minute).then(|| self.tz.name())
    }

    /// The start as stored and shown; None for a minute window, which has none.
    pub fn start_text(&self) -> Option<String> {
        (self.period != WindowPeriod::Minute).then(|| self.start_hhmm())
    }

    /// The window as the API writes it: `{period, tz, start, weekday?}`, or `{period: minute}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut window = serde_json::Map::new();
        window.insert("period".into(), self.period_name().into());
        if let (Some(tz), Some(start)) = (self.tz_name(), self.start_text()) {
            window.insert("tz".into(), tz.into());
            window.insert("start".into(), start.into());
        }
        if let Some(day) = self.weekday_name() {
            window.insert("weekday".into(), day.into());
        }
        serde_json::Value::Object(window)
    }

    /// Window starts near `t`, sorted and deduplicated, from anchors within `radius_periods`
    /// periods of `t`'s local time. Anchors can coincide: when a whole local day is skipped
    /// (Pacific/Apia 2011-12-30) the 30th's start resolves to the 31st's, so the 29th's window
    /// ends there and no window belongs to the 30th.
    fn candidate_starts_utc(&self, t: DateTime<Utc>, radius_periods: i64) -> Vec<DateTime<Utc>> {
        let local = t.with_timezone(&self.tz).naive_local();
        let mut starts_utc = Vec::new();
        match self.period {
            WindowPeriod::Minute | WindowPeriod::Hour => {
                let Some(base) = local.date().and_hms_opt(local.hour(), self.start.minute(), 0) else {
                    return starts_utc;
                };
                for k in -radius_periods..=radius_periods {
                    let Some(wall) = base.checked_add_signed(TimeDelta::hours(k)) else {
                        continue;
                    };
                    match self.tz.from_local_datetime(&wall) {
                        LocalResult::Single(instant) => starts_utc.push(instant.to_utc()),
                        // The clock reads hh:MM twice and both readings begin an hour window,
                        // which keeps hour windows one elapsed hour long across a fold.
                        LocalResult::Ambiguous(first, second) => {
                            starts_utc.push(first.to_utc());
                            starts_utc.push(second.to_utc());
                        }
                        // The clock never reads hh:MM, so no hour window begins in a gap.
                        LocalResult::None => {}
                    }
                }
            }
            WindowPeriod::Day | WindowPeriod::Week => {
                let (anchor_date, days_per_period) = match self.period {
                    WindowPeriod::Week => (last_weekday_on_or_before(local.date(), self.anchor_weekday()), 7),
                    _ => (Some(local.date()), 1),
                };
                let Some(anchor_date) = anchor_date else {
                    return starts_utc;
                };
                for k in -radius_periods..=radius_periods {
                    let wall = anchor_date
                        .checked_add_signed(TimeDelta::days(k * days_per_period))
                        .map(|date| date.and_time(self.start));
                    if let Some(start_utc) = wall.and_then(|wall| first_instant_reading(self.tz, wall)) {
                        starts_utc.push(start_utc);
                    }
                }
            }
        }
        starts_utc.sort_unstable();
        starts_utc.dedup();
        starts_utc
    }

    /// Whether a window found among the narrow candidates can have missed a start in between.
    fn narrow_window_is_complete(&self, window: (DateTime<Utc>, DateTime<Utc>)) -> bool {
        let (start_utc, end_utc) = window;
        match self.period {
            // A day/week start is the first instant the clock reaches its anchor, which only
            // grows with the anchor. Both ends were found among consecutive anchors, so every
            // anchor that could start a window between them was in the set.
            WindowPeriod::Day | WindowPeriod::Week => true,
            // With one offset at both ends (the database never changes offset twice within an
            // hour), hh:MM starts are exactly an hour apart and none can hide in between. Near a
            // transition, or a jump as large as Antarctica/Vostok's 7-hour fold in 1994, the
            // neighbouring starts can lie far outside ±1 local hour: use the wide set.
            WindowPeriod::Minute | WindowPeriod::Hour => {
                end_utc - start_utc == TimeDelta::hours(1)
                    && utc_offset_seconds(self.tz, start_utc) == utc_offset_seconds(self.tz, end_utc)
            }
        }
    }

    /// A last resort for instants no candidate set covers (none in the database's range): the
    /// window as if the zone kept `t`'s offset forever.
    fn window_at_fixed_offset(&self, t: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let offset = TimeDelta::seconds(utc_offset_seconds(self.tz, t).into());
        let local = t.naive_utc().checked_add_signed(offset)?;
        let (anchor, period_length) = match self.period {
            WindowPeriod::Minute | WindowPeriod::Hour => {
                (local.date().and_hms_opt(local.hour(), self.start.minute(), 0)?, TimeDelta::hours(1))
            }
            WindowPeriod::Day => (local.date().and_time(self.start), TimeDelta::days(1)),
            WindowPeriod::Week => (
                last_weekday_on_or_before(local.date(), self.anchor_weekday())?.and_time(self.start),
                TimeDelta::weeks(1),
            ),
        };
        let anchor = if anchor > local { anchor.checked_sub_signed(period_length)? } else { anchor };
        let start_utc = anchor.checked_sub_signed(offset)?.and_utc();
        Some((start_utc, start_utc.checked_add_signed(period_length)?))
    }

    fn anchor_weekday(&self) -> Weekday {
        debug_assert!(self.weekday.is_some(), "a week window needs a weekday; use WindowSpec::parse");
        self.weekday.unwrap_or(Weekday::Mon)
    }
}

/// `[latest start <= t, earliest start > t)` among sorted starts, if both exist.
fn window_around(starts_utc: &[DateTime<Utc>], t: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let first_after = starts_utc.partition_point(|start| *start <= t);
    let start_utc = *starts_utc.get(first_after.checked_sub(1)?)?;
    let end_utc = *starts_utc.get(first_after)?;
    Some((start_utc, end_utc))
}

/// The first instant at which the wall clock in `tz` reads `wall` or later.
pub(crate) fn first_instant_reading(tz: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(instant) => Some(instant.to_utc()),
        // The clock reached the anchor on its first pass; the repeat is the same window's.
        LocalResult::Ambiguous(first, second) if crate::mutants::hooks::fold_takes_later_instant() => {
            Some(first.max(second).to_utc())
        }
        LocalResult::Ambiguous(first, second) => Some(first.min(second).to_utc()),
        // The clock jumped over the anchor, and first reads later than it where the gap ends.
        LocalResult::None => GapInfo::new(&wall, &tz)?.end.map(|instant| instant.to_utc()),
    }
}

fn utc_offset_seconds(tz: Tz, instant: DateTime<Utc>) -> i32 {
    tz.offset_from_utc_datetime(&instant.naive_utc()).fix().local_minus_utc()
}

fn last_weekday_on_or_before(date: NaiveDate, weekday: Weekday) -> Option<NaiveDate> {
    let days_back = (date.weekday().num_days_from_monday() + 7 - weekday.num_days_from_monday()) % 7;
    date.checked_sub_signed(TimeDelta::days(days_back.into()))
}

/// Exactly `HH:MM`: two ASCII digits each, so "7:00" and "+7:00" are refused, not guessed at.
/// Shifts (`presence`) read their times with it too.
pub(crate) fn parse_hhmm(text: &str) -> Option<NaiveTime> {
    let [h1, h2, b':', m1, m2] = *text.as_bytes() else {
        return None;
    };
    let digit = |byte: u8| byte.is_ascii_digit().then(|| u32::from(byte - b'0'));
    let hour = digit(h1)? * 10 + digit(h2)?;
    let minute = digit(m1)? * 10 + digit(m2)?;
    // from_hms_opt refuses 24:00 and 07:60.
    NaiveTime::from_hms_opt(hour, minute, 0)
}

fn field_error(field: &'static str, message: String) -> WindowFieldError {
    WindowFieldError { field, message }
}

/// Echoes client input in an error, escaped and bounded so a hostile body cannot bloat a reply.
fn quoted(text: &str) -> String {
    const ECHO_CHARS_MAX: usize = 40;
    if text.chars().count() <= ECHO_CHARS_MAX {
        format!("{text:?}")
    } else {
        let head: String = text.chars().take(ECHO_CHARS_MAX).collect();
        format!("{head:?}…")
    }
}

/// The IANA zone names this build knows (chrono-tz's compiled-in table), as a regular-expression
/// alternation: exactly the `tz` values [`WindowSpec::parse`] and a shift accept.
pub fn zone_alternation() -> String {
    // Only the characters a regular expression gives a meaning to outside a class are escaped
    // (`+` in `Etc/GMT+1`): an escaped `-` is an error in ECMA-262's unicode mode, which JSON
    // Schema validators in JavaScript use.
    let escape = |name: &str| -> String {
        name.chars().map(|c| if "\\^$.|?*+()[]{}".contains(c) { format!("\\{c}") } else { c.to_string() }).collect()
    };
    chrono_tz::TZ_VARIANTS.iter().map(|tz| escape(tz.name())).collect::<Vec<_>>().join("|")
}

/// `HH:MM` from 00:00 to 23:59, as [`parse_hhmm`] reads it, without anchors.
pub const HHMM_PATTERN: &str = "(?:[01][0-9]|2[0-3]):[0-5][0-9]";

/// A window as JSON Schema, as strict as [`WindowSpec::parse`]: an hour or day window names no
/// weekday, a week window must; the zone is one this build knows; the start is `HH:MM`. The
/// policy request and every answer carrying a policy share it.
impl schemars::JsonSchema for WindowSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Window".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let tz = serde_json::json!({ "type": "string", "pattern": format!("^(?:{})$", zone_alternation()),
            "description": "IANA zone name" });
        let start = serde_json::json!({ "type": "string", "pattern": format!("^{HHMM_PATTERN}$"),
            "description": "local start, HH:MM" });
        let days: Vec<&str> = WEEKDAY_NAMES.iter().map(|(name, _)| *name).collect();
        schemars::json_schema!({ "oneOf": [
            { "type": "object", "additionalProperties": false, "required": ["period", "tz", "start"],
              "properties": { "period": { "enum": ["hour", "day"] }, "tz": tz, "start": start,
                  "weekday": { "type": "null" } } },
            { "type": "object", "additionalProperties": false, "required": ["period", "tz", "start", "weekday"],
              "properties": { "period": { "const": "week" }, "tz": tz, "start": start, "weekday": { "enum": days } } },
            { "type": "object", "additionalProperties": false, "required": ["period"],
              "properties": { "period": { "const": "minute" }, "tz": { "type": "null" }, "start": { "type": "null" },
                  "weekday": { "type": "null" } } },
        ] })
    }
}

/// The stored and wire form: the same strings a policy request carries, re-validated on the way
/// in so a hand-edited row cannot smuggle in a spec `parse` would refuse.
#[derive(Serialize, Deserialize)]
struct WindowSpecWire {
    period: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tz: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weekday: Option<String>,
}

impl TryFrom<WindowSpecWire> for WindowSpec {
    type Error = WindowFieldError;

    fn try_from(wire: WindowSpecWire) -> Result<Self, Self::Error> {
        WindowSpec::parse_fields(&wire.period, wire.tz.as_deref(), wire.start.as_deref(), wire.weekday.as_deref())
    }
}

impl From<WindowSpec> for WindowSpecWire {
    fn from(spec: WindowSpec) -> Self {
        WindowSpecWire {
            period: spec.period_name().to_owned(),
            tz: spec.tz_name().map(str::to_owned),
            start: spec.start_text(),
            weekday: spec.weekday_name().map(str::to_owned),
        }
    }
}
