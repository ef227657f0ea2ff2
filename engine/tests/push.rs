//! Push decisions on real PostgreSQL with a manual clock (SPEC-0030 REQ-8; docs/push.md): the
//! doorbell heartbeat's schedule, which session is rung, presence, and the hook outbox's leases
//! across two replicas. The black-box tests prove the same through the binary; these reach the
//! instants (five minutes, six hours, a lapsed lease) a black-box test cannot wait for.

mod support;

use chrono::Duration;
use models::admission::Policy;
use models::identity::QueueIdentity;
use models::presence::Shift;
use models::push::{HookOutcome, RingReason};
use models::scope::Actor;
use models::store::prelude::*;
use models::store::{Clock, OverrideBy, PolicyActor};
use models::window::WindowSpec;
use support::World;

fn endpoint_of(agent: &Actor) -> String {
    match agent {
        Actor::Agent(scope) => scope.endpoint_id.clone(),
        Actor::Human(_) => panic!("an agent"),
    }
}

/// A budget of `max` claims per UTC day.
fn daily_utc(max: i64) -> Policy {
    let window = WindowSpec::parse("day", "UTC", "00:00", None).expect("window");
    Policy { max_in_flight: None, max_claims_per_window: Some(max), window: Some(window), additional_windows: vec![] }
}

async fn attached(world: &World, endpoint: &str, replica: &str) -> String {
    let session = world.store.open_session(endpoint).await.expect("open");
    assert!(world.store.attach_session(endpoint, &session, replica).await.expect("attach"));
    session
}

#[tokio::test]
async fn req8_the_heartbeat_rerings_an_unclaimed_todo_on_schedule_at_most_five_times() {
    let world = World::new().await;
    let owner = world.human("hb").await;
    let agent = world.agent(&owner, &["inbox"]).await;
    let endpoint = endpoint_of(&agent);
    let session = attached(&world, &endpoint, "r1").await;
    let todo = world.push(&QueueIdentity::endpoint(&endpoint, "inbox"), "waits").await;
    let created = world.store.dispatch_pushes().await.expect("dispatch");
    assert_eq!(created.rings.len(), 1);
    assert_eq!(created.rings[0].reason, RingReason::Created);
    assert_eq!(created.rings[0].session_id, session);

    // Gaps after ring n: 5 min, 20 min, 1 h, 6 h; nothing before a gap ends, nothing after five.
    for gap in [Duration::minutes(5), Duration::minutes(20), Duration::hours(1), Duration::hours(6)] {
        world.clock.advance(gap - Duration::seconds(1));
        world.store.refresh_sessions("r1", std::slice::from_ref(&session)).await.expect("refresh");
        assert!(world.store.heartbeat_sweep().await.expect("sweep").rings.is_empty(), "rang before {gap}");
        world.clock.advance(Duration::seconds(1));
        let swept = world.store.heartbeat_sweep().await.expect("sweep");
        assert_eq!(swept.rings.len(), 1, "one ring after {gap}");
        assert_eq!(swept.rings[0].reason, RingReason::Heartbeat);
        assert_eq!(swept.rings[0].todo_id.as_deref(), Some(todo.id.as_str()));
    }
    world.clock.advance(Duration::days(2));
    world.store.refresh_sessions("r1", std::slice::from_ref(&session)).await.expect("refresh");
    assert!(world.store.heartbeat_sweep().await.expect("sweep").rings.is_empty(), "a sixth ring");
}

#[tokio::test]
async fn req8_the_heartbeat_rings_at_most_three_todos_a_pass_round_robin_across_endpoints() {
    let world = World::new().await;
    let owner = world.human("rr").await;
    let (a, b) = (world.agent(&owner, &["q"]).await, world.agent(&owner, &["q"]).await);
    let (a, b) = (endpoint_of(&a), endpoint_of(&b));
    let session_a = attached(&world, &a, "r1").await;
    let session_b = attached(&world, &b, "r1").await;
    for n in 0..4 {
        world.push(&QueueIdentity::endpoint(&a, "q"), &format!("a{n}")).await;
    }
    world.push(&QueueIdentity::endpoint(&b, "q"), "b0").await;
    world.store.dispatch_pushes().await.expect("dispatch");
    world.clock.advance(Duration::minutes(5));
    world.store.refresh_sessions("r1", &[session_a, session_b]).await.expect("refresh");
    let swept = world.store.heartbeat_sweep().await.expect("sweep");
    assert_eq!(swept.rings.len(), 3, "three a pass");
    let to_b = swept.rings.iter().filter(|r| r.endpoint_id == b).count();
    assert_eq!(to_b, 1, "b's one todo is not starved by a's four: {:?}", swept.rings);
}

