//! Owner cancellation (context/intake-capacity.md scenarios 1–11, the provenance / cancellation /
//! capacity ADR) through the real binary on real PostgreSQL: clear-all and remove-one over the
//! operator API, MCP and signed webhook ingest, across one or two server processes. One test per
//! scenario. Capacity is in `blackbox_intake_capacity.rs`, purges in `blackbox_intake_purge.rs`.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use support::run;
use support::world::{World, claim_next, id_of, send, tool_names};

// intake-capacity scenario 1
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s01_clear_all_ignores_provenance_and_reports_the_exact_count() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "other"]})).await;

    // Human, agent and ingest provenance in one queue identity. (Workflow and system todos have
    // no producer a black-box test can drive; the removal predicate ignores provenance anyway.)
    let keyed = send(
        &world.client,
        Method::POST,
        "/api/v1/todos",
        &alice,
        Some(json!({"scope": ep.scope, "queue": "inbox", "title": "by hand, keyed", "idempotency_key": "hand-1"})),
    )
    .await;
    assert_eq!(keyed.status, 201, "{}", keyed.text);
    let mut ids = vec![id_of(&keyed.body["todo"]), world.push(&alice, &ep.scope, "inbox", "by hand").await];
    for title in ["from the agent 1", "from the agent 2"] {
        let (is_error, made) =
            world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": title})).await;
        assert!(!is_error, "{made}");
        ids.push(id_of(&made["todo"]));
    }
    let hook = world.webhook(&alice, &[(&ep.scope, "inbox")]).await;
    let delivered = world.deliver(&hook, "msg_1", r#"{"title": "from a provider"}"#).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text);
    let ingested = delivered.body["todos"][0].as_str().expect("ingested id").to_string();
    ids.push(ingested.clone());
    let spared = world.push(&alice, &ep.scope, "other", "another queue identity").await;

    let mut kinds = vec![];
    for id in &ids {
        kinds.push(world.todo(&alice, id).await["created_by_kind"].as_str().expect("kind").to_string());
    }
    kinds.sort();
    assert_eq!(kinds, ["agent", "agent", "human", "human", "ingest"]);

    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(5)), "{}", cleared.text);
    for id in &ids {
        assert_eq!(world.state(&alice, id).await, "discarded", "{id}");
    }
    assert!(world.pending(&alice, &ep.scope, "inbox").await.is_empty());
    assert_eq!(world.state(&alice, &spared).await, "pending", "another queue identity is untouched");

    // Discarded work keeps its dedup slot: neither a redelivery nor the same key makes a new todo.
    let again = world.deliver(&hook, "msg_1", r#"{"title": "from a provider"}"#).await;
    assert_eq!((again.status, again.body["deduped"].as_bool()), (202, Some(true)), "{}", again.text);
    assert_eq!(again.body["todos"], json!([ingested]));
    let rekeyed = send(
        &world.client,
        Method::POST,
        "/api/v1/todos",
        &alice,
        Some(json!({"scope": ep.scope, "queue": "inbox", "title": "by hand, keyed", "idempotency_key": "hand-1"})),
    )
    .await;
    assert_eq!((rekeyed.status, rekeyed.body["deduped"].as_bool()), (200, Some(true)), "{}", rekeyed.text);
    assert_eq!(id_of(&rekeyed.body["todo"]), ids[0]);
    assert!(world.pending(&alice, &ep.scope, "inbox").await.is_empty(), "nothing was resurrected");

    let twice = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((twice.status, twice.body["removed"].as_i64()), (200, Some(0)), "{}", twice.text);
}

