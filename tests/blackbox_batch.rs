//! Batched create through the real binary (issue #15 item 2): `POST /api/v1/todos` with a list
//! and MCP `create_todos`, each one transaction answered in order, through the same validation
//! as a single create (a refusal names the item and creates nothing); and the batch claim of
//! issue #31 (`claim_next {max}`, `complete {ids}`) over MCP.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use support::world::{World, claim_next, send, tool_names};

fn titles(answer: &Value) -> Vec<(String, bool)> {
    answer["todos"]
        .as_array()
        .expect("todos")
        .iter()
        .map(|a| (a["todo"]["title"].as_str().expect("title").to_string(), a["deduped"].as_bool().expect("deduped")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_takes_a_list_in_one_transaction_answered_in_order() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox", "lane"]})).await;
    let batch = json!([
        {"scope": ep.scope, "queue": "inbox", "title": "first", "idempotency_key": "k1", "payload": {"n": 1}},
        {"scope": ep.scope, "queue": "lane", "title": "second", "max_attempts": 2},
        {"scope": ep.scope, "queue": "inbox", "title": "first again", "idempotency_key": "k1"},
    ]);
    let created = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(batch.clone())).await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(titles(&created.body), vec![("first".into(), false), ("second".into(), false), ("first".into(), true)]);
    assert_eq!(created.body["todos"][0]["todo"]["payload"], json!({"n": 1}));
    assert_eq!(created.body["todos"][1]["todo"]["max_attempts"], 2);

    // The same list again: every todo dedups (200), nothing new.
    let again = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(json!([batch[0].clone()]))).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 1);
    // The agent drains the batch in the order it was sent: one instant, first-sent first.
    let sent: Vec<Option<String>> =
        (0..2).map(|i| created.body["todos"][i]["todo"]["id"].as_str().map(str::to_string)).collect();
    let mut drained = Vec::new();
    for _ in 0..2 {
        drained.push(claim_next(&world.client, &ep, json!({})).await);
    }
    assert_eq!(drained, sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_item_is_a_400_naming_it_and_the_batch_creates_nothing() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let cases = [
        (
            json!([{"scope": ep.scope, "queue": "inbox", "title": "ok"}, {"scope": ep.scope, "queue": "inbox", "title": ""}]),
            "todos[1].title",
        ),
        (json!([{"scope": ep.scope, "queue": "inbox", "title": "ok"}, "not an object"]), "todos[1]"),
        (json!([{"scope": ep.scope, "queue": "inbox", "title": "ok", "colour": "red"}]), "todos[0].colour"),
        (json!([{"scope": ep.scope, "queue": "inbox", "title": "t\u{0}"}]), "todos[0].title"),
        (json!([]), "todos"),
    ];
    for (body, field) in cases {
        let refused = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(body.clone())).await;
        assert_eq!(refused.status, 400, "{body}: {}", refused.text);
        assert_eq!(refused.body["field"].as_str(), Some(field), "{}", refused.text);
    }
    let too_many: Vec<Value> =
        (0..1001).map(|i| json!({"scope": ep.scope, "queue": "inbox", "title": format!("t{i}")})).collect();
    let refused = send(&world.client, Method::POST, "/api/v1/todos", &alice, Some(Value::Array(too_many))).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(world.pending(&alice, &ep.scope, "inbox").await.is_empty(), "no batch created anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_create_todos_comes_with_create_todo_and_answers_in_order() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    assert!(tool_names(&world.client, &ep).await.contains(&"create_todos".to_string()));
    let (is_error, answer) = world
        .client
        .tool(
            &ep.slug,
            &ep.key,
            "create_todos",
            json!({"todos": [
                {"queue": "inbox", "title": "a"}, {"queue": "inbox", "title": "b", "payload": [1, 2]}
            ]}),
        )
        .await;
    assert!(!is_error, "{answer}");
    assert_eq!(titles(&answer), vec![("a".into(), false), ("b".into(), false)]);
    assert_eq!(answer["todos"][1]["todo"]["created_by_kind"], "agent");
    let (is_error, refused) = world
        .client
        .tool(
            &ep.slug,
            &ep.key,
            "create_todos",
            json!({"todos": [{"queue": "inbox", "title": "c"}, {"queue": "elsewhere", "title": "d"}]}),
        )
        .await;
    assert!(is_error, "{refused}");
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 2, "the refused batch created nothing");

    // Without create_todo, no create_todos either.
    let reader = world.vend(&alice, json!({"name": "r", "queues": ["inbox"], "verbs": ["list_todos"]})).await;
    assert!(!tool_names(&world.client, &reader).await.contains(&"create_todos".to_string()));
    let (is_error, refused) = world
        .client
        .tool(&reader.slug, &reader.key, "create_todos", json!({"todos": [{"queue": "inbox", "title": "x"}]}))
        .await;
    assert!(is_error);
    assert_eq!(refused["code"], "forbidden", "{refused}");
}

/// The titles of a batch claim's todos, in the order claimed.
fn claimed_titles(answer: &Value) -> Vec<String> {
    let todos = answer["todos"].as_array().unwrap_or_else(|| panic!("todos: {answer}"));
    todos.iter().map(|claim| claim["todo"]["title"].as_str().expect("title").to_string()).collect()
}

