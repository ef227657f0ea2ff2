//! The laws of the pure admission core, checked over random inputs (issue #14, item 6): raising a
//! limit never turns an admit into a refusal, `decide` admits exactly when every limit has room,
//! and the headroom a claim or a status reports adds up (`used + remaining = max`); a group
//! admitted in turn (issue #15) takes exactly the room single claims would. The window
//! laws (a window contains its instant, the next starts at its end) are
//! `windows_oracle.rs`'s `req5_windows_tile_the_timeline`.
//!
//! Written with proptest, the property-testing crate the workspace already uses, rather than a
//! second one (the issue names quickcheck; the laws are the point, not the crate).

use chrono::{DateTime, Duration, Utc};
use models::admission::{Decision, Headroom, Observation, Policy, Reason, Used, decide, decide_in_turn, status};
use models::window::WindowSpec;
use proptest::prelude::*;

/// A limit as a policy holds it: absent (unlimited) or a count, zero meaning paused.
fn limit() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![Just(None), (0..50i64).prop_map(Some)]
}

/// `limit` raised by `by` (absent stays absent; a count may also be lifted to absent).
fn raised(limit: Option<i64>, by: i64, lift: bool) -> Option<i64> {
    if lift { None } else { limit.map(|max| max + by) }
}

fn policy(max_in_flight: Option<i64>, max_claims_per_window: Option<i64>) -> Policy {
    let window =
        max_claims_per_window.map(|_| WindowSpec::parse("day", "Europe/Berlin", "09:00", None).expect("valid"));
    Policy { max_in_flight, max_claims_per_window, window, additional_windows: vec![] }
}

