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
//!
//! The budgeted pick runs on its generic plan, set for its transaction only: the connection goes
//! back to the pool planning as before.

mod support;

use engine::{PgStore, PoolSettings};
use models::admission::Policy;
use models::identity::QueueIdentity;
use models::store::PolicyActor;
use models::store::prelude::*;
use serde_json::{Value, json};
use support::plans::{logged_plans, scans};
use support::{agent_world, claimed, deferred, queue_of, queue_of_both_kinds, set_policy};

/// Pending todos per queue, analysed before the claims start.
const BACKLOG: i64 = 2_000;
/// Claims per queue: enough past the five after which a prepared statement may get a generic
/// plan for each scenario's statements to settle on theirs.
const CLAIMS: usize = 14;

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
    let drain = |queues: Vec<QueueIdentity>| {
        let agent = agent.clone();
        move |store: PgStore| async move {
            for _ in 0..CLAIMS {
                let claim = claimed(store.claim_next(&agent, &queues, 300).await.expect("claim"));
                store.complete(&agent, &claim.todo.id, None).await.expect("complete");
            }
        }
    };
    let one_queue = logged_plans(&world, "cand AS", drain(vec![work])).await;
    let budgeted = logged_plans(&world, "cand AS", drain(vec![paced.clone()])).await;
    // The paused queue's older backlog comes first in claim order: it is refused, excluded, and
    // the pick goes on in the one queue left open.
    let after_refusal = logged_plans(&world, "cand AS", drain(vec![held, paced])).await;

    for (scenario, logged) in [("one queue", &one_queue), ("budgeted", &budgeted), ("after a refusal", &after_refusal)]
    {
        let mut from_one_queue = 0;
        for (text, plan) in logged {
            let cand = scans(candidate_of(plan));
            let indexes: Vec<&str> = cand
                .iter()
                .filter(|scan| scan.relation.as_deref() == Some("todos"))
                .filter_map(|scan| scan.index.as_deref())
                .collect();
            assert!(
                !indexes.iter().any(|index| index.starts_with("todos_list_")),
                "{scenario}: a claim reads todos through a listing index: {indexes:?}\nplan: {plan:#}"
            );
            // One open queue is named by equality (`t.queue = $n`), several by a list.
            let expected = if text.contains("AND t.queue = $") {
                from_one_queue += 1;
                "todos_claim_scan_endpoint"
            } else {
                "todos_claim_order_endpoint"
            };
            assert_eq!(indexes, [expected], "{scenario}: the candidate's scan\nquery: {text}\nplan: {plan:#}");
            let sorts: Vec<&str> =
                cand.iter().map(|scan| scan.node.as_str()).filter(|node| node.contains("Sort")).collect();
            assert!(
                sorts.is_empty(),
                "{scenario}: the candidate is sorted, not read in order: {sorts:?}\nplan: {plan:#}"
            );
        }
        assert!(from_one_queue >= CLAIMS, "{scenario}: only {from_one_queue} claims named one open queue");
    }
    // The unbudgeted claim settles on its generic plan by itself, as a statement whose generic
    // plan costs no more than its custom ones does. With its row limit bound as a parameter it
    // never did: PostgreSQL costs `LIMIT $n` as a tenth of the rows, and planned the claim anew
    // at every run (bench-peer (a) at half speed; `sql::RowLimit`).
    assert!(
        one_queue.iter().any(|(_, plan)| !plan.to_string().contains(&endpoint_literal)),
        "the unbudgeted claim was planned for its values at every run"
    );
    // The budgeted pick (the one with further candidates) runs on its generic plan, whose
    // conditions name parameters; planned anew it would name the endpoint itself.
    let picks: Vec<&Value> =
        budgeted.iter().filter(|(text, _)| text.contains("more_endpoint")).map(|(_, p)| p).collect();
    assert!(picks.len() >= CLAIMS, "only {} budgeted picks were logged", picks.len());
    for plan in picks {
        assert!(
            !plan.to_string().contains(&endpoint_literal),
            "the budgeted pick was planned for its values, not generic: {plan:#}"
        );
    }
}