#[tokio::test]
async fn req8_one_session_per_todo_rotating_least_recently_rung_first() {
    let world = World::new().await;
    let owner = world.human("rot").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    let first = attached(&world, &endpoint, "r1").await;
    let second = attached(&world, &endpoint, "r2").await;
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    let mut rung = Vec::new();
    for n in 0..4 {
        world.push(&identity, &format!("t{n}")).await;
        world.clock.advance(Duration::seconds(1));
        let report = world.store.dispatch_pushes().await.expect("dispatch");
        assert_eq!(report.rings.len(), 1, "one session per todo");
        rung.push(report.rings[0].session_id.clone());
    }
    assert_eq!(rung.iter().filter(|s| **s == first).count(), 2, "{rung:?}");
    assert_eq!(rung.iter().filter(|s| **s == second).count(), 2, "{rung:?}");
    assert!(rung.windows(2).all(|w| w[0] != w[1]), "rotates: {rung:?}");
}

#[tokio::test]
async fn req8_presence_out_withholds_and_the_shift_start_rings_one_digest() {
    let world = World::new().await;
    let owner = world.human("shift").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    let session = attached(&world, &endpoint, "r1").await;
    // The epoch is Monday 2026-11-30 12:00 UTC; this shift starts at 13:00 UTC.
    let shift = Shift::parse("TZ=UTC Mon-Fri 13:00-17:00").expect("shift");
    world.store.set_shift(&endpoint, Some(shift)).await.expect("shift");
    world.store.presence_sweep().await.expect("sweep");
    assert_eq!(world.store.presence(&endpoint).await.expect("presence").effective.presence.as_str(), "out");
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    world.push(&identity, "waits for the shift").await;
    world.push(&identity, "also waits").await;
    let withheld = world.store.dispatch_pushes().await.expect("dispatch");
    assert!(withheld.rings.is_empty());
    assert_eq!(withheld.withheld_out, 2);

    world.clock.advance(Duration::hours(1));
    world.store.refresh_sessions("r1", std::slice::from_ref(&session)).await.expect("refresh");
    let digest = world.store.presence_sweep().await.expect("sweep");
    assert_eq!(digest.rings.len(), 1, "one digest");
    let meta = &digest.rings[0].message["params"]["meta"];
    assert_eq!(meta["kind"], "digest");
    assert_eq!(meta["pending"], "2");
    assert_eq!(meta["reason"], "shift_start");
    // Won once: a second replica's sweep finds nothing to do.
    let other = World::store_on(&world.db, &world.clock).await;
    assert!(other.presence_sweep().await.expect("sweep").rings.is_empty());
}

#[tokio::test]
async fn req8_a_deferred_identity_is_watched_and_rung_once_when_its_policy_is_raised() {
    let world = World::new().await;
    let owner = world.human("window").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    attached(&world, &endpoint, "r1").await;
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    let policy = daily_utc(0);
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    world.store.set_policy(&identity, &policy, &actor).await.expect("policy");
    world.push(&identity, "waits").await;
    let withheld = world.store.dispatch_pushes().await.expect("dispatch");
    assert_eq!((withheld.rings.len(), withheld.withheld_deferred), (0, 1));
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "still deferred");

    let raised = Policy { max_claims_per_window: Some(10), ..policy };
    world.store.set_policy(&identity, &raised, &actor).await.expect("raise");
    let reopened = world.store.reopen_sweep().await.expect("sweep");
    assert_eq!((reopened.rings.len(), reopened.reopens), (1, 1));
    assert_eq!(reopened.rings[0].reason, RingReason::Reopen);
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "once");
}

