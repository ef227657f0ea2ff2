//! Batched create (issue #15 item 2): many todos in one transaction, each created or deduped as
//! `create_todo` would, answered in order, all or nothing. The model store's answers are compared
//! with these by the differential run (`Op::CreateBatch`).

mod support;

use models::error::Code;
use models::store::prelude::*;
use models::store::{TodoQuery, TodoSet};
use models::todo::{Created, NewTodo, TodoState};
use serde_json::json;
use support::{World, new_todo, queue_of};

fn summary(created: &[Created]) -> Vec<(String, bool)> {
    created.iter().map(|c| (c.todo.title.clone(), c.deduped)).collect()
}

#[tokio::test]
async fn a_batch_is_created_in_order_at_one_instant_and_dedups_like_single_creates() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox", "lane"]).await;
    let (inbox, lane) = (queue_of(&agent, "inbox"), queue_of(&agent, "lane"));
    let held = world.store.create_todo(new_todo(&inbox, "already here", Some("k-held"))).await.expect("create").todo;
    let mut with_payload = new_todo(&lane, "second", None);
    with_payload.payload = Some(json!({"n": 2}));
    let batch = vec![
        new_todo(&inbox, "first", Some("k-new")),
        with_payload,
        new_todo(&inbox, "copy of first", Some("k-new")),
        new_todo(&inbox, "copy of held", Some("k-held")),
        new_todo(&inbox, "fourth", None),
    ];
    let created = world.store.create_todos(batch).await.expect("batch");
    assert_eq!(
        summary(&created),
        vec![
            ("first".to_string(), false),
            ("second".to_string(), false),
            ("first".to_string(), true),
            ("already here".to_string(), true),
            ("fourth".to_string(), false),
        ]
    );
    assert_eq!(created[2].todo.id, created[0].todo.id, "a later copy of a key dedups onto the earlier");
    assert_eq!(created[3].todo.id, held.id, "a key a live todo holds dedups onto it");
    assert_eq!(created[1].todo.payload, Some(json!({"n": 2})));
    assert_eq!(created[1].todo.identity, lane);
    let made: Vec<_> = created.iter().filter(|c| !c.deduped).collect();
    assert!(made.iter().all(|c| c.todo.created_at == made[0].todo.created_at), "one instant");
    assert!(made.iter().all(|c| c.todo.state == TodoState::Pending));
    let listed = world
        .store
        .list_todos(TodoQuery { set: TodoSet::Queues(vec![inbox.clone(), lane.clone()]), state: None, limit: 100 })
        .await
        .expect("list");
    assert_eq!(listed.len(), 4, "held, first, second, fourth");
}

#[tokio::test]
async fn a_refused_item_refuses_the_whole_batch_and_names_itself() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let inbox = queue_of(&agent, "inbox");
    let batch = vec![new_todo(&inbox, "fine", None), new_todo(&inbox, "   ", None)];
    let refused = world.store.create_todos(batch).await.expect_err("a blank title");
    assert_eq!((refused.code, refused.extras["field"].as_str()), (Code::InvalidArgument, Some("todos[1].title")));
    let empty = world.store.create_todos(vec![]).await.expect_err("empty");
    assert_eq!((empty.code, empty.extras["field"].as_str()), (Code::InvalidArgument, Some("todos")));
    let too_many: Vec<NewTodo> =
        (0..=models::limits::TODOS_PER_BATCH_MAX).map(|i| new_todo(&inbox, &format!("t{i}"), None)).collect();
    assert_eq!(world.store.create_todos(too_many).await.expect_err("too many").code, Code::InvalidArgument);
    let listed = world
        .store
        .list_todos(TodoQuery { set: TodoSet::Queues(vec![inbox]), state: None, limit: 10 })
        .await
        .expect("list");
    assert!(listed.is_empty(), "nothing was created: {listed:?}");
}

#[tokio::test]
async fn a_batch_over_the_intake_capacity_is_queue_full_and_creates_nothing() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox", "lane"]).await;
    let (inbox, lane) = (queue_of(&agent, "inbox"), queue_of(&agent, "lane"));
    let Some(admin) = world.store.human_id_by_name("alice").await.expect("lookup") else { panic!("alice") };
    world.store.set_queue_capacity(2, &admin).await.expect("set capacity");
    world.push(&inbox, "one").await;
    // Each identity is capped on its own: lane takes two, inbox has room for one more.
    let fits = vec![new_todo(&lane, "l1", None), new_todo(&inbox, "two", None), new_todo(&lane, "l2", None)];
    assert_eq!(world.store.create_todos(fits).await.expect("fits").len(), 3);
    let over = vec![new_todo(&inbox, "dup of one", None), new_todo(&lane, "l3", None)];
    let refused = world.store.create_todos(over).await.expect_err("full");
    assert_eq!(refused.code, Code::QueueFull);
    let listed = world
        .store
        .list_todos(TodoQuery { set: TodoSet::Queues(vec![inbox, lane]), state: None, limit: 10 })
        .await
        .expect("list");
    assert_eq!(listed.len(), 4, "the refused batch created nothing");
}

#[tokio::test]
async fn a_batch_is_claimed_in_the_order_it_was_sent() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let inbox = queue_of(&agent, "inbox");
    let titles: Vec<String> = (0..12).map(|i| format!("step {i}")).collect();
    let batch = titles.iter().map(|title| new_todo(&inbox, title, None)).collect();
    world.store.create_todos(batch).await.expect("batch");
    let mut claimed = Vec::new();
    for _ in 0..titles.len() {
        match world.store.claim_next(&agent, std::slice::from_ref(&inbox), 60).await.expect("claim") {
            models::store::ClaimNext::Claimed(c) => claimed.push(c.todo.title),
            other => panic!("expected a claim, got {other:?}"),
        }
    }
    assert_eq!(claimed, titles, "one instant, claimed first-sent first");
}
