//! SPEC-0030 REQ-4 and REQ-6 on real PostgreSQL: a lapsed lease is counted in flight until it is
//! reaped or taken over, but it is a takeover candidate, not a slot (issue #28). `claim_next`'s
//! unlocked pre-skip must not skip a queue whose cap a takeover fits, and the `in_flight_full`
//! hint waits for the earliest *live* lease.

mod support;

use chrono::Duration;
use models::admission::Reason;
use models::error::Code;
use models::store::prelude::*;
use serde_json::json;
use support::{agent_world, at, claimed, granted, queue_of, set_policy};

// SPEC-0030 REQ-4: after a refusal, the pre-skip reads which other queues are deferred. A queue
// at max_in_flight 1 whose one claim has lapsed shows in_flight_full there, yet the takeover of
// that claim is admitted under the lock, so claim_next must still reach it.
#[tokio::test]
async fn req4_the_pre_skip_does_not_skip_a_takeover_the_cap_admits() {
    let (world, agent) = agent_world(&["paused", "capped"]).await;
    world.clock.set(at("2026-11-30T09:00:00Z"));
    let paused = queue_of(&agent, "paused");
    let capped = queue_of(&agent, "capped");
    set_policy(&world, &paused, json!({"max_in_flight": 0})).await;
    set_policy(&world, &capped, json!({"max_in_flight": 1})).await;
    world.push(&paused, "oldest, refused first").await;
    world.clock.advance(Duration::seconds(1));
    let lapsing = world.push(&capped, "claimed, then abandoned").await;
    world.store.claim(&agent, &lapsing.id, 60).await.expect("claim");
    world.clock.advance(Duration::seconds(120));

    let got = claimed(world.store.claim_next(&agent, &granted(&agent), 60).await.expect("claim_next"));
    assert_eq!((got.todo.id, got.todo.attempt), (lapsing.id, 2), "the lapsed claim is taken over");
    assert_eq!(got.admission.map(|a| a.in_flight), Some(1));
}

// SPEC-0030 REQ-6: "for in_flight_full, the earliest live lease expiry plus the reaper interval".
// A lapsed lease frees its slot at the next reap, so it is not the one the hint waits for.
#[tokio::test]
async fn req6_the_in_flight_full_hint_is_the_earliest_live_lease_plus_the_reaper_interval() {
    let (world, agent) = agent_world(&["inbox"]).await;
    world.clock.set(at("2026-11-30T09:00:00Z"));
    let queue = queue_of(&agent, "inbox");
    set_policy(&world, &queue, json!({"max_in_flight": 2})).await;
    let short = world.push(&queue, "short lease").await;
    let long = world.push(&queue, "long lease").await;
    let waiting = world.push(&queue, "waits").await;
    world.store.claim(&agent, &short.id, 60).await.expect("claim short");
    world.store.claim(&agent, &long.id, 600).await.expect("claim long");
    world.clock.advance(Duration::seconds(120)); // the short lease has lapsed, unreaped

    let refused = world.store.claim(&agent, &waiting.id, 60).await.expect_err("at the cap");
    assert_eq!(refused.code, Code::Deferred);
    assert_eq!(refused.extras.get("reason").and_then(|r| r.as_str()), Some(Reason::InFlightFull.as_str()));
    let expected = at("2026-11-30T09:10:00Z") + Duration::seconds(30);
    assert_eq!(
        refused.extras.get("next_eligible_at").and_then(|t| t.as_str()).map(str::to_string),
        Some(models::window::wire_instant(expected)),
        "{refused:?}"
    );
    let status = world.store.queue_admissions(std::slice::from_ref(&queue)).await.expect("status").remove(0);
    assert_eq!(status.status.hint.next_eligible_at, Some(expected));
    assert_eq!((status.status.in_flight, status.lapsed), (Some(2), 1));
}