#[tokio::test]
async fn req8_a_hook_call_leased_by_a_dead_replica_is_sent_by_another_after_the_lease() {
    let world = World::new().await;
    let owner = world.human("hooks").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    world.store.add_hook(&endpoint, "http://hooks.example/x", "whsec_c2VjcmV0", false).await.expect("hook");
    world.push(&QueueIdentity::endpoint(&endpoint, "q"), "notify").await;
    assert_eq!(world.store.dispatch_pushes().await.expect("dispatch").hook_calls_enqueued, 1);
    let other = World::store_on(&world.db, &world.clock).await;

    let leased = world.store.take_hook_calls("dead").await.expect("take");
    assert_eq!(leased.len(), 1);
    assert!(other.take_hook_calls("alive").await.expect("take").is_empty(), "leased to one replica");
    world.clock.advance(Duration::seconds(models::push::HOOK_LEASE_SECONDS + 1));
    let retaken = other.take_hook_calls("alive").await.expect("take");
    assert_eq!(retaken.len(), 1);
    assert_eq!(retaken[0].msg_id, leased[0].msg_id, "the same call");
    // The dead replica's late answer is ignored; the live one's is recorded.
    world.store.finish_hook_call(leased[0].id, "dead", &HookOutcome::Failed("late".into())).await.expect("finish");
    other.finish_hook_call(retaken[0].id, "alive", &HookOutcome::Delivered).await.expect("finish");
    world.clock.advance(Duration::minutes(10));
    assert!(other.take_hook_calls("alive").await.expect("take").is_empty(), "delivered once");
    let hook = &other.list_hooks(&endpoint).await.expect("list")[0];
    assert_eq!(hook.consecutive_failures, 0, "the dead replica's failure did not count");
}

#[tokio::test]
async fn req8_clock_in_is_bounded_and_an_operator_override_is_named_in_the_digest() {
    let world = World::new().await;
    let owner = world.human("override").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    let session = attached(&world, &endpoint, "r1").await;
    let now = world.clock.now();
    let out = models::presence::clock_out(None, now);
    world.store.set_presence_override(&endpoint, Some(out), OverrideBy::Agent).await.expect("out");
    world.push(&QueueIdentity::endpoint(&endpoint, "q"), "waits").await;
    assert!(world.store.dispatch_pushes().await.expect("dispatch").rings.is_empty());
    assert!(models::presence::clock_in(None, now, Some(9 * 3600)).is_err(), "8 h at most");
    let back = models::presence::clock_in(None, now, None).expect("in");
    let view = world.store.set_presence_override(&endpoint, Some(back), OverrideBy::Operator).await.expect("in");
    assert_eq!(view.effective.presence.as_str(), "in");
    assert_eq!(view.pending, 1);
    let rung = world.store.rings_since(&session, 0).await.expect("rings");
    assert_eq!(rung.len(), 1, "one digest on the way in: {rung:?}");
    assert_eq!(rung[0].message["params"]["meta"]["reason"], "operator");
}

// SPEC-0030 REQ-8 "when its policy is raised", issue #28: work that was already rung (so no
// push is withheld for it), deferred by lowering the budget and reopened by raising it with no
// claim in between, is rung exactly once. The policy write records the watch itself.
#[tokio::test]
async fn req8_lower_then_raise_rings_exactly_once() {
    let world = World::new().await;
    let owner = world.human("lower").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    attached(&world, &endpoint, "r1").await;
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    world.store.set_policy(&identity, &daily_utc(5), &actor).await.expect("policy");
    world.push(&identity, "rung on creation").await;
    let created = world.store.dispatch_pushes().await.expect("dispatch");
    assert_eq!((created.rings.len(), created.withheld_deferred), (1, 0));

    world.store.set_policy(&identity, &daily_utc(0), &actor).await.expect("lower");
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "deferred: nothing rings");
    world.store.set_policy(&identity, &daily_utc(5), &actor).await.expect("raise");
    let reopened = world.store.reopen_sweep().await.expect("sweep");
    assert_eq!((reopened.rings.len(), reopened.reopens), (1, 1));
    assert_eq!(reopened.rings[0].reason, RingReason::Reopen);
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "exactly once");
}

