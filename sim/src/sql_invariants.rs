//! The invariants every test layer checks (design.md), checked afterwards in SQL against what a
//! run left in PostgreSQL: `admission_windows` and `admission_charges` (the usage rows and the
//! ledger, both kept per queue identity), `todo_attempts` (one row per committed claim, closed
//! with its outcome), `todos`, `admission_policies` and `admission_audit`.
//!
//! Governing: SPEC-0030 REQ-3 (charging equality), REQ-4 (no over-admission), REQ-1 (no policy,
//! no change), REQ-10 (every change audited), and the base queue's "nothing lost".
//!
//! Windows are calendar windows in a policy's zone, so which window a claim belongs to is
//! computed here in Rust with `models::window`, never re-derived in SQL. A policy can change,
//! be deleted and be re-created during a run; each queue identity's history is rebuilt from
//! `admission_audit` (each `after` value from its `at`, a delete as "no policy"), and the
//! charges are judged per identity over that whole history (issue #28). The audit's `at` is read before the change waits for the policy lock, so a claim that
//! committed up to `CheckOptions::policy_change_grace` after it may still have run under the
//! previous version: every check takes each version "possibly in force" at an instant into
//! account and flags only what no possible version allows. A check never needs the run to have
//! recorded anything beyond the database. Must never write to the database.

use chrono::{DateTime, Duration, Utc};
use models::admission::Policy;
use serde_json::Value;
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet};

mod judges;

use judges::{additional_ranks_within_limit, in_flight, ledger_equality, place_claims, ranks_within_limit, usage_rows};

/// Violations kept per invariant; the count beyond is still reported.
const VIOLATIONS_PER_INVARIANT_MAX: usize = 25;
/// Rows one SQL check reports at most.
const SQL_ROWS_MAX: i64 = 25;

/// The invariant a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// (1) used == claims committed in the window (REQ-3).
    ChargingEquality,
    /// (2) no window charged above `max_claims_per_window` as it stood (REQ-4).
    WindowBudget,
    /// (3) in flight never above `max_in_flight` when a claim committed (REQ-4).
    InFlightCap,
    /// (4) every todo in one consistent state, attempts within bounds, one holder at a time.
    NothingLost,
    /// (5) no admission row for a queue identity (or a time) without a charging policy (REQ-1).
    NoPolicyNoChange,
    /// Every stored policy is its audit trail's last `after` (REQ-10).
    AuditTrail,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub detail: String,
}

/// What `check` found: violations (empty = pass) and counts that show the run did something.
#[derive(Debug, Clone, Default)]
pub struct InvariantReport {
    pub violations: Vec<Violation>,
    /// Violations not listed because of `VIOLATIONS_PER_INVARIANT_MAX`, per invariant.
    pub violations_omitted: BTreeMap<String, usize>,
    /// Rows in `todo_attempts`: one per committed claim.
    pub claims_committed: i64,
    /// Sum of `admission_windows.used`.
    pub units_charged: i64,
    pub todos_by_state: BTreeMap<String, i64>,
    /// Closed attempts by outcome (`completed`, `released`, `lease_expired`, `reaped`, …).
    pub attempts_by_outcome: BTreeMap<String, i64>,
    /// Claims that followed a lapsed claim of the same todo (closed `lease_expired` by the claim
    /// itself, or `reaped` by the reaper first).
    pub takeovers: i64,
    pub policies: usize,
    /// Windows (policy, window_start) compared for charging equality.
    pub windows_checked: usize,
    /// Committed claims whose window depends on which policy version was in force (near a change
    /// of window definition or of whether the policy charges); they bound, not fix, the count.
    pub claims_ambiguous: usize,
}

impl InvariantReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn has(&self, invariant: Invariant) -> bool {
        self.violations.iter().any(|v| v.invariant == invariant)
    }

    fn violate(&mut self, invariant: Invariant, detail: String) {
        if self.violations.iter().filter(|v| v.invariant == invariant).count() < VIOLATIONS_PER_INVARIANT_MAX {
            self.violations.push(Violation { invariant, detail });
        } else {
            *self.violations_omitted.entry(format!("{invariant:?}")).or_default() += 1;
        }
    }
}

