//! The reference model under random operation sequences: every invariant holds after every step
//! (issue 4, item 3), and the spec's scenarios read the same as on the engine.

use chrono::{DateTime, Duration, Utc};
use models::admission::{Policy, Reason};
use models::reference::Model;
use proptest::prelude::*;
use serde_json::json;

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-01T05:30:00Z").expect("instant").to_utc()
}

fn policy(variant: u8, limit: i64) -> Option<Policy> {
    let body = match variant % 5 {
        0 => return None,
        1 => json!({"max_in_flight": limit % 4}),
        2 => json!({"max_claims_per_window": limit, "window": {"period": "hour", "tz": "UTC", "start": "00:30"}}),
        3 => {
            json!({"max_claims_per_window": limit, "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}})
        }
        _ => json!({"max_in_flight": 1 + limit % 3, "max_claims_per_window": limit,
                    "window": {"period": "week", "tz": "Europe/Berlin", "start": "09:00", "weekday": "Mon"}}),
    };
    Some(Policy::from_request(&body).expect("valid policy"))
}

#[derive(Debug, Clone)]
enum Op {
    Create(u8, i32),
    ClaimNext(u8, i64),
    Claim(usize, u8),
    Complete(usize, u8),
    Fail(usize, u8),
    Release(usize, u8),
    Advance(i64),
    Reap,
    Requeue,
    RetryNow(usize),
    SetPolicy(u8, u8, i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3u8, 1..4i32).prop_map(|(q, m)| Op::Create(q, m)),
        4 => (0..2u8, 1..3600i64).prop_map(|(h, l)| Op::ClaimNext(h, l)),
        1 => (0..40usize, 0..2u8).prop_map(|(i, h)| Op::Claim(i, h)),
        2 => (0..40usize, 0..2u8).prop_map(|(i, h)| Op::Complete(i, h)),
        2 => (0..40usize, 0..2u8).prop_map(|(i, h)| Op::Fail(i, h)),
        1 => (0..40usize, 0..2u8).prop_map(|(i, h)| Op::Release(i, h)),
        2 => (1..20_000i64).prop_map(Op::Advance),
        1 => Just(Op::Reap),
        1 => Just(Op::Requeue),
        1 => (0..40usize).prop_map(Op::RetryNow),
        1 => (0..3u8, 0..5u8, 0..6i64).prop_map(|(q, v, l)| Op::SetPolicy(q, v, l)),
    ]
}

fn queue(q: u8) -> String {
    ["triage", "lane-s", "lane-m"][q as usize % 3].to_string()
}

fn holder(h: u8) -> String {
    format!("endpoint:agent-{h}")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    // SPEC-0030 REQ-3, REQ-4, REQ-5, REQ-6: random sequences keep every invariant.
    #[test]
    fn req4_random_operation_sequences_keep_every_invariant(ops in proptest::collection::vec(op(), 1..150)) {
        let mut model = Model::new(start());
        for op in ops {
            match op {
                Op::Create(q, max_attempts) => { model.create(&queue(q), max_attempts); }
                Op::ClaimNext(h, lease) => { model.claim_next(&holder(h), Duration::seconds(lease)); }
                Op::Claim(i, h) => { let _ = model.claim(i, &holder(h), Duration::seconds(120)); }
                Op::Complete(i, h) => { model.complete(i, &holder(h)); }
                Op::Fail(i, h) => { model.fail(i, &holder(h)); }
                Op::Release(i, h) => { model.release(i, &holder(h)); }
                Op::Advance(seconds) => model.advance(Duration::seconds(seconds)),
                Op::Reap => model.reap(),
                Op::Requeue => model.requeue_due_retries(),
                Op::RetryNow(i) => { model.retry_now(i); }
                Op::SetPolicy(q, variant, limit) => model.set_policy(&queue(q), policy(variant, limit)),
            }
            model.check();
        }
    }
}

// SPEC-0030 REQ-3 "A takeover is charged" and REQ-4 "Takeover at the in-flight cap", in the model.
#[test]
fn req4_a_takeover_at_the_cap_is_admitted_and_charged() {
    let mut model = Model::new(start());
    let body = json!({"max_in_flight": 1, "max_claims_per_window": 10, "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    model.set_policy("lane", Some(Policy::from_request(&body).expect("policy")));
    let todo = model.create("lane", 5);
    assert_eq!(model.claim_next("endpoint:a", Duration::seconds(60)), Some(todo));
    model.advance(Duration::seconds(61));
    assert_eq!(model.claim(todo, "endpoint:b", Duration::seconds(60)), Ok(()));
    assert_eq!(model.usage.values().sum::<i64>(), 2);
    model.check();
}

// SPEC-0030 REQ-4 "One deferred queue does not starve the others", in the model.
#[test]
fn req4_one_deferred_queue_does_not_starve_the_others() {
    let mut model = Model::new(start());
    model.set_policy("lane-s", Some(Policy::from_request(&json!({"max_in_flight": 0})).expect("policy")));
    model.create("lane-s", 5);
    model.advance(Duration::seconds(1));
    let triage = model.create("triage", 5);
    assert_eq!(model.claim_next("endpoint:a", Duration::seconds(60)), Some(triage));
    assert_eq!(model.refusals, vec![("lane-s".to_string(), Reason::Paused)]);
    model.check();
}