// SPEC-0030 REQ-8 "when its window turns", issue #28: a claim on any surface (here the
// owner's, as the board claims) that spends the window defers the queue; when the boundary
// passes, the waiting work is rung once. The claim's own transaction records the watch.
#[tokio::test]
async fn req8_an_owner_claim_that_fills_the_window_then_the_boundary_rings_once() {
    let world = World::new().await;
    let (_, token) = world.store.bootstrap_human("filler", false).await.expect("bootstrap human");
    let endpoint = endpoint_of(&world.agent(&world.human_scope(&token).await, &["q"]).await);
    // Read after the vend, so the scope manages the new endpoint.
    let owner = world.human_scope(&token).await;
    world.clock.set(support::at("2026-11-30T09:00:00Z"));
    let session = attached(&world, &endpoint, "r1").await;
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    let policy = daily_utc(1);
    world.store.set_policy(&identity, &policy, &actor).await.expect("policy");
    let first = world.push(&identity, "claimed by the owner").await;
    world.push(&identity, "waits for tomorrow").await;
    assert_eq!(world.store.dispatch_pushes().await.expect("dispatch").rings.len(), 2, "both rung on creation");

    let human = Actor::Human(owner.clone());
    let claimed = world.store.claim(&human, &first.id, 600).await.expect("the owner's claim");
    assert_eq!(claimed.admission.and_then(|a| a.remaining), Some(0));
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "spent: nothing rings");
    world.clock.set(support::at("2026-12-01T00:00:00Z"));
    world.store.refresh_sessions("r1", std::slice::from_ref(&session)).await.expect("the stream is still there");
    let reopened = world.store.reopen_sweep().await.expect("sweep");
    assert_eq!((reopened.rings.len(), reopened.reopens), (1, 1));
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "exactly once");
}

// SPEC-0030 REQ-8 "no hook call while deferred", issue #28: the check is made again when the
// call is sent. A call enqueued while the queue admitted claims, whose queue is deferred by the
// time a sender takes it, is dropped (saying why) and the queue watched; raising the budget
// enqueues one `reopened` call, which is sent.
#[tokio::test]
async fn req8_a_hook_call_whose_queue_was_deferred_since_is_rechecked_at_send_time() {
    let world = World::new().await;
    let owner = world.human("recheck").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    world.store.add_hook(&endpoint, "http://hooks.example/x", "whsec_c2VjcmV0", false).await.expect("hook");
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    world.store.set_policy(&identity, &daily_utc(5), &actor).await.expect("policy");
    world.push(&identity, "notify").await;
    assert_eq!(world.store.dispatch_pushes().await.expect("dispatch").hook_calls_enqueued, 1);

    world.store.set_policy(&identity, &daily_utc(0), &actor).await.expect("lower");
    assert!(world.store.take_hook_calls("r1").await.expect("take").is_empty(), "deferred at send time");
    let dropped: (Option<String>, Option<String>) =
        sqlx::query_as("SELECT outcome, last_error FROM hook_outbox").fetch_one(world.store.pool()).await.expect("row");
    assert_eq!(dropped, (Some("dropped".into()), Some(models::push::HOOK_DEFERRED_AT_SEND.into())));

    world.store.set_policy(&identity, &daily_utc(5), &actor).await.expect("raise");
    assert_eq!(world.store.reopen_sweep().await.expect("sweep").hook_calls_enqueued, 1);
    let calls = world.store.take_hook_calls("r1").await.expect("take");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].body["reason"], "reopened");
}

// SPEC-0030 REQ-8, issue #28: a refused claim proves its queue deferred, so the store watches
// every queue an empty claim_next lists, in one statement. Here the watches the deferring writes
// recorded are removed first (as on a database upgraded while queues were deferred), so only the
// refusal can have recorded them: raising both budgets then rings each queue once.
#[tokio::test]
async fn req8_the_queues_an_empty_claim_next_lists_are_watched_and_ring_when_raised() {
    let world = World::new().await;
    let owner = world.human("refused").await;
    let agent = world.agent(&owner, &["a", "b"]).await;
    let endpoint = endpoint_of(&agent);
    attached(&world, &endpoint, "r1").await;
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    let queues = [QueueIdentity::endpoint(&endpoint, "a"), QueueIdentity::endpoint(&endpoint, "b")];
    for queue in &queues {
        world.store.set_policy(queue, &daily_utc(0), &actor).await.expect("paused");
        world.push(queue, "waits").await;
    }
    world.store.dispatch_pushes().await.expect("dispatch");
    sqlx::query("DELETE FROM admission_reopen_watch").execute(world.store.pool()).await.expect("forget the watches");

    let granted = queues.to_vec();
    match world.store.claim_next(&agent, &granted, 60).await.expect("claim_next") {
        models::store::ClaimNext::Empty { deferred } => assert_eq!(deferred.len(), 2),
        models::store::ClaimNext::Claimed(claimed) => panic!("claimed {}", claimed.todo.id),
    }
    for queue in &queues {
        world.store.set_policy(queue, &daily_utc(5), &actor).await.expect("raise");
    }
    let reopened = world.store.reopen_sweep().await.expect("sweep");
    assert_eq!((reopened.rings.len(), reopened.reopens), (2, 2));
}