// intake-capacity scenario 2
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s02_clear_all_spares_claimed_work_and_its_claimant_completes() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let ids = [
        world.push(&alice, &ep.scope, "inbox", "first").await,
        world.push(&alice, &ep.scope, "inbox", "second").await,
        world.push(&alice, &ep.scope, "inbox", "third").await,
    ];
    let claimed = claim_next(&world.client, &ep, json!({})).await.expect("a claim");
    assert_eq!(claimed, ids[0]);

    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(2)), "{}", cleared.text);
    assert_eq!(world.state(&alice, &ids[0]).await, "claimed");
    assert_eq!(world.state(&alice, &ids[1]).await, "discarded");
    assert_eq!(world.state(&alice, &ids[2]).await, "discarded");

    let (is_error, done) = world.client.tool(&ep.slug, &ep.key, "complete", json!({"id": claimed})).await;
    assert!(!is_error, "{done}");
    assert_eq!(world.state(&alice, &ids[0]).await, "done");
}

// intake-capacity scenario 3
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s03_clear_all_on_an_empty_queue_removes_zero() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "busy"]})).await;
    for _ in 0..2 {
        let cleared = world.clear(&alice, &ep.scope, "inbox").await;
        assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(0)), "{}", cleared.text);
    }
    // A queue holding only claimed work is empty of pending todos too.
    let held = world.push(&alice, &ep.scope, "busy", "held").await;
    assert_eq!(claim_next(&world.client, &ep, json!({"queue": "busy"})).await.as_deref(), Some(held.as_str()));
    let cleared = world.clear(&alice, &ep.scope, "busy").await;
    assert_eq!((cleared.status, cleared.body["removed"].as_i64()), (200, Some(0)), "{}", cleared.text);
    assert_eq!(world.state(&alice, &held).await, "claimed");
}

// intake-capacity scenario 4
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s04_removing_an_agent_todo_leaves_the_others_in_order() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let mut ids = vec![];
    for title in ["a", "b", "c", "d"] {
        let (is_error, made) =
            world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": title})).await;
        assert!(!is_error, "{made}");
        assert_eq!(made["todo"]["created_by_kind"], "agent");
        ids.push(id_of(&made["todo"]));
    }
    let removed = world.remove(&alice, &ep.scope, "inbox", &ids[1]).await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    assert_eq!(world.state(&alice, &ids[1]).await, "discarded");
    let expected: BTreeSet<String> = [&ids[0], &ids[2], &ids[3]].into_iter().cloned().collect();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, expected);

    // The survivors are claimed oldest first, exactly as before the removal.
    for id in [&ids[0], &ids[2], &ids[3]] {
        assert_eq!(claim_next(&world.client, &ep, json!({})).await.as_ref(), Some(id));
    }
    assert_eq!(claim_next(&world.client, &ep, json!({})).await, None);
}

// intake-capacity scenario 5
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s05_ingest_todos_are_not_editable_but_removable_and_own_human_todos_are_editable() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let hook = world.webhook(&alice, &[(&ep.scope, "inbox")]).await;
    let delivered = world.deliver(&hook, "msg_1", r#"{"title": "issue opened"}"#).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text);
    let ingested = delivered.body["todos"][0].as_str().expect("id").to_string();
    let (is_error, made) =
        world.client.tool(&ep.slug, &ep.key, "create_todo", json!({"queue": "inbox", "title": "agent's"})).await;
    assert!(!is_error, "{made}");
    let agents = id_of(&made["todo"]);
    let own = world.push(&alice, &ep.scope, "inbox", "alice's").await;

    let refused = world.edit(&alice, &ingested, json!({"title": "rewritten"})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    let refused = world.edit(&alice, &agents, json!({"payload": {"x": 1}})).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("conflict")), "{}", refused.text);
    assert_eq!(world.todo(&alice, &ingested).await["title"], "issue opened", "unchanged");
    assert_eq!(world.todo(&alice, &agents).await["payload"], Value::Null, "unchanged");

    let removed = world.remove(&alice, &ep.scope, "inbox", &ingested).await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    assert_eq!(world.state(&alice, &ingested).await, "discarded");

    let edited = world.edit(&alice, &own, json!({"title": "alice's, revised", "payload": {"n": 2}})).await;
    assert_eq!(edited.status, 200, "{}", edited.text);
    assert_eq!(
        (&edited.body["todo"]["id"], &edited.body["todo"]["title"], &edited.body["todo"]["state"]),
        (&json!(own), &json!("alice's, revised"), &json!("pending"))
    );
    let shown = world.todo(&alice, &own).await;
    assert_eq!((&shown["title"], &shown["payload"]), (&json!("alice's, revised"), &json!({"n": 2})));

    // Outside the caller's reach: 404, nothing changes.
    let foreign = world.edit(&bob, &own, json!({"title": "bob was here"})).await;
    assert_eq!((foreign.status, foreign.body["code"].as_str()), (404, Some("not_found")), "{}", foreign.text);
    assert_eq!(world.todo(&alice, &own).await["title"], "alice's, revised");
}

