//! The judges `sql_invariants` runs per queue identity, over the claims it read from
//! PostgreSQL and the policy history it rebuilt: where each committed claim is charged, the
//! ledger and usage rows against those charges, the claims within each window's limit, and the
//! in-flight cap at every claim.
//!
//! Its own module so the reading (SQL, in `sql_invariants.rs`) and the judging (pure Rust over
//! what was read, here) can each be read alone. Must never touch the database.

use super::{Attempt, CheckOptions, History, Invariant, InvariantReport, Stored, label};
use chrono::{DateTime, Utc};
use models::admission::Policy;
use std::collections::{BTreeMap, BTreeSet};

/// The window a claim at `t` is charged to under a version; None when that version charges nothing.
fn charged_window(policy: &Option<Policy>, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let policy = policy.as_ref().filter(|p| p.charges())?;
    policy.window.as_ref().map(|w| w.window_start(t))
}

/// Where each committed claim is charged: `sure` (every version possibly in force at its commit
/// charges it to the same window), with that window's start, in commit order; `maybe` (a policy
/// change is too near to tell whether or where), with every window it may be charged to.
pub(super) struct Placed<'a> {
    sure: Vec<(&'a Attempt, DateTime<Utc>)>,
    maybe: Vec<(&'a Attempt, BTreeSet<DateTime<Utc>>)>,
}

pub(super) fn place_claims<'a>(
    history: &History,
    attempts: &'a [Attempt],
    grace: &CheckOptions,
    report: &mut InvariantReport,
) -> Placed<'a> {
    let mut placed = Placed { sure: vec![], maybe: vec![] };
    for attempt in attempts {
        let targets: BTreeSet<Option<DateTime<Utc>>> = history
            .possible_at(attempt.started_at, grace)
            .iter()
            .map(|p| charged_window(p, attempt.started_at))
            .collect();
        match (targets.len(), targets.first()) {
            (1, Some(Some(window))) => placed.sure.push((attempt, *window)),
            (1, _) => {}
            _ => {
                report.claims_ambiguous += 1;
                placed.maybe.push((attempt, targets.into_iter().flatten().collect()));
            }
        }
    }
    placed
}

/// (1) The ledger holds one unit per charged claim in the minute it committed: per minute, the
/// units lie between the claims surely charged then and those possibly charged; (5) none where
/// no charging version was possibly in force.
pub(super) fn ledger_equality(
    history: &History,
    placed: &Placed,
    ledger: &BTreeMap<DateTime<Utc>, i64>,
    report: &mut InvariantReport,
) {
    let mut sure: BTreeMap<DateTime<Utc>, i64> = BTreeMap::new();
    let mut maybe: BTreeMap<DateTime<Utc>, i64> = BTreeMap::new();
    for (attempt, _) in &placed.sure {
        *sure.entry(charge_minute(attempt.started_at)).or_default() += 1;
    }
    for (attempt, _) in &placed.maybe {
        *maybe.entry(charge_minute(attempt.started_at)).or_default() += 1;
    }
    let minutes: BTreeSet<DateTime<Utc>> = ledger.keys().chain(sure.keys()).chain(maybe.keys()).copied().collect();
    for minute in minutes {
        let units = ledger.get(&minute).copied().unwrap_or(0);
        let surely = sure.get(&minute).copied().unwrap_or(0);
        let possibly = surely + maybe.get(&minute).copied().unwrap_or(0);
        if units > 0 && possibly == 0 {
            report.violate(
                Invariant::NoPolicyNoChange,
                format!(
                    "{}: {units} units in the ledger at {minute} with no charging policy in force",
                    label(&history.identity)
                ),
            );
        } else if units < surely || units > possibly {
            report.violate(
                Invariant::ChargingEquality,
                format!(
                    "{}: ledger minute {minute} holds {units} units, claims charged in it {surely}{}",
                    label(&history.identity),
                    if possibly > surely { format!("..{possibly}") } else { String::new() }
                ),
            );
        }
    }
}