// SPEC-0030 REQ-8: the reopen sweep looks at every watched identity, not only the oldest batch.
// A hundred queues stay deferred for the day, watched first; one watched after them reopens
// when its budget is raised, and the next pass rings it. (A sweep that read only the oldest
// `PUSH_BATCH_MAX` watches would never look at it while the hundred stay deferred.)
#[tokio::test]
async fn req8_a_reopening_behind_a_full_batch_of_deferred_watches_still_rings() {
    let world = World::new().await;
    let owner = world.human("crowded").await;
    let names: Vec<String> = (0..=models::push::PUSH_BATCH_MAX).map(|i| format!("q{i:03}")).collect();
    let granted: Vec<&str> = names.iter().map(String::as_str).collect();
    let endpoint = endpoint_of(&world.agent(&owner, &granted).await);
    attached(&world, &endpoint, "r1").await;
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    let identities: Vec<QueueIdentity> = names.iter().map(|name| QueueIdentity::endpoint(&endpoint, name)).collect();
    let (crowd, last) = identities.split_at(identities.len() - 1);
    for identity in crowd {
        world.store.set_policy(identity, &daily_utc(0), &actor).await.expect("paused");
        world.push(identity, "waits for tomorrow").await;
    }
    world.store.dispatch_pushes().await.expect("dispatch the crowd");
    // Watched a second after the crowd, so it is the last watch by age.
    world.clock.advance(Duration::seconds(1));
    world.store.set_policy(&last[0], &daily_utc(0), &actor).await.expect("paused");
    world.push(&last[0], "waits for its raise").await;
    let withheld = world.store.dispatch_pushes().await.expect("dispatch the last");
    assert_eq!(withheld.withheld_deferred, 1);
    let watched: i64 = sqlx::query_scalar("SELECT count(*) FROM admission_reopen_watch")
        .fetch_one(world.store.pool())
        .await
        .expect("count the watches");
    assert_eq!(watched, models::push::PUSH_BATCH_MAX + 1, "every deferred queue is watched");
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "all deferred");

    world.store.set_policy(&last[0], &daily_utc(5), &actor).await.expect("raise");
    let reopened = world.store.reopen_sweep().await.expect("sweep");
    assert_eq!((reopened.rings.len(), reopened.reopens), (1, 1), "the raised queue rings");
    assert_eq!(reopened.rings[0].queue.as_deref(), Some(last[0].queue.as_str()));
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "once");
}

// SPEC-0030 REQ-8: the heartbeat weighs the longest-unrung todos of queues that admit claims.
// A backlog of `HEARTBEAT_CANDIDATES_MAX` todos older than any other, in a queue paused for the
// day, does not keep it from re-ringing another queue's waiting todo on schedule. (A pass that
// read the oldest candidates first and dropped the deferred ones after would find nothing else.)
#[tokio::test]
async fn req8_a_deferred_backlog_does_not_keep_the_heartbeat_from_other_queues() {
    let world = World::new().await;
    let owner = world.human("backlog").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["backlog", "free"]).await);
    let session = attached(&world, &endpoint, "r1").await;
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    let backlog = QueueIdentity::endpoint(&endpoint, "backlog");
    world.store.set_policy(&backlog, &daily_utc(0), &actor).await.expect("paused");
    support::push_n(&world, &backlog, models::push::HEARTBEAT_CANDIDATES_MAX as usize).await;
    world.clock.advance(Duration::seconds(1));
    let free = world.push(&QueueIdentity::endpoint(&endpoint, "free"), "rings on schedule").await;
    let created = world.store.dispatch_pushes().await.expect("dispatch");
    assert_eq!(created.rings.len(), 1, "only the free queue's todo rings on creation");

    world.clock.advance(Duration::minutes(5));
    world.store.refresh_sessions("r1", std::slice::from_ref(&session)).await.expect("refresh");
    let swept = world.store.heartbeat_sweep().await.expect("sweep");
    assert_eq!(swept.rings.len(), 1, "the free queue's todo is re-rung: {:?}", swept.rings);
    assert_eq!(swept.rings[0].todo_id.as_deref(), Some(free.id.as_str()));
    assert_eq!(swept.rings[0].reason, RingReason::Heartbeat);
}

