//! Usage over time on a budgeted queue's page (issue #29): the last 30 windows' usage against
//! the limit, with the windows that ran out marked and the time each ran out, and the claims of
//! the last 24 hours by hour. A policy with additional windows (issue #52) gets one such chart per
//! window, the primary first. Server-rendered SVG (no chart library, nothing inline for the CSP
//! to refuse) with a data table beside each chart, which is what a screen reader and a page
//! without styles read.
//!
//! Numbers come from the store: the primary windows' usage from `policy_detail` (what
//! `GET /api/v1/admission/...` lists), an additional window's from the charge ledger
//! (`PgStore::charged_in`), and the claim times from `PgStore::claim_history`. The
//! time a window ran out is the instant of its limit-th committed claim. Only geometry and
//! wording are decided here.

use super::view::{LocalTime, zone_moment};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use chrono_tz::Tz;
use models::limits::DETAIL_WINDOWS_MAX;
use models::what_if::PastClaim;

/// The charts' drawing box, in SVG user units.
pub const CHART_WIDTH: i64 = 600;
pub const CHART_HEIGHT: i64 = 160;
/// Room above the tallest bar for its marker.
const HEADROOM: i64 = 16;

/// One bar of a chart, in SVG user units.
pub struct Bar {
    pub x: i64,
    pub y: i64,
    pub width: i64,
    pub height: i64,
    /// The bar's tooltip and accessible text.
    pub label: String,
    /// Drawn in the alarm colour with a marker above: the window ran out.
    pub full: bool,
}

/// One window's row of the data table.
pub struct WindowRow {
    pub start: String,
    pub used: i64,
    pub ran_out: Option<LocalTime>,
    /// Ran out, but the claim that did it is older than the claim history kept.
    pub ran_out_unknown: bool,
}

/// One hour's row of the data table.
pub struct HourRow {
    pub hour: LocalTime,
    pub claims: i64,
}

/// One window's chart: its last windows' usage against its limit, and the data table beside it.
pub struct WindowsChart {
    /// Which window, in words ("per day from 09:00", "per minute").
    pub name: String,
    /// The chart's place on the page (0 for the primary window), for its element ids.
    pub key: usize,
    pub limit: i64,
    pub zone: String,
    pub bars: Vec<Bar>,
    /// The limit's height, as a line across the chart.
    pub limit_y: i64,
    pub rows: Vec<WindowRow>,
}

/// What the queue page's usage section shows.
pub struct UsageView {
    /// One chart per window, the primary first.
    pub charts: Vec<WindowsChart>,
    pub hour_bars: Vec<Bar>,
    pub hours: Vec<HourRow>,
    /// How many days back the charge ledger an additional window's chart reads is kept.
    pub ledger_days: i64,
    pub width: i64,
    pub height: i64,
}

/// Bars for `values`, left to right and ending at the right edge, in `slots` equal slots (so a
/// young queue's few windows are as wide as a month's), scaled so `scale_max` reaches the top
/// less the headroom.
fn bars(values: &[(i64, String, bool)], scale_max: i64, slots: usize) -> Vec<Bar> {
    let count = values.len() as i64;
    let slots = (slots as i64).max(count).max(1);
    let slot = CHART_WIDTH / slots;
    let first = slots - count;
    let width = (slot * 3 / 4).max(1);
    let drawable = CHART_HEIGHT - HEADROOM;
    values
        .iter()
        .enumerate()
        .map(|(i, (value, label, full))| {
            let height = if scale_max <= 0 { 0 } else { value * drawable / scale_max };
            Bar {
                x: (first + i as i64) * slot + (slot - width) / 2,
                y: CHART_HEIGHT - height,
                width,
                height,
                label: label.clone(),
                full: *full,
            }
        })
        .collect()
}

/// The instant the window `[start, end)` ran out: its `limit`-th claim in `history` (sorted).
fn ran_out_at(history: &[PastClaim], start: DateTime<Utc>, end: DateTime<Utc>, limit: i64) -> Option<DateTime<Utc>> {
    let first = history.partition_point(|c| c.claimed_at < start);
    let nth = first + usize::try_from(limit).ok()?.checked_sub(1)?;
    history.get(nth).map(|c| c.claimed_at).filter(|at| *at < end)
}

