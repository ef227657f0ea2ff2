//! The lease holder's verbs (heartbeat, complete, fail, release) in one statement each: the
//! common case, where the caller holds the lease on a todo it may act on, costs one round trip
//! instead of a transaction of five (issue #15).
//!
//! Each statement changes the row only if the caller holds its lease (`HOLDS`), with the update
//! itself as the row's lock, and closes the attempt, all in one autocommit statement. When it
//! changes nothing, the caller does not hold the lease right now, and the verb runs its
//! step-by-step transaction in `lifecycle.rs`, which says exactly why (`not_found`, `forbidden`,
//! `conflict`) or succeeds if the lease changed hands back in between. So the rules live in one
//! place: who may act on a todo is `Actor::todo_access` (bound as data), when a failed todo is
//! retried is `retry_backoff` (bound as a table), and every refusal is decided in Rust.
//!
//! Must never succeed where the transaction would refuse: the `HOLDS` predicate is the
//! transaction's success condition (claimed, by this caller, in a queue it may act on), nothing
//! looser.

use super::rows::TodoRow;
use super::sql::TODO_COLUMNS;
use super::{PgStore, db_error};
use models::error::Result;
use models::scope::{Actor, TodoAccess};
use models::todo::{MAX_ATTEMPTS_LIMIT, Todo, retry_backoff};
use serde_json::Value;
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::QueryAs;
use std::sync::LazyLock;

/// Todo `t` is claimed by `$2`, and the caller may act on its queue (`$4`..`$7`, a
/// [`HeldAccess`]: the granted queues of each owner kind as `queue/owner` keys, and the owners
/// all of whose queues it may act on). Each access test is one `= ANY` over a bound array: no set
/// to build per call, which an agent granted 200 queues would pay for on every verb.
const HOLDS: &str = "t.state = 'claimed' AND t.owner = $2 \
       AND (t.queue || '/' || t.endpoint_id = ANY($4::text[]) OR t.endpoint_id = ANY($5::text[]) \
         OR t.queue || '/' || t.team_id = ANY($6::text[]) OR t.team_id = ANY($7::text[]))";

/// The `FROM` and `WHERE` of a verb's update of todo `$1`, as `t`, if the caller [`HOLDS`] it,
/// with the clock (`$3`, or the database's) as `clock.now`.
///
/// The verb's own `UPDATE` is the lock: no `SELECT ... FOR UPDATE` first, because locking a row
/// writes a WAL record of its own, one more per job than the update that follows it. Under READ
/// COMMITTED, an update that meets a row changed since its snapshot waits for that writer and
/// tests this predicate again on the row as committed, so it changes the row only if the caller
/// still holds the lease then.
const HELD: &str = "FROM (SELECT coalesce($3::timestamptz, clock_timestamp()) AS now) clock \
     WHERE t.id = $1 AND {HOLDS}";

/// Heartbeat: the lease runs `$8` seconds from now.
const HEARTBEAT: &str = "UPDATE todos t SET lease_expires_at = clock.now + $8::bigint * interval '1 second', \
       updated_at = clock.now {HELD} RETURNING {TODO_COLUMNS}";

/// Complete with result `$8`; the attempt closes as `completed`.
const COMPLETE: &str = "WITH changed AS ( \
       UPDATE todos t SET state = 'done', result = $8, completed_at = clock.now, lease_expires_at = NULL, \
         updated_at = clock.now {HELD} RETURNING {TODO_COLUMNS}), \
     closed AS ( \
       UPDATE todo_attempts a SET ended_at = changed.updated_at, outcome = 'completed' \
       FROM changed WHERE a.todo_id = changed.id AND a.ended_at IS NULL) \
     SELECT * FROM changed";

/// The todos of the list `$1` that the caller [`HOLDS`], as a CTE `held` that locks them in id
/// order, so two such calls never wait on each other in a cycle, and `clock`. Complete of
/// several locks them all first, as it changes them only if the caller holds every one.
const HELD_MANY: &str = "held AS ( \
       SELECT t.id FROM todos t WHERE t.id = ANY($1::text[]) AND {HOLDS} ORDER BY t.id FOR UPDATE), \
     clock AS (SELECT held.id, coalesce($3::timestamptz, clock_timestamp()) AS now FROM held)";