// Issue #15: the budgeted path's transactions plan generically (`SET LOCAL plan_cache_mode`),
// and the setting ends with each transaction, committed or rolled back: the statement a pooled
// connection runs next plans as the server's own setting says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generic_plan_setting_ends_with_its_claim_transaction() {
    let (world, agent) = agent_world(&["paced", "held"]).await;
    let (paced, held) = (queue_of(&agent, "paced"), queue_of(&agent, "held"));
    set_policy(&world, &paced, json!({"max_in_flight": 10})).await;
    set_policy(&world, &held, json!({"max_in_flight": 0})).await;
    world.push(&paced, "admitted").await;
    world.push(&held, "held back").await;
    // One connection: the claims and the reads after them run on the same session.
    let settings = PoolSettings { connections_max: 1, ..PoolSettings::default() };
    let store = world.store_with(settings).await;
    let server_default: String = sqlx::query_scalar("SELECT reset_val FROM pg_settings WHERE name = 'plan_cache_mode'")
        .fetch_one(store.pool())
        .await
        .expect("default");
    let plan_cache_mode = || async {
        sqlx::query_scalar::<_, String>("SHOW plan_cache_mode").fetch_one(store.pool()).await.expect("show")
    };
    assert_ne!(server_default, "force_generic_plan", "the test cluster must not plan generically by itself");

    // Committed: the budgeted queue admits the claim.
    claimed(store.claim_next(&agent, std::slice::from_ref(&paced), 300).await.expect("claim"));
    assert_eq!(plan_cache_mode().await, server_default, "after a committed claim transaction");
    // Rolled back: the held queue refuses its only candidate.
    let refused = deferred(store.claim_next(&agent, std::slice::from_ref(&held), 300).await.expect("claim"));
    assert_eq!(refused.len(), 1, "the held queue is deferred: {refused:?}");
    assert_eq!(plan_cache_mode().await, server_default, "after a refused claim's rollback");
}

// Issue #31 item 1 (migration 0020): the reaper finds lapsed leases through the in-flight
// indexes, which carry the lease since `todos_leases` went, for both owner kinds, and never
// reads the backlog: the pending and done todos around the claims are not scanned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_reads_leases_through_the_in_flight_indexes() {
    let (world, agent, [own, teams]) = queue_of_both_kinds("work").await;
    let endpoint_id = own.endpoint_id().expect("an endpoint's queue").to_string();
    let team_id = teams.team_id().expect("a team's queue").to_string();
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, team_id, queue, title, created_by_kind, state, completed_at, \
                            created_at, updated_at) \
         SELECT 'td_backlog_' || n, CASE WHEN n % 2 = 0 THEN $1 END, CASE WHEN n % 2 = 1 THEN $2 END, 'work', \
                'backlog ' || n, 'system', CASE WHEN n % 3 = 0 THEN 'done' ELSE 'pending' END, \
                CASE WHEN n % 3 = 0 THEN now() END, now() - interval '1 day' + make_interval(secs => n), now() \
         FROM generate_series(1, $3::bigint) AS n",
    )
    .bind(&endpoint_id)
    .bind(&team_id)
    .bind(BACKLOG)
    .execute(world.store.pool())
    .await
    .expect("backlog");
    for queue in [&own, &teams] {
        for _ in 0..CLAIMS {
            claimed(world.store.claim_next(&agent, std::slice::from_ref(queue), 300).await.expect("claim"));
        }
    }
    sqlx::query("ANALYZE todos").execute(world.store.pool()).await.expect("analyze");
    world.clock.advance(chrono::Duration::seconds(301));

    let logged = logged_plans(&world, "lapsed_endpoint AS", |store: PgStore| async move {
        let report = store.reap_lapsed_leases().await.expect("reap");
        assert_eq!(report.returned_to_pending, 2 * CLAIMS as u64, "every lapsed lease, of both owner kinds");
    })
    .await;
    assert!(!logged.is_empty(), "the reaper's statement was not logged");
    for (_, plan) in &logged {
        let nodes = scans(plan);
        let seq_scans =
            nodes.iter().filter(|scan| scan.node == "Seq Scan" && scan.relation.as_deref() == Some("todos"));
        assert_eq!(seq_scans.count(), 0, "the reaper scans the todos table\nplan: {plan:#}");
        // A bitmap index scan names its index, not its table; every index of todos is todos_*.
        let mut read_through: Vec<&str> =
            nodes.iter().filter_map(|scan| scan.index.as_deref()).filter(|index| index.starts_with("todos_")).collect();
        read_through.sort_unstable();
        read_through.dedup();
        // The update finds each lapsed row again by its key.
        assert_eq!(
            read_through,
            ["todos_in_flight_endpoint", "todos_in_flight_team", "todos_pkey"],
            "the reaper's reads of todos\nplan: {plan:#}"
        );
    }
}