fn instant(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).expect("in range")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

    // SPEC-0030 REQ-1, REQ-4: a higher cap admits at least what the lower one admitted.
    #[test]
    fn req4_raising_a_limit_never_turns_an_admit_into_a_refusal(
        max_in_flight in limit(),
        max_claims in limit(),
        in_flight in 0..60i64,
        used in 0..60i64,
        by_in_flight in 0..10i64,
        by_claims in 0..10i64,
        lift_in_flight in any::<bool>(),
        lift_claims in any::<bool>(),
    ) {
        let before = policy(max_in_flight, max_claims);
        let after = policy(raised(max_in_flight, by_in_flight, lift_in_flight), raised(max_claims, by_claims, lift_claims));
        if decide(&before, in_flight, used) == Decision::Admit {
            prop_assert_eq!(decide(&after, in_flight, used), Decision::Admit, "{:?} -> {:?}", before, after);
        }
        // And the converse: lowering never admits what the higher cap refused.
        if decide(&after, in_flight, used) != Decision::Admit {
            prop_assert_ne!(decide(&before, in_flight, used), Decision::Admit);
        }
    }

    // SPEC-0030 REQ-1: admit exactly when no limit is zero and every limit has room.
    #[test]
    fn req1_decide_admits_exactly_when_every_limit_has_room(
        max_in_flight in limit(),
        max_claims in limit(),
        in_flight in 0..60i64,
        used in 0..60i64,
    ) {
        let has_room = |max: Option<i64>, count: i64| max.is_none_or(|max| max > 0 && count < max);
        let admits = has_room(max_in_flight, in_flight) && has_room(max_claims, used);
        let decision = decide(&policy(max_in_flight, max_claims), in_flight, used);
        prop_assert_eq!(decision == Decision::Admit, admits, "{:?}", decision);
        if max_in_flight == Some(0) || max_claims == Some(0) {
            prop_assert_eq!(decision, Decision::Refuse(Reason::Paused));
        }
    }

    // SPEC-0030 REQ-4 with issue #15's group admission: deciding a group's claims in turn admits
    // what single claims one after another would (each seeing the last one's claim and charge,
    // a takeover not counting itself), and never more than every limit's room.
    #[test]
    fn req4_a_group_decided_in_turn_admits_what_single_claims_in_sequence_would(
        max_in_flight in limit(),
        max_claims in limit(),
        settled in 0..60i64,
        used in 0..60i64,
        takes_over in proptest::collection::vec(any::<bool>(), 0..12),
    ) {
        let policy = policy(max_in_flight, max_claims);
        // Every lapsed candidate is still counted in flight.
        let lapsed = takes_over.iter().filter(|t| **t).count() as i64;
        let observed = Observation {
            now: instant(0),
            in_flight: settled + lapsed,
            used,
            additional_used: [0; 4],
            recent: Default::default(),
            earliest_lease_expiry: None,
            reaper_interval: Duration::seconds(5),
        };
        let group = decide_in_turn(&policy, &observed, &takes_over, |used| used);

        let (mut in_flight, mut single_used, mut single_admitted) = (settled + lapsed, used, 0);
        for takes_over in &takes_over {
            let without_itself = in_flight - i64::from(*takes_over);
            if decide(&policy, without_itself, single_used) != Decision::Admit {
                break;
            }
            prop_assert_eq!(group.admitted.get(single_admitted).map(|seen| seen.in_flight), Some(without_itself));
            single_admitted += 1;
            in_flight += i64::from(!*takes_over);
            single_used += i64::from(policy.charges());
        }
        prop_assert_eq!(group.admitted.len(), single_admitted);
        prop_assert_eq!(group.refused.is_some(), single_admitted < takes_over.len());
        if let Some((reason, seen)) = group.refused {
            prop_assert_eq!(decide(&policy, seen.in_flight, seen.used), Decision::Refuse(reason));
        }
        if let (Some(max), false) = (max_in_flight, group.admitted.is_empty()) {
            prop_assert!(in_flight <= max.max(settled + lapsed), "{} in flight > {}", in_flight, max);
        }
        if let (Some(max), false) = (max_claims, group.admitted.is_empty()) {
            prop_assert!(used + group.admitted.len() as i64 <= max);
        }
    }

    // SPEC-0030 REQ-7: after a charged claim within the cap, `used + remaining = max`.
    #[test]
    fn req7_headroom_after_a_claim_adds_up(
        max_claims in 1..50i64,
        used_seed in 0..50i64,
        in_flight_before in 0..50i64,
        now_seconds in 1_600_000_000..1_900_000_000i64,
    ) {
        let used_before = used_seed % max_claims; // within the cap, as any admitted claim is
        let policy = policy(None, Some(max_claims));
        let window = policy.window.as_ref().map(|w| w.window_containing(instant(now_seconds)));
        let headroom = Headroom::after_claim(&policy, in_flight_before, Some(Used::from(used_before + 1)), window);
        prop_assert_eq!(headroom.used.zip(headroom.remaining).map(|(u, r)| u + r), Some(max_claims));
        prop_assert_eq!(headroom.in_flight, in_flight_before + 1);
        prop_assert!(headroom.window_resets_at.is_some_and(|end| end > instant(now_seconds)));
    }

    // SPEC-0030 REQ-6: a status reports `used + remaining = max` while within the cap, never a
    // negative remainder past it, and a window that contains the instant it was read at.
    #[test]
    fn req6_status_headroom_adds_up_and_never_goes_negative(
        max_in_flight in limit(),
        max_claims in 1..50i64,
        in_flight in 0..60i64,
        used in 0..60i64,
        now_seconds in 1_600_000_000..1_900_000_000i64,
    ) {
        let now = instant(now_seconds);
        let observed = Observation { now, in_flight, used, earliest_lease_expiry: None, reaper_interval: Duration::seconds(30), additional_used: [0; 4], recent: Default::default() };
        let reported = status(&policy(max_in_flight, Some(max_claims)), &observed);
        let remaining = reported.remaining.expect("a windowed policy reports its remainder");
        prop_assert!(remaining >= 0);
        if used <= max_claims {
            prop_assert_eq!(reported.used.map(|u| u + remaining), Some(max_claims));
        }
        let (start, end) = (reported.window_start.expect("start"), reported.window_resets_at.expect("end"));
        prop_assert!(start <= now && now < end, "{} not in {}..{}", now, start, end);
        prop_assert_eq!(reported.status == models::admission::QueueStatus::Admitted, !reported.hint.is_deferred());
    }
}
