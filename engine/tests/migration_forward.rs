//! Migrations run forward on a database that holds data (issue #28, 0017): the usage rows of
//! existing policies are re-keyed by queue identity and entered in the charge ledger, so the
//! first policy change after the upgrade refunds nothing.

use chrono::{DateTime, Utc};
use engine::testing::empty_database;
use std::borrow::Cow;

/// The version of the migration that keys charges by identity.
const CHARGES_PER_IDENTITY: i64 = 17;

#[tokio::test]
async fn req3_existing_usage_survives_the_move_to_charges_per_identity() {
    let database = empty_database().await;
    let pool = sqlx::PgPool::connect(&database.url).await.expect("connect");
    let before: Vec<_> =
        engine::pg_store::MIGRATOR.migrations.iter().filter(|m| m.version < CHARGES_PER_IDENTITY).cloned().collect();
    let older = sqlx::migrate::Migrator { migrations: Cow::Owned(before), ..sqlx::migrate::Migrator::DEFAULT };
    older.run(&pool).await.expect("migrations before 0017");
    // One endpoint with a daily policy that spent 4 units today and 7 yesterday.
    sqlx::raw_sql(
        "INSERT INTO humans (id, name) VALUES ('hu_1', 'alice'); \
         INSERT INTO endpoints (id, slug, name, owner_human_id, token_hash, verbs) \
           VALUES ('ep_1', 'agent-1', 'agent', 'hu_1', 'hash', '{claim_next}'); \
         INSERT INTO admission_policies (id, endpoint_id, queue, max_claims_per_window, window_period, window_tz, \
           window_start, created_at, updated_at) \
           VALUES ('ap_1', 'ep_1', 'inbox', 5, 'day', 'UTC', '00:00', now(), now()); \
         INSERT INTO admission_windows (policy_id, window_start, used, updated_at) VALUES \
           ('ap_1', date_trunc('day', now()), 4, now()), \
           ('ap_1', date_trunc('day', now()) - interval '1 day', 7, date_trunc('day', now()) - interval '1 minute');",
    )
    .execute(&pool)
    .await
    .expect("populate");

    engine::pg_store::MIGRATOR.run(&pool).await.expect("migrate forward");

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
