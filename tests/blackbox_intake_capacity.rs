//! Intake capacity (context/intake-capacity.md scenarios 12–24) through the real binary on real
//! PostgreSQL: the per-queue pending cap over the operator API, MCP and signed webhook ingest,
//! its environment override and its admin setting, across one or two server processes. One test
//! per scenario.

mod support;

use reqwest::Method;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::intake::{
    CAPACITY_ENV, METRICS_TOKEN, assert_capacity, assert_queue_full, capacity_get, capacity_patch, set_capacity,
};
use support::world::{World, claim_next, push_on, sample, send, wait_for_state};

// intake-capacity scenario 12
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s12_capacity_3_with_3_pending_refuses_an_api_create() {
    let world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 3).await;
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "lane"]})).await;
    for i in 0..3 {
        world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await;
    }
    let refused = push_on(&world.client, &alice, &ep.scope, "inbox", "one too many").await;
    assert_queue_full(&refused, "inbox", 3, 3);
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 3, "no todo was made");

    // MCP create_todo: a tool error carrying the same facts.
    let (is_error, refused) =
        world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": "agent's"})).await;
    assert!(is_error, "{refused}");
    assert_eq!(
        (refused["code"].as_str(), refused["queue"].as_str(), refused["pending"].as_i64(), refused["max"].as_i64()),
        (Some("queue_full"), Some("inbox"), Some(3), Some(3)),
        "{refused}"
    );
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 3);
    // Another queue identity has its own count.
    world.push(&alice, &ep.scope, "lane", "elsewhere").await;
}

// intake-capacity scenario 13
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s13_ingest_into_a_full_queue_is_refused_unrecorded_and_admitted_once_later() {
    let world = World::start(&[], &[(CAPACITY_ENV, "1")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["events"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "events")]).await;
    let blocker = world.push(&alice, &ep.scope, "events", "fills the queue").await;
    let body = r#"{"title": "push to main", "sha": "abc123"}"#;

    let refused = world.deliver(&hook, "msg_1", body).await;
    assert_queue_full(&refused, "events", 1, 1);
    let only_blocker: BTreeSet<String> = [blocker.clone()].into();
    assert_eq!(world.pending(&alice, &ep.scope, "events").await, only_blocker, "no todo was made");
    // Not recorded: the provider's retry is not mistaken for a redelivery of admitted work.
    let still = world.deliver(&hook, "msg_1", body).await;
    assert_queue_full(&still, "events", 1, 1);

    let removed = world.remove(&alice, &ep.scope, "events", &blocker).await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    let admitted = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((admitted.status, admitted.body["deduped"].as_bool()), (202, Some(false)), "{}", admitted.text);
    let todos = admitted.body["todos"].as_array().expect("todos").clone();
    assert_eq!(todos.len(), 1);
    let again = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((again.status, again.body["deduped"].as_bool()), (202, Some(true)), "{}", again.text);
    assert_eq!(again.body["todos"], json!(todos));

    let pending = world.pending(&alice, &ep.scope, "events").await;
    assert_eq!(pending.len(), 1, "admitted exactly once: {pending:?}");
    let id = todos[0].as_str().expect("id");
    assert!(pending.contains(id));
    assert_eq!(world.todo(&alice, id).await["created_by_kind"], "ingest");
}

// intake-capacity scenario 14
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s14_at_capacity_a_redelivery_of_admitted_work_is_a_free_dedup() {
    let world = World::start(&[], &[(CAPACITY_ENV, "2")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["events"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "events")]).await;
    let body = r#"{"title": "issue 9 opened"}"#;
    let first = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((first.status, first.body["deduped"].as_bool()), (202, Some(false)), "{}", first.text);
    let keyed = json!({"scope": ep.scope, "queue": "events", "title": "keyed", "idempotency_key": "k-1"});
    let made = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(keyed.clone())).await;
    assert_eq!(made.status, 201, "{}", made.text);

    // Full (2 of 2): dedup hits pass free; anything new is refused.
    let again = world.deliver(&hook, "msg_1", body).await;
    assert_eq!((again.status, again.body["deduped"].as_bool()), (202, Some(true)), "{}", again.text);
    assert_eq!(again.body["todos"], first.body["todos"]);
    let rekeyed = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(keyed)).await;
    assert_eq!((rekeyed.status, rekeyed.body["deduped"].as_bool()), (200, Some(true)), "{}", rekeyed.text);
    assert_eq!(rekeyed.body["todo"]["id"], made.body["todo"]["id"]);

    assert_queue_full(&world.deliver(&hook, "msg_2", r#"{"title": "issue 10 opened"}"#).await, "events", 2, 2);
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "events", "new").await, "events", 2, 2);
    assert_eq!(world.pending(&alice, &ep.scope, "events").await.len(), 2);
}