impl std::fmt::Display for InvariantReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "claims committed {}, units charged {}, takeovers {}, todos {:?}, outcomes {:?}, policies {}, \
             windows checked {}, claims near a policy change (bounded, not exact) {}",
            self.claims_committed,
            self.units_charged,
            self.takeovers,
            self.todos_by_state,
            self.attempts_by_outcome,
            self.policies,
            self.windows_checked,
            self.claims_ambiguous
        )?;
        for violation in &self.violations {
            writeln!(f, "  VIOLATION {:?}: {}", violation.invariant, violation.detail)?;
        }
        if !self.violations_omitted.is_empty() {
            writeln!(f, "  and more, not listed: {:?}", self.violations_omitted)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
pub struct CheckOptions {
    /// How long after its audited `at` a policy change may still be waiting for the policy lock
    /// (claims ahead of it commit under the previous version meanwhile).
    pub policy_change_grace: Duration,
    /// The same for a policy's creation, which waits on no claim (there is no row to lock yet),
    /// only for its own statements to commit.
    pub policy_creation_grace: Duration,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions { policy_change_grace: Duration::seconds(5), policy_creation_grace: Duration::seconds(1) }
    }
}

/// Checks every invariant with the default options.
pub async fn check(pool: &PgPool) -> Result<InvariantReport, sqlx::Error> {
    check_with(pool, &CheckOptions::default()).await
}

pub async fn check_with(pool: &PgPool, options: &CheckOptions) -> Result<InvariantReport, sqlx::Error> {
    let mut report = InvariantReport::default();
    counts(pool, &mut report).await?;
    for (invariant, what, sql) in SQL_CHECKS {
        // Constant text from this module; nothing is interpolated.
        let rows: Vec<String> = sqlx::query_scalar(*sql).bind(SQL_ROWS_MAX).fetch_all(pool).await?;
        for row in rows {
            report.violate(*invariant, format!("{what}: {row}"));
        }
    }
    admission_checks(pool, options, &mut report).await?;
    Ok(report)
}

async fn counts(pool: &PgPool, report: &mut InvariantReport) -> Result<(), sqlx::Error> {
    report.claims_committed = sqlx::query_scalar("SELECT count(*) FROM todo_attempts").fetch_one(pool).await?;
    report.units_charged =
        sqlx::query_scalar("SELECT coalesce(sum(used), 0)::bigint FROM admission_windows").fetch_one(pool).await?;
    let states: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM todos GROUP BY state ORDER BY state").fetch_all(pool).await?;
    report.todos_by_state = states.into_iter().collect();
    let outcomes: Vec<(Option<String>, i64)> =
        sqlx::query_as("SELECT outcome, count(*) FROM todo_attempts GROUP BY outcome ORDER BY outcome")
            .fetch_all(pool)
            .await?;
    report.attempts_by_outcome =
        outcomes.into_iter().map(|(outcome, n)| (outcome.unwrap_or_else(|| "open".into()), n)).collect();
    report.takeovers = sqlx::query_scalar(
        "SELECT count(*) FROM todo_attempts a JOIN todo_attempts p ON p.todo_id = a.todo_id AND p.seq = a.seq - 1 \
         WHERE p.outcome IN ('lease_expired', 'reaped')",
    )
    .fetch_one(pool)
    .await?;
    Ok(())
}