/// Complete of several todos (`$1` a list of ids, issue #31 item 2) with result `$8`: all of
/// them, if the caller holds every one, else none (then the step-by-step transaction decides).
/// The rows are locked in id order, so two such calls never wait on each other in a cycle.
const COMPLETE_MANY: &str = "WITH {HELD_MANY}, \
     every AS (SELECT count(*) = cardinality($1::text[]) AS held FROM held), \
     changed AS ( \
       UPDATE todos t SET state = 'done', result = $8, completed_at = clock.now, lease_expires_at = NULL, \
         updated_at = clock.now \
       FROM clock, every WHERE t.id = clock.id AND every.held RETURNING {TODO_COLUMNS}), \
     closed AS ( \
       UPDATE todo_attempts a SET ended_at = changed.updated_at, outcome = 'completed' \
       FROM changed WHERE a.todo_id = changed.id AND a.ended_at IS NULL) \
     SELECT * FROM changed";

/// Fail with result `$8`: below `max_attempts` the todo parks until now plus the backoff for the
/// attempt that failed (`$9[attempt]`, seconds, from `retry_backoff`); at it, it is dead-lettered.
/// The attempt closes as `failed`.
const FAIL: &str = "WITH changed AS ( \
       UPDATE todos t SET state = 'failed', result = $8, lease_expires_at = NULL, updated_at = clock.now, \
         next_retry_at = CASE WHEN t.attempt < t.max_attempts THEN clock.now \
           + ($9::bigint[])[least(greatest(t.attempt, 1), cardinality($9::bigint[]))] * interval '1 second' END \
       {HELD} RETURNING {TODO_COLUMNS}), \
     closed AS ( \
       UPDATE todo_attempts a SET ended_at = changed.updated_at, outcome = 'failed' \
       FROM changed WHERE a.todo_id = changed.id AND a.ended_at IS NULL) \
     SELECT * FROM changed";

/// Release: back to pending with the attempt unchanged; the attempt closes as `released`.
const RELEASE: &str = "WITH changed AS ( \
       UPDATE todos t SET state = 'pending', owner = NULL, claimed_by_endpoint_id = NULL, lease_expires_at = NULL, \
         updated_at = clock.now {HELD} RETURNING {TODO_COLUMNS}), \
     closed AS ( \
       UPDATE todo_attempts a SET ended_at = changed.updated_at, outcome = 'released' \
       FROM changed WHERE a.todo_id = changed.id AND a.ended_at IS NULL) \
     SELECT * FROM changed";

/// `retry_backoff` for attempts 1..=MAX_ATTEMPTS_LIMIT, in seconds: the rule as a table the
/// `FAIL` statement indexes by the failed attempt (an attempt past the table uses its last entry,
/// which `retry_backoff`'s cap makes right).
static BACKOFF_SECONDS: LazyLock<Vec<i64>> =
    LazyLock::new(|| (1..=MAX_ATTEMPTS_LIMIT).map(|attempt| retry_backoff(attempt).num_seconds()).collect());

/// A held-verb statement's text with the shared parts spelled out: built once per process, not
/// on every call of these hot-path verbs.
type Statement = LazyLock<String>;

fn spelled_out(verb: &str) -> String {
    verb.replace("{HELD_MANY}", HELD_MANY)
        .replace("{HELD}", HELD)
        .replace("{HOLDS}", HOLDS)
        .replace("{TODO_COLUMNS}", TODO_COLUMNS)
}

static HEARTBEAT_SQL: Statement = LazyLock::new(|| spelled_out(HEARTBEAT));
static COMPLETE_SQL: Statement = LazyLock::new(|| spelled_out(COMPLETE));
static FAIL_SQL: Statement = LazyLock::new(|| spelled_out(FAIL));
static RELEASE_SQL: Statement = LazyLock::new(|| spelled_out(RELEASE));
static COMPLETE_MANY_SQL: Statement = LazyLock::new(|| spelled_out(COMPLETE_MANY));

type HeldQuery = QueryAs<'static, Postgres, TodoRow, PgArguments>;

/// [`TodoAccess`] as the `HOLDS` predicate reads it. A granted queue is the key `queue/owner`: a
/// queue name is `[a-z0-9._-]` (contract §2), so its key's first `/` ends it and no two grants
/// share a key. An owner with no queue named (a human's reach) is every queue of that owner.
#[derive(Debug, Default, PartialEq, Eq)]
struct HeldAccess {
    endpoint_queue_keys: Vec<String>,
    endpoint_ids_all_queues: Vec<String>,
    team_queue_keys: Vec<String>,
    team_ids_all_queues: Vec<String>,
}