// intake-capacity scenario 15
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s15_lowering_capacity_removes_nothing_and_intake_resumes_below_it() {
    let world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let mut ids = vec![];
    for i in 0..5 {
        ids.push(world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await);
    }
    set_capacity(&world.client, &admin, 3).await;
    let all: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, all, "lowering removed nothing");
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 5, 3);

    for id in &ids[..2] {
        assert_eq!(world.remove(&alice, &ep.scope, "inbox", id).await.status, 204);
    }
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 3);
    assert_eq!(world.remove(&alice, &ep.scope, "inbox", &ids[2]).await.status, 204);
    world.push(&alice, &ep.scope, "inbox", "below the cap again").await;
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 3);
}

// intake-capacity scenario 16
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s16_a_failed_todo_returning_to_pending_bypasses_the_cap_but_new_intake_is_refused() {
    let world = World::start(&["--reaper-interval", "1"], &[(CAPACITY_ENV, "2")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let failing = world.push(&alice, &ep.scope, "inbox", "will fail").await;
    let waiting = world.push(&alice, &ep.scope, "inbox", "waits").await;
    assert_eq!(claim_next(&world.client, &ep, json!({})).await.as_ref(), Some(&failing));
    let (is_error, failed) = world.client.tool(&ep.slug, &ep.key, "fail", json!({"id": failing})).await;
    assert!(!is_error, "{failed}");
    assert_eq!(world.state(&alice, &failing).await, "failed");
    let filler = world.push(&alice, &ep.scope, "inbox", "fills the freed slot").await;
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 2, 2);

    // The backoff after a first failure is 30 s; rather than wait it out, the owner's "Retry now"
    // returns the failed todo to pending (the same kind of return as the retry scheduler's).
    let retried = send(&world.client, Method::POST, &format!("/api/v1/todos/{failing}/retry"), &alice, None).await;
    assert_eq!(retried.status, 200, "a return to pending is never capped: {}", retried.text);
    assert_eq!(world.state(&alice, &failing).await, "pending");
    let expected: BTreeSet<String> = [failing, waiting, filler].into();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, expected, "3 pending over a cap of 2");
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 2);
}

// intake-capacity scenario 17
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s17_release_and_the_reaper_return_work_to_pending_at_capacity() {
    let world = World::start(&["--reaper-interval", "1"], &[(CAPACITY_ENV, "2")]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let reaped = world.push(&alice, &ep.scope, "inbox", "will lapse").await;
    let released = world.push(&alice, &ep.scope, "inbox", "will be released").await;
    for id in [&reaped, &released] {
        let (is_error, claimed) = world.client.tool(&ep.slug, &ep.key, "claim", json!({"id": id})).await;
        assert!(!is_error, "{claimed}");
    }
    let fillers = [
        world.push(&alice, &ep.scope, "inbox", "filler 1").await,
        world.push(&alice, &ep.scope, "inbox", "filler 2").await,
    ];
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 2, 2);

    let (is_error, answer) = world.client.tool(&ep.slug, &ep.key, "release", json!({"id": released})).await;
    assert!(!is_error, "release at capacity: {answer}");
    assert_eq!(world.state(&alice, &released).await, "pending");

    // The lease is cut to 1 s only now that the queue is full, so the reaper returns it to a
    // queue that is over its cap (a heartbeat sets the lease exactly like a claim's TTL).
    let (is_error, answer) =
        world.client.tool(&ep.slug, &ep.key, "heartbeat", json!({"id": reaped, "lease_ttl_seconds": 1})).await;
    assert!(!is_error, "{answer}");
    wait_for_state(&world, &alice, &reaped, "pending", Duration::from_secs(30)).await;

    let expected: BTreeSet<String> = [reaped, released, fillers[0].clone(), fillers[1].clone()].into();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, expected);
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 4, 2);
}

