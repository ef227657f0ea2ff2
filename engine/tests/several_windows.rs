//! Issue #52 on real PostgreSQL, at engine level: a policy with several windows ("2 a minute and
//! 100 a day"), each scenario by name. Every window admits a claim, every window is charged in
//! the claim's transaction, the refusal names its window, a redefinition counts the claims
//! already in each window's span, and two replicas racing never overrun the tightest window.

mod support;

use chrono::Duration;
use models::admission::{QueueStatus, Reason};
use models::error::Code;
use models::store::prelude::*;
use models::window::{WindowPeriod, WindowSpec};
use serde_json::json;
use support::{World, agent_world, at, claimed, deferred, granted, push_n, queue_of, set_policy};

/// 2 claims a minute and 100 a Pacific day (the primary window).
fn minute_and_daily(per_minute: i64, per_day: i64) -> serde_json::Value {
    json!({"max_claims_per_window": per_day,
        "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"},
        "additional_windows": [{"max_claims": per_minute, "window": {"period": "minute"}}]})
}

/// Units in the additional windows' counters, by slot, summed over windows.
async fn additional_charged(world: &World) -> Vec<(i16, i64)> {
    sqlx::query_as("SELECT slot, sum(used)::bigint FROM admission_additional_windows GROUP BY slot ORDER BY slot")
        .fetch_all(world.store.pool())
        .await
        .expect("additional counters")
}

// Issue #52 "a minute window defers the third quick claim"
#[tokio::test]
async fn ext52_a_minute_window_defers_the_third_quick_claim() {
    let (world, agent) = agent_world(&["calls"]).await;
    world.clock.set(at("2026-12-07T17:03:20Z"));
    let calls = queue_of(&agent, "calls");
    set_policy(&world, &calls, minute_and_daily(2, 100)).await;
    push_n(&world, &calls, 4).await;

    for expected_used in [1, 2] {
        let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
        let headroom = got.admission.expect("headroom");
        // The headroom stays the primary window's (SPEC-0030 REQ-7).
        assert_eq!((headroom.used, headroom.remaining), (Some(expected_used), Some(100 - expected_used)));
    }
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!(waiting.len(), 1);
    assert_eq!((waiting[0].reason, waiting[0].pending), (Reason::WindowExhausted, 2));
    assert_eq!(waiting[0].window, Some(WindowSpec::MINUTE));
    assert_eq!((waiting[0].next_eligible_at, waiting[0].exact), (Some(at("2026-12-07T17:04:00Z")), Some(true)));

    let pending = world.store.list_todos(models::store::TodoQuery {
        set: models::store::TodoSet::Queues(granted(&agent)),
        state: Some(models::todo::TodoState::Pending),
        limit: 10,
    });
    let named = pending.await.expect("list").pop().expect("a pending todo");
    let refused = world.store.claim(&agent, &named.id, 60).await.expect_err("deferred");
    assert_eq!((refused.code, refused.extras["reason"].as_str()), (Code::Deferred, Some("window_exhausted")));
    assert_eq!(refused.extras["window"], json!({"period": "minute"}));
    assert_eq!(refused.extras["next_eligible_at"], "2026-12-07T17:04:00.000Z");

    let status = world.store.queue_admissions(std::slice::from_ref(&calls)).await.expect("status").pop().expect("one");
    assert_eq!(
        (status.status.status, status.status.used, status.status.remaining),
        (QueueStatus::WindowExhausted, Some(2), Some(98))
    );
    let windows: Vec<(WindowPeriod, i64, i64)> =
        status.status.windows.iter().map(|w| (w.window.period, w.used, w.remaining)).collect();
    assert_eq!(windows, [(WindowPeriod::Day, 2, 98), (WindowPeriod::Minute, 2, 0)]);

    // The next minute admits again, and charges both windows.
    world.clock.set(at("2026-12-07T17:04:00Z"));
    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    let status = world.store.queue_admissions(std::slice::from_ref(&calls)).await.expect("status").pop().expect("one");
    let used: Vec<i64> = status.status.windows.iter().map(|w| w.used).collect();
    assert_eq!((status.status.status, used), (QueueStatus::Admitted, vec![3, 1]));
    assert_eq!(additional_charged(&world).await, [(1, 3)]);
}

