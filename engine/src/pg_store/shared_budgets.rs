//! Shared budgets on PostgreSQL (issue #52 item 2; `migrations/0024_shared_budgets.sql`): a
//! budget, its members and its audit, written in one transaction.
//!
//! A write serialises on two kinds of transaction lock, always in this order: the budget's name
//! (so a create and an update of one name cannot both read "absent"), then each member queue's,
//! sorted (so two budgets adding the same queue cannot both count three others and make it five).
//! Neither is a row lock a claim takes, so budget writes and claims never wait on each other here.

use super::rows::AuditRow;
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Utc};
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::shared_budget::{
    BudgetOwner, SHARED_BUDGETS_PER_QUEUE_MAX, SharedBudgetSpec, SharedBudgetView, too_many_budgets, validate_name,
};
use models::store::{AuditRecord, PolicyActor, SharedBudgets};
use models::window::WindowSpec;
use serde_json::Value;
use sqlx::{Postgres, Transaction};

/// A `shared_budgets` row with its members as JSON, in their order.
#[derive(sqlx::FromRow)]
struct BudgetRow {
    owner_human_id: Option<String>,
    owner_team_id: Option<String>,
    name: String,
    max_claims: i32,
    window_spec: Value,
    members: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl BudgetRow {
    fn into_view(self) -> Result<SharedBudgetView> {
        let owner = match (self.owner_human_id, self.owner_team_id) {
            (_, Some(team)) => BudgetOwner::Team(team),
            (Some(human), None) => BudgetOwner::Human(human),
            (None, None) => return Err(Error::internal("a shared budget without an owner")),
        };
        let window: WindowSpec = serde_json::from_value(self.window_spec).map_err(|error| {
            Error::internal(format!("shared budget {} has an unreadable window: {error}", self.name))
        })?;
        let members = self
            .members
            .as_array()
            .into_iter()
            .flatten()
            .map(|member| {
                let queue = member["queue"].as_str().unwrap_or_default();
                match (member["endpoint_id"].as_str(), member["team_id"].as_str()) {
                    (Some(endpoint), _) => QueueIdentity::endpoint(endpoint, queue),
                    (None, Some(team)) => QueueIdentity::team(team, queue),
                    (None, None) => QueueIdentity::endpoint("", queue),
                }
            })
            .collect();
        let spec = SharedBudgetSpec { name: self.name, max_claims: i64::from(self.max_claims), window, members };
        Ok(SharedBudgetView { owner, spec, created_at: self.created_at, updated_at: self.updated_at })
    }
}

/// The budgets of `$1` owners (by owner id), or the one named `$2` when it is not NULL, with
/// their members in order; by owner (humans first, as `BudgetOwner` orders) then name.
const BUDGETS: &str = "SELECT b.owner_human_id, b.owner_team_id, b.name, b.max_claims, b.window_spec, \
       coalesce(jsonb_agg(jsonb_build_object('endpoint_id', m.endpoint_id, 'team_id', m.team_id, 'queue', m.queue) \
                ORDER BY m.position) FILTER (WHERE m.budget_id IS NOT NULL), '[]'::jsonb) AS members, \
       b.created_at, b.updated_at \
     FROM shared_budgets b LEFT JOIN shared_budget_members m ON m.budget_id = b.id \
     WHERE b.owner_id = ANY($1) AND ($2::text IS NULL OR b.name = $2) \
     GROUP BY b.id ORDER BY b.owner_team_id IS NOT NULL, b.owner_id, b.name";

impl PgStore {
    async fn budgets(&self, owners: &[BudgetOwner], name: Option<&str>) -> Result<Vec<SharedBudgetView>> {
        let ids: Vec<&str> = owners.iter().map(BudgetOwner::id).collect();
        let rows: Vec<BudgetRow> =
            sqlx::query_as(BUDGETS).bind(&ids).bind(name).fetch_all(&self.pool).await.map_err(db_error)?;
        rows.into_iter().map(BudgetRow::into_view).collect()
    }