/// (4) where SQL alone decides: each query returns one line per offending row.
const SQL_CHECKS: &[(Invariant, &str, &str)] = &[
    (
        Invariant::NothingLost,
        "a todo's fields contradict its state (claimed needs a lease and an owner; pending has neither)",
        "SELECT format('todo %s state %s owner %s claimed_by %s lease %s completed_at %s next_retry_at %s attempt %s/%s', \
           id, state, owner, claimed_by_endpoint_id, lease_expires_at, completed_at, next_retry_at, attempt, max_attempts) \
         FROM todos WHERE NOT coalesce(CASE state \
           WHEN 'pending' THEN lease_expires_at IS NULL AND owner IS NULL AND claimed_by_endpoint_id IS NULL \
           WHEN 'claimed' THEN lease_expires_at IS NOT NULL AND owner IS NOT NULL AND claimed_at IS NOT NULL \
           WHEN 'done' THEN lease_expires_at IS NULL AND completed_at IS NOT NULL \
           WHEN 'failed' THEN lease_expires_at IS NULL AND (next_retry_at IS NULL) = (attempt >= max_attempts) \
           WHEN 'discarded' THEN lease_expires_at IS NULL \
           ELSE false END, false) \
         ORDER BY id LIMIT $1",
    ),
    (
        Invariant::NothingLost,
        "open attempts disagree with the todo (a claimed todo has exactly one, its owner's, from claimed_at; \
         any other state has none)",
        "SELECT format('todo %s state %s owner %s claimed_at %s: %s open attempts, claimants %s, started %s', \
           t.id, t.state, t.owner, t.claimed_at, count(a.seq), string_agg(a.claimant, ','), min(a.started_at)) \
         FROM todos t LEFT JOIN todo_attempts a ON a.todo_id = t.id AND a.ended_at IS NULL GROUP BY t.id \
         HAVING count(a.seq) <> CASE WHEN t.state = 'claimed' THEN 1 ELSE 0 END \
           OR (t.state = 'claimed' AND (min(a.claimant) IS DISTINCT FROM t.owner \
                                        OR min(a.started_at) IS DISTINCT FROM t.claimed_at)) \
         ORDER BY t.id LIMIT $1",
    ),
    (
        Invariant::NothingLost,
        "a todo was held by two claims at once, or its attempts are out of order",
        "SELECT format('todo %s attempt %s [%s, %s) then attempt %s from %s', todo_id, seq, started_at, \
           coalesce(ended_at::text, 'open'), next_seq, next_started) \
         FROM (SELECT todo_id, seq, started_at, ended_at, row_number() OVER w AS ordinal, \
                 lead(seq) OVER w AS next_seq, lead(started_at) OVER w AS next_started \
               FROM todo_attempts WINDOW w AS (PARTITION BY todo_id ORDER BY seq)) x \
         WHERE seq <> ordinal OR ended_at < started_at \
            OR (next_seq IS NOT NULL AND (ended_at IS NULL OR ended_at > next_started)) \
         ORDER BY todo_id, seq LIMIT $1",
    ),
    (
        // Release keeps the attempt and a pending todo is claimable whatever its attempt, so each
        // release may let one later claim go past max_attempts (engine claim.rs says so).
        Invariant::NothingLost,
        "attempt above max_attempts (plus releases) or above the claims committed",
        "SELECT format('todo %s attempt %s max_attempts %s, %s claims committed, %s released', \
           t.id, t.attempt, t.max_attempts, coalesce(a.n, 0), coalesce(a.released, 0)) \
         FROM todos t LEFT JOIN (SELECT todo_id, count(*) AS n, count(*) FILTER (WHERE outcome = 'released') AS released \
                                 FROM todo_attempts GROUP BY todo_id) a ON a.todo_id = t.id \
         WHERE t.attempt > t.max_attempts + coalesce(a.released, 0) OR t.attempt > coalesce(a.n, 0) \
         ORDER BY t.id LIMIT $1",
    ),
];

/// The queue identity a policy, a charge or a todo belongs to: (endpoint_id, team_id, queue).
type Identity = (Option<String>, Option<String>, String);

fn label(identity: &Identity) -> String {
    match identity {
        (Some(endpoint), _, queue) => format!("endpoint:{endpoint}/{queue}"),
        (_, Some(team), queue) => format!("team:{team}/{queue}"),
        (None, None, queue) => format!("?/{queue}"),
    }
}

/// One policy version and the instant from which it may have been in force. `None` is "no policy"
/// (before the first create, or after a delete).
#[derive(Debug, Clone)]
struct Version {
    from: DateTime<Utc>,
    policy: Option<Policy>,
}

/// The policy history of one queue identity, across every delete and re-create (issue #28: the
/// charges belong to the identity, not to a policy row).
struct History {
    identity: Identity,
    /// Oldest first; the first is always "no policy yet".
    versions: Vec<Version>,
}

