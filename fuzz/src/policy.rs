//! Target `policy`: the admission policy JSON (`Policy::from_request`, SPEC-0030 REQ-1).
//!
//! Laws for an accepted policy: it round-trips through the JSON the API shows
//! (`from_request(to_json(p)) == p`); it rebuilds from the columns a store writes
//! (`from_stored`), so a policy the API accepts is never one the claim path would call corrupt
//! (REQ-9); and the decision and charged window behave for any observation.

use models::admission::{Decision, Policy, decide};

pub fn run(data: &[u8]) {
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let Ok(policy) = Policy::from_request(&body) else { return };

    let shown = policy.to_json();
    let again = Policy::from_request(&shown).unwrap_or_else(|e| panic!("{shown} was refused on the way back: {e}"));
    assert_eq!(again, policy, "a policy must round-trip through its JSON {shown}");

    let column = |limit: Option<i64>| limit.map(|v| i32::try_from(v).expect("REQ-1 limits fit a PostgreSQL integer"));
    let window = policy.window.as_ref();
    let stored = Policy::from_stored(
        column(policy.max_in_flight),
        column(policy.max_claims_per_window),
        window.map(|w| w.period_name()),
        window.and_then(|w| w.tz_name()),
        window.and_then(|w| w.start_text()).as_deref(),
        window.and_then(|w| w.weekday_name()),
        policy.additional_windows_json().as_ref(),
    )
    .unwrap_or_else(|e| panic!("accepted policy {shown} does not rebuild from its columns: {e}"));
    assert_eq!(stored, policy, "the stored columns must rebuild the same policy");

    for (in_flight, used) in [(0, 0), (1, 1), (9_999, 999_999), (10_000, 1_000_000), (i64::MAX, i64::MAX)] {
        let decision = decide(&policy, in_flight, used);
        let paused = policy.max_in_flight == Some(0) || policy.max_claims_per_window == Some(0);
        assert!(!paused || decision != Decision::Admit, "a zero limit pauses, yet {shown} admitted");
    }
    let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default();
    if let Some((start, end)) = policy.charged_window(now) {
        assert!(start <= now && now < end, "the charged window must contain the claim");
    }
}