// Issue #52 "every window is charged, and a redefinition counts the claims already in its span"
#[tokio::test]
async fn ext52_a_redefined_window_counts_the_claims_already_in_its_span_and_nothing_is_refunded() {
    let (world, agent) = agent_world(&["calls"]).await;
    world.clock.set(at("2026-12-07T17:03:20Z"));
    let calls = queue_of(&agent, "calls");
    let hourly = json!({"max_claims_per_window": 100,
        "window": {"period": "day", "tz": "UTC", "start": "00:00"},
        "additional_windows": [{"max_claims": 10, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}}]});
    set_policy(&world, &calls, hourly).await;
    push_n(&world, &calls, 8).await;
    for _ in 0..3 {
        claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    }
    world.clock.advance(Duration::minutes(2));

    // The hour window moves to slot 2 behind a new minute window, and is lowered to 4; a policy
    // delete in between refunds nothing.
    let actor = models::store::PolicyActor { human_id: None, endpoint_id: None };
    world.store.clear_policy(&calls, &actor).await.expect("clear");
    let redefined = json!({"max_claims_per_window": 100,
        "window": {"period": "day", "tz": "UTC", "start": "00:00"},
        "additional_windows": [{"max_claims": 5, "window": {"period": "minute"}},
            {"max_claims": 4, "window": {"period": "hour", "tz": "UTC", "start": "00:00"}}]});
    let saved = set_policy(&world, &calls, redefined).await;
    let used: Vec<i64> = saved.status.windows.iter().map(|w| w.used).collect();
    assert_eq!(used, [3, 0, 3], "the day and the hour count the three claims; this minute has none");

    claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    let waiting = deferred(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    let hour = WindowSpec::parse("hour", "UTC", "00:00", None).expect("hour");
    assert_eq!((waiting[0].reason, waiting[0].window), (Reason::WindowExhausted, Some(hour)));
    assert_eq!(waiting[0].next_eligible_at, Some(at("2026-12-07T18:00:00Z")));
    // Slot 1 keeps its old hour's counter (3) beside this minute's (1); slot 2's hour has all 4.
    assert_eq!(additional_charged(&world).await, [(1, 3 + 1), (2, 4)]);
    let audit = world.store.policy_audit(&calls, 10).await.expect("audit");
    assert_eq!(
        audit[0].after.as_ref().map(|after| after["additional_windows"][1]["max_claims"].clone()),
        Some(json!(4))
    );
    assert_eq!(
        audit[1].before.as_ref().map(|before| before["additional_windows"][0]["max_claims"].clone()),
        Some(json!(10))
    );
}

// Issue #52: REQ-4's race over two replicas holds for every window
#[tokio::test]
async fn ext52_two_replicas_racing_never_overrun_the_minute_window() {
    let (world, agent) = agent_world(&["calls"]).await;
    world.clock.set(at("2026-12-07T17:03:20Z"));
    let calls = queue_of(&agent, "calls");
    set_policy(&world, &calls, minute_and_daily(5, 1000)).await;
    push_n(&world, &calls, 30).await;
    let other = World::store_on(&world.db, &world.clock).await;
    let claims = (0..24).map(|i| {
        let (store, agent, queues) = (if i % 2 == 0 { &world.store } else { &other }, &agent, granted(&agent));
        async move { store.claim_next(agent, &queues, 60).await.expect("claim_next") }
    });
    let outcomes = futures::future::join_all(claims).await;
    let committed = outcomes.iter().filter(|o| matches!(o, models::store::ClaimNext::Claimed(_))).count();
    assert_eq!(committed, 5);
    assert_eq!(additional_charged(&world).await, [(1, 5)]);
    assert_eq!(support::charged(&world, &calls).await, 5);
}

// Issue #52 "when it will run out": a budget spent steadily says when it runs out at that rate.
#[tokio::test]
async fn ext52_the_status_forecasts_when_a_steadily_spent_budget_runs_out() {
    let (world, agent) = agent_world(&["calls"]).await;
    let calls = queue_of(&agent, "calls");
    world.clock.set(at("2026-12-07T16:50:00Z"));
    set_policy(
        &world,
        &calls,
        json!({"max_claims_per_window": 100, "window": {"period": "day", "tz": "UTC", "start": "00:00"}}),
    )
    .await;
    push_n(&world, &calls, 12).await;
    let status = world.store.queue_admissions(std::slice::from_ref(&calls)).await.expect("status").pop().expect("one");
    assert_eq!(status.status.forecast_exhausted_at, None, "no claim yet: no rate");
    for _ in 0..10 {
        claimed(world.store.claim_next(&agent, &granted(&agent), 30).await.expect("claim_next"));
        world.clock.advance(Duration::minutes(1));
    }
    // 10 claims in the last 15 minutes, 90 left: 135 minutes more.
    let status = world.store.queue_admissions(std::slice::from_ref(&calls)).await.expect("status").pop().expect("one");
    assert_eq!(status.status.forecast_exhausted_at, Some(at("2026-12-07T19:15:00Z")));
    // An hour later nothing was claimed in the last 15 minutes: no rate, no forecast.
    world.clock.advance(Duration::hours(1));
    let status = world.store.queue_admissions(std::slice::from_ref(&calls)).await.expect("status").pop().expect("one");
    assert_eq!(status.status.forecast_exhausted_at, None);
}