// intake-capacity scenario 18
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s18_deferred_todos_count_toward_capacity_and_clearing_drops_the_deferred_gauge() {
    let world = World::start(&[], &[(CAPACITY_ENV, "4"), ("SWITCHBOARD_METRICS_TOKEN", METRICS_TOKEN)]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let daily = json!({"max_in_flight": null, "max_claims_per_window": 1,
                       "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    let (status, policy) = world.client.put_admission_policy(&alice, &ep.scope, "inbox", daily).await;
    assert_eq!(status, 200, "{policy}");
    world.push(&alice, &ep.scope, "inbox", "today's one").await;
    assert!(claim_next(&world.client, &ep, json!({})).await.is_some(), "the day's budget is spent");

    // The exhausted queue keeps filling up to the cap, then refuses intake with queue_full.
    for i in 0..4 {
        world.push(&alice, &ep.scope, "inbox", &format!("deferred {i}")).await;
    }
    let (_, listed) =
        world.client.get(&format!("/api/v1/todos?scope={}&queue=inbox&state=pending", ep.scope), &alice).await;
    let listed = listed["todos"].as_array().expect("todos").clone();
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|t| t["admission"]["state"] == "deferred"), "{listed:?}");
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 4, 4);

    let gauge = |text: &str| {
        sample(text, "switchboard_admission_deferred_todos", &[("queue", "inbox"), ("reason", "window_exhausted")])
    };
    let (status, before) = world.client.scrape_metrics(Some(METRICS_TOKEN)).await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(gauge(&before), Some(4.0), "{before}");
    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(4)), "{}", cleared.text);
    let (_, after) = world.client.scrape_metrics(Some(METRICS_TOKEN)).await;
    assert_eq!(gauge(&before).zip(gauge(&after)).map(|(b, a)| b - a), Some(4.0), "{after}");

    // Removals never refund the window: the day's one claim stays spent.
    let (_, shown) = world.client.get(&format!("/api/v1/admission/{}/inbox", ep.scope), &alice).await;
    assert_eq!(shown["usage"]["used"], 1, "{shown}");
}

