//! Issue #14 item 4: a listing's `payload_size` comes from SQL (the `todos.payload_bytes` column,
//! migration 0014) and the listing reads neither payload nor result. The SQL value must equal
//! what a client counts on the compact JSON it reads back (`models::todo::payload_size_bytes`),
//! so these tests store a spread of awkward documents and compare the two.

mod support;

use models::scope::Actor;
use models::store::prelude::*;
use models::store::{ClaimNext, TodoQuery, TodoSet};
use models::todo::payload_size_bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use support::{World, new_todo, queue_of};

/// Characters that stress the count: escapes, multi-byte UTF-8, and the separators `, ` and `: `
/// inside strings, where they are text and not structure.
const ALPHABET: &[char] = &[
    'a', 'Z', '7', ' ', ',', ':', '"', '\\', '/', '\n', '\t', '\u{1}', '\u{1f}', '\u{7f}', 'é', '漢', '🦀', '\u{2028}',
];

fn random_string(rng: &mut StdRng) -> String {
    (0..rng.random_range(0..12)).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())]).collect()
}

/// A random document of depth at most `depth`. Numbers are integers and binary fractions of
/// modest size: the ones both JSON writers spell the same way (see the module docs of 0014).
fn random_document(rng: &mut StdRng, depth: u32) -> Value {
    let scalar_only = depth == 0;
    match rng.random_range(0..if scalar_only { 5 } else { 7 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 => json!(rng.random_range(-1_000_000_000_i64..1_000_000_000)),
        3 => json!(f64::from(rng.random_range(-100_000_i32..100_000)) / 8.0),
        4 => Value::String(random_string(rng)),
        5 => Value::Array((0..rng.random_range(0..4)).map(|_| random_document(rng, depth - 1)).collect()),
        _ => {
            let mut members = Map::new();
            for _ in 0..rng.random_range(0..4) {
                members.insert(random_string(rng), random_document(rng, depth - 1));
            }
            Value::Object(members)
        }
    }
}

#[tokio::test]
async fn listing_payload_size_is_computed_in_sql_and_equals_the_compact_json_length() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["docs"]).await;
    let queue = queue_of(&agent, "docs");
    let mut rng = StdRng::seed_from_u64(14);
    let mut expected = BTreeMap::new();
    let fixed = [
        json!({}),
        json!([]),
        json!({"a": [1, 2, {"b": null}], "c": {}}),
        json!("a, b: c"),
        json!({"k, ": {": v": [[], [[]], {}]}}),
        json!(2.0),
    ];
    let documents: Vec<Value> = fixed.into_iter().chain((0..200).map(|_| random_document(&mut rng, 3))).collect();
    for (index, document) in documents.into_iter().enumerate() {
        let mut new = new_todo(&queue, &format!("doc {index}"), None);
        new.payload = Some(document);
        let created = world.store.create_todo(new.clone()).await.expect("create").todo;
        let size = payload_size_bytes(new.payload.as_ref());
        assert_eq!(created.payload_size_bytes, size, "as created: {}", new.payload.as_ref().expect("payload"));
        expected.insert(created.id, (size, new.payload));
    }
    let none = world.store.create_todo(new_todo(&queue, "no payload", None)).await.expect("create").todo;
    expected.insert(none.id, (0, None));

    let listed = world
        .store
        .list_todos(TodoQuery { set: TodoSet::Queues(vec![queue.clone()]), state: None, limit: 1000 })
        .await
        .expect("list");
    assert_eq!(listed.len(), expected.len());
    for todo in &listed {
        let (size, payload) = &expected[&todo.id];
        assert_eq!(todo.payload_size_bytes, *size, "listed size of {:?}", payload.as_ref().map(Value::to_string));
        assert_eq!(todo.payload, None, "a listing carries no payload");
    }
}

#[tokio::test]
async fn listing_leaves_payload_and_result_out_but_a_read_of_one_todo_carries_both() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["docs"]).await;
    let queue = queue_of(&agent, "docs");
    let payload = json!({"report": "q3", "pages": [1, 2, 3]});
    let mut new = new_todo(&queue, "summarise", None);
    new.payload = Some(payload.clone());
    world.store.create_todo(new).await.expect("create");
    let ClaimNext::Claimed(claimed) =
        world.store.claim_next(&agent, std::slice::from_ref(&queue), 60).await.expect("claim")
    else {
        panic!("the todo was not claimed")
    };
    world.store.complete(&agent, &claimed.todo.id, Some(json!({"ok": true}))).await.expect("complete");

    let owner = world.owner("alice").await;
    let Actor::Human(scope) = &owner else { panic!("not a human") };
    for set in [TodoSet::Queues(vec![queue.clone()]), TodoSet::Owners(scope.reach.clone())] {
        let listed = world.store.list_todos(TodoQuery { set, state: None, limit: 10 }).await.expect("list");
        let [todo] = listed.as_slice() else { panic!("expected one todo, listed {}", listed.len()) };
        assert_eq!((&todo.payload, &todo.result), (&None, &None));
        assert_eq!(todo.payload_size_bytes, payload.to_string().len() as i64);
    }
    let read = world.store.get_todo(&owner, &claimed.todo.id).await.expect("get");
    assert_eq!(read.payload, Some(payload.clone()));
    assert_eq!(read.result, Some(json!({"ok": true})));
    assert_eq!(read.payload_size_bytes, payload.to_string().len() as i64);
}
