//! How queue state reads on the board (SPEC-0030 REQ-11): the queue header (used of limit, in
//! flight of limit, status in words, "resets at" in the policy's zone and the viewer's), the
//! deferred chip on each waiting todo, and the intake line ("P pending of C").
//!
//! Only wording and time zones live here. Every number and every decision (status, reason,
//! next eligible time) comes from the store as the API reports it; the board adds none.

use askama::Template;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use models::admission::{QueueStatus, Reason};
use models::capacity::Capacity;
use models::identity::{Owner, QueueIdentity};
use models::store::QueueAdmission;
use models::todo::{Todo, TodoState};
use models::window::generic_zone_name;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// Display names of the endpoints and teams a viewer reaches, by id.
#[derive(Default, Clone)]
pub struct Names {
    pub by_owner_id: HashMap<String, String>,
}

/// A queue identity as the board links and labels it.
#[derive(Clone)]
pub struct QueueRef {
    pub queue: String,
    /// "research / investigations".
    pub title: String,
    /// A DOM id fragment: letters, digits, `_`, `-` and `.` only.
    pub key: String,
    pub href: String,
}

impl QueueRef {
    pub fn new(identity: &QueueIdentity, names: &Names) -> QueueRef {
        let (kind, id) = match &identity.owner {
            Owner::Endpoint(id) => ("endpoint", id),
            Owner::Team(id) => ("team", id),
        };
        let owner_name = names.by_owner_id.get(id).cloned().unwrap_or_else(|| id.clone());
        let scope = format!("{kind}:{id}");
        QueueRef {
            href: format!("/queues/{scope}/{}", identity.queue),
            title: format!("{owner_name} / {}", identity.queue),
            key: format!("{kind}-{id}-{}", identity.queue)
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '-' })
                .collect(),
            queue: identity.queue.clone(),
        }
    }
}

/// A status in words and the CSS class that sets it apart (text first; colour only repeats it).
pub fn status_words(status: QueueStatus) -> (&'static str, &'static str) {
    match status {
        QueueStatus::Admitted => ("admitted", "admitted"),
        QueueStatus::WindowExhausted => ("exhausted", "exhausted"),
        QueueStatus::InFlightFull => ("in-flight full", "full"),
        QueueStatus::Paused => ("paused", "paused"),
        QueueStatus::AdmissionUnavailable => ("unavailable", "unavailable"),
        QueueStatus::SharedBudgetExhausted => ("shared budget spent", "exhausted"),
    }
}

/// Why a todo waits, in the chip's words.
pub fn reason_words(reason: Reason) -> &'static str {
    reason.words()
}

/// The policy's zone (UTC when the policy has no window or cannot be read).
pub fn policy_zone(admission: Option<&QueueAdmission>) -> Tz {
    admission.and_then(|a| a.policy.as_ref()).and_then(|p| p.window.as_ref()).map_or(Tz::UTC, |w| w.tz)
}

/// "00:00 PT": wall-clock time and the zone's generic name (`models::window::generic_zone_name`).
pub fn zone_time(instant: DateTime<Utc>, zone: Tz) -> String {
    format!("{} {}", instant.with_timezone(&zone).format("%H:%M"), generic_zone_name(zone, instant))
}

/// "00:00 PT on Wed 2 Dec".
pub fn zone_moment(instant: DateTime<Utc>, zone: Tz) -> String {
    let local = instant.with_timezone(&zone);
    format!("{} {} on {}", local.format("%H:%M"), generic_zone_name(zone, instant), local.format("%a %-d %b"))
}

/// A time in the viewer's own zone (REQ-11): written server-side in the zone the human set (or
/// the browser reported), UTC only while it is unknown; the script rewrites it into the
/// browser's zone when JavaScript runs.
#[derive(Clone)]
pub struct LocalTime {
    pub iso: String,
    pub text: String,
}

impl LocalTime {
    pub fn new(instant: DateTime<Utc>, viewer_zone: Tz) -> LocalTime {
        LocalTime { iso: crate::wire::rfc3339(instant), text: zone_moment(instant, viewer_zone) }
    }
}

/// "resets at": in the policy's zone, and as a `<time>` for the viewer's zone.
#[derive(Clone)]
pub struct Resets {
    pub zone_text: String,
    pub zone_name: String,
    pub local: LocalTime,
}