impl HeldAccess {
    fn new(access: TodoAccess) -> Self {
        fn split(ids: Vec<String>, queues: Vec<Option<String>>) -> (Vec<String>, Vec<String>) {
            let (mut keys, mut all_queues) = (Vec::new(), Vec::new());
            for (id, queue) in ids.into_iter().zip(queues) {
                match queue {
                    Some(queue) => keys.push(format!("{queue}/{id}")),
                    None => all_queues.push(id),
                }
            }
            (keys, all_queues)
        }
        let (endpoint_queue_keys, endpoint_ids_all_queues) = split(access.endpoint_ids, access.endpoint_queues);
        let (team_queue_keys, team_ids_all_queues) = split(access.team_ids, access.team_queues);
        HeldAccess { endpoint_queue_keys, endpoint_ids_all_queues, team_queue_keys, team_ids_all_queues }
    }
}

impl PgStore {
    /// Binds `$1`..`$7` of a held-verb statement: the todo, the caller's holder label, the clock
    /// and the queues the caller may act on.
    fn held_query<Id>(&self, statement: &'static Statement, actor: &Actor, id: Id) -> HeldQuery
    where
        Id: 'static + Send + sqlx::Encode<'static, Postgres> + sqlx::Type<Postgres>,
    {
        let access = HeldAccess::new(actor.todo_access());
        sqlx::query_as(sqlx::AssertSqlSafe(statement.as_str()))
            .bind(id)
            .bind(actor.label())
            .bind(self.now_param())
            .bind(access.endpoint_queue_keys)
            .bind(access.endpoint_ids_all_queues)
            .bind(access.team_queue_keys)
            .bind(access.team_ids_all_queues)
    }

    /// Runs a held-verb statement: the changed todo, or `None` when the caller does not hold the
    /// lease (then the step-by-step transaction decides).
    async fn run_held(&self, query: HeldQuery) -> Result<Option<Todo>> {
        let row = query.fetch_optional(&self.pool).await.map_err(db_error)?;
        row.map(TodoRow::into_todo).transpose()
    }

    pub(crate) async fn heartbeat_held(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Option<Todo>> {
        self.run_held(self.held_query(&HEARTBEAT_SQL, actor, id.to_string()).bind(lease_seconds)).await
    }

    pub(crate) async fn complete_held(&self, actor: &Actor, id: &str, result: &Option<Value>) -> Result<Option<Todo>> {
        self.run_held(self.held_query(&COMPLETE_SQL, actor, id.to_string()).bind(result.clone())).await
    }

    pub(crate) async fn fail_held(&self, actor: &Actor, id: &str, result: &Option<Value>) -> Result<Option<Todo>> {
        let query =
            self.held_query(&FAIL_SQL, actor, id.to_string()).bind(result.clone()).bind(BACKOFF_SECONDS.as_slice());
        self.run_held(query).await
    }

    pub(crate) async fn release_held(&self, actor: &Actor, id: &str) -> Result<Option<Todo>> {
        self.run_held(self.held_query(&RELEASE_SQL, actor, id.to_string())).await
    }

    /// `COMPLETE_MANY`: the completed todos in id order, or none when the caller does not hold
    /// every one of `ids` right now.
    pub(crate) async fn complete_many_held(
        &self,
        actor: &Actor,
        ids: &[String],
        result: &Option<Value>,
    ) -> Result<Vec<Todo>> {
        let query = self.held_query(&COMPLETE_MANY_SQL, actor, ids.to_vec()).bind(result.clone());
        let rows = query.fetch_all(&self.pool).await.map_err(db_error)?;
        rows.into_iter().map(TodoRow::into_todo).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_queues_become_keys_and_a_whole_reach_stays_owners() {
        let access = TodoAccess {
            endpoint_ids: vec!["ep_1".into(), "ep_2".into()],
            endpoint_queues: vec![Some("inbox".into()), None],
            team_ids: vec!["tm_1".into()],
            team_queues: vec![Some("triage.v2".into())],
        };
        assert_eq!(
            HeldAccess::new(access),
            HeldAccess {
                endpoint_queue_keys: vec!["inbox/ep_1".into()],
                endpoint_ids_all_queues: vec!["ep_2".into()],
                team_queue_keys: vec!["triage.v2/tm_1".into()],
                team_ids_all_queues: vec![],
            }
        );
    }
}