// intake-capacity scenario 19
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s19_environment_20_over_persisted_6_wins_locks_and_stores_nothing() {
    let mut world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 6).await;
    let locked = world.serve(&[], &[(CAPACITY_ENV, "20")]);

    let shown = capacity_get(&locked, &alice).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_capacity(&shown.body, Some(6), 20, "environment", true);
    let refused = capacity_patch(&locked, &admin, json!({"max_pending_per_queue": 9})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    assert_capacity(&capacity_get(&locked, &alice).await.body, Some(6), 20, "environment", true);
    assert_capacity(&capacity_get(&world.client, &alice).await.body, Some(6), 6, "setting", false);

    // The environment is the locked process's own: it admits 7, the other process still caps at 6.
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    for i in 0..7 {
        let made = push_on(&locked, &alice, &ep.scope, "inbox", &format!("t{i}")).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    assert_queue_full(&push_on(&world.client, &alice, &ep.scope, "inbox", "x").await, "inbox", 7, 6);
}

// intake-capacity scenario 20
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s20_environment_parsing_warns_on_garbage_locks_on_negative_and_defaults_to_zero() {
    let mut world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    assert_capacity(&capacity_get(&world.client, &alice).await.body, None, 0, "default", false);
    set_capacity(&world.client, &admin, 5).await;

    // `many`: a warning naming the variable; the persisted value applies, unlocked.
    let garbage = world.serve(&[], &[(CAPACITY_ENV, "many")]);
    let shown = capacity_get(&garbage, &alice).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_capacity(&shown.body, Some(5), 5, "setting", false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !world.log(1).lines().any(|l| l.contains(CAPACITY_ENV) && l.to_lowercase().contains("warn")) {
        assert!(Instant::now() < deadline, "no warning naming {CAPACITY_ENV}:\n{}", world.log(1));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // `-3`: 0 (unlimited), locked.
    let negative = world.serve(&[], &[(CAPACITY_ENV, "-3")]);
    assert_capacity(&capacity_get(&negative, &alice).await.body, Some(5), 0, "environment", true);
    let refused = capacity_patch(&negative, &admin, json!({"max_pending_per_queue": 2})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    for i in 0..6 {
        let made = push_on(&negative, &alice, &ep.scope, "inbox", &format!("t{i}")).await;
        assert_eq!(made.status, 201, "unlimited: {}", made.text);
    }

    // Nothing set (blank counts as unset): the default 0 on a database with no setting.
    let fresh = World::start(&[], &[(CAPACITY_ENV, "")]).await;
    let (_, carol) = fresh.human("carol");
    assert_capacity(&capacity_get(&fresh.client, &carol).await.body, None, 0, "default", false);
}

// intake-capacity scenario 21
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s21_a_patch_on_one_server_applies_to_the_others_next_intake() {
    let mut world = World::start(&[], &[]).await;
    let other = world.serve(&[], &[]);
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    for i in 0..3 {
        assert_eq!(push_on(&other, &alice, &ep.scope, "inbox", &format!("t{i}")).await.status, 201);
    }
    set_capacity(&world.client, &admin, 3).await;
    assert_queue_full(&push_on(&other, &alice, &ep.scope, "inbox", "x").await, "inbox", 3, 3);
    assert_capacity(&capacity_get(&other, &alice).await.body, Some(3), 3, "setting", false);

    set_capacity(&world.client, &admin, 4).await;
    assert_eq!(push_on(&other, &alice, &ep.scope, "inbox", "fourth").await.status, 201);
    assert_queue_full(&push_on(&other, &alice, &ep.scope, "inbox", "x").await, "inbox", 4, 4);

    set_capacity(&world.client, &admin, 0).await;
    for i in 0..3 {
        assert_eq!(push_on(&other, &alice, &ep.scope, "inbox", &format!("u{i}")).await.status, 201);
    }
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 7);
}

// intake-capacity scenario 22
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s22_patch_is_admin_only_validated_consistent_and_repairs_a_corrupt_value() {
    let mut world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let admin = world.admin("root");
    assert_capacity(&capacity_get(&world.client, &alice).await.body, None, 0, "default", false);

    let refused = capacity_patch(&world.client, &alice, json!({"max_pending_per_queue": 5})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (403, Some("forbidden")), "{}", refused.text);
    for bad in [json!(-1), json!(1_000_001), json!("ten")] {
        let refused = capacity_patch(&world.client, &admin, json!({"max_pending_per_queue": bad})).await;
        assert_eq!(
            (refused.status, refused.body["code"].as_str(), refused.body["field"].as_str()),
            (400, Some("invalid_argument"), Some("max_pending_per_queue")),
            "{bad}: {}",
            refused.text
        );
    }
    assert_capacity(&capacity_get(&world.client, &alice).await.body, None, 0, "default", false);
    set_capacity(&world.client, &admin, 1_000_000).await;

    // Overlapping writes (another admin, so no earlier write spends this one's write budget).
    let racer = world.admin("racer");
    let writes: Vec<_> = (11..=16)
        .map(|n| {
            let (client, racer) = (world.client.clone(), racer.clone());
            tokio::spawn(async move {
                (n, capacity_patch(&client, &racer, json!({"max_pending_per_queue": n})).await.status)
            })
        })
        .collect();
    let mut stored = BTreeSet::new();
    for write in writes {
        let (n, status) = write.await.expect("join");
        assert!(status == 200 || status == 429, "PATCH {n}: {status}");
        if status == 200 {
            stored.insert(n);
        }
    }
    assert!(!stored.is_empty());
    let shown = capacity_get(&world.client, &alice).await.body;
    let setting = shown["setting"]["max_pending_per_queue"].as_i64().expect("setting");
    assert!(stored.contains(&setting), "{setting} is none of the values written: {stored:?}");
    assert_capacity(&shown, Some(setting), setting, "setting", false);

    // The one place this test touches the database directly: corrupt the stored value.
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&world.db.url).await.expect("connect");
    let updated = sqlx::query("UPDATE settings SET value = '\"ten\"'::jsonb WHERE key = 'queue_max_pending_per_queue'")
        .execute(&mut connection)
        .await
        .expect("corrupt the setting");
    assert_eq!(updated.rows_affected(), 1);
    <sqlx::PgConnection as sqlx::Connection>::close(connection).await.expect("close");

    // A process started now (so no cached value can hide the row) falls back to the default.
    let fresh = world.serve(&[], &[]);
    assert_capacity(&capacity_get(&fresh, &alice).await.body, None, 0, "default", false);
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    assert_eq!(push_on(&fresh, &alice, &ep.scope, "inbox", "still admitted").await.status, 201);
    let repairer = world.admin("repairer");
    set_capacity(&fresh, &repairer, 7).await;
    assert_capacity(&capacity_get(&fresh, &alice).await.body, Some(7), 7, "setting", false);
    assert_capacity(&capacity_get(&world.client, &alice).await.body, Some(7), 7, "setting", false);
}

// intake-capacity scenario 23
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s23_fifty_racing_creates_across_two_servers_admit_exactly_ten() {
    let mut world = World::start(&[], &[]).await;
    let second = world.serve(&[], &[]);
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 10).await;
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;

    let clients = [world.client.clone(), second];
    let creates: Vec<_> = (0..50)
        .map(|i| {
            let (client, alice, scope) = (clients[i % 2].clone(), alice.clone(), ep.scope.clone());
            tokio::spawn(async move { push_on(&client, &alice, &scope, "inbox", &format!("t{i}")).await })
        })
        .collect();
    let (mut created, mut full) = (0, 0);
    for create in creates {
        let reply = create.await.expect("join");
        match reply.status {
            201 => created += 1,
            _ => {
                assert_queue_full(&reply, "inbox", 10, 10);
                full += 1;
            }
        }
    }
    assert_eq!((created, full), (10, 40));
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 10);
}

// intake-capacity scenario 24
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s24_capacity_0_admits_sixty_creates_into_one_queue() {
    let world = World::start(&[], &[]).await;
    let admin = world.admin("root");
    let (_, alice) = world.human("alice");
    set_capacity(&world.client, &admin, 0).await;
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let creates: Vec<_> = (0..60)
        .map(|i| {
            let (client, alice, scope) = (world.client.clone(), alice.clone(), ep.scope.clone());
            tokio::spawn(async move { push_on(&client, &alice, &scope, "inbox", &format!("t{i}")).await })
        })
        .collect();
    for create in creates {
        let reply = create.await.expect("join");
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 60);
}