// Issue #31 item 2 (SPEC-0030 REQ-3, REQ-4, REQ-7): `claim_next {max}` over MCP claims up to
// max in turn, each charged, with its headroom; over the window's limit the rest stays pending
// and the answer says why and until when. Without `max` the answer is today's single claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req4_mcp_claim_next_max_claims_in_turn_each_charged() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    let policy = json!({"max_claims_per_window": 3, "window": {"period": "day", "tz": "UTC", "start": "00:00"}});
    let path = format!("/api/v1/admission/{}/inbox", ep.scope);
    assert_eq!(send(&world.client, Method::PUT, &path, &alice, Some(policy)).await.status, 200);
    for i in 0..6 {
        world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await;
    }

    let (is_error, single) = world.client.tool(&ep.slug, &ep.key, "claim_next", json!({})).await;
    assert!(!is_error, "{single}");
    assert_eq!((single["todo"]["title"].as_str(), single["empty"].as_bool()), (Some("t0"), Some(false)));
    assert!(single.get("todos").is_none(), "no max, today's answer: {single}");

    let (is_error, many) = world.client.tool(&ep.slug, &ep.key, "claim_next", json!({"max": 10})).await;
    assert!(!is_error, "{many}");
    assert_eq!(claimed_titles(&many), ["t1", "t2"], "the window admits two more");
    let used: Vec<_> =
        many["todos"].as_array().expect("todos").iter().map(|c| c["admission"]["used"].clone()).collect();
    assert_eq!(used, [json!(2), json!(3)], "each claim charged in turn");
    assert_eq!(many["empty"], false);
    let deferred = &many["deferred"][0];
    assert_eq!((deferred["reason"].as_str(), deferred["pending"].as_i64()), (Some("window_exhausted"), Some(3)));
    assert!(deferred["next_eligible_at"].is_string(), "{deferred}");

    let (_, none) = world.client.tool(&ep.slug, &ep.key, "claim_next", json!({"max": 10})).await;
    assert_eq!((none["empty"].as_bool(), none["deferred"][0]["queue"].as_str()), (Some(true), Some("inbox")));
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 3, "nothing over the limit was dropped");
}

// Issue #31 item 2: `complete {ids}` ends every listed held todo, or none when one is not held
// (naming it); `max` and `ids` out of range are refused naming the field, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_complete_ids_ends_all_or_none() {
    let world = World::start(&[], &[]).await;
    let (_, alice) = world.human("alice");
    let ep = world.vend(&alice, json!({"name": "w", "queues": ["inbox"]})).await;
    for i in 0..4 {
        world.push(&alice, &ep.scope, "inbox", &format!("t{i}")).await;
    }
    for bad in [json!({"max": 0}), json!({"max": 101}), json!({"max": "3"})] {
        let (is_error, refused) = world.client.tool(&ep.slug, &ep.key, "claim_next", bad.clone()).await;
        assert!(is_error, "{bad}: {refused}");
        assert_eq!((refused["code"].as_str(), refused["field"].as_str()), (Some("invalid_argument"), Some("max")));
    }
    assert_eq!(world.pending(&alice, &ep.scope, "inbox").await.len(), 4, "a refused claim_next claims nothing");

    let (_, many) = world.client.tool(&ep.slug, &ep.key, "claim_next", json!({"max": 3})).await;
    assert_eq!(claimed_titles(&many), ["t0", "t1", "t2"]);
    let mut ids: Vec<String> =
        many["todos"].as_array().expect("todos").iter().map(|c| c["todo"]["id"].as_str().expect("id").into()).collect();
    let unheld = world.pending(&alice, &ep.scope, "inbox").await.into_iter().next().expect("one pending");

    let mut with_unheld = ids.clone();
    with_unheld.push(unheld.clone());
    let (is_error, refused) = world.client.tool(&ep.slug, &ep.key, "complete", json!({"ids": with_unheld})).await;
    assert!(is_error, "{refused}");
    assert_eq!((refused["code"].as_str(), refused["id"].as_str()), (Some("conflict"), Some(unheld.as_str())));
    for id in &ids {
        assert_eq!(world.state(&alice, id).await, "claimed", "none completed");
    }
    let both = json!({"id": ids[0], "ids": [ids[0]]});
    for bad in [json!({"ids": []}), json!({"ids": [ids[0], ids[0]]}), json!({"ids": "td_x"}), both] {
        let (is_error, refused) = world.client.tool(&ep.slug, &ep.key, "complete", bad.clone()).await;
        assert!(is_error, "{bad}: {refused}");
        assert_eq!(refused["field"].as_str(), Some("ids"), "{bad}: {refused}");
    }

    ids.reverse();
    let (is_error, done) = world.client.tool(&ep.slug, &ep.key, "complete", json!({"ids": ids, "summary": "ok"})).await;
    assert!(!is_error, "{done}");
    let states: Vec<_> =
        done["todos"].as_array().expect("todos").iter().map(|t| (t["id"].clone(), t["state"].clone())).collect();
    assert_eq!(states, ids.iter().map(|id| (json!(id), json!("done"))).collect::<Vec<_>>(), "in the order asked");
}
