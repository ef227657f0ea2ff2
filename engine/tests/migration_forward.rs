//! Migrations run forward on a database that holds data. Issue #28 (0017): the usage rows of
//! existing policies are re-keyed by queue identity and entered in the charge ledger, so the
//! first policy change after the upgrade refunds nothing. Issue #31 (0020): the in-flight
//! indexes take the lease over from `todos_leases`, built from the todos already claimed.
//! Issue #31 (0021): the todo's and the attempt's one-column rules become domains.
//!
//! A migration that retypes a column changes the result type of every statement that reads it,
//! and PostgreSQL refuses to run such a statement a connection prepared before ("cached plan must
//! not change result type"). So each test reads after the migration on a new pool, as a server
//! started after the migration does.

use chrono::{DateTime, Utc};
use engine::testing::empty_database;
use models::store::prelude::*;
use std::borrow::Cow;

/// The version of the migration that keys charges by identity.
const CHARGES_PER_IDENTITY: i64 = 17;
/// The version of the migration that moves the lease into the in-flight indexes.
const LEASES_IN_FLIGHT: i64 = 20;
/// The version of the migration that makes the todo's one-column checks domains.
const CHECKS_AS_DOMAINS: i64 = 21;

/// A database migrated up to, not including, `version`.
async fn migrated_before(version: i64) -> (engine::testing::TestDatabase, sqlx::PgPool) {
    let database = empty_database().await;
    let pool = sqlx::PgPool::connect(&database.url).await.expect("connect");
    let before: Vec<_> =
        engine::pg_store::MIGRATOR.migrations.iter().filter(|m| m.version < version).cloned().collect();
    let older = sqlx::migrate::Migrator { migrations: Cow::Owned(before), ..sqlx::migrate::Migrator::DEFAULT };
    older.run(&pool).await.unwrap_or_else(|error| panic!("migrations before {version}: {error}"));
    (database, pool)
}

/// Alice and her endpoint `ep_1`, which the populated rows belong to.
async fn one_endpoint(pool: &sqlx::PgPool) {
    sqlx::raw_sql(
        "INSERT INTO humans (id, name) VALUES ('hu_1', 'alice'); \
         INSERT INTO endpoints (id, slug, name, owner_human_id, token_hash, verbs) \
           VALUES ('ep_1', 'agent-1', 'agent', 'hu_1', 'hash', '{claim_next}');",
    )
    .execute(pool)
    .await
    .expect("alice and her endpoint");
}

/// Runs every migration on `pool`, closes it and answers a new pool on the migrated database.
async fn migrate_forward(database: &engine::testing::TestDatabase, pool: sqlx::PgPool) -> sqlx::PgPool {
    engine::pg_store::MIGRATOR.run(&pool).await.expect("migrate forward");
    pool.close().await;
    sqlx::PgPool::connect(&database.url).await.expect("reconnect")
}

#[tokio::test]
async fn req3_existing_usage_survives_the_move_to_charges_per_identity() {
    let (database, pool) = migrated_before(CHARGES_PER_IDENTITY).await;
    // One endpoint with a daily policy that spent 4 units today and 7 yesterday.
    one_endpoint(&pool).await;
    sqlx::raw_sql(
        "INSERT INTO admission_policies (id, endpoint_id, queue, max_claims_per_window, window_period, window_tz, \
           window_start, created_at, updated_at) \
           VALUES ('ap_1', 'ep_1', 'inbox', 5, 'day', 'UTC', '00:00', now(), now()); \
         INSERT INTO admission_windows (policy_id, window_start, used, updated_at) VALUES \
           ('ap_1', date_trunc('day', now()), 4, now()), \
           ('ap_1', date_trunc('day', now()) - interval '1 day', 7, date_trunc('day', now()) - interval '1 minute');",
    )
    .execute(&pool)
    .await
    .expect("populate");

    let pool = migrate_forward(&database, pool).await;

    let windows: Vec<(String, String, DateTime<Utc>, i32)> =
        sqlx::query_as("SELECT owner_id, queue, window_start, used FROM admission_windows ORDER BY window_start")
            .fetch_all(&pool)
            .await
            .expect("windows");
    assert_eq!(
        windows.iter().map(|w| (w.0.as_str(), w.1.as_str(), w.3)).collect::<Vec<_>>(),
        vec![("ep_1", "inbox", 7), ("ep_1", "inbox", 4)]
    );
    let ledger: Vec<(DateTime<Utc>, i32)> =
        sqlx::query_as("SELECT minute, units FROM admission_charges ORDER BY minute")
            .fetch_all(&pool)
            .await
            .expect("ledger");
    assert_eq!(ledger.iter().map(|l| l.1).collect::<Vec<_>>(), vec![7, 4], "each window's units at its last charge");
    assert!(ledger[0].0 < windows[1].2 && ledger[1].0 >= windows[1].2, "yesterday's before today's start: {ledger:?}");

    // The policy's delete no longer takes the charges with it.
    sqlx::query("DELETE FROM admission_policies").execute(&pool).await.expect("delete policy");
    let kept: i64 =
        sqlx::query_scalar("SELECT sum(used)::bigint FROM admission_windows").fetch_one(&pool).await.expect("sum");
    assert_eq!(kept, 11);
    pool.close().await;
}