/// Another transaction holding the session's row, as a concurrent ring, the session refresh or
/// a stream's attach does (`FOR NO KEY UPDATE`, the lock every `UPDATE mcp_sessions` takes),
/// until the returned transaction ends.
async fn hold_session_row(world: &World, session: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("a second connection");
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("UPDATE mcp_sessions SET last_seen_at = last_seen_at WHERE id = $1")
        .bind(session)
        .execute(&mut *holder)
        .await
        .expect("hold the session row");
    holder
}

// SPEC-0030 REQ-8 "exactly one doorbell per endpoint and queue on every reopening", issue #51: a
// reopening whose endpoint's only session is held by another transaction at that moment rings
// it once, and its watch goes only with that ring. Before the fix the pick skipped the busy row,
// found nobody, deleted the watch and rang nothing.
#[tokio::test]
async fn req8_a_reopening_rings_once_while_another_transaction_holds_the_session_row() {
    let world = World::new().await;
    let owner = world.human("busy").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    let session = attached(&world, &endpoint, "r1").await;
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    world.store.set_policy(&identity, &daily_utc(0), &actor).await.expect("pause the window");
    let waiting = world.push(&identity, "waits").await;
    assert_eq!(world.store.dispatch_pushes().await.expect("dispatch").withheld_deferred, 1);
    world.store.set_policy(&identity, &daily_utc(5), &actor).await.expect("raise");

    let holder = hold_session_row(&world, &session).await;
    let reopened = tokio::time::timeout(std::time::Duration::from_secs(20), world.store.reopen_sweep())
        .await
        .expect("the sweep does not wait for the held row")
        .expect("sweep");
    holder.rollback().await.expect("release");
    assert_eq!((reopened.reopens, reopened.rings.len()), (1, 1), "{reopened:?}");
    assert_eq!(reopened.rings[0].session_id, session);
    assert_eq!(reopened.rings[0].todo_id.as_deref(), Some(waiting.id.as_str()));
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "rung once");
    let rung = world.store.rings_since(&session, 0).await.expect("rings");
    assert_eq!(rung.iter().filter(|r| r.reason == RingReason::Reopen).count(), 1, "{rung:?}");
}

// Issue #51: "a watch is never deleted without its ring committed in the same transaction". A
// reopening whose ring cannot commit (the session's row locked exclusively past the lock timeout,
// as a session being closed holds it) leaves its watch, and the next pass rings it once.
#[tokio::test]
async fn req8_a_reopening_whose_ring_cannot_commit_keeps_its_watch_and_rings_on_the_next_pass() {
    let world = World::new().await;
    let owner = world.human("blocked").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    let session = attached(&world, &endpoint, "r1").await;
    let identity = QueueIdentity::endpoint(&endpoint, "q");
    let actor = PolicyActor { human_id: Some(owner.human.id.clone()), endpoint_id: None };
    world.store.set_policy(&identity, &daily_utc(0), &actor).await.expect("pause the window");
    world.push(&identity, "waits").await;
    world.store.dispatch_pushes().await.expect("dispatch");
    world.store.set_policy(&identity, &daily_utc(5), &actor).await.expect("raise");

    let impatient = engine::PoolSettings {
        connections_max: 4,
        lock_timeout: std::time::Duration::from_millis(300),
        ..engine::PoolSettings::default()
    };
    let impatient = world.store_with(impatient).await;
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("a second connection");
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM mcp_sessions WHERE id = $1 FOR UPDATE")
        .bind(&session)
        .execute(&mut *holder)
        .await
        .expect("lock the session row exclusively");
    let blocked = impatient.reopen_sweep().await;
    assert!(blocked.as_ref().map_or(true, |report| report.rings.is_empty()), "rang through the lock: {blocked:?}");
    holder.rollback().await.expect("release");

    let reopened = world.store.reopen_sweep().await.expect("sweep");
    assert_eq!((reopened.reopens, reopened.rings.len()), (1, 1), "the watch went without its ring: {reopened:?}");
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "rung once");
}

