//! Batched create through the real binary (issue #15 item 2): `POST /api/v1/todos` with a list
//! and MCP `create_todos`, each one transaction answered in order, through the same validation
//! as a single create (a refusal names the item and creates nothing).

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
