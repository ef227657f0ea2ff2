//! Webhooks: registration, and ingest of a signed delivery as one transaction that records the
//! delivery id and fans out one todo per target queue identity (contract §4; base-system §2).
//! A redelivery (same delivery id) creates nothing and charges nothing (SPEC-0030 REQ-3).

use super::{PgStore, db_error, finish, touched};
use chrono::{DateTime, Utc};
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::limits::WEBHOOK_SECRET_GRACE_SECONDS;
use models::store::{Ingested, PreviousSecret, WebhookRoute, WebhookSummary, Webhooks};
use models::todo::NewTodo;

impl PgStore {
    pub(crate) async fn create_webhook_tx(
        &self,
        owner: &str,
        name: &str,
        secret: &str,
        targets: &[QueueIdentity],
    ) -> Result<String> {
        let mut tx = self.begin().await?;
        let outcome = async {
            let id: String = sqlx::query_scalar(
                "INSERT INTO webhooks (id, name, owner_human_id, secret) \
                 VALUES ('wh_' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3) RETURNING id",
            )
            .bind(name)
            .bind(owner)
            .bind(secret)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            let endpoints: Vec<Option<&str>> = targets.iter().map(|t| t.endpoint_id()).collect();
            let teams: Vec<Option<&str>> = targets.iter().map(|t| t.team_id()).collect();
            let queues: Vec<&str> = targets.iter().map(|t| t.queue.as_str()).collect();
            sqlx::query(
                "INSERT INTO webhook_targets (webhook_id, endpoint_id, team_id, queue) \
                 SELECT $1, e, t, q FROM unnest($2::text[], $3::text[], $4::text[]) AS targets (e, t, q)",
            )
            .bind(&id)
            .bind(&endpoints)
            .bind(&teams)
            .bind(&queues)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            Ok(id)
        }
        .await;
        finish(tx, outcome).await
    }

    pub(crate) async fn list_webhooks_tx(&self, owner: &str) -> Result<Vec<WebhookSummary>> {
        let rows: Vec<WebhookRow> = sqlx::query_as(composed_sql!(
            "SELECT w.id, w.name, {TARGET_COLUMNS} FROM webhooks w WHERE w.owner_human_id = $1 ORDER BY w.created_at, w.id"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|row| WebhookSummary { id: row.id, name: row.name, targets: row.targets.into_identities() })
            .collect())
    }

    pub(crate) async fn delete_webhook_tx(&self, owner: &str, webhook_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM webhooks WHERE id = $1 AND owner_human_id = $2")
            .bind(webhook_id)
            .bind(owner)
            .execute(&self.pool)
            .await
            .map_err(db_error)
            .and_then(touched)
    }

    /// Issue #14: the replaced secret keeps verifying until `$now` + the grace, and takes the
    /// place of any earlier previous secret (the right-hand sides read the row before the update).
    pub(crate) async fn rotate_webhook_secret_tx(&self, owner: &str, webhook_id: &str, secret: &str) -> Result<()> {
        sqlx::query(
            "UPDATE webhooks SET secret = $3, previous_secret = secret, previous_secret_expires_at = \
             coalesce($4::timestamptz, clock_timestamp()) + make_interval(secs => $5::bigint) \
             WHERE id = $1 AND owner_human_id = $2",
        )
        .bind(webhook_id)
        .bind(owner)
        .bind(secret)
        .bind(self.now_param())
        .bind(WEBHOOK_SECRET_GRACE_SECONDS)
        .execute(&self.pool)
        .await
        .map_err(db_error)
        .and_then(touched)
    }

    pub(crate) async fn webhook_for_ingest_tx(&self, webhook_id: &str) -> Result<Option<WebhookRoute>> {
        let row: Option<RouteRow> = sqlx::query_as(composed_sql!(
            "SELECT w.name, w.secret, w.previous_secret, w.previous_secret_expires_at, \
             coalesce($2::timestamptz, clock_timestamp()) AS now, w.owner_human_id, {TARGET_COLUMNS} \
             FROM webhooks w WHERE w.id = $1"
        ))
        .bind(webhook_id)
        .bind(self.now_param())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let RouteRow { name, secret, previous_secret, previous_secret_expires_at, now, owner_human_id: owner, targets } =
            row;
        // Issue #14: the replaced secret only while its grace runs, on the database's clock.
        let previous_secret = PreviousSecret::offered_at(previous_secret, previous_secret_expires_at, now);
        // The owner's reach is read live: a target they no longer manage (they left the team,
        // lost its admin role) receives nothing from their webhook.
        let manages = self.human_scope(&owner).await?.map(|scope| scope.manages);
        let mut targets = targets.into_identities();
        targets.retain(|target| manages.as_ref().is_some_and(|reach| reach.contains(target)));
        Ok(Some(WebhookRoute { name, secret, previous_secret, targets }))
    }

