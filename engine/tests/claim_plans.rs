//! Claims read a queue's todos through the claim-order indexes (issue #15), proved by the plans
//! PostgreSQL runs for the store's own statements (`support::plans`).
//!
//! `todos_claim_order_endpoint` / `_team` hold only the rows a claim can take, oldest first per
//! owner. `todos_list_endpoint` / `_team` (issue #14) hold every row of an owner in the same
//! order, done ones included. While the statistics show no done todo, as after a backlog is
//! loaded and analysed, the planner costs the two alike; read through the listing index, every
//! claim walks past each todo completed since, so a claim costs in proportion to the queue's
//! recent history (measured in `ci/bench-peer`: 20,000 jobs drained at about 40 % of the rate).
//!
//! `todos_claim_scan_endpoint` / `_team` hold the same rows per owner and queue. A pick from the
//! one queue of an owner left open reads there: a queue refused for its window keeps its
//! backlog, usually the oldest work, and a pick through the per-owner index walked all of it.

mod support;

use models::store::Store;
use serde_json::{Value, json};
use support::plans::{logged_plans, scans};
use support::{agent_world, claimed, queue_of, set_policy};

/// Pending todos per queue, analysed before the claims start.
const BACKLOG: i64 = 2_000;
/// Claims per queue: more than five, after which a prepared statement may get a generic plan.
const CLAIMS: usize = 7;

// Issue #15: the unbudgeted claim and the budgeted pick both read the backlog in claim order
// through the claim indexes, never through a listing index; a pick from one open queue reads
// that queue's own index, also once a paused queue with older work is excluded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_read_the_backlog_through_the_claim_indexes() {
    let (world, agent) = agent_world(&["work", "paced", "held"]).await;
    let (work, paced, held) = (queue_of(&agent, "work"), queue_of(&agent, "paced"), queue_of(&agent, "held"));
    set_policy(&world, &paced, json!({"max_in_flight": 10_000})).await;
    set_policy(&world, &held, json!({"max_in_flight": 0})).await;
    let endpoint_id = work.endpoint_id().expect("an endpoint's queue").to_string();
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, created_at, updated_at) \
         SELECT 'td_backlog_' || q || '_' || n, $1, q, 'backlog ' || n, 'system', \
                now() - make_interval(hours => age) + make_interval(secs => n), now() \
         FROM unnest(ARRAY['work', 'paced', 'held'], ARRAY[1, 1, 2]) AS owned (q, age), \
              generate_series(1, $2::bigint) AS n",
    )
    .bind(&endpoint_id)
    .bind(BACKLOG)
    .execute(world.store.pool())
    .await
    .expect("backlog");
    sqlx::query("ANALYZE todos").execute(world.store.pool()).await.expect("analyze");

    let endpoint_literal = format!("'{endpoint_id}'");
    let one_queue_named = "AND t.queue = $".to_string();
    let logged = logged_plans(&world, "cand AS", |store| async move {
        // The paused queue's older backlog comes first in claim order: it is refused, excluded,
        // and the pick goes on in the other queue.
        for queues in [vec![work.clone()], vec![paced.clone()], vec![held, paced]] {
            for _ in 0..CLAIMS {
                let claim = claimed(store.claim_next(&agent, &queues, 300).await.expect("claim"));
                store.complete(&agent, &claim.todo.id, None).await.expect("complete");
            }
        }
    })
    .await;

    assert!(logged.len() >= 3 * CLAIMS, "only {} claim plans were logged", logged.len());
    let mut one_open_queue = 0;
    for (text, plan) in &logged {
        let indexes: Vec<String> = scans(plan)
            .into_iter()
            .filter(|scan| scan.relation.as_deref() == Some("todos"))
            .filter_map(|scan| scan.index)
            .collect();
        // One open queue is named by equality (`t.queue = $n))`); several by a list.
        let expected =
            if text.contains(&one_queue_named) { "todos_claim_scan_endpoint" } else { "todos_claim_order_endpoint" };
        one_open_queue += usize::from(text.contains(&one_queue_named));
        assert!(
            indexes.iter().any(|index| index == expected),
            "a claim does not read the backlog through {expected}: {indexes:?}\nquery: {text}\nplan: {plan:#}"
        );
        assert!(
            !indexes.iter().any(|index| index.starts_with("todos_list_")),
            "a claim reads todos through a listing index: {indexes:?}\nplan: {plan:#}"
        );
    }
    assert!(one_open_queue >= 3 * CLAIMS, "only {one_open_queue} claims named one open queue");
    // The budgeted pick (the one with further candidates) runs on its generic plan, whose
    // conditions name parameters; planned anew it would name the endpoint itself.
    let picks: Vec<&Value> = logged.iter().filter(|(text, _)| text.contains("more_endpoint")).map(|(_, p)| p).collect();
    assert!(picks.len() >= CLAIMS, "only {} budgeted picks were logged", picks.len());
    for plan in picks {
        let plan_text = plan.to_string();
        assert!(
            !plan_text.contains(&endpoint_literal),
            "the budgeted pick was planned for its values, not generic: {plan:#}"
        );
    }
}
