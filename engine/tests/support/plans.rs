//! Plans as PostgreSQL runs the store's own statements: `auto_explain` switched on for one test
//! database, and the plans read back from the throwaway cluster's log. No SQL is copied into a
//! test; a statement is matched by a fragment of its text.

use super::World;
use engine::{PgStore, PoolSettings};
use serde_json::Value;

/// One scan node of a plan: its type, the table it reads and the index it reads it through.
#[derive(Debug)]
pub struct Scan {
    pub node: String,
    pub relation: Option<String>,
    pub index: Option<String>,
}

/// Every node of an `EXPLAIN (FORMAT JSON)` plan (the `Plan` object), depth first.
pub fn scans(plan: &Value) -> Vec<Scan> {
    let mut found = Vec::new();
    collect_scans(plan, &mut found);
    found
}

fn collect_scans(plan: &Value, into: &mut Vec<Scan>) {
    let text = |key: &str| plan.get(key).and_then(Value::as_str).map(str::to_string);
    into.push(Scan {
        node: text("Node Type").unwrap_or_default(),
        relation: text("Relation Name"),
        index: text("Index Name"),
    });
    for child in plan.get("Plans").and_then(Value::as_array).into_iter().flatten() {
        collect_scans(child, into);
    }
}

/// Switches `auto_explain` on for new sessions of `world`'s database, runs `run` on a fresh
/// store (so its sessions load it), and returns the plans its database's sessions logged
/// meanwhile whose query text contains `fragment`, each with that text.
pub async fn logged_plans<F, Fut>(world: &World, fragment: &str, run: F) -> Vec<(String, Value)>
where
    F: FnOnce(PgStore) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let database = &world.db.name;
    for setting in [
        "session_preload_libraries = 'auto_explain'",
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_format = 'json'",
    ] {
        // `database` is the harness's name (digits and underscores); the settings are constants.
        sqlx::query(sqlx::AssertSqlSafe(format!("ALTER DATABASE {database} SET {setting}")))
            .execute(world.store.pool())
            .await
            .expect("configure auto_explain");
    }
    let log_path = engine::testing::cluster().root.join("postgres.log");
    let logged_before = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0) as usize;
    // One connection: PostgreSQL caches a prepared statement's plan per session, and a statement
    // settles on its generic plan only after five runs on one session. With a pool, a connection
    // given back a moment late (a busy machine) makes the next statement open another, and runs
    // spread over sessions never reach a generic plan.
    let store = world.store_with(PoolSettings { connections_max: 1, ..PoolSettings::default() }).await;
    run(store.clone()).await;
    store.pool().close().await;
    let log = std::fs::read(&log_path).expect("read the cluster log");
    let log = String::from_utf8_lossy(&log[logged_before.min(log.len())..]).into_owned();
    // Each plan follows "plan:" as one JSON document, its lines indented by a tab, on a line
    // whose prefix names the database (`pg_cluster`): the tests of this process run at once, each
    // on its own database, and all log here.
    let own_line = format!(" db={database} ");
    let pieces: Vec<&str> = log.split("plan:").collect();
    pieces
        .windows(2)
        .filter(|pair| pair[0].rsplit('\n').next().is_some_and(|line| line.contains(&own_line)))
        .filter_map(|pair| serde_json::Deserializer::from_str(pair[1]).into_iter::<Value>().next()?.ok())
        .filter_map(|plan| {
            let text = plan["Query Text"].as_str().filter(|text| text.contains(fragment))?.to_string();
            Some((text, plan["Plan"].clone()))
        })
        .collect()
}
