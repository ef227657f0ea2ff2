//! Reads the board needs at scale (issue #29, "Scale"): per queue identity, how many todos wait
//! and how many are claimed, for an owner with hundreds of queues; one queue's todos a page at
//! a time, by keyset, with exact counts per state. The operator API lists todos with a limit
//! and no cursor (`list_todos`); these reads exist so a page of the board never stops at a
//! fixed cap nor reads more rows than it shows. Also an endpoint's MCP sessions, last seen
//! first, which only the board shows.
//!
//! Each statement filters by the caller's owners (the reach the board passes, or one identity
//! or endpoint the board already resolved within it), through the tenant indexes.

use super::rows::{TodoRow, identity_of};
use super::sql::LISTED_TODO_COLUMNS;
use super::{PgStore, db_error};
use chrono::{DateTime, Utc};
use models::error::Result;
use models::identity::{Owner, QueueIdentity};
use models::scope::Reach;
use models::todo::{Todo, TodoState};

/// Pending and claimed todos of one queue identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCounts {
    pub identity: QueueIdentity,
    pub pending: i64,
    pub claimed: i64,
}

/// One MCP session of an endpoint as the board lists it: when it began, when it was last seen
/// (its stream refreshes this while it lives), and whether a stream is open now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSeen {
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub streaming: bool,
}

/// `(endpoint_id, team_id, queue, pending, claimed)` as `queue_counts` reads them.
type CountsRow = (Option<String>, Option<String>, String, i64, i64);

/// Where a page of a queue's todos starts: after this todo, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoCursor {
    pub created_at: DateTime<Utc>,
    pub id: String,
}

/// One queue's todos, newest first, `$3`/`$4` the cursor (NULL for the first page). One
/// statement per owner kind, each on its tenant listing index.
const QUEUE_PAGE_ENDPOINT_SQL: &str = "SELECT {LISTED_TODO_COLUMNS} FROM todos t \
     WHERE t.endpoint_id = $1 AND t.queue = $2 \
       AND ($3::timestamptz IS NULL OR (t.created_at, t.id) < ($3, $4::text)) \
     ORDER BY t.created_at DESC, t.id DESC LIMIT $5";
const QUEUE_PAGE_TEAM_SQL: &str = "SELECT {LISTED_TODO_COLUMNS} FROM todos t \
     WHERE t.team_id = $1 AND t.queue = $2 \
       AND ($3::timestamptz IS NULL OR (t.created_at, t.id) < ($3, $4::text)) \
     ORDER BY t.created_at DESC, t.id DESC LIMIT $5";

impl PgStore {
    /// For each queue identity of `reach` holding pending or claimed todos, how many of each.
    pub async fn queue_counts(&self, reach: &Reach) -> Result<Vec<QueueCounts>> {
        let rows: Vec<CountsRow> = sqlx::query_as(
            "SELECT t.endpoint_id, t.team_id, t.queue, \
                    count(*) FILTER (WHERE t.state = 'pending'), count(*) FILTER (WHERE t.state = 'claimed') \
             FROM todos t \
             WHERE (t.endpoint_id = ANY($1) OR t.team_id = ANY($2)) AND t.state IN ('pending', 'claimed') \
             GROUP BY t.endpoint_id, t.team_id, t.queue",
        )
        .bind(&reach.endpoint_ids)
        .bind(&reach.team_ids)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        rows.into_iter()
            .map(|(endpoint_id, team_id, queue, pending, claimed)| {
                Ok(QueueCounts { identity: identity_of(endpoint_id, team_id, queue)?, pending, claimed })
            })
            .collect()
    }

    /// One page of `identity`'s todos, newest first: at most `limit` after `after`.
    pub async fn queue_todos_page(
        &self,
        identity: &QueueIdentity,
        after: Option<&TodoCursor>,
        limit: i64,
    ) -> Result<Vec<Todo>> {
        let template = match identity.owner {
            Owner::Endpoint(_) => QUEUE_PAGE_ENDPOINT_SQL,
            Owner::Team(_) => QUEUE_PAGE_TEAM_SQL,
        };
        let sql = sqlx::AssertSqlSafe(template.replace("{LISTED_TODO_COLUMNS}", LISTED_TODO_COLUMNS));
        let rows: Vec<TodoRow> = sqlx::query_as(sql)
            .bind(identity.owner_id())
            .bind(&identity.queue)
            .bind(after.map(|c| c.created_at))
            .bind(after.map(|c| c.id.clone()))
            .bind(limit.clamp(1, 1000))
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        rows.into_iter().map(TodoRow::into_todo).collect()
    }

    /// The endpoint's `limit` most recently seen MCP sessions, newest first. The board's caller
    /// has already checked that the viewer manages the endpoint.
    pub async fn endpoint_sessions(&self, endpoint_id: &str, limit: i64) -> Result<Vec<SessionSeen>> {
        let rows: Vec<(String, DateTime<Utc>, DateTime<Utc>, bool)> = sqlx::query_as(
            "SELECT id, created_at, last_seen_at, stream_replica IS NOT NULL FROM mcp_sessions \
             WHERE endpoint_id = $1 ORDER BY last_seen_at DESC, id LIMIT $2",
        )
        .bind(endpoint_id)
        .bind(limit.clamp(1, 100))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(id, created_at, last_seen_at, streaming)| SessionSeen { id, created_at, last_seen_at, streaming })
            .collect())
    }

    /// How many todos `identity` holds in each state, exactly (states with none are left out).
    pub async fn queue_state_counts(&self, identity: &QueueIdentity) -> Result<Vec<(TodoState, i64)>> {
        let sql = match identity.owner {
            Owner::Endpoint(_) => {
                "SELECT state, count(*) FROM todos WHERE endpoint_id = $1 AND queue = $2 GROUP BY state"
            }
            Owner::Team(_) => "SELECT state, count(*) FROM todos WHERE team_id = $1 AND queue = $2 GROUP BY state",
        };
        let rows: Vec<(String, i64)> = sqlx::query_as(sql)
            .bind(identity.owner_id())
            .bind(&identity.queue)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        rows.into_iter().map(|(state, count)| Ok((TodoState::parse("state", &state)?, count))).collect()
    }
}
