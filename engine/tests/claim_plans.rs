//! Claims read a queue's todos through the claim-order indexes (issue #15), proved by the plans
//! PostgreSQL runs for the store's own statements (`support::plans`).
//!
//! `todos_claim_order_endpoint` / `_team` hold only the rows a claim can take, oldest first per
//! owner. `todos_list_endpoint` / `_team` (issue #14) hold every row of an owner in the same
//! order, done ones included. While the statistics show no done todo, as after a backlog is
//! loaded and analysed, the planner costs the two alike; read through the listing index, every
//! claim walks past each todo completed since, so a claim costs in proportion to the queue's
//! recent history (measured in `ci/bench-peer`: 20,000 jobs drained at about 40 % of the rate).

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
// through `todos_claim_order_*`, never through a listing index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_read_the_backlog_through_the_claim_order_indexes() {
    let (world, agent) = agent_world(&["work", "paced"]).await;
    let (work, paced) = (queue_of(&agent, "work"), queue_of(&agent, "paced"));
    set_policy(&world, &paced, json!({"max_in_flight": 10_000})).await;
    let endpoint_id = work.endpoint_id().expect("an endpoint's queue").to_string();
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, created_at, updated_at) \
         SELECT 'td_backlog_' || q || '_' || n, $1, q, 'backlog ' || n, 'system', \
                now() - interval '1 hour' + make_interval(secs => n), now() \
         FROM unnest(ARRAY['work', 'paced']) AS q, generate_series(1, $2::bigint) AS n",
    )
    .bind(&endpoint_id)
    .bind(BACKLOG)
    .execute(world.store.pool())
    .await
    .expect("backlog");
    sqlx::query("ANALYZE todos").execute(world.store.pool()).await.expect("analyze");

    let endpoint_literal = format!("'{endpoint_id}'");
    let logged = logged_plans(&world, "cand AS", |store| async move {
        for queue in [work, paced] {
            for _ in 0..CLAIMS {
                let claim = claimed(store.claim_next(&agent, std::slice::from_ref(&queue), 300).await.expect("claim"));
                store.complete(&agent, &claim.todo.id, None).await.expect("complete");
            }
        }
    })
    .await;

    assert!(logged.len() >= 2 * CLAIMS, "only {} claim plans were logged", logged.len());
    for (_, plan) in &logged {
        let indexes: Vec<String> = scans(plan)
            .into_iter()
            .filter(|scan| scan.relation.as_deref() == Some("todos"))
            .filter_map(|scan| scan.index)
            .collect();
        assert!(
            indexes.iter().any(|index| index == "todos_claim_order_endpoint"),
            "a claim does not read the backlog through todos_claim_order_endpoint: {indexes:?}\nplan: {plan:#}"
        );
        assert!(
            !indexes.iter().any(|index| index.starts_with("todos_list_")),
            "a claim reads todos through a listing index: {indexes:?}\nplan: {plan:#}"
        );
    }
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