/// The live part of a queue header: what `/events` re-renders and swaps in.
#[derive(Template, Clone)]
#[template(path = "header_fragment.html")]
pub struct HeaderFragment {
    pub status_word: &'static str,
    pub status_class: &'static str,
    pub has_policy: bool,
    pub used_text: Option<String>,
    pub flight_text: Option<String>,
    pub resets: Option<Resets>,
    /// Issue #52: each additional window's usage, "2 of 2 used this minute".
    pub more_windows: Vec<String>,
    /// Issue #52: "at this rate, runs out at 15:40 PT".
    pub forecast_text: Option<String>,
    pub intake_text: String,
    pub at_capacity: bool,
}

/// The same live state as a row of the board's queue table: the cells after the queue's name
/// (status in words, used of limit, in flight, pending, resets at).
#[derive(Template)]
#[template(path = "queue_row.html")]
struct RowFragment<'a> {
    queue: &'a QueueRef,
    fragment: &'a HeaderFragment,
}

/// A queue header: the fixed part (title, edit control) and the live fragment, pre-rendered,
/// once as the queue page's header and once as the board table's row.
#[derive(Clone)]
pub struct HeaderView {
    pub queue: QueueRef,
    pub manages: bool,
    pub fragment_html: String,
    pub row_html: String,
    /// The status in words, what the board's status filter matches.
    pub status_word: &'static str,
    /// Short digest of `fragment_html`: the script skips a pushed fragment it already shows.
    pub version: String,
    pub is_alarm: bool,
    pub has_policy: bool,
}

pub fn intake_text(pending: i64, capacity: &Capacity) -> (String, bool) {
    if capacity.effective <= 0 {
        (format!("{pending} pending · unlimited"), false)
    } else if pending >= capacity.effective {
        (format!("{pending} pending of {} · at capacity", capacity.effective), true)
    } else {
        (format!("{pending} pending of {}", capacity.effective), false)
    }
}

/// The live header of a queue; `claimed` is its in-flight count where no policy reports one.
pub fn header_fragment(
    admission: Option<&QueueAdmission>,
    pending: i64,
    claimed: Option<i64>,
    capacity: &Capacity,
    viewer_zone: Tz,
) -> HeaderFragment {
    let (intake, at_capacity) = intake_text(pending, capacity);
    let Some(admission) = admission else {
        return HeaderFragment {
            status_word: "no budget",
            status_class: "admitted",
            has_policy: false,
            used_text: None,
            flight_text: claimed.map(|n| format!("{n} in flight")),
            resets: None,
            more_windows: vec![],
            forecast_text: None,
            intake_text: intake,
            at_capacity,
        };
    };
    let status = &admission.status;
    let (status_word, status_class) = status_words(status.status);
    let zone = policy_zone(Some(admission));
    HeaderFragment {
        status_word,
        status_class,
        has_policy: true,
        used_text: match (status.used, status.max_claims_per_window) {
            (Some(used), Some(max)) => Some(format!("{used} of {max} used")),
            _ => None,
        },
        flight_text: match (status.in_flight, status.max_in_flight) {
            (Some(in_flight), Some(max)) => Some(format!("{in_flight} of {max} in flight")),
            (Some(in_flight), None) => Some(format!("{in_flight} in flight")),
            _ => None,
        },
        resets: status.window_resets_at.map(|at| Resets {
            zone_text: zone_moment(at, zone),
            zone_name: zone.name().to_string(),
            local: LocalTime::new(at, viewer_zone),
        }),
        more_windows: status
            .windows
            .iter()
            .skip(1)
            .map(|w| {
                let span = match w.window.period {
                    models::window::WindowPeriod::Minute => "this minute".to_string(),
                    _ => format!(
                        "this {} (resets {})",
                        w.window.period_name(),
                        zone_time(w.window_resets_at, w.window.tz)
                    ),
                };
                format!("{} of {} used {span}", w.used, w.max_claims)
            })
            .collect(),
        forecast_text: status
            .forecast_exhausted_at
            .map(|at| format!("at this rate, runs out at {}", zone_time(at, zone))),
        intake_text: intake,
        at_capacity,
    }
}

