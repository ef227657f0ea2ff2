//! The invariants every test layer checks (design.md), checked afterwards in SQL against what a
//! run left in PostgreSQL: `admission_windows`, `todo_attempts` (one row per committed claim,
//! closed with its outcome), `todos`, `admission_policies` and `admission_audit`.
//!
//! Governing: SPEC-0030 REQ-3 (charging equality), REQ-4 (no over-admission), REQ-1 (no policy,
//! no change), REQ-10 (every change audited), and the base queue's "nothing lost".
//!
//! Windows are calendar windows in a policy's zone, so which window a claim belongs to is
//! computed here in Rust with `models::window`, never re-derived in SQL. A policy can change
//! during a run; its history is rebuilt from `admission_audit` (each `after` value from its
//! `at`). The audit's `at` is read before the change waits for the policy lock, so a claim that
//! committed up to `CheckOptions::policy_change_grace` after it may still have run under the
//! previous version: every check takes each version "possibly in force" at an instant into
//! account and flags only what no possible version allows. A check never needs the run to have
//! recorded anything beyond the database. Must never write to the database.

use chrono::{DateTime, Duration, Utc};
use models::admission::Policy;
use serde_json::Value;
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet};

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
// A usage row whose policy is gone is the schema's to refuse (admission_windows.policy_id
// references admission_policies ON DELETE CASCADE), so there is no check for it here.

/// The queue identity a policy or todo belongs to: (endpoint_id, team_id, queue).
type Identity = (Option<String>, Option<String>, String);

/// One policy version and the instant from which it may have been in force. `None` is "no policy
/// under this id" (before its creation).
#[derive(Debug, Clone)]
struct Version {
    from: DateTime<Utc>,
    policy: Option<Policy>,
}

struct PolicyHistory {
    id: String,
    identity: Identity,
    /// Oldest first; the first is always "no policy yet".
    versions: Vec<Version>,
}

impl PolicyHistory {
    /// Versions that may have been in force at `t`: version i from its `from` until the next
    /// version's `from` plus the grace.
    fn possible_at(&self, t: DateTime<Utc>, grace: &CheckOptions) -> Vec<&Option<Policy>> {
        self.possible_during(t, t + Duration::microseconds(1), grace)
    }

    /// Versions that may have been in force at some instant of `[start, end)`.
    fn possible_during(&self, start: DateTime<Utc>, end: DateTime<Utc>, grace: &CheckOptions) -> Vec<&Option<Policy>> {
        self.versions
            .iter()
            .enumerate()
            .filter(|(i, v)| {
                let grace = if *i == 0 { grace.policy_creation_grace } else { grace.policy_change_grace };
                let until = self.versions.get(i + 1).map(|next| next.from + grace);
                v.from < end && until.is_none_or(|until| until > start)
            })
            .map(|(_, v)| &v.policy)
            .collect()
    }
}

struct Attempt {
    todo_id: String,
    seq: i32,
    started_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
}

/// (1), (2), (3), (5), and the audit trail.
async fn admission_checks(
    pool: &PgPool,
    options: &CheckOptions,
    report: &mut InvariantReport,
) -> Result<(), sqlx::Error> {
    let grace = options;
    let histories = policy_histories(pool, report).await?;
    report.policies = histories.len();
    let windows: Vec<(String, DateTime<Utc>, i32)> =
        sqlx::query_as("SELECT policy_id, window_start, used FROM admission_windows ORDER BY policy_id, window_start")
            .fetch_all(pool)
            .await?;
    for history in &histories {
        let attempts = attempts_of(pool, &history.identity).await?;
        let used: BTreeMap<DateTime<Utc>, i64> =
            windows.iter().filter(|w| w.0 == history.id).map(|w| (w.1, i64::from(w.2))).collect();
        charging_and_budget(history, &attempts, &used, grace, report);
        in_flight(history, &attempts, grace, report);
    }
    Ok(())
}

/// One row of `admission_policies`, as stored.
#[derive(sqlx::FromRow)]
struct PolicyRow {
    id: String,
    endpoint_id: Option<String>,
    team_id: Option<String>,
    queue: String,
    max_in_flight: Option<i32>,
    max_claims_per_window: Option<i32>,
    window_period: Option<String>,
    window_tz: Option<String>,
    window_start: Option<String>,
    window_weekday: Option<String>,
    created_at: DateTime<Utc>,
}