// Issue #31 item 1: a claim's update is not HOT, so every claim that has finished leaves its
// entry in the in-flight index until vacuum. The in-flight reads (the claim's count, the status
// read, the reaper, a policy write's count) take one branch per owner kind, so each is a plain
// index scan, which marks those entries dead as it passes them. An OR of the two kinds plans as
// bitmap scans, which revisit every finished claim's entry at every read (0.19 ms per claim after
// a few thousand jobs in bench-peer's (b)).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_reads_are_plain_index_scans() {
    let (world, agent, queues) = queue_of_both_kinds("paced").await;
    for queue in &queues {
        set_policy(&world, queue, json!({"max_in_flight": 10_000})).await;
        support::push_n(&world, queue, 200).await;
    }
    sqlx::query("ANALYZE todos").execute(world.store.pool()).await.expect("analyze");
    // Finished claims: their entries stay in the in-flight indexes.
    for queue in &queues {
        for _ in 0..150 {
            let claim = claimed(world.store.claim_next(&agent, std::slice::from_ref(queue), 300).await.expect("claim"));
            world.store.complete(&agent, &claim.todo.id, None).await.expect("complete");
        }
    }

    let statuses = queues.to_vec();
    let logged = logged_plans(&world, "claimed", |store: PgStore| async move {
        for queue in &statuses {
            for _ in 0..CLAIMS {
                claimed(store.claim_next(&agent, std::slice::from_ref(queue), 300).await.expect("claim"));
            }
        }
        let read = store.queue_admissions(&statuses).await.expect("status");
        let in_flight: Vec<Option<i64>> = read.iter().map(|a| a.status.in_flight).collect();
        assert_eq!(in_flight, [Some(CLAIMS as i64); 2], "the claims still held, not the finished ones");
        store.reap_lapsed_leases().await.expect("reap");
        // A policy write counts in flight too, to watch a queue it defers (REQ-8). Written eight
        // times on the one session: PostgreSQL plans the first five for their values and may
        // then settle on a generic plan; either must read the in-flight indexes.
        let actor = PolicyActor { human_id: None, endpoint_id: None };
        for max_in_flight in 1..=8 {
            let lowered = Policy::from_request(&json!({ "max_in_flight": max_in_flight })).expect("valid policy");
            for queue in &statuses {
                store.set_policy(queue, &lowered, &actor).await.expect("set");
            }
        }
    })
    .await;
    // Whether the statement is planned for one identity's values (then one owner kind's branch
    // may be folded away) or not (then each plan reads the endpoint kind's index).
    for (statement, fragment, per_identity) in [
        ("the claim's count", "clock_timestamp()), f.n, f.earliest", false),
        ("the status read", "AS lapsed ", false),
        ("the reaper", "lapsed_endpoint AS", false),
        ("the policy write's count", "w.owner_id = coalesce($1, $2)", true),
    ] {
        let plans: Vec<&Value> =
            logged.iter().filter(|(text, _)| text.contains(fragment)).map(|(_, plan)| plan).collect();
        assert!(!plans.is_empty(), "{statement} was not logged");
        // Both owner kinds' indexes are looked for across the statement's plans.
        let mut read_through = std::collections::BTreeSet::new();
        for plan in plans {
            let nodes = scans(plan);
            let in_flight: Vec<(&str, &str)> = nodes
                .iter()
                .filter_map(|scan| Some((scan.node.as_str(), scan.index.as_deref()?)))
                .filter(|(_, index)| index.starts_with("todos_in_flight_"))
                .collect();
            assert!(!in_flight.is_empty(), "{statement} reads no in-flight index: {plan:#}");
            if !per_identity {
                let endpoint = in_flight.iter().any(|(_, index)| *index == "todos_in_flight_endpoint");
                assert!(endpoint, "{statement}: {plan:#}");
            }
            read_through.extend(in_flight.iter().map(|(_, index)| index.to_string()));
            assert!(
                in_flight.iter().all(|(node, _)| matches!(*node, "Index Scan" | "Index Only Scan")),
                "{statement} reads the in-flight indexes by bitmap: {in_flight:?}\nplan: {plan:#}"
            );
            // Nor by an OR of bitmaps over other indexes of todos. (The reaper's update may find
            // its batch of ids through the primary key by bitmap: each id is one exact entry.)
            let bitmaps: Vec<&str> = nodes
                .iter()
                .filter(|scan| scan.node == "BitmapOr" || scan.node == "Bitmap Index Scan")
                .map(|scan| scan.index.as_deref().unwrap_or(scan.node.as_str()))
                .filter(|index| *index != "todos_pkey" && !index.starts_with("todo_attempts"))
                .collect();
            assert!(bitmaps.is_empty(), "{statement} reads todos by bitmap: {bitmaps:?}\nplan: {plan:#}");
        }
        assert_eq!(
            read_through.into_iter().collect::<Vec<_>>(),
            ["todos_in_flight_endpoint", "todos_in_flight_team"],
            "{statement}: the in-flight indexes read"
        );
    }
}

/// The part of a claim statement's plan that finds the candidate (the `cand` CTE), or the whole
/// plan where the planner folded it in.
fn candidate_of(plan: &Value) -> &Value {
    fn find(node: &Value) -> Option<&Value> {
        if node.get("Subplan Name").and_then(Value::as_str) == Some("CTE cand") {
            return Some(node);
        }
        node.get("Plans").and_then(Value::as_array)?.iter().find_map(find)
    }
    find(plan).unwrap_or(plan)
}