/// One window's chart. `windows` are its `(start, used)`, newest first; `end_of` gives a
/// window's end; `history` is the claim history since the oldest window's start, oldest first.
#[allow(clippy::too_many_arguments)]
pub fn windows_chart(
    name: String,
    key: usize,
    limit: i64,
    zone: Tz,
    viewer_zone: Tz,
    windows: &[(DateTime<Utc>, i64)],
    end_of: impl Fn(DateTime<Utc>) -> DateTime<Utc>,
    history: &[PastClaim],
) -> WindowsChart {
    let oldest_known = history.first().map(|c| c.claimed_at);
    let mut rows = Vec::new();
    let mut window_values = Vec::new();
    for &(start, used) in windows.iter().rev() {
        let full = limit > 0 && used >= limit;
        let ran_out = if full { ran_out_at(history, start, end_of(start), limit) } else { None };
        let start_text = zone_moment(start, zone);
        window_values.push((used, format!("window from {start_text}: {used} of {limit} used"), full));
        rows.push(WindowRow {
            start: start_text,
            used,
            ran_out_unknown: full && ran_out.is_none() && oldest_known.is_none_or(|first| first > start),
            ran_out: ran_out.map(|at| LocalTime::new(at, viewer_zone)),
        });
    }
    let scale_max = windows.iter().map(|(_, used)| *used).max().unwrap_or(0).max(limit);
    let limit_y =
        if scale_max <= 0 { CHART_HEIGHT } else { CHART_HEIGHT - limit * (CHART_HEIGHT - HEADROOM) / scale_max };
    WindowsChart {
        name,
        key,
        limit,
        zone: zone.name().to_string(),
        bars: bars(&window_values, scale_max, DETAIL_WINDOWS_MAX as usize),
        limit_y,
        rows,
    }
}

/// The usage section: the windows' charts (the primary first) and the claims of the last 24
/// hours by hour, from `history` (oldest first).
pub fn usage_view(charts: Vec<WindowsChart>, viewer_zone: Tz, history: &[PastClaim], now: DateTime<Utc>) -> UsageView {
    let this_hour = now.duration_trunc(TimeDelta::hours(1)).unwrap_or(now);
    let first_hour = this_hour - TimeDelta::hours(23);
    let mut per_hour = [0_i64; 24];
    for claim in history.iter().filter(|c| c.claimed_at >= first_hour && c.claimed_at <= now) {
        let index = ((claim.claimed_at - first_hour).num_hours()).clamp(0, 23) as usize;
        per_hour[index] += 1;
    }
    let hours: Vec<HourRow> = per_hour
        .iter()
        .enumerate()
        .map(|(i, claims)| HourRow {
            hour: LocalTime::new(first_hour + TimeDelta::hours(i as i64), viewer_zone),
            claims: *claims,
        })
        .collect();
    let hour_values: Vec<(i64, String, bool)> =
        hours.iter().map(|h| (h.claims, format!("hour from {}: {} claims", h.hour.text, h.claims), false)).collect();
    let hour_max = per_hour.iter().copied().max().unwrap_or(0);

    UsageView {
        charts,
        hour_bars: bars(&hour_values, hour_max, 24),
        hours,
        ledger_days: models::limits::CHARGE_LEDGER_RETENTION_DAYS,
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("in range")
    }

    fn claims(offsets: &[i64]) -> Vec<PastClaim> {
        offsets.iter().map(|s| PastClaim { claimed_at: at(*s), held_for: TimeDelta::seconds(1) }).collect()
    }

    #[test]
    fn a_window_ran_out_at_its_limit_th_claim() {
        let history = claims(&[-10, 5, 20, 30, 4000]);
        assert_eq!(ran_out_at(&history, at(0), at(3600), 3), Some(at(30)));
        assert_eq!(ran_out_at(&history, at(0), at(3600), 4), None, "the 4th claim is in the next window");
        assert_eq!(ran_out_at(&history, at(0), at(3600), 0), None);
    }

    #[test]
    fn bars_scale_to_the_larger_of_the_limit_and_the_usage() {
        let history = claims(&[1, 2, 3, 4]);
        let chart = windows_chart(
            "per hour".into(),
            0,
            4,
            Tz::UTC,
            Tz::UTC,
            &[(at(3600), 2), (at(0), 4)],
            |s| s + TimeDelta::hours(1),
            &history,
        );
        let view = usage_view(vec![chart], Tz::UTC, &history, at(7000));
        let chart = &view.charts[0];
        assert_eq!(chart.bars.len(), 2);
        // Thirty slots, the two windows in the last two.
        let slot = CHART_WIDTH / 30;
        assert_eq!((chart.bars[0].x / slot, chart.bars[1].x / slot), (28, 29));
        // Oldest first: the full window is on the left, at the full drawable height.
        assert!(chart.bars[0].full && !chart.bars[1].full);
        assert_eq!(chart.bars[0].height, CHART_HEIGHT - HEADROOM);
        assert_eq!(chart.bars[1].height, (CHART_HEIGHT - HEADROOM) / 2);
        assert_eq!(chart.limit_y, HEADROOM);
        assert_eq!(chart.rows[0].ran_out.as_ref().map(|t| t.iso.clone()), Some(crate::wire::rfc3339(at(4))));
        assert_eq!(view.hours.iter().map(|h| h.claims).sum::<i64>(), 4);
    }
}