/// (1) Each usage row against the claims: at least those surely charged to its window, plus,
/// when a policy write placed `now` in it, those charged in its span before the write (the
/// rebuild of issue #28); at most the ledger's units in its span. (5) A row at a start no
/// charging definition has.
pub(super) fn usage_rows(
    history: &History,
    placed: &Placed,
    stored: &Stored,
    grace: &CheckOptions,
    report: &mut InvariantReport,
) {
    let name = label(&history.identity);
    let charged_in = |from: DateTime<Utc>, until: DateTime<Utc>| {
        placed.sure.iter().filter(|(a, _)| a.started_at >= from && a.started_at < until).count() as i64
    };
    let mut starts: BTreeSet<DateTime<Utc>> = stored.windows.keys().copied().collect();
    starts.extend(placed.sure.iter().map(|(_, start)| *start));
    for start in starts {
        report.windows_checked += 1;
        let used = stored.windows.get(&start).copied().unwrap_or(0);
        let ends: Vec<DateTime<Utc>> = history
            .windows()
            .map(|w| w.window_containing(start))
            .filter(|(s, _)| *s == start)
            .map(|(_, end)| end)
            .collect();
        let Some(end) = ends.iter().max().copied() else {
            let invariant = if history.windows().next().is_none() {
                Invariant::NoPolicyNoChange
            } else {
                Invariant::ChargingEquality
            };
            report.violate(
                invariant,
                format!("{name}: usage row at {start} (used {used}), a start no window limit of it has"),
            );
            continue;
        };
        let placed_here = |after: DateTime<Utc>| {
            placed.sure.iter().filter(|(a, s)| *s == start && a.started_at >= after).count() as i64
        };
        let mut lower = placed_here(DateTime::<Utc>::MIN_UTC);
        for version in history.versions.iter().skip(1) {
            let Some(window) = version.policy.as_ref().filter(|p| p.charges()).and_then(|p| p.window.as_ref()) else {
                continue;
            };
            if window.window_start(version.from) == start {
                let before = charged_in(start, version.from - grace.policy_change_grace);
                lower = lower.max(before + placed_here(version.from + grace.policy_change_grace));
            }
        }
        let upper = ledger_units_within(&stored.ledger, start, end);
        if used < lower || used > upper {
            report.violate(
                Invariant::ChargingEquality,
                format!("{name}: window {start}: used {used}, claims committed in it {lower}, ledger units in its span {upper}"),
            );
        }
    }
}

fn ledger_units_within(ledger: &BTreeMap<DateTime<Utc>, i64>, start: DateTime<Utc>, end: DateTime<Utc>) -> i64 {
    models::charges::units_within(ledger.iter().map(|(minute, units)| (*minute, *units)), start, end)
}

fn charge_minute(at: DateTime<Utc>) -> DateTime<Utc> {
    models::charges::charge_minute(at)
}

/// (2) Each claim surely charged, in commit order: the claims surely charged in its window's span
/// up to it, itself included and whatever definition charged them, within the largest window
/// limit possibly in force at its commit (REQ-3: usage of a window is the claims committed in
/// it, across every policy change).
pub(super) fn ranks_within_limit(
    history: &History,
    placed: &Placed,
    grace: &CheckOptions,
    report: &mut InvariantReport,
) {
    for (index, (attempt, start)) in placed.sure.iter().enumerate() {
        let limit = history
            .possible_at(attempt.started_at, grace)
            .into_iter()
            .filter_map(|p| p.as_ref().filter(|p| p.charges())?.max_claims_per_window)
            .max();
        let Some(limit) = limit else { continue };
        let rank = placed.sure[..=index].iter().filter(|(a, _)| a.started_at >= *start).count() as i64;
        if rank > limit {
            report.violate(
                Invariant::WindowBudget,
                format!(
                    "{} window {start}: claim {rank} of todo {} (attempt {}) at {} with max_claims_per_window {limit}",
                    label(&history.identity),
                    attempt.todo_id,
                    attempt.seq,
                    attempt.started_at
                ),
            );
        }
    }
}

/// (2) for issue #52's additional windows: each claim surely charged, within every additional
/// window's limit, counting the claims surely charged in that window's span up to it. A claim
/// overruns only if every version possibly in force at its commit has a window it overran.
pub(super) fn additional_ranks_within_limit(
    history: &History,
    placed: &Placed,
    grace: &CheckOptions,
    report: &mut InvariantReport,
) {
    for (index, (attempt, _)) in placed.sure.iter().enumerate() {
        let possible = history.possible_at(attempt.started_at, grace);
        let overrun = |policy: &Policy| {
            policy.additional_windows.iter().find_map(|limit| {
                let start = limit.window.window_start(attempt.started_at);
                let rank = placed.sure[..=index].iter().filter(|(a, _)| a.started_at >= start).count() as i64;
                (rank > limit.max_claims).then(|| (limit.window.period_name(), start, rank, limit.max_claims))
            })
        };
        let overruns: Vec<_> = possible.iter().map(|p| p.as_ref().filter(|p| p.charges()).and_then(overrun)).collect();
        if let Some(Some((period, start, rank, max))) =
            overruns.first().filter(|_| overruns.iter().all(Option::is_some))
        {
            report.violate(
                Invariant::WindowBudget,
                format!(
                    "{} {period} window {start}: claim {rank} of todo {} (attempt {}) at {} with max_claims {max}",
                    label(&history.identity),
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
pub(super) fn in_flight(history: &History, attempts: &[Attempt], grace: &CheckOptions, report: &mut InvariantReport) {
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
                    "{}: claim of todo {} (attempt {}) at {t} committed with {open} in flight, max_in_flight {cap}",
                    label(&history.identity),
                    attempt.todo_id,
                    attempt.seq
                ),
            );
        }
    }
}