// Issue #31 item 1: the todos of every state survive 0020 unchanged, the in-flight indexes are
// rebuilt with the lease, and the store's reaper, which reads the leases through them, reaps
// exactly the lapsed claims.
#[tokio::test]
async fn claimed_todos_keep_their_leases_when_the_in_flight_indexes_take_them_over() {
    let (database, pool) = migrated_before(LEASES_IN_FLIGHT).await;
    one_endpoint(&pool).await;
    sqlx::raw_sql(
        "INSERT INTO teams (id, slug, name) VALUES ('tm_1', 'crew', 'crew'); \
         INSERT INTO todos (id, endpoint_id, team_id, queue, title, created_by_kind, state, owner, \
                            claimed_by_endpoint_id, lease_expires_at, attempt, claimed_at, completed_at, created_at, updated_at) \
         SELECT 'td_' || n, CASE WHEN n % 2 = 0 THEN 'ep_1' END, CASE WHEN n % 2 = 1 THEN 'tm_1' END, 'inbox', \
                'todo ' || n, 'system', s.state, \
                CASE WHEN s.state = 'claimed' THEN 'endpoint/ep_1' END, CASE WHEN s.state = 'claimed' THEN 'ep_1' END, \
                CASE WHEN s.state = 'claimed' THEN now() + make_interval(mins => n - 5) END, \
                CASE WHEN s.state = 'pending' THEN 0 ELSE 1 END, CASE WHEN s.state <> 'pending' THEN now() END, \
                CASE WHEN s.state = 'done' THEN now() END, now() - make_interval(mins => n), now() \
         FROM generate_series(1, 30) AS n, \
              LATERAL (SELECT (ARRAY['pending', 'claimed', 'done'])[n % 3 + 1] AS state) s;",
    )
    .execute(&pool)
    .await
    .expect("populate");
    let snapshot = "SELECT id, state, lease_expires_at FROM todos ORDER BY id";
    let before: Vec<(String, String, Option<DateTime<Utc>>)> =
        sqlx::query_as(snapshot).fetch_all(&pool).await.expect("before");
    assert_eq!(before.iter().filter(|t| t.1 == "claimed").count(), 10);

    let pool = migrate_forward(&database, pool).await;

    let after: Vec<(String, String, Option<DateTime<Utc>>)> =
        sqlx::query_as(snapshot).fetch_all(&pool).await.expect("after");
    assert_eq!(after, before, "the migration changes no todo");
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT indexname, indexdef FROM pg_indexes \
         WHERE tablename = 'todos' AND (indexname LIKE 'todos_in_flight%' OR indexname = 'todos_leases') ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .expect("indexes");
    assert_eq!(
        indexes.iter().map(|i| i.0.as_str()).collect::<Vec<_>>(),
        ["todos_in_flight_endpoint", "todos_in_flight_team"]
    );
    assert!(
        indexes.iter().all(|i| i.1.contains("queue, lease_expires_at)")),
        "the lease is the third column: {indexes:?}"
    );
    // The store on the migrated database reaps exactly the lapsed leases (n < 5: td_1 and td_4,
    // one of each owner kind).
    let store = engine::PgStore::connect(
        &database.url,
        engine::PoolSettings::default(),
        std::sync::Arc::new(models::store::SystemClock),
    )
    .await
    .expect("store");
    let report = store.reap_lapsed_leases().await.expect("reap");
    assert_eq!(report.returned_to_pending, 2, "{report:?}");
    let still_claimed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM todos WHERE state = 'claimed'").fetch_one(&pool).await.expect("count");
    assert_eq!(still_claimed, 8);
    pool.close().await;
}