impl History {
    /// Versions that may have been in force at `t`: version i from its `from` until the next
    /// version's `from` plus the grace.
    fn possible_at(&self, t: DateTime<Utc>, grace: &CheckOptions) -> Vec<&Option<Policy>> {
        self.versions
            .iter()
            .enumerate()
            .filter(|(i, v)| {
                let grace = if *i == 0 { grace.policy_creation_grace } else { grace.policy_change_grace };
                let until = self.versions.get(i + 1).map(|next| next.from + grace);
                v.from <= t && until.is_none_or(|until| until > t)
            })
            .map(|(_, v)| &v.policy)
            .collect()
    }

    /// Every charging window definition the identity ever had.
    fn windows(&self) -> impl Iterator<Item = &models::window::WindowSpec> {
        self.versions.iter().filter_map(|v| v.policy.as_ref().filter(|p| p.charges())?.window.as_ref())
    }
}

struct Attempt {
    todo_id: String,
    seq: i32,
    started_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
}

/// What the store holds for one identity: its usage rows and its ledger (`models::charges`).
#[derive(Default)]
struct Stored {
    /// `admission_windows`: units per window start.
    windows: BTreeMap<DateTime<Utc>, i64>,
    /// `admission_charges`: units per whole minute.
    ledger: BTreeMap<DateTime<Utc>, i64>,
}

/// (1), (2), (3), (5), and the audit trail, per queue identity over its whole history.
async fn admission_checks(
    pool: &PgPool,
    options: &CheckOptions,
    report: &mut InvariantReport,
) -> Result<(), sqlx::Error> {
    let histories = histories(pool, report).await?;
    report.policies = histories.len();
    let mut stored: BTreeMap<Identity, Stored> = BTreeMap::new();
    type UsageRow = (Option<String>, Option<String>, String, DateTime<Utc>, i32);
    let windows: Vec<UsageRow> =
        sqlx::query_as("SELECT endpoint_id, team_id, queue, window_start, used FROM admission_windows")
            .fetch_all(pool)
            .await?;
    for (endpoint_id, team_id, queue, start, used) in windows {
        stored.entry((endpoint_id, team_id, queue)).or_default().windows.insert(start, i64::from(used));
    }
    let ledger: Vec<UsageRow> =
        sqlx::query_as("SELECT endpoint_id, team_id, queue, minute, units FROM admission_charges")
            .fetch_all(pool)
            .await?;
    for (endpoint_id, team_id, queue, minute, units) in ledger {
        stored.entry((endpoint_id, team_id, queue)).or_default().ledger.insert(minute, i64::from(units));
    }
    for identity in stored.keys().filter(|identity| !histories.iter().any(|h| &h.identity == *identity)) {
        report.violate(
            Invariant::NoPolicyNoChange,
            format!("{}: charges stored for an identity that never had a policy", label(identity)),
        );
    }
    for history in &histories {
        let attempts = attempts_of(pool, &history.identity).await?;
        let empty = Stored::default();
        let stored = stored.get(&history.identity).unwrap_or(&empty);
        let placed = place_claims(history, &attempts, options, report);
        ledger_equality(history, &placed, &stored.ledger, report);
        usage_rows(history, &placed, stored, options, report);
        ranks_within_limit(history, &placed, options, report);
        additional_ranks_within_limit(history, &placed, options, report);
        in_flight(history, &attempts, options, report);
    }
    Ok(())
}

/// One row of `admission_policies`, as stored.
#[derive(sqlx::FromRow)]
struct PolicyRow {
    endpoint_id: Option<String>,
    team_id: Option<String>,
    queue: String,
    max_in_flight: Option<i32>,
    max_claims_per_window: Option<i32>,
    window_period: Option<String>,
    window_tz: Option<String>,
    window_start: Option<String>,
    window_weekday: Option<String>,
    additional_windows: Option<Value>,
    created_at: DateTime<Utc>,
}

/// One `admission_audit` record.
#[derive(sqlx::FromRow)]
struct AuditRow {
    endpoint_id: Option<String>,
    team_id: Option<String>,
    queue: String,
    action: String,
    after: Option<Value>,
    at: DateTime<Utc>,
}