// intake-capacity scenario 6
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s06_a_claim_committed_before_a_removal_wins() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let id = world.push(&alice, &ep.scope, "inbox", "contested").await;
    let (is_error, claimed) = world.client.tool(&ep.slug, &ep.key, "claim", json!({"id": id})).await;
    assert!(!is_error, "{claimed}");

    let refused = world.remove(&alice, &ep.scope, "inbox", &id).await;
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert_eq!(
        (refused.body["code"].as_str(), refused.body["state"].as_str()),
        (Some("not_pending"), Some("claimed")),
        "{}",
        refused.text
    );
    let cleared = world.clear(&alice, &ep.scope, "inbox").await;
    assert_eq!(cleared.body["removed"].as_i64(), Some(0), "{}", cleared.text);
    assert_eq!(world.state(&alice, &id).await, "claimed", "the claim won completely");

    let (is_error, done) = world.client.tool(&ep.slug, &ep.key, "complete", json!({"id": id})).await;
    assert!(!is_error, "{done}");
    let refused = world.remove(&alice, &ep.scope, "inbox", &id).await;
    assert_eq!(
        (refused.status, refused.body["code"].as_str(), refused.body["state"].as_str()),
        (409, Some("not_pending"), Some("done")),
        "{}",
        refused.text
    );
}

// intake-capacity scenario 7
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s07_a_removal_committed_before_claim_next_wins() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let removed_id = world.push(&alice, &ep.scope, "inbox", "older, removed").await;
    let kept = world.push(&alice, &ep.scope, "inbox", "newer, kept").await;
    let removed = world.remove(&alice, &ep.scope, "inbox", &removed_id).await;
    assert_eq!(removed.status, 204, "{}", removed.text);

    assert_eq!(claim_next(&world.client, &ep, json!({})).await, Some(kept));
    assert_eq!(claim_next(&world.client, &ep, json!({})).await, None, "the removed todo is never returned");
    let (is_error, refused) = world.client.tool(&ep.slug, &ep.key, "claim", json!({"id": removed_id})).await;
    assert!(is_error, "a discarded todo cannot be claimed by id either: {refused}");
    assert_eq!(world.state(&alice, &removed_id).await, "discarded");
    let again = world.remove(&alice, &ep.scope, "inbox", &removed_id).await;
    assert_eq!(
        (again.status, again.body["code"].as_str(), again.body["state"].as_str()),
        (409, Some("not_pending"), Some("discarded")),
        "{}",
        again.text
    );
}

