//! The simulation's Postgres side: a throwaway database per run behind the blocking bridge,
//! set-up SQL for principals, the damaged-row fault, and the SQL invariant checks at the end.

use crate::bridge::BridgeStore;
use crate::sim_store::SimStore;
use crate::sim_time::SimClock;
use crate::sql_invariants::Invariant;
use chrono::{DateTime, Utc};
use models::identity::QueueIdentity;
use models::model_store::{OutboxEntry, PushJournal};

/// A zone no zone database knows: evaluating the stored row must fail closed (REQ-9).
pub const UNKNOWN_ZONE: &str = "Mars/Olympus_Mons";

/// A fresh, migrated database on the test cluster (started on first use) and a bridge to it.
pub fn fresh(clock: &SimClock) -> (BridgeStore, engine::testing::TestDatabase) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime for the set-up: {e}"));
    let database = runtime.block_on(engine::testing::fresh_database());
    (BridgeStore::start(&database.url, clock.clone()), database)
}

/// Drops a run's database.
pub fn drop(database: &engine::testing::TestDatabase) {
    if let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
        runtime.block_on(engine::testing::drop_database(database));
    }
}

impl SimStore for BridgeStore {
    fn add_human(&self, name: &str, token_hash: &str) -> String {
        let (name, token_hash) = (name.to_string(), token_hash.to_string());
        self.call(move |s| async move {
            let id: String = sqlx::query_scalar(
                "INSERT INTO humans (id, name, instance_admin) \
                 VALUES ('hu_' || md5($1), $1, false) RETURNING id",
            )
            .bind(&name)
            .fetch_one(s.pool())
            .await?;
            sqlx::query("INSERT INTO api_tokens (token_hash, human_id, label) VALUES ($1, $2, 'simulation')")
                .bind(&token_hash)
                .bind(&id)
                .execute(s.pool())
                .await?;
            Ok::<_, sqlx::Error>(id)
        })
        .unwrap_or_else(|e| panic!("set-up: human {e}"))
    }

    /// The slug has the stores' shape, the name and 8 hex digits, so it is as long as the
    /// model's: a request naming the team is then the same size on both stores, and a large one
    /// (a batched create) splits into the same TCP segments, each with its seeded latency.
    fn add_team(&self, name: &str, owner_human_id: &str) -> (String, String) {
        let (name, owner) = (name.to_string(), owner_human_id.to_string());
        self.call(move |s| async move {
            let (id, slug): (String, String) = sqlx::query_as(
                "INSERT INTO teams (id, slug, name) VALUES ('tm_' || md5($1), $1 || '-' || left(md5($1), 8), $1) \
                 RETURNING id, slug",
            )
            .bind(&name)
            .fetch_one(s.pool())
            .await?;
            sqlx::query("INSERT INTO team_members (team_id, human_id, role) VALUES ($1, $2, 'owner')")
                .bind(&id)
                .bind(&owner)
                .execute(s.pool())
                .await?;
            Ok::<_, sqlx::Error>((id, slug))
        })
        .unwrap_or_else(|e| panic!("set-up: team {e}"))
    }

    fn corrupt_policy_zone(&self, identity: &QueueIdentity) {
        let identity = identity.clone();
        self.call(move |s| async move {
            sqlx::query(
                "UPDATE admission_policies SET window_tz = $1 WHERE queue = $2 \
                 AND endpoint_id IS NOT DISTINCT FROM $3 AND team_id IS NOT DISTINCT FROM $4",
            )
            .bind(UNKNOWN_ZONE)
            .bind(&identity.queue)
            .bind(identity.endpoint_id())
            .bind(identity.team_id())
            .execute(s.pool())
            .await
        })
        .unwrap_or_else(|e| panic!("fault: corrupt policy {e}"));
    }

    fn hook_outbox(&self) -> Vec<OutboxEntry> {
        type Row =
            (i64, String, serde_json::Value, i32, Option<String>, Option<String>, Option<DateTime<Utc>>, DateTime<Utc>);
        let rows: Vec<Row> = self
            .call(|s| async move {
                sqlx::query_as(
                    "SELECT id, hook_id, body, attempts, outcome, leased_by, leased_until, created_at \
                     FROM hook_outbox ORDER BY id",
                )
                .fetch_all(s.pool())
                .await
            })
            .unwrap_or_else(|e| panic!("check: read hook_outbox: {e}"));
        rows.into_iter()
            .map(|(id, hook_id, body, attempts, outcome, leased_by, leased_until, created_at)| OutboxEntry {
                id,
                hook_id,
                body,
                attempts,
                outcome,
                leased_by,
                leased_until,
                created_at,
            })
            .collect()
    }

    /// PostgreSQL keeps no history of its reopen watches (a row goes when it is rung), so "one
    /// reopen ring per reopening" is judged on the model's runs.
    fn push_journal(&self) -> Option<PushJournal> {
        None
    }

    fn final_check(&self) -> Vec<String> {
        match self.call(|s| async move { crate::sql_invariants::check(s.pool()).await }) {
            // A row the harness damaged on purpose no longer matches its audit trail; that is the
            // injected fault, not a finding.
            Ok(report) => report
                .violations
                .iter()
                .filter(|v| !(v.invariant == Invariant::AuditTrail && v.detail.contains(UNKNOWN_ZONE)))
                .map(|v| format!("sql {:?}: {}", v.invariant, v.detail))
                .collect(),
            Err(error) => vec![format!("the SQL invariant check could not run: {error}")],
        }
    }
}