// Issue #31: 0021 moves the todo's and the attempt's one-column rules from table checks to
// domains, so a claim and a complete no longer read seven check expressions anew. The stored
// todos and attempts survive unchanged, and every rule still refuses what it refused.
#[tokio::test]
async fn the_todo_rules_hold_as_domains_with_the_stored_todos_unchanged() {
    let (database, pool) = migrated_before(CHECKS_AS_DOMAINS).await;
    one_endpoint(&pool).await;
    sqlx::raw_sql(
        "INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, state, owner, claimed_by_endpoint_id, \
                            lease_expires_at, attempt, max_attempts, claimed_at, completed_at, created_at, updated_at) \
         SELECT 'td_' || n, 'ep_1', 'q.' || n % 4, 'todo ' || n, \
                (ARRAY['human', 'agent', 'workflow', 'ingest', 'system'])[n % 5 + 1], s.state, \
                CASE WHEN s.state = 'claimed' THEN 'endpoint/ep_1' END, CASE WHEN s.state = 'claimed' THEN 'ep_1' END, \
                CASE WHEN s.state = 'claimed' THEN now() + interval '5 minutes' END, \
                CASE WHEN s.state = 'pending' THEN 0 ELSE 1 END, n % 100 + 1, \
                CASE WHEN s.state <> 'pending' THEN now() END, CASE WHEN s.state = 'done' THEN now() END, \
                now() - make_interval(mins => n), now() \
         FROM generate_series(1, 25) AS n, \
              LATERAL (SELECT (ARRAY['pending', 'claimed', 'done', 'failed', 'discarded'])[n % 5 + 1] AS state) s; \
         INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at, ended_at, outcome) \
         SELECT id, 1, 'endpoint/ep_1', 'ep_1', now(), CASE WHEN state <> 'claimed' THEN now() END, \
                CASE state WHEN 'done' THEN 'completed' WHEN 'failed' THEN 'failed' WHEN 'discarded' THEN 'canceled' END \
         FROM todos WHERE state <> 'pending';",
    )
    .execute(&pool)
    .await
    .expect("populate");
    let todos = "SELECT id, queue::text, state::text, created_by_kind::text, attempt::int4, max_attempts::int4 \
                 FROM todos ORDER BY id";
    let attempts = "SELECT todo_id, outcome::text FROM todo_attempts ORDER BY todo_id";
    type TodoRow = (String, String, String, String, i32, i32);
    let todos_before: Vec<TodoRow> = sqlx::query_as(todos).fetch_all(&pool).await.expect("todos before");
    let attempts_before: Vec<(String, Option<String>)> =
        sqlx::query_as(attempts).fetch_all(&pool).await.expect("attempts before");
    assert_eq!(attempts_before.len(), 20);

    let pool = migrate_forward(&database, pool).await;

    let todos_after: Vec<TodoRow> = sqlx::query_as(todos).fetch_all(&pool).await.expect("todos after");
    let attempts_after: Vec<(String, Option<String>)> =
        sqlx::query_as(attempts).fetch_all(&pool).await.expect("attempts after");
    assert_eq!(todos_after, todos_before, "the migration changes no todo");
    assert_eq!(attempts_after, attempts_before, "the migration changes no attempt");
    let checks: Vec<String> = sqlx::query_scalar(
        "SELECT conname::text FROM pg_constraint \
         WHERE contype = 'c' AND conrelid IN ('todos'::regclass, 'todo_attempts'::regclass) ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .expect("checks");
    assert_eq!(checks, ["todos_lease_iff_claimed", "todos_one_queue_owner"], "only the two-column rules stay checks");

    // Each rule refuses a value it refused as a check, on an update as on an insert.
    let refused = [
        "UPDATE todos SET state = 'lost' WHERE id = 'td_1'",
        "UPDATE todos SET queue = 'Not A Queue' WHERE id = 'td_1'",
        "UPDATE todos SET queue = '' WHERE id = 'td_1'",
        "UPDATE todos SET created_by_kind = 'robot' WHERE id = 'td_1'",
        "UPDATE todos SET attempt = -1 WHERE id = 'td_1'",
        "UPDATE todos SET max_attempts = 0 WHERE id = 'td_1'",
        "UPDATE todos SET max_attempts = 101 WHERE id = 'td_1'",
        "UPDATE todo_attempts SET outcome = 'vanished' WHERE todo_id = 'td_2'",
        "INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, state, created_at, updated_at) \
         VALUES ('td_new', 'ep_1', 'inbox', 'new', 'system', 'sleeping', now(), now())",
    ];
    for statement in refused {
        let error = sqlx::raw_sql(statement).execute(&pool).await.expect_err(statement);
        let code = error.as_database_error().and_then(|e| e.code()).map(|code| code.into_owned());
        assert_eq!(code.as_deref(), Some("23514"), "{statement}: {error}");
    }
    // And admits what it admitted: the bounds themselves, and no outcome on an open attempt.
    sqlx::raw_sql(
        "UPDATE todos SET max_attempts = 100, attempt = 0, queue = 'a.b_c-9' WHERE id = 'td_1'; \
         UPDATE todos SET max_attempts = 1 WHERE id = 'td_2'; \
         UPDATE todo_attempts SET outcome = NULL WHERE todo_id = 'td_2';",
    )
    .execute(&pool)
    .await
    .expect("values inside the rules");
    let bounds: (String, i32, i32) =
        sqlx::query_as("SELECT queue::text, attempt::int4, max_attempts::int4 FROM todos WHERE id = 'td_1'")
            .fetch_one(&pool)
            .await
            .expect("td_1");
    assert_eq!(bounds, ("a.b_c-9".to_string(), 0, 100), "the values at the rules' bounds were stored");
    pool.close().await;
}
