//! Policies this replica has locked and evaluated, so the budgeted `claim_next` can run as one
//! statement (see `claim.rs`, "at once").
//!
//! The one statement has to know, before it starts, the window its clock reading will fall in:
//! window arithmetic is `models::window`'s and stays out of SQL. So each policy row the
//! step-by-step path locks and evaluates is remembered here with its stored columns, and a claim
//! passes the remembered rows, each with the window containing this host's clock reading. The
//! statement uses a remembered row only when it equals the locked row column for column and the
//! database's clock reading falls inside the passed window; anything else (a changed or damaged
//! policy, a window boundary, clock skew) makes it write nothing and hand the claim to the
//! step-by-step path. A stale entry therefore costs a round trip, never a wrong decision.

use chrono::{DateTime, Utc};
use models::admission::Policy;
use models::identity::QueueIdentity;
use models::window::WindowSpec;
use std::collections::HashMap;
use std::sync::Mutex;

/// A policy row's stored limit and window columns (`max_in_flight`, `max_claims_per_window`,
/// `window_period`, `window_tz`, `window_start`, `window_weekday`).
pub(crate) type StoredLimits =
    (Option<i32>, Option<i32>, Option<String>, Option<String>, Option<String>, Option<String>);

struct Known {
    policy_id: String,
    stored: StoredLimits,
    spec: Option<WindowSpec>,
    /// The last window computed for this policy, reused while the clock stays inside it.
    window: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

#[derive(Default)]
pub(crate) struct KnownPolicies {
    entries: Mutex<HashMap<QueueIdentity, Known>>,
}

/// The remembered rows for a set of queues, as the statement's parallel array parameters.
#[derive(Default)]
pub(crate) struct KnownRows {
    pub policy_ids: Vec<String>,
    pub max_in_flight: Vec<Option<i32>>,
    pub max_claims_per_window: Vec<Option<i32>>,
    pub periods: Vec<Option<String>>,
    pub zones: Vec<Option<String>>,
    pub starts: Vec<Option<String>>,
    pub weekdays: Vec<Option<String>>,
    pub windows_from: Vec<Option<DateTime<Utc>>>,
    pub windows_until: Vec<Option<DateTime<Utc>>>,
}

impl KnownPolicies {
    /// Forgets everything past this many queue identities, so memory stays bounded.
    const ENTRIES_MAX: usize = 16_384;

    /// Records a locked row that evaluated to `policy`.
    pub(crate) fn remember(&self, identity: &QueueIdentity, policy_id: &str, stored: &StoredLimits, policy: &Policy) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= Self::ENTRIES_MAX && !entries.contains_key(identity) {
            entries.clear();
        }
        let known =
            Known { policy_id: policy_id.to_string(), stored: stored.clone(), spec: policy.window, window: None };
        entries.insert(identity.clone(), known);
    }

    /// Drops an identity whose row is gone or no longer evaluates.
    pub(crate) fn forget(&self, identity: &QueueIdentity) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(identity);
    }

    /// The remembered rows among `queues`, each with the window containing `now`.
    pub(crate) fn rows_for(&self, queues: &[QueueIdentity], now: DateTime<Utc>) -> KnownRows {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows = KnownRows::default();
        for identity in queues {
            let Some(known) = entries.get_mut(identity) else { continue };
            let window = known.spec.map(|spec| match known.window {
                Some((from, until)) if from <= now && now < until => (from, until),
                _ => spec.window_containing(now),
            });
            known.window = window;
            let (max_in_flight, max_claims, period, tz, start, weekday) = known.stored.clone();
            rows.policy_ids.push(known.policy_id.clone());
            rows.max_in_flight.push(max_in_flight);
            rows.max_claims_per_window.push(max_claims);
            rows.periods.push(period);
            rows.zones.push(tz);
            rows.starts.push(start);
            rows.weekdays.push(weekday);
            rows.windows_from.push(window.map(|(from, _)| from));
            rows.windows_until.push(window.map(|(_, until)| until));
        }
        rows
    }
}