// intake-capacity scenario 8
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_s08_twenty_claimers_racing_a_clear_across_two_servers_account_for_all_fifty() {
    let mut world = World::start(&[], &[]).await;
    let second = world.serve(&[], &[]);
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let mut ids = vec![];
    for i in 0..50 {
        ids.push(world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await);
    }

    let clients = [world.client.clone(), second];
    let mut claims = vec![];
    let mut clear = None;
    for i in 0..20 {
        let (client, claimer) = (clients[i % 2].clone(), ep.clone());
        claims.push(tokio::spawn(async move { claim_next(&client, &claimer, json!({})).await }));
        if i == 9 {
            let (client, alice, scope) = (clients[1].clone(), alice.clone(), ep.scope.clone());
            clear = Some(tokio::spawn(async move {
                send(&client, Method::POST, &format!("/api/v1/queues/{scope}/inbox/clear"), &alice, None).await
            }));
        }
    }
    let mut claimed = BTreeSet::new();
    for claim in claims {
        if let Some(id) = claim.await.expect("join") {
            assert!(claimed.insert(id.clone()), "{id} was claimed twice");
        }
    }
    let cleared = clear.expect("clear").await.expect("join");
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    let removed = cleared.body["removed"].as_u64().expect("removed") as usize;
    assert_eq!(claimed.len() + removed, 50, "claimed {} + removed {removed}", claimed.len());

    let mut discarded = 0;
    for id in &ids {
        match world.state(&alice, id).await.as_str() {
            "claimed" => assert!(claimed.contains(id), "{id} is claimed but no claimer got it"),
            "discarded" => {
                assert!(!claimed.contains(id), "{id} was handed out and then discarded");
                discarded += 1;
            }
            other => panic!("{id} ended {other}"),
        }
    }
    assert_eq!(discarded, removed, "the count matches the todos discarded");
}

// intake-capacity scenario 9
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s09_another_humans_remove_and_clear_are_404_and_change_nothing() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let (_, bob) = world.human("bob");
    let (_, carol) = world.human("carol");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let bobs = world.vend(&bob, json!({"name": "b", "queues": ["inbox"]})).await;
    let first = world.push(&alice, &ep.scope, "inbox", "one").await;
    let second = world.push(&alice, &ep.scope, "inbox", "two").await;

    let nowhere = "endpoint:no-such-endpoint";
    let unknown_remove = world.remove(&bob, nowhere, "inbox", &first).await;
    let unknown_clear = world.clear(&bob, nowhere, "inbox").await;
    assert_eq!((unknown_remove.status, unknown_clear.status), (404, 404));
    let foreign_remove = world.remove(&bob, &ep.scope, "inbox", &first).await;
    let foreign_clear = world.clear(&bob, &ep.scope, "inbox").await;
    assert_eq!((foreign_remove.status, &foreign_remove.text), (404, &unknown_remove.text), "byte-identical");
    assert_eq!((foreign_clear.status, &foreign_clear.text), (404, &unknown_clear.text), "byte-identical");
    assert_eq!(foreign_remove.body["code"], "not_found");
    // Bob naming his own queue with alice's todo id: not a todo of that identity.
    let crossed = world.remove(&bob, &bobs.scope, "inbox", &first).await;
    assert_eq!((crossed.status, crossed.body["code"].as_str()), (404, Some("not_found")), "{}", crossed.text);
    let both: BTreeSet<String> = [first.clone(), second.clone()].into();
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await, both, "bob changed nothing");

    // A team queue: a plain member is "anyone else"; the team's admin and owner manage it.
    let team = run(&["admin", "team", "add", "core", "--owner", "alice", "--database-url", &world.db.url], &[]);
    assert_eq!(team.0, 0, "{}", team.2);
    let team: Value = serde_json::from_str(team.1.trim()).expect("team JSON");
    let slug = team["slug"].as_str().expect("team slug").to_string();
    for (human, role) in [("bob", "member"), ("carol", "admin")] {
        let added = run(
            &["admin", "team", "member", "add", &slug, human, "--role", role, "--database-url", &world.db.url],
            &[],
        );
        assert_eq!(added.0, 0, "{}", added.2);
    }
    let team_scope = format!("team:{slug}");
    let lane = [
        world.push(&alice, &team_scope, "lane", "team work 1").await,
        world.push(&alice, &team_scope, "lane", "team work 2").await,
    ];
    let unknown_team = world.clear(&bob, "team:no-such-team", "lane").await;
    let member_clear = world.clear(&bob, &team_scope, "lane").await;
    assert_eq!((member_clear.status, &member_clear.text), (404, &unknown_team.text), "byte-identical");
    let member_remove = world.remove(&bob, &team_scope, "lane", &lane[0]).await;
    assert_eq!(member_remove.status, 404, "{}", member_remove.text);
    assert_eq!(world.pending(&alice, &team_scope, "lane").await.len(), 2, "the member changed nothing");

    let by_admin = world.remove(&carol, &team_scope, "lane", &lane[0]).await;
    assert_eq!(by_admin.status, 204, "{}", by_admin.text);
    let by_owner = world.clear(&alice, &team_scope, "lane").await;
    assert_eq!((by_owner.status, by_owner.body["removed"].as_i64()), (200, Some(1)), "{}", by_owner.text);
}