/// A paused identity of `endpoint`'s queue `queue` with one todo waiting and its watch recorded,
/// then raised: due to reopen on the next sweep.
async fn reopening(world: &World, owner_human: &str, endpoint: &str, queue: &str) -> QueueIdentity {
    let identity = QueueIdentity::endpoint(endpoint, queue);
    let actor = PolicyActor { human_id: Some(owner_human.to_string()), endpoint_id: None };
    world.store.set_policy(&identity, &daily_utc(0), &actor).await.expect("pause the window");
    world.push(&identity, "waits").await;
    assert_eq!(world.store.dispatch_pushes().await.expect("dispatch").withheld_deferred, 1);
    world.store.set_policy(&identity, &daily_utc(5), &actor).await.expect("raise");
    identity
}

/// `session`'s row locked exclusively (as closing a session locks it) until the answer ends.
async fn lock_session_exclusively(world: &World, session: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("a second connection");
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM mcp_sessions WHERE id = $1 FOR UPDATE")
        .bind(session)
        .execute(&mut *holder)
        .await
        .expect("lock the session row exclusively");
    holder
}

/// Waits until some statement waits for a lock: a pass has reached the held row.
async fn until_a_lock_is_awaited(world: &World) {
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("a watching connection");
    for _ in 0..200 {
        let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_locks WHERE NOT granted")
            .fetch_one(&pool)
            .await
            .expect("pg_locks");
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("no pass reached the held session row");
}

// Issue #51, "no ring is lost": a doorbell's event id is what a reconnecting stream resumes from
// (`Last-Event-ID`), so a session's ids must follow the order its rings commit in. Here a reopen
// pass decides a ring to session A, then waits on session B's held row; meanwhile a creation
// doorbell to A commits. The reopen ring, committed last, has the later id and is replayed to a
// stream that resumes after the creation doorbell. Before the fix it had the earlier id and the
// replay skipped it.
#[tokio::test]
async fn req8_a_ring_that_commits_after_another_has_the_later_event_id_and_is_replayed() {
    let world = World::new().await;
    let owner = world.human("order").await;
    let a = endpoint_of(&world.agent(&owner, &["q", "other"]).await);
    let b = endpoint_of(&world.agent(&owner, &["q"]).await);
    let (session_a, session_b) = (attached(&world, &a, "r1").await, attached(&world, &b, "r1").await);
    reopening(&world, &owner.human.id, &a, "q").await;
    world.clock.advance(Duration::seconds(1));
    reopening(&world, &owner.human.id, &b, "q").await;

    let holder = lock_session_exclusively(&world, &session_b).await;
    let store = world.store.clone();
    let sweep = tokio::spawn(async move { store.reopen_sweep().await });
    until_a_lock_is_awaited(&world).await;
    world.push(&QueueIdentity::endpoint(&a, "other"), "lands meanwhile").await;
    let created = world.store.dispatch_pushes().await.expect("dispatch");
    assert_eq!(created.rings.len(), 1, "{created:?}");
    holder.rollback().await.expect("release within the ring's lock timeout");
    let reopened = sweep.await.expect("join").expect("sweep");

    assert_eq!(reopened.reopens, 2, "{reopened:?}");
    let reopen_a = reopened.rings.iter().find(|r| r.session_id == session_a).expect("A rung");
    assert!(reopen_a.seq > created.rings[0].seq, "committed last, numbered first: {reopened:?} {created:?}");
    let resumed = world.store.rings_since(&session_a, created.rings[0].seq).await.expect("replay");
    assert_eq!(resumed.iter().map(|r| r.reason).collect::<Vec<_>>(), vec![RingReason::Reopen], "{resumed:?}");
}

// Issue #51: each reopening is a step of its own. One whose session's row is held past the
// ring's lock timeout keeps its watch and rings on a later pass; the others in the same pass ring
// now, and nobody is rung twice.
#[tokio::test]
async fn req8_a_held_session_delays_only_its_own_reopening() {
    let world = World::new().await;
    let owner = world.human("isolated").await;
    let a = endpoint_of(&world.agent(&owner, &["q"]).await);
    let b = endpoint_of(&world.agent(&owner, &["q"]).await);
    let (session_a, session_b) = (attached(&world, &a, "r1").await, attached(&world, &b, "r1").await);
    reopening(&world, &owner.human.id, &b, "q").await;
    world.clock.advance(Duration::seconds(1));
    reopening(&world, &owner.human.id, &a, "q").await;

    let holder = lock_session_exclusively(&world, &session_b).await;
    let first = world.store.reopen_sweep().await.expect("the pass goes on past the held row");
    assert_eq!(first.rings.iter().map(|r| r.session_id.as_str()).collect::<Vec<_>>(), vec![session_a.as_str()]);
    holder.rollback().await.expect("release");

    let second = world.store.reopen_sweep().await.expect("sweep");
    assert_eq!(second.rings.iter().map(|r| r.session_id.as_str()).collect::<Vec<_>>(), vec![session_b.as_str()]);
    assert!(world.store.reopen_sweep().await.expect("sweep").rings.is_empty(), "each rung once");
}

// Issue #51, "no ring is lost": a creation doorbell whose session's row is held past the ring's
// lock timeout is due again for the next pass, while the rest of its batch rings now.
#[tokio::test]
async fn req8_a_creation_doorbell_held_past_the_lock_timeout_rings_on_the_next_pass() {
    let world = World::new().await;
    let owner = world.human("due").await;
    let a = endpoint_of(&world.agent(&owner, &["q"]).await);
    let b = endpoint_of(&world.agent(&owner, &["q"]).await);
    let (session_a, session_b) = (attached(&world, &a, "r1").await, attached(&world, &b, "r1").await);
    let for_b = world.push(&QueueIdentity::endpoint(&b, "q"), "for b").await;
    let for_a = world.push(&QueueIdentity::endpoint(&a, "q"), "for a").await;

    let holder = lock_session_exclusively(&world, &session_b).await;
    let first = world.store.dispatch_pushes().await.expect("the pass goes on past the held row");
    holder.rollback().await.expect("release");
    assert_eq!(
        first.rings.iter().map(|r| (r.session_id.as_str(), r.todo_id.as_deref())).collect::<Vec<_>>(),
        vec![(session_a.as_str(), Some(for_a.id.as_str()))]
    );

    let second = world.store.dispatch_pushes().await.expect("dispatch");
    assert_eq!(
        second.rings.iter().map(|r| (r.session_id.as_str(), r.todo_id.as_deref())).collect::<Vec<_>>(),
        vec![(session_b.as_str(), Some(for_b.id.as_str()))]
    );
    assert!(world.store.dispatch_pushes().await.expect("dispatch").rings.is_empty(), "each rung once");
}

// Issue #51: a creation doorbell, and a clock-in digest, that meet the session's row held by
// another transaction ring it all the same.
#[tokio::test]
async fn req8_a_creation_doorbell_and_a_clock_in_digest_ring_a_session_another_transaction_holds() {
    let world = World::new().await;
    let owner = world.human("busy2").await;
    let endpoint = endpoint_of(&world.agent(&owner, &["q"]).await);
    let session = attached(&world, &endpoint, "r1").await;
    let identity = QueueIdentity::endpoint(&endpoint, "q");

    let created = world.push(&identity, "rings while held").await;
    let holder = hold_session_row(&world, &session).await;
    let dispatched = world.store.dispatch_pushes().await.expect("dispatch");
    holder.rollback().await.expect("release");
    assert_eq!(dispatched.rings.len(), 1, "{dispatched:?}");
    assert_eq!(dispatched.rings[0].todo_id.as_deref(), Some(created.id.as_str()));

    let now = world.clock.now();
    world
        .store
        .set_presence_override(&endpoint, Some(models::presence::clock_out(None, now)), OverrideBy::Agent)
        .await
        .expect("out");
    let holder = hold_session_row(&world, &session).await;
    let back = models::presence::clock_in(None, now, None).expect("in");
    let view = world.store.set_presence_override(&endpoint, Some(back), OverrideBy::Agent).await.expect("in");
    holder.rollback().await.expect("release");
    assert_eq!(view.effective.presence.as_str(), "in");
    let digests: Vec<_> = world
        .store
        .rings_since(&session, 0)
        .await
        .expect("rings")
        .into_iter()
        .filter(|r| r.reason == RingReason::Digest)
        .collect();
    assert_eq!(digests.len(), 1, "one clock-in digest: {digests:?}");
    assert_eq!(digests[0].message["params"]["meta"]["reason"], "clock_in");
}