/// Renders a header. The fragment renders from a struct of owned strings; it cannot fail short
/// of a formatter error, which then shows as an empty header rather than a failed page.
pub fn header_view(queue: QueueRef, manages: bool, fragment: &HeaderFragment) -> HeaderView {
    let fragment_html = fragment.render().unwrap_or_default();
    let row_html = RowFragment { queue: &queue, fragment }.render().unwrap_or_default();
    let digest = Sha256::digest(fragment_html.as_bytes());
    HeaderView {
        row_html,
        status_word: fragment.status_word,
        queue,
        manages,
        version: digest.iter().take(8).map(|b| format!("{b:02x}")).collect(),
        fragment_html,
        is_alarm: matches!(fragment.status_class, "exhausted" | "paused" | "unavailable"),
        has_policy: fragment.has_policy,
    }
}

/// "deferred · budget · eligible 00:00 PT" for a pending todo its queue does not admit now.
pub fn chip(admission: Option<&QueueAdmission>) -> Option<String> {
    let admission = admission?;
    let reason = admission.status.hint.reason?;
    let mut text = format!("deferred · {}", reason_words(reason));
    if let Some(at) = admission.status.hint.next_eligible_at {
        let about = if admission.status.hint.exact == Some(false) { "about " } else { "" };
        text.push_str(&format!(" · eligible {about}{}", zone_time(at, policy_zone(Some(admission)))));
    }
    Some(text)
}

/// A todo as a card or a table row shows it.
#[derive(Clone)]
pub struct TodoView {
    pub id: String,
    pub title: String,
    pub state: &'static str,
    pub href: String,
    pub chip: Option<String>,
    pub attempts: String,
    pub lease: Option<LocalTime>,
    pub pending: bool,
}

pub fn todo_view(todo: &Todo, admission: Option<&QueueAdmission>, viewer_zone: Tz) -> TodoView {
    let pending = todo.state == TodoState::Pending;
    TodoView {
        id: todo.id.clone(),
        title: todo.title.clone(),
        state: todo.state.as_str(),
        href: format!("/todos/{}", todo.id),
        chip: if pending { chip(admission) } else { None },
        attempts: format!("{} of {}", todo.attempt, todo.max_attempts),
        lease: todo
            .lease_expires_at
            .filter(|_| todo.state == TodoState::Claimed)
            .map(|at| LocalTime::new(at, viewer_zone)),
        pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::admission::{Observation, Policy, Used, status};
    use models::forecast::RecentCharges;

    // Issue #52: the header names each additional window's usage and says, in words, when the
    // budget runs out at its rate ("at this rate, runs out at 15:40 PT").
    #[test]
    fn ext52_the_header_shows_every_window_and_the_forecast_in_words() {
        let policy = Policy::from_request(&serde_json::json!({"max_claims_per_window": 100,
            "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"},
            "additional_windows": [{"max_claims": 2, "window": {"period": "minute"}}]}))
        .expect("valid");
        let now = DateTime::parse_from_rfc3339("2026-12-07T22:00:20Z").expect("instant").to_utc();
        let whole_minute = DateTime::parse_from_rfc3339("2026-12-07T22:00:00Z").expect("instant").to_utc();
        let minute = |k: i64| (whole_minute - chrono::TimeDelta::minutes(k), 1);
        let used = Used { primary: 70, additional: [1, 0, 0, 0] };
        let observed = Observation {
            now,
            in_flight: 0,
            used: used.primary,
            additional_used: used.additional,
            recent: RecentCharges::from_ledger(now, (1..=15).map(minute)),
            earliest_lease_expiry: None,
            reaper_interval: chrono::Duration::seconds(30),
        };
        let admission = QueueAdmission {
            identity: models::identity::QueueIdentity::endpoint("ep_1", "calls"),
            policy_id: "ap_1".into(),
            status: status(&policy, &observed),
            policy: Some(policy),
            pending: 3,
            lapsed: 0,
            created_at: now,
            updated_at: now,
        };
        let capacity = Capacity { setting: None, effective: 0, source: "default", locked: false };
        let fragment = header_fragment(Some(&admission), 3, None, &capacity, Tz::UTC);
        assert_eq!(fragment.more_windows, ["1 of 2 used this minute"]);
        // 15 claims over the 15 minutes and 20 s since 21:45: the day's 30 left go in ~30.7 minutes.
        assert_eq!(fragment.forecast_text.as_deref(), Some("at this rate, runs out at 14:31 PT"));
        let html = fragment.render().expect("render");
        assert!(
            html.contains("at this rate, runs out at 14:31 PT") && html.contains("1 of 2 used this minute"),
            "{html}"
        );
    }
}