// intake-capacity scenario 10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s10_a_todo_of_another_queue_identity_than_the_one_named_is_404() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let w = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "other"]})).await;
    let v = world.vend(&alice, json!({"name": "v", "queues": ["inbox"]})).await;
    let other_queue = world.push(&alice, &w.scope, "other", "w/other").await;
    let other_endpoint = world.push(&alice, &v.scope, "inbox", "v/inbox").await;
    let named = world.push(&alice, &w.scope, "inbox", "w/inbox").await;

    let never = world.remove(&alice, &w.scope, "inbox", "td_00000000-0000-0000-0000-000000000000").await;
    assert_eq!((never.status, never.body["code"].as_str()), (404, Some("not_found")), "{}", never.text);
    for id in [&other_queue, &other_endpoint] {
        let refused = world.remove(&alice, &w.scope, "inbox", id).await;
        assert_eq!((refused.status, &refused.text), (404, &never.text), "{id}: same as an id never minted");
        assert_eq!(world.state(&alice, id).await, "pending");
    }
    assert_eq!(world.state(&alice, &named).await, "pending");
    let right = world.remove(&alice, &w.scope, "other", &other_queue).await;
    assert_eq!(right.status, 204, "named with its own identity it goes: {}", right.text);
}

// intake-capacity scenario 11
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_s11_a_default_grant_neither_lists_nor_calls_the_discard_verbs() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let plain = world.vend(&alice, json!({"name": "plain", "queues": ["inbox"]})).await;
    let id = world.push(&alice, &plain.scope, "inbox", "keep me").await;

    let names = tool_names(&world.client, &plain).await;
    assert!(names.iter().any(|n| n == "claim_next"), "{names:?}");
    for verb in ["discard_todo", "clear_queue"] {
        assert!(!names.iter().any(|n| n == verb), "{verb} listed: {names:?}");
    }
    let (is_error, refused) =
        world.client.tool(&plain.slug, &plain.key, "discard_todo", json!({"queue": "inbox", "id": id})).await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden", "{refused}");
    let (is_error, refused) =
        world.client.tool(&plain.slug, &plain.key, "clear_queue", json!({"queue": "inbox"})).await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden", "{refused}");
    assert_eq!(world.state(&alice, &id).await, "pending", "nothing changed");

    // Opted in by name, the same verbs are listed and work on the endpoint's own queue.
    let opted = world
        .vend(
            &alice,
            json!({"name": "opted", "queues": ["inbox"], "verbs": ["claim_next", "discard_todo", "clear_queue"]}),
        )
        .await;
    let names = tool_names(&world.client, &opted).await;
    assert!(names.iter().any(|n| n == "discard_todo") && names.iter().any(|n| n == "clear_queue"), "{names:?}");
    let ids = [
        world.push(&alice, &opted.scope, "inbox", "one").await,
        world.push(&alice, &opted.scope, "inbox", "two").await,
    ];
    let (is_error, answer) =
        world.client.tool(&opted.slug, &opted.key, "discard_todo", json!({"queue": "inbox", "id": ids[0]})).await;
    assert!(!is_error, "{answer}");
    assert_eq!(world.state(&alice, &ids[0]).await, "discarded");
    let (is_error, answer) = world.client.tool(&opted.slug, &opted.key, "clear_queue", json!({"queue": "inbox"})).await;
    assert!(!is_error, "{answer}");
    assert_eq!(world.state(&alice, &ids[1]).await, "discarded");
    assert_eq!(world.state(&alice, &id).await, "pending", "the plain endpoint's queue is another identity");
}