    /// The budget as this transaction sees it, after its name lock.
    async fn budget_in(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        owner: &BudgetOwner,
        name: &str,
    ) -> Result<Option<SharedBudgetView>> {
        let row: Option<BudgetRow> =
            sqlx::query_as(BUDGETS).bind([owner.id()]).bind(name).fetch_optional(&mut **tx).await.map_err(db_error)?;
        row.map(BudgetRow::into_view).transpose()
    }
}

fn owner_columns(owner: &BudgetOwner) -> (Option<&str>, Option<&str>) {
    match owner {
        BudgetOwner::Human(id) => (Some(id), None),
        BudgetOwner::Team(id) => (None, Some(id)),
    }
}

/// The write lock of one budget name (see the module's lock order).
async fn lock_name(tx: &mut Transaction<'static, Postgres>, owner: &BudgetOwner, name: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('shared_budget:' || $1 || '/' || $2, 0))")
        .bind(owner.id())
        .bind(name)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The membership locks of the member queues, in sorted order (see the module's lock order).
async fn lock_members(tx: &mut Transaction<'static, Postgres>, members: &[QueueIdentity]) -> Result<()> {
    let mut keys: Vec<String> =
        members.iter().map(|m| format!("shared_budget_member:{}/{}", m.owner_id(), m.queue)).collect();
    keys.sort();
    sqlx::query(
        "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) \
         FROM (SELECT k FROM unnest($1::text[]) AS k ORDER BY k) AS sorted",
    )
    .bind(&keys)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Refuses the first member already in `SHARED_BUDGETS_PER_QUEUE_MAX` other budgets.
async fn check_memberships(
    tx: &mut Transaction<'static, Postgres>,
    owner: &BudgetOwner,
    spec: &SharedBudgetSpec,
) -> Result<()> {
    let owners: Vec<&str> = spec.members.iter().map(QueueIdentity::owner_id).collect();
    let queues: Vec<&str> = spec.members.iter().map(|m| m.queue.as_str()).collect();
    let counts: Vec<i64> = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM shared_budget_members m JOIN shared_budgets b ON b.id = m.budget_id \
                 WHERE m.owner_id = k.owner_id AND m.queue = k.queue AND NOT (b.owner_id = $3 AND b.name = $4)) \
         FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k (owner_id, queue, n) ORDER BY k.n",
    )
    .bind(&owners)
    .bind(&queues)
    .bind(owner.id())
    .bind(&spec.name)
    .fetch_all(&mut **tx)
    .await
    .map_err(db_error)?;
    match counts.iter().position(|others| *others >= SHARED_BUDGETS_PER_QUEUE_MAX as i64) {
        Some(index) => Err(too_many_budgets(index)),
        None => Ok(()),
    }
}

#[allow(clippy::too_many_arguments)]
async fn budget_audit(
    tx: &mut Transaction<'static, Postgres>,
    owner: &BudgetOwner,
    name: &str,
    actor: &PolicyActor,
    action: &str,
    before: Option<Value>,
    after: Option<Value>,
    at: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO shared_budget_audit (budget_owner_id, name, actor_human_id, actor_endpoint_id, action, before, \
           after, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(owner.id())
    .bind(name)
    .bind(&actor.human_id)
    .bind(&actor.endpoint_id)
    .bind(action)
    .bind(before)
    .bind(after)
    .bind(at)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}

impl SharedBudgets for PgStore {
    async fn set_shared_budget(
        &self,
        owner: &BudgetOwner,
        spec: &SharedBudgetSpec,
        actor: &PolicyActor,
    ) -> Result<SharedBudgetView> {
        validate_name(&spec.name)?;
        let mut tx = self.begin().await?;
        let outcome = async {
            lock_name(&mut tx, owner, &spec.name).await?;
            lock_members(&mut tx, &spec.members).await?;
            let now = self.clock_after_lock(&mut tx).await?;
            let before = self.budget_in(&mut tx, owner, &spec.name).await?;
            check_memberships(&mut tx, owner, spec).await?;
            let (human, team) = owner_columns(owner);
            let id: String = sqlx::query_scalar(
                "INSERT INTO shared_budgets AS b (id, owner_human_id, owner_team_id, name, max_claims, window_spec, \
                   created_at, updated_at) \
                 VALUES ('sb_' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3, $4, $5, $6, $6) \
                 ON CONFLICT (owner_id, name) DO UPDATE SET max_claims = EXCLUDED.max_claims, \
                   window_spec = EXCLUDED.window_spec, updated_at = EXCLUDED.updated_at \
                 RETURNING b.id",
            )
            .bind(human)
            .bind(team)
            .bind(&spec.name)
            .bind(spec.max_claims as i32)
            .bind(spec.window.to_json())
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            sqlx::query("DELETE FROM shared_budget_members WHERE budget_id = $1")
                .bind(&id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            let endpoints: Vec<Option<&str>> = spec.members.iter().map(QueueIdentity::endpoint_id).collect();
            let teams: Vec<Option<&str>> = spec.members.iter().map(QueueIdentity::team_id).collect();
            let queues: Vec<&str> = spec.members.iter().map(|m| m.queue.as_str()).collect();
            sqlx::query(
                "INSERT INTO shared_budget_members (budget_id, endpoint_id, team_id, queue, position) \
                 SELECT $1, k.endpoint_id, k.team_id, k.queue, k.n - 1 \
                 FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS k (endpoint_id, team_id, queue, n)",
            )
            .bind(&id)
            .bind(&endpoints)
            .bind(&teams)
            .bind(&queues)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            let action = if before.is_some() { "update" } else { "create" };
            let before = before.map(|view| view.spec.to_json());
            budget_audit(&mut tx, owner, &spec.name, actor, action, before, Some(spec.to_json()), now).await?;
            tracing::info!(owner = owner.id(), budget = %spec.name, action, "shared budget saved");
            Ok(())
        }
        .await;
        finish(tx, outcome).await?;
        self.shared_budget(owner, &spec.name).await
    }

    async fn shared_budgets(&self, owners: &[BudgetOwner]) -> Result<Vec<SharedBudgetView>> {
        self.budgets(owners, None).await
    }

    async fn shared_budget(&self, owner: &BudgetOwner, name: &str) -> Result<SharedBudgetView> {
        self.budgets(std::slice::from_ref(owner), Some(name)).await?.pop().ok_or_else(Error::not_found)
    }

    async fn delete_shared_budget(&self, owner: &BudgetOwner, name: &str, actor: &PolicyActor) -> Result<()> {
        let mut tx = self.begin().await?;
        let outcome = async {
            lock_name(&mut tx, owner, name).await?;
            let now = self.clock_after_lock(&mut tx).await?;
            let Some(before) = self.budget_in(&mut tx, owner, name).await? else {
                return Err(Error::not_found());
            };
            sqlx::query("DELETE FROM shared_budgets WHERE owner_id = $1 AND name = $2")
                .bind(owner.id())
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            budget_audit(&mut tx, owner, name, actor, "delete", Some(before.spec.to_json()), None, now).await?;
            tracing::info!(owner = owner.id(), budget = name, "shared budget deleted");
            Ok(())
        }
        .await;
        finish(tx, outcome).await
    }

    async fn shared_budget_audit(&self, owner: &BudgetOwner, name: &str, limit: i64) -> Result<Vec<AuditRecord>> {
        let rows: Vec<AuditRow> = sqlx::query_as(
            "SELECT actor_human_id, actor_endpoint_id, at, action, before, after FROM shared_budget_audit \
             WHERE budget_owner_id = $1 AND name = $2 ORDER BY at DESC, id DESC LIMIT $3",
        )
        .bind(owner.id())
        .bind(name)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(AuditRow::into_record).collect())
    }
}