/// Every identity's versions, from its audit records (create, update, delete), each checked
/// against the stored row (REQ-10); an identity whose policy has no audit gets the row itself
/// from its creation.
async fn histories(pool: &PgPool, report: &mut InvariantReport) -> Result<Vec<History>, sqlx::Error> {
    let rows: Vec<PolicyRow> = sqlx::query_as(
        "SELECT endpoint_id, team_id, queue, max_in_flight, max_claims_per_window, window_period, window_tz, \
           window_start, window_weekday, additional_windows, created_at FROM admission_policies",
    )
    .fetch_all(pool)
    .await?;
    let audit: Vec<AuditRow> =
        sqlx::query_as("SELECT endpoint_id, team_id, queue, action, after, at FROM admission_audit ORDER BY at, id")
            .fetch_all(pool)
            .await?;
    let mut versions: BTreeMap<Identity, Vec<Version>> = BTreeMap::new();
    for record in audit {
        let identity = (record.endpoint_id, record.team_id, record.queue);
        let policy = match (record.action.as_str(), record.after.as_ref().map(Policy::from_request)) {
            ("delete", _) => None,
            (_, Some(Ok(policy))) => Some(policy),
            _ => {
                report.violate(
                    Invariant::AuditTrail,
                    format!("{}: audit record at {} has no valid after", label(&identity), record.at),
                );
                continue;
            }
        };
        versions.entry(identity).or_default().push(Version { from: record.at, policy });
    }
    let mut stored_rows: BTreeMap<Identity, PolicyRow> = BTreeMap::new();
    for row in rows {
        stored_rows.insert((row.endpoint_id.clone(), row.team_id.clone(), row.queue.clone()), row);
    }
    let identities: BTreeSet<Identity> = versions.keys().chain(stored_rows.keys()).cloned().collect();
    let mut histories = Vec::with_capacity(identities.len());
    for identity in identities {
        let mut trail = vec![Version { from: DateTime::<Utc>::MIN_UTC, policy: None }];
        trail.extend(versions.remove(&identity).unwrap_or_default());
        let name = label(&identity);
        match (stored_rows.get(&identity), trail.last().and_then(|v| v.policy.as_ref())) {
            (None, Some(_)) => report.violate(Invariant::AuditTrail, format!("{name}: audited policy is not stored")),
            (None, None) => {}
            (Some(row), last) => {
                let stored = Policy::from_stored(
                    row.max_in_flight,
                    row.max_claims_per_window,
                    row.window_period.as_deref(),
                    row.window_tz.as_deref(),
                    row.window_start.as_deref(),
                    row.window_weekday.as_deref(),
                    row.additional_windows.as_ref(),
                );
                match (&stored, last) {
                    (Err(problem), _) => {
                        report.violate(Invariant::AuditTrail, format!("{name}: stored row invalid: {problem}"))
                    }
                    (Ok(_), None) if trail.len() > 1 => {
                        report.violate(Invariant::AuditTrail, format!("{name}: stored policy after its audited delete"))
                    }
                    (Ok(_), None) => {
                        report.violate(Invariant::AuditTrail, format!("{name}: policy has no audit record"));
                        trail.push(Version { from: row.created_at, policy: stored.clone().ok() });
                    }
                    (Ok(row), Some(last)) if row != last => report.violate(
                        Invariant::AuditTrail,
                        format!("{name}: stored {} but the last audit says {}", row.to_json(), last.to_json()),
                    ),
                    _ => {}
                }
            }
        }
        histories.push(History { identity, versions: trail });
    }
    Ok(histories)
}

/// Every committed claim on a queue identity, oldest first.
async fn attempts_of(pool: &PgPool, identity: &Identity) -> Result<Vec<Attempt>, sqlx::Error> {
    type Row = (String, i32, DateTime<Utc>, Option<DateTime<Utc>>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT a.todo_id, a.seq, a.started_at, a.ended_at FROM todo_attempts a JOIN todos t ON t.id = a.todo_id \
         WHERE t.queue = $3 AND (t.endpoint_id = $1 OR t.team_id = $2) ORDER BY a.started_at, a.todo_id, a.seq",
    )
    .bind(&identity.0)
    .bind(&identity.1)
    .bind(&identity.2)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(todo_id, seq, started_at, ended_at)| Attempt { todo_id, seq, started_at, ended_at })
        .collect())
}