/// Every policy's versions: from its audit records, or from the row itself when it has none.
async fn policy_histories(pool: &PgPool, report: &mut InvariantReport) -> Result<Vec<PolicyHistory>, sqlx::Error> {
    let rows: Vec<PolicyRow> = sqlx::query_as(
        "SELECT id, endpoint_id, team_id, queue, max_in_flight, max_claims_per_window, window_period, window_tz, \
           window_start, window_weekday, created_at FROM admission_policies ORDER BY id",
    )
    .fetch_all(pool)
    .await?;
    let audit: Vec<(String, String, Option<Value>, DateTime<Utc>)> = sqlx::query_as(
        "SELECT policy_id, action, after, at FROM admission_audit WHERE action IN ('create', 'update') ORDER BY at, id",
    )
    .fetch_all(pool)
    .await?;
    let mut histories = Vec::with_capacity(rows.len());
    for row in rows {
        let stored = Policy::from_stored(
            row.max_in_flight,
            row.max_claims_per_window,
            row.window_period.as_deref(),
            row.window_tz.as_deref(),
            row.window_start.as_deref(),
            row.window_weekday.as_deref(),
        );
        let PolicyRow { id, endpoint_id, team_id, queue, created_at, .. } = row;
        let mut versions = vec![Version { from: DateTime::<Utc>::MIN_UTC, policy: None }];
        for (_, _, after, at) in audit.iter().filter(|a| a.0 == id) {
            match after.as_ref().map(Policy::from_request) {
                Some(Ok(policy)) => versions.push(Version { from: *at, policy: Some(policy) }),
                _ => report
                    .violate(Invariant::AuditTrail, format!("policy {id}: audit record at {at} has no valid after")),
            }
        }
        match (&stored, versions.last()) {
            (Err(problem), _) => {
                report.violate(Invariant::AuditTrail, format!("policy {id}: stored row invalid: {problem}"))
            }
            (Ok(_), Some(Version { policy: None, .. })) => {
                report.violate(Invariant::AuditTrail, format!("policy {id} on {queue} has no audit record"));
            }
            (Ok(row), Some(Version { policy: Some(last), .. })) if row != last => report.violate(
                Invariant::AuditTrail,
                format!("policy {id}: stored {} but the last audit says {}", row.to_json(), last.to_json()),
            ),
            _ => {}
        }
        if versions.len() == 1 {
            // No usable audit: the row as it stands, from its creation.
            versions.push(Version { from: created_at, policy: stored.ok() });
        }
        histories.push(PolicyHistory { id, identity: (endpoint_id, team_id, queue), versions });
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

/// The window a claim at `t` is charged to under a version; None when that version charges nothing.
fn charged_window(policy: &Option<Policy>, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let policy = policy.as_ref().filter(|p| p.charges())?;
    policy.window.as_ref().map(|w| w.window_start(t))
}

/// (1) used ∈ [claims surely charged to the window, claims possibly charged to it], exactly equal
/// when no policy change is near; (2) used, and each surely charged claim's rank in its window,
/// within the largest window limit possibly in force; (5) no usage where no charging version was.
fn charging_and_budget(
    history: &PolicyHistory,
    attempts: &[Attempt],
    used: &BTreeMap<DateTime<Utc>, i64>,
    grace: &CheckOptions,
    report: &mut InvariantReport,
) {
    let (sure, maybe) = place_claims(history, attempts, grace, report);
    let starts: BTreeSet<DateTime<Utc>> = used.keys().chain(sure.keys()).chain(maybe.keys()).copied().collect();
    for start in starts {
        report.windows_checked += 1;
        let charged = used.get(&start).copied().unwrap_or(0);
        let surely = sure.get(&start).map_or(0, |v| v.len() as i64);
        let possibly = surely + maybe.get(&start).copied().unwrap_or(0);
        if charged < surely || charged > possibly {
            report.violate(
                Invariant::ChargingEquality,
                format!(
                    "policy {} window {start}: used {charged}, claims committed in it {surely}{}",
                    history.id,
                    if possibly > surely { format!("..{possibly}") } else { String::new() }
                ),
            );
        }
        window_within_limit(history, start, charged, grace, report);
        ranks_within_limit(history, start, sure.get(&start).map_or(&[], Vec::as_slice), grace, report);
    }
}

/// The windows each claim is charged to: surely (every version possibly in force at its commit
/// charges it to the same window), or possibly (a policy change is too near to tell), by window
/// start. Claims no version charges are in neither.
#[allow(clippy::type_complexity)]
fn place_claims<'a>(
    history: &PolicyHistory,
    attempts: &'a [Attempt],
    grace: &CheckOptions,
    report: &mut InvariantReport,
) -> (BTreeMap<DateTime<Utc>, Vec<&'a Attempt>>, BTreeMap<DateTime<Utc>, i64>) {
    let mut sure: BTreeMap<DateTime<Utc>, Vec<&Attempt>> = BTreeMap::new();
    let mut maybe: BTreeMap<DateTime<Utc>, i64> = BTreeMap::new();
    for attempt in attempts {
        let possible = history.possible_at(attempt.started_at, grace);
        let targets: BTreeSet<Option<DateTime<Utc>>> =
            possible.iter().map(|p| charged_window(p, attempt.started_at)).collect();
        match (targets.len(), targets.first()) {
            (1, Some(Some(window))) => sure.entry(*window).or_default().push(attempt),
            (1, _) => {}
            _ => {
                report.claims_ambiguous += 1;
                for window in targets.into_iter().flatten() {
                    *maybe.entry(window).or_default() += 1;
                }
            }
        }
    }
    (sure, maybe)
}

/// (2) and (5) for the window starting at `start`, which was charged `charged`: against every
/// charging version possibly in force during the window.
fn window_within_limit(
    history: &PolicyHistory,
    start: DateTime<Utc>,
    charged: i64,
    grace: &CheckOptions,
    report: &mut InvariantReport,
) {
    // Two versions can have windows starting at the same instant (an hour window and a day
    // window both at :30): the window lasts until the latest of their ends, or a later version's
    // limit would be missed.
    let end = history
        .versions
        .iter()
        .filter_map(|v| v.policy.as_ref()?.window)
        .map(|w| w.window_containing(start))
        .filter(|(s, _)| *s == start)
        .map(|(_, end)| end)
        .max()
        .unwrap_or(start + Duration::days(8));
    let limits: Vec<i64> = history
        .possible_during(start, end, grace)
        .into_iter()
        .filter_map(|p| p.as_ref().filter(|p| p.charges())?.max_claims_per_window)
        .collect();
    match limits.iter().max() {
        None if charged > 0 => report.violate(
            Invariant::NoPolicyNoChange,
            format!(
                "policy {} window {start}: used {charged} while no version with a window limit was in force",
                history.id
            ),
        ),
        Some(limit) if charged > *limit => report.violate(
            Invariant::WindowBudget,
            format!("policy {} window {start}: used {charged} > max_claims_per_window {limit}", history.id),
        ),
        _ => {}
    }
}

/// (2) for each claim surely charged to the window at `start`, in commit order: its rank within
/// the largest window limit possibly in force at its commit.
fn ranks_within_limit(
    history: &PolicyHistory,
    start: DateTime<Utc>,
    surely: &[&Attempt],
    grace: &CheckOptions,
    report: &mut InvariantReport,
) {
    for (rank, attempt) in surely.iter().enumerate() {
        let limit = history
            .possible_at(attempt.started_at, grace)
            .into_iter()
            .filter_map(|p| p.as_ref().filter(|p| p.charges())?.max_claims_per_window)
            .max();
        if let Some(limit) = limit
            && rank as i64 + 1 > limit
        {
            report.violate(
                Invariant::WindowBudget,
                format!(
                    "policy {} window {start}: claim {} of todo {} (attempt {}) at {} with max_claims_per_window {limit}",
                    history.id,
                    rank + 1,
                    attempt.todo_id,
                    attempt.seq,
                    attempt.started_at
                ),
            );
        }
    }
}

/// (3) At each claim's commit (its `started_at`, the clock read under the policy lock), the claims
/// of the identity open at that instant, itself included, never exceed the largest
/// `max_in_flight` possibly in force. A takeover closes the lapsed claim at its own start, so the
/// replaced claim does not count, as REQ-4 says.
fn in_flight(history: &PolicyHistory, attempts: &[Attempt], grace: &CheckOptions, report: &mut InvariantReport) {
    for attempt in attempts {
        let possible = history.possible_at(attempt.started_at, grace);
        let caps: Option<Vec<i64>> = possible.iter().map(|p| p.as_ref().and_then(|p| p.max_in_flight)).collect();
        let Some(cap) = caps.and_then(|caps| caps.into_iter().max()) else {
            continue; // some version possibly in force had no in-flight limit
        };
        let t = attempt.started_at;
        let open = attempts.iter().filter(|o| o.started_at <= t && o.ended_at.is_none_or(|end| end > t)).count() as i64;
        if open > cap {
            report.violate(
                Invariant::InFlightCap,
                format!(
                    "policy {}: claim of todo {} (attempt {}) at {t} committed with {open} in flight, max_in_flight {cap}",
                    history.id, attempt.todo_id, attempt.seq
                ),
            );
        }
    }
}