    pub(crate) async fn ingest_tx(&self, webhook_id: &str, delivery_id: &str, todos: Vec<NewTodo>) -> Result<Ingested> {
        for todo in &todos {
            todo.validate()?;
        }
        let mut tx = self.begin().await?;
        let outcome = async {
            let now = self.clock_after_lock(&mut tx).await?;
            let capacity = self.capacity_on(&mut tx).await?.effective;
            // The delivery id decides under concurrency: the first insert wins, a redelivery
            // (even one racing the first) reads the winner's todos.
            let recorded = sqlx::query(
                "INSERT INTO webhook_deliveries (webhook_id, delivery_id, todo_ids, received_at) VALUES ($1, $2, '{}', $3) \
                 ON CONFLICT (webhook_id, delivery_id) DO NOTHING",
            )
            .bind(webhook_id)
            .bind(delivery_id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?
            .rows_affected();
            if recorded == 0 && !super::mutant_hooks::redelivery_treated_as_new() {
                let todo_ids: Vec<String> =
                    sqlx::query_scalar("SELECT todo_ids FROM webhook_deliveries WHERE webhook_id = $1 AND delivery_id = $2")
                        .bind(webhook_id)
                        .bind(delivery_id)
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(db_error)?;
                return Ok((Ingested { todo_ids, deduped: true }, vec![]));
            }
            if capacity > 0 {
                self.lock_intakes_sorted(&mut tx, &todos).await?;
            }
            let mut created = Vec::new();
            // Each copy is capped against its own queue identity; one full copy refuses the
            // whole delivery, and the rollback leaves its delivery id unrecorded so the
            // provider's retry is admitted later.
            for todo in todos {
                let made = self.create_in(&mut tx, &todo, None, Some(now), capacity).await?;
                created.push(made);
            }
            let todo_ids: Vec<String> = created.iter().map(|c| c.todo.id.clone()).collect();
            sqlx::query("UPDATE webhook_deliveries SET todo_ids = $3 WHERE webhook_id = $1 AND delivery_id = $2")
                .bind(webhook_id)
                .bind(delivery_id)
                .bind(&todo_ids)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            Ok((Ingested { todo_ids, deduped: false }, created))
        }
        .await;
        let (ingested, created) = match finish(tx, outcome).await {
            Ok(done) => done,
            Err(error) => {
                if error.code == models::error::Code::QueueFull
                    && let Some(queue) = error.extras.get("queue").and_then(serde_json::Value::as_str)
                {
                    self.counters.intake_refused(queue, "ingest");
                }
                return Err(error);
            }
        };
        for made in created.iter().filter(|c| !c.deduped) {
            self.counters.created(&made.todo.identity.queue, made.todo.created_by_kind.as_str());
        }
        if ingested.todo_ids.is_empty() && !ingested.deduped {
            return Err(Error::internal("a delivery created no todo"));
        }
        Ok(ingested)
    }
}

/// A webhook's targets as three arrays in insertion order, as `TargetsRow` names them: endpoint
/// id or '', team id or '', queue. `w` is the webhooks alias.
const TARGET_COLUMNS: &str = "\
    ARRAY(SELECT coalesce(t.endpoint_id, '') FROM webhook_targets t WHERE t.webhook_id = w.id ORDER BY t.ctid) \
      AS target_endpoint_ids, \
    ARRAY(SELECT coalesce(t.team_id, '') FROM webhook_targets t WHERE t.webhook_id = w.id ORDER BY t.ctid) \
      AS target_team_ids, \
    ARRAY(SELECT t.queue FROM webhook_targets t WHERE t.webhook_id = w.id ORDER BY t.ctid) AS target_queues";

#[derive(sqlx::FromRow)]
struct TargetsRow {
    target_endpoint_ids: Vec<String>,
    target_team_ids: Vec<String>,
    target_queues: Vec<String>,
}

impl TargetsRow {
    /// The targets as queue identities, in order.
    fn into_identities(self) -> Vec<QueueIdentity> {
        self.target_endpoint_ids
            .into_iter()
            .zip(self.target_team_ids)
            .zip(self.target_queues)
            .map(|((endpoint, team), queue)| {
                if endpoint.is_empty() {
                    QueueIdentity::team(team, queue)
                } else {
                    QueueIdentity::endpoint(endpoint, queue)
                }
            })
            .collect()
    }
}

/// A webhook as its owner lists it.
#[derive(sqlx::FromRow)]
struct WebhookRow {
    id: String,
    name: String,
    #[sqlx(flatten)]
    targets: TargetsRow,
}

/// A webhook as ingest routes a delivery through it.
#[derive(sqlx::FromRow)]
struct RouteRow {
    name: String,
    secret: String,
    previous_secret: Option<String>,
    previous_secret_expires_at: Option<DateTime<Utc>>,
    /// The instant the grace is judged at: `$now`, or the database's clock.
    now: DateTime<Utc>,
    owner_human_id: String,
    #[sqlx(flatten)]
    targets: TargetsRow,
}

/// The webhooks role on PostgreSQL: each method is one of the transactions above.
impl Webhooks for PgStore {
    async fn create_webhook(&self, owner: &str, name: &str, secret: &str, targets: &[QueueIdentity]) -> Result<String> {
        self.create_webhook_tx(owner, name, secret, targets).await
    }

    async fn list_webhooks(&self, owner_human_id: &str) -> Result<Vec<models::store::WebhookSummary>> {
        self.list_webhooks_tx(owner_human_id).await
    }

    async fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> Result<()> {
        self.delete_webhook_tx(owner_human_id, webhook_id).await
    }

    async fn rotate_webhook_secret(&self, owner_human_id: &str, webhook_id: &str, secret: &str) -> Result<()> {
        self.rotate_webhook_secret_tx(owner_human_id, webhook_id, secret).await
    }

    async fn webhook_for_ingest_unscoped(&self, webhook_id: &str) -> Result<Option<models::store::WebhookRoute>> {
        self.webhook_for_ingest_tx(webhook_id).await
    }

    async fn ingest(
        &self,
        webhook_id: &str,
        delivery_id: &str,
        todos: Vec<NewTodo>,
    ) -> Result<models::store::Ingested> {
        self.ingest_tx(webhook_id, delivery_id, todos).await
    }
}
