//! A model of the claim transaction's lock protocol, small enough for loom to explore every
//! interleaving of two or three claimers.
//!
//! Governing: SPEC-0030 REQ-4 (lock the candidate todo first, then the policy row with a blocking
//! lock; read in-flight and usage under that lock; never take the policy lock before a todo lock
//! nor wait on a todo lock while holding it; at most one policy lock; a refusal releases both).
//!
//! Why a model and not the engine: loom can only explore code whose every synchronisation point
//! it controls, and the engine's locks live in Postgres. So this file restates the protocol of
//! `engine/src/pg_store/claim.rs` with in-process mutexes standing for row locks, and calls the
//! same `crate::admission::decide` the engine does, so the decision cannot drift from production;
//! only the locking around it is modelled. How the model maps to the SQL:
//!
//! - `todos[i].lock()`, rank 1: step 1, `SELECT … FROM todos … FOR UPDATE [SKIP LOCKED]`
//!   (`pick_candidates`, `lock_todo`; a group claim takes several, without waiting).
//! - `policy.lock()`, rank 2: steps 2–3, `SELECT … FROM admission_policies … FOR UPDATE`
//!   (`lock_policy`), blocking.
//! - `PolicyRow::used_in_window`: the `admission_windows` counter row. It is only ever written
//!   under the policy lock, so the model folds it into the policy row.
//! - reading `committed`, rank 3: step 4, `observe`'s `count(*)` of claimed todos. That is a
//!   READ COMMITTED snapshot taken after the lock and takes no row lock; the commit log is the
//!   committed state such a snapshot sees.
//! - marking the todo claimed, `used_in_window += 1`, appending to `committed`: step 6,
//!   `claim_locked`'s update and upsert, then `COMMIT`, all before either lock is released.
//! - returning early with the guards dropped: `ROLLBACK`. Nothing was written, both locks go.
//!
//! The locks are ranked, and every acquire asserts that its rank is above every rank the thread
//! already holds. A wrong order therefore fails at once and on every run with "lock order
//! violation", instead of as a deadlock that loom would report by aborting the test process.
//! The strict inequality also encodes the rest of REQ-4's lock rules: two todos or two policies
//! (equal ranks) are never waited for together, and no todo is waited on under the policy lock.
//! The one exception is a lock that never waits (`try_lock`, `SKIP LOCKED`): a group claim
//! (`claim_group`, issue #15) takes several todo locks that way, all before the policy lock.
//!
//! `Protocol` carries two deliberately broken variants so the tests can show that the model
//! notices each mistake. Nothing outside this file's tests uses them, and nothing in production
//! uses this module at all.

use crate::admission::{self, Decision, Policy, Reason};
use std::cell::Cell;
use std::sync::PoisonError;

#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

/// Rank of a todo row lock: always taken first.
pub const TODO_ROW_RANK: u8 = 1;
/// Rank of the policy row lock: taken only while holding the candidate's todo lock.
pub const POLICY_ROW_RANK: u8 = 2;
/// Rank of the commit log, which stands for the committed state reads see: innermost.
pub const COMMIT_LOG_RANK: u8 = 3;

/// The highest usable rank.
const RANK_MAX: u8 = 31;

// How many locks of each rank this thread holds. Counts rather than a "highest held" value, so
// a guard dropped out of acquisition order still leaves the right ranks behind, and a group claim
// may hold several todo locks taken without waiting.
type HeldRanks = [u8; RANK_MAX as usize + 1];
#[cfg(loom)]
loom::thread_local! {
    static HELD_RANKS: Cell<HeldRanks> = Cell::new([0; RANK_MAX as usize + 1]);
}
#[cfg(not(loom))]
std::thread_local! {
    static HELD_RANKS: Cell<HeldRanks> = const { Cell::new([0; RANK_MAX as usize + 1]) };
}

/// The highest rank this thread holds; 0 when it holds none.
fn highest_held_rank() -> u8 {
    let held = HELD_RANKS.with(Cell::get);
    // The array has RANK_MAX + 1 entries, so the index fits a u8.
    held.iter().rposition(|count| *count > 0).map_or(0, |rank| rank as u8)
}

/// Counts one more (`true`) or one fewer lock of `rank` held by this thread.
fn note_held(rank: u8, acquired: bool) {
    HELD_RANKS.with(|held| {
        let mut counts = held.get();
        let count = &mut counts[usize::from(rank)];
        *count = if acquired { *count + 1 } else { *count - 1 };
        held.set(counts);
    });
}

/// A mutex with a rank: locking it while holding a lock of the same or a higher rank panics
/// with "lock order violation" before it waits, so an ordering mistake is caught on the first run
/// that reaches it, under loom or in an ordinary test alike.
#[derive(Debug)]
pub struct Ranked<T> {
    rank: u8,
    mutex: Mutex<T>,
}

/// Access to a `Ranked` value; dropping it releases the lock and the rank.
#[derive(Debug)]
pub struct RankedGuard<'a, T> {
    rank: u8,
    guard: MutexGuard<'a, T>,
}

impl<T> Ranked<T> {
    pub fn new(rank: u8, value: T) -> Ranked<T> {
        assert!((1..=RANK_MAX).contains(&rank), "rank {rank} outside 1..={RANK_MAX}");
        Ranked { rank, mutex: Mutex::new(value) }
    }

    pub fn lock(&self) -> RankedGuard<'_, T> {
        let highest = highest_held_rank();
        assert!(self.rank > highest, "lock order violation: rank {} acquired while holding rank {highest}", self.rank);
        // A poisoned std mutex means another claimer panicked holding it, so the run has already
        // failed; the data is still the best evidence for the invariant checks, so use it. (loom
        // never reports poisoning: it panics in that case itself.)
        let guard = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        note_held(self.rank, true);
        RankedGuard { rank: self.rank, guard }
    }

    /// Locks without waiting (`SKIP LOCKED`), or None when another thread holds the lock. Never
    /// waiting, it cannot deadlock, so it may join locks of its own rank (a group claim's
    /// candidates); a rank below one held is still refused, as the protocol takes it first.
    pub fn try_lock(&self) -> Option<RankedGuard<'_, T>> {
        let highest = highest_held_rank();
        assert!(self.rank >= highest, "lock order violation: rank {} acquired while holding rank {highest}", self.rank);
        let guard = match self.mutex.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        note_held(self.rank, true);
        Some(RankedGuard { rank: self.rank, guard })
    }
}

impl<T> Drop for RankedGuard<'_, T> {
    fn drop(&mut self) {
        // The count drops just before the mutex field is dropped; nothing runs in between.
        note_held(self.rank, false);
    }
}

impl<T> std::ops::Deref for RankedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for RankedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// The limits of the one modelled queue identity. Both are set, so every admitted claim is
/// charged (REQ-3) and either limit can be the one that binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_claims_per_window: i64,
    pub max_in_flight: i64,
}

#[derive(Debug, Default)]
struct TodoRow {
    claimed: bool,
}

#[derive(Debug)]
struct PolicyRow {
    policy: Policy,
    /// Units charged in the (single) current window.
    used_in_window: i64,
}

/// One committed claim and the ground truth at its commit: what the store really held, not what
/// the claimer believed when it decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    pub todo_index: usize,
    pub used_after_charge: i64,
    pub in_flight_after_claim: i64,
}

/// The modelled database: todo rows, one policy row with its window counter, and the log of
/// committed claims.
#[derive(Debug)]
pub struct Db {
    todos: Vec<Ranked<TodoRow>>,
    policy: Ranked<PolicyRow>,
    committed: Ranked<Vec<Commit>>,
}

/// Which protocol `claim` follows. Only `Production` is correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// claim.rs's order: todo lock, policy lock, read and decide under both, charge, commit.
    Production,
    /// Broken: reads usage and in-flight under the policy lock, releases it, then re-locks to
    /// charge (an unlocked `SELECT used` followed by `UPDATE … used + 1`). Over-admits.
    CheckOutsideLock,
    /// Broken: locks the policy row before the todo row. Can deadlock against `Production`.
    PolicyBeforeTodo,
}

/// What one claim transaction ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Claimed,
    /// The todo was claimed by a transaction that committed first (`conflict`).
    AlreadyClaimed,
    Refused(Reason),
}

impl Db {
    pub fn new(todo_count: usize, limits: Limits) -> Db {
        let policy = Policy {
            max_in_flight: Some(limits.max_in_flight),
            max_claims_per_window: Some(limits.max_claims_per_window),
            // `decide` never looks at the window, and the model has only the current one.
            window: None,
        };
        Db {
            todos: (0..todo_count).map(|_| Ranked::new(TODO_ROW_RANK, TodoRow::default())).collect(),
            policy: Ranked::new(POLICY_ROW_RANK, PolicyRow { policy, used_in_window: 0 }),
            committed: Ranked::new(COMMIT_LOG_RANK, Vec::new()),
        }
    }

    /// In-flight as step 4 reads it: claimed todos in the committed state. Nothing completes
    /// in this model, so that is every committed claim.
    fn in_flight(&self) -> i64 {
        self.committed.lock().len() as i64
    }

    /// Step 6's commit: records the claim with the counts as they really stand at this instant.
    fn commit(&self, todo_index: usize, used_after_charge: i64) {
        let mut committed = self.committed.lock();
        let in_flight_after_claim = committed.len() as i64 + 1;
        committed.push(Commit { todo_index, used_after_charge, in_flight_after_claim });
    }

    /// Asserts the invariants every test layer checks (design.md): no over-admission at any
    /// commit, charged units equal to committed claims, no todo claimed twice, and every todo
    /// row agreeing with the log. Call it once the claimers are done. Returns the claims
    /// committed.
    pub fn check(&self) -> usize {
        let (claims, used_in_window) = {
            let policy_row = self.policy.lock();
            let committed = self.committed.lock();
            let limit = policy_row.policy.max_claims_per_window.unwrap_or(i64::MAX);
            let cap = policy_row.policy.max_in_flight.unwrap_or(i64::MAX);
            for commit in committed.iter() {
                assert!(
                    commit.used_after_charge <= limit,
                    "over-admission: todo {} committed with used {} > max_claims_per_window {limit}",
                    commit.todo_index,
                    commit.used_after_charge
                );
                assert!(
                    commit.in_flight_after_claim <= cap,
                    "over-admission: todo {} committed with {} in flight > max_in_flight {cap}",
                    commit.todo_index,
                    commit.in_flight_after_claim
                );
            }
            assert!(
                policy_row.used_in_window <= limit,
                "over-admission: used {} > max_claims_per_window {limit}",
                policy_row.used_in_window
            );
            (committed.clone(), policy_row.used_in_window)
        };
        assert_eq!(
            used_in_window,
            claims.len() as i64,
            "charging inequality: {used_in_window} units charged for {} committed claims",
            claims.len()
        );
        let mut claimed_in_log = vec![false; self.todos.len()];
        for commit in &claims {
            assert!(!claimed_in_log[commit.todo_index], "todo {} claimed twice", commit.todo_index);
            claimed_in_log[commit.todo_index] = true;
        }
        for (todo_index, todo) in self.todos.iter().enumerate() {
            assert_eq!(todo.lock().claimed, claimed_in_log[todo_index], "todo {todo_index} row disagrees with the log");
        }
        claims.len()
    }
}

/// One claim transaction on the todo at `todo_index`, following `protocol`.
pub fn claim(db: &Db, todo_index: usize, protocol: Protocol) -> Outcome {
    claim_paced(db, todo_index, protocol, &|| {})
}

/// `claim` with a hook run between the admission decision and the charge, where a read done
/// outside the lock goes stale. Ordinary tests use it to force the interleaving loom finds on
/// its own; under `Production` the hook runs under both locks and so cannot change the result.
fn claim_paced(db: &Db, todo_index: usize, protocol: Protocol, after_decision: &dyn Fn()) -> Outcome {
    match protocol {
        Protocol::Production => claim_in_production_order(db, todo_index, after_decision),
        Protocol::CheckOutsideLock => claim_checking_outside_lock(db, todo_index, after_decision),
        Protocol::PolicyBeforeTodo => claim_policy_first(db, todo_index, after_decision),
    }
}

fn claim_in_production_order(db: &Db, todo_index: usize, after_decision: &dyn Fn()) -> Outcome {
    // 1. The candidate todo, locked first.
    let mut todo_row = db.todos[todo_index].lock();
    if todo_row.claimed {
        return Outcome::AlreadyClaimed;
    }
    // 2–3. The policy row, with a blocking lock, while holding the todo.
    let mut policy_row = db.policy.lock();
    // 4–5. In-flight and usage read under the lock, decided by the production function.
    let decision = admission::decide(&policy_row.policy, db.in_flight(), policy_row.used_in_window);
    if let Decision::Refuse(reason) = decision {
        return Outcome::Refused(reason); // ROLLBACK: both guards drop here.
    }
    after_decision();
    // 6. Claim, charge one unit, commit; the locks go with the guards.
    todo_row.claimed = true;
    policy_row.used_in_window += 1;
    db.commit(todo_index, policy_row.used_in_window);
    Outcome::Claimed
}

fn claim_checking_outside_lock(db: &Db, todo_index: usize, after_decision: &dyn Fn()) -> Outcome {
    let mut todo_row = db.todos[todo_index].lock();
    if todo_row.claimed {
        return Outcome::AlreadyClaimed;
    }
    let decision = {
        let policy_row = db.policy.lock();
        admission::decide(&policy_row.policy, db.in_flight(), policy_row.used_in_window)
    }; // The bug: the policy lock is released here, so the decision can be stale by the charge.
    if let Decision::Refuse(reason) = decision {
        return Outcome::Refused(reason);
    }
    after_decision();
    let mut policy_row = db.policy.lock();
    todo_row.claimed = true;
    policy_row.used_in_window += 1;
    db.commit(todo_index, policy_row.used_in_window);
    Outcome::Claimed
}

fn claim_policy_first(db: &Db, todo_index: usize, after_decision: &dyn Fn()) -> Outcome {
    // The bug: waiting on a todo lock while holding the policy lock. A `Production` claimer
    // holding this todo and waiting for the policy would deadlock with it; the rank check
    // refuses the acquire before it can wait.
    let mut policy_row = db.policy.lock();
    let mut todo_row = db.todos[todo_index].lock();
    if todo_row.claimed {
        return Outcome::AlreadyClaimed;
    }
    let decision = admission::decide(&policy_row.policy, db.in_flight(), policy_row.used_in_window);
    if let Decision::Refuse(reason) = decision {
        return Outcome::Refused(reason);
    }
    after_decision();
    todo_row.claimed = true;
    policy_row.used_in_window += 1;
    db.commit(todo_index, policy_row.used_in_window);
    Outcome::Claimed
}

/// One group claim (issue #15, group admission; `claim.rs`, `claim_next_in_turn`): `members`
/// claimers of one queue served by one transaction. Step 1 locks the `candidates` that are
/// free, without waiting (`SKIP LOCKED`), all before step 2–3's blocking policy lock; then 4–6
/// run claimer by claimer under that lock, each decision reading in-flight and usage as this
/// transaction sees them (its own claims included), until one is refused; one commit. Returns
/// one outcome per member, in turn: `AlreadyClaimed` for a member left without a candidate.
pub fn claim_group(db: &Db, candidates: &[usize], members: usize) -> Vec<Outcome> {
    // 1. The free candidates, locked without waiting; a locked or claimed one is skipped.
    let mut locked: Vec<(usize, RankedGuard<'_, TodoRow>)> = candidates
        .iter()
        .filter_map(|&index| db.todos[index].try_lock().map(|row| (index, row)))
        .filter(|(_, row)| !row.claimed)
        .collect();
    locked.truncate(members);
    let mut outcomes = vec![Outcome::AlreadyClaimed; members];
    if locked.is_empty() {
        return outcomes;
    }
    // 2–3. The policy row, blocking, while holding every candidate.
    let mut policy_row = db.policy.lock();
    let committed_in_flight = db.in_flight();
    let mut claimed: Vec<(usize, i64)> = Vec::new();
    for (turn, (index, todo_row)) in locked.iter_mut().enumerate() {
        // 4–5. This transaction's own claims count, as its reads see them.
        let in_flight = committed_in_flight + claimed.len() as i64;
        match admission::decide(&policy_row.policy, in_flight, policy_row.used_in_window) {
            Decision::Refuse(reason) => {
                outcomes[turn] = Outcome::Refused(reason);
                break;
            }
            Decision::Admit => {
                todo_row.claimed = true;
                policy_row.used_in_window += 1;
                claimed.push((*index, policy_row.used_in_window));
                outcomes[turn] = Outcome::Claimed;
            }
        }
    }
    // 6. One commit for the group, before either lock is released.
    for (index, used_after_charge) in claimed {
        db.commit(index, used_after_charge);
    }
    outcomes
}

/// The scenarios, written once against whichever threads the build has: loom's under
/// `--cfg loom` (explored exhaustively or up to a preemption bound), std's otherwise (run once).
#[cfg(test)]
mod scenarios {
    use super::*;

    #[cfg(loom)]
    use loom::{sync::Arc, thread};
    #[cfg(not(loom))]
    use std::{sync::Arc, thread};

    pub const ONE_UNIT_LEFT: Limits = Limits { max_claims_per_window: 1, max_in_flight: 10 };
    pub const ONE_SLOT_FREE: Limits = Limits { max_claims_per_window: 10, max_in_flight: 1 };
    pub const ROOM_FOR_TWO: Limits = Limits { max_claims_per_window: 2, max_in_flight: 2 };

    /// Runs each `(todo_index, protocol)` claim on its own thread, checks the invariants, and
    /// returns the outcomes in claimer order.
    pub fn claim_concurrently(db: Db, claimers: &[(usize, Protocol)]) -> Vec<Outcome> {
        claim_concurrently_paced(db, claimers, || {})
    }

    /// `claim_concurrently` with `after_decision` run by every claimer between its decision and
    /// its charge (see `claim_paced`).
    pub fn claim_concurrently_paced(
        db: Db,
        claimers: &[(usize, Protocol)],
        after_decision: impl Fn() + Clone + Send + 'static,
    ) -> Vec<Outcome> {
        let db = Arc::new(db);
        let handles: Vec<_> = claimers
            .iter()
            .map(|&(todo_index, protocol)| {
                let (db, after_decision) = (Arc::clone(&db), after_decision.clone());
                thread::spawn(move || claim_paced(&db, todo_index, protocol, &after_decision))
            })
            .collect();
        // A claimer's panic (an assertion in the model) is re-raised as it was, message included.
        let outcomes: Vec<Outcome> = handles
            .into_iter()
            .map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect();
        let committed = db.check();
        assert_eq!(committed, outcomes.iter().filter(|o| **o == Outcome::Claimed).count(), "{outcomes:?}");
        outcomes
    }

    /// Two claimers on two todos with one unit left: exactly one commits, the other is refused.
    pub fn two_claimers_one_unit_left() {
        let outcomes =
            claim_concurrently(Db::new(2, ONE_UNIT_LEFT), &[(0, Protocol::Production), (1, Protocol::Production)]);
        let refused = Outcome::Refused(Reason::WindowExhausted);
        assert!(outcomes.contains(&Outcome::Claimed) && outcomes.contains(&refused), "{outcomes:?}");
    }

    /// Two claimers on two todos with one in-flight slot free: exactly one commits.
    pub fn two_claimers_one_slot_free() {
        let outcomes =
            claim_concurrently(Db::new(2, ONE_SLOT_FREE), &[(0, Protocol::Production), (1, Protocol::Production)]);
        let refused = Outcome::Refused(Reason::InFlightFull);
        assert!(outcomes.contains(&Outcome::Claimed) && outcomes.contains(&refused), "{outcomes:?}");
    }

    /// Three claimers, two racing on todo 0, room for two claims: both todos are claimed once
    /// each and the loser of the race sees the winner's commit.
    pub fn three_claimers_two_racing_on_one_todo() {
        let outcomes = claim_concurrently(
            Db::new(2, ROOM_FOR_TWO),
            &[(0, Protocol::Production), (0, Protocol::Production), (1, Protocol::Production)],
        );
        assert_eq!(outcomes[2], Outcome::Claimed, "{outcomes:?}");
        let racers = &outcomes[..2];
        assert!(racers.contains(&Outcome::Claimed) && racers.contains(&Outcome::AlreadyClaimed), "{outcomes:?}");
    }

    /// Three claimers, two racing on todo 0, one unit left: exactly one claim commits.
    pub fn three_claimers_one_unit_left() {
        let outcomes = claim_concurrently(
            Db::new(2, ONE_UNIT_LEFT),
            &[(0, Protocol::Production), (0, Protocol::Production), (1, Protocol::Production)],
        );
        assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Claimed).count(), 1, "{outcomes:?}");
    }

    /// Two claimers on two todos with one unit left, both checking outside the lock.
    pub fn check_outside_lock_one_unit_left(after_decision: impl Fn() + Clone + Send + 'static) {
        claim_concurrently_paced(
            Db::new(2, ONE_UNIT_LEFT),
            &[(0, Protocol::CheckOutsideLock), (1, Protocol::CheckOutsideLock)],
            after_decision,
        );
    }

    /// A group claim of two members over todos 0 and 1 beside a single claimer of todo 1 (or
    /// of `single_todo`), each on its own thread; checks the invariants and returns every
    /// outcome, the group's first.
    pub fn group_beside_single(db: Db, single_todo: usize) -> Vec<Outcome> {
        let db = Arc::new(db);
        let group = {
            let db = Arc::clone(&db);
            thread::spawn(move || claim_group(&db, &[0, 1], 2))
        };
        let single = {
            let db = Arc::clone(&db);
            thread::spawn(move || claim(&db, single_todo, Protocol::Production))
        };
        let mut outcomes = group.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        outcomes.push(single.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        let committed = db.check();
        assert_eq!(committed, outcomes.iter().filter(|o| **o == Outcome::Claimed).count(), "{outcomes:?}");
        outcomes
    }

    /// A group of two and a single claimer on another todo, one unit left: one claim commits.
    pub fn group_and_single_one_unit_left() {
        let outcomes = group_beside_single(Db::new(3, ONE_UNIT_LEFT), 2);
        assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Claimed).count(), 1, "{outcomes:?}");
    }

    /// A group of two and a single claimer racing for todo 1, room for two: two claims commit,
    /// each todo at most once, whoever wins the race.
    pub fn group_and_single_racing_room_for_two() {
        let outcomes = group_beside_single(Db::new(2, ROOM_FOR_TWO), 1);
        assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Claimed).count(), 2, "{outcomes:?}");
    }

    /// A `Production` claimer and a policy-first claimer on the same todo: the pair that can
    /// deadlock. Both run on spawned threads: had the model's own thread panicked while a thread
    /// it spawned had not yet started, loom would abort the process during cleanup (measured)
    /// instead of failing the test.
    pub fn policy_before_todo_against_production() {
        claim_concurrently(Db::new(1, ROOM_FOR_TWO), &[(0, Protocol::Production), (0, Protocol::PolicyBeforeTodo)]);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::scenarios;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Explores `scenario` (every interleaving when `preemption_bound` is None) and prints how
    /// many interleavings that took and how long.
    fn explore(name: &str, preemption_bound: Option<usize>, scenario: fn()) {
        let executions = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&executions);
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = preemption_bound;
        let started = std::time::Instant::now();
        builder.check(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            scenario();
        });
        println!(
            "{name}: {} interleavings, preemption bound {preemption_bound:?}, {:?}",
            executions.load(Ordering::Relaxed),
            started.elapsed()
        );
    }

    // SPEC-0030 REQ-4
    #[test]
    fn req4_two_claimers_cannot_exceed_the_window_limit() {
        explore("req4_two_claimers_cannot_exceed_the_window_limit", None, scenarios::two_claimers_one_unit_left);
    }

    // SPEC-0030 REQ-4
    #[test]
    fn req4_two_claimers_cannot_exceed_max_in_flight() {
        explore("req4_two_claimers_cannot_exceed_max_in_flight", None, scenarios::two_claimers_one_slot_free);
    }

    // SPEC-0030 REQ-4
    #[test]
    fn req4_three_claimers_racing_on_one_todo_claim_it_once() {
        explore(
            "req4_three_claimers_racing_on_one_todo_claim_it_once",
            Some(3),
            scenarios::three_claimers_two_racing_on_one_todo,
        );
    }

    // SPEC-0030 REQ-4
    #[test]
    fn req4_three_claimers_cannot_exceed_the_window_limit() {
        explore("req4_three_claimers_cannot_exceed_the_window_limit", Some(3), scenarios::three_claimers_one_unit_left);
    }

    // SPEC-0030 REQ-4, with issue #15's group admission
    #[test]
    fn req4_a_group_claim_and_a_single_claim_cannot_exceed_the_window_limit() {
        explore(
            "req4_a_group_claim_and_a_single_claim_cannot_exceed_the_window_limit",
            None,
            scenarios::group_and_single_one_unit_left,
        );
    }

    // SPEC-0030 REQ-4, with issue #15's group admission
    #[test]
    fn req4_a_group_claim_racing_a_single_claim_claims_each_todo_once() {
        explore(
            "req4_a_group_claim_racing_a_single_claim_claims_each_todo_once",
            None,
            scenarios::group_and_single_racing_room_for_two,
        );
    }

    // SPEC-0030 REQ-4
    #[test]
    #[should_panic(expected = "over-admission")]
    fn req4_check_outside_the_policy_lock_over_admits() {
        explore("req4_check_outside_the_policy_lock_over_admits", None, || {
            scenarios::check_outside_lock_one_unit_left(|| {});
        });
    }

    // SPEC-0030 REQ-4
    #[test]
    #[should_panic(expected = "lock order violation")]
    fn req4_policy_lock_before_todo_lock_is_refused() {
        explore("req4_policy_lock_before_todo_lock_is_refused", None, scenarios::policy_before_todo_against_production);
    }
}

#[cfg(all(test, not(loom)))]
mod std_tests {
    //! The loom scenarios with std threads, run once each, so `cargo test` exercises the model;
    //! only the loom build (`ci/loom`) proves them for every interleaving.

    use super::*;
    use std::sync::{Arc, Barrier};

    // SPEC-0030 REQ-4
    #[test]
    fn req4_two_claimers_cannot_exceed_the_window_limit() {
        scenarios::two_claimers_one_unit_left();
    }

    // SPEC-0030 REQ-4
    #[test]
    fn req4_two_claimers_cannot_exceed_max_in_flight() {
        scenarios::two_claimers_one_slot_free();
    }

    // SPEC-0030 REQ-4
    #[test]
    fn req4_three_claimers_racing_on_one_todo_claim_it_once() {
        scenarios::three_claimers_two_racing_on_one_todo();
    }

    // SPEC-0030 REQ-4
    #[test]
    fn req4_three_claimers_cannot_exceed_the_window_limit() {
        scenarios::three_claimers_one_unit_left();
    }

    // SPEC-0030 REQ-4, with issue #15's group admission
    #[test]
    fn req4_a_group_claim_and_a_single_claim_cannot_exceed_the_window_limit() {
        scenarios::group_and_single_one_unit_left();
    }

    // SPEC-0030 REQ-4, with issue #15's group admission
    #[test]
    fn req4_a_group_claim_racing_a_single_claim_claims_each_todo_once() {
        scenarios::group_and_single_racing_room_for_two();
    }

    // Issue #15: a group's decisions see its own claims, so the member past the cap is refused
    // and the ones before it are claimed.
    #[test]
    fn a_group_claim_admits_members_in_turn_until_the_cap() {
        let db = Db::new(3, Limits { max_claims_per_window: 10, max_in_flight: 2 });
        let outcomes = claim_group(&db, &[0, 1, 2], 3);
        assert_eq!(outcomes, vec![Outcome::Claimed, Outcome::Claimed, Outcome::Refused(Reason::InFlightFull)]);
        assert_eq!(db.check(), 2);
    }

    #[test]
    fn try_lock_joins_its_own_rank_and_skips_a_held_lock() {
        let (first, second) = (Ranked::new(TODO_ROW_RANK, ()), Ranked::new(TODO_ROW_RANK, ()));
        let _first = first.try_lock().expect("free");
        let second_guard = second.try_lock().expect("a second lock of the same rank, taken without waiting");
        assert!(std::thread::scope(|scope| scope.spawn(|| second.try_lock().is_none()).join().expect("join")));
        drop(second_guard);
        assert_eq!(highest_held_rank(), TODO_ROW_RANK, "one todo lock is still held");
    }

    #[test]
    #[should_panic(expected = "lock order violation: rank 1 acquired while holding rank 2")]
    fn try_lock_still_refuses_a_todo_under_the_policy_lock() {
        let (todo, policy) = (Ranked::new(TODO_ROW_RANK, ()), Ranked::new(POLICY_ROW_RANK, ()));
        let _policy = policy.lock();
        let _todo = todo.try_lock();
    }

    // SPEC-0030 REQ-4. A single std run rarely hits the race, so a barrier holds both claimers
    // between their decision and their charge: the interleaving loom finds by itself.
    #[test]
    #[should_panic(expected = "over-admission")]
    fn req4_check_outside_the_policy_lock_over_admits() {
        let both_decided = Arc::new(Barrier::new(2));
        scenarios::check_outside_lock_one_unit_left(move || {
            both_decided.wait();
        });
    }

    // SPEC-0030 REQ-4
    #[test]
    #[should_panic(expected = "lock order violation")]
    fn req4_policy_lock_before_todo_lock_is_refused() {
        scenarios::policy_before_todo_against_production();
    }

    #[test]
    fn ranked_locks_allow_any_release_order_and_reacquiring_lower_ranks_after_release() {
        let (todo, policy, log) = (Ranked::new(1, ()), Ranked::new(2, ()), Ranked::new(3, ()));
        let todo_guard = todo.lock();
        let policy_guard = policy.lock();
        drop(todo_guard); // out of acquisition order: rank 2 is still held
        assert_eq!(highest_held_rank(), 2);
        let log_guard = log.lock();
        drop(log_guard);
        drop(policy_guard);
        assert_eq!(highest_held_rank(), 0);
        let _todo_again = todo.lock();
        let _policy_again = policy.lock();
    }

    #[test]
    #[should_panic(expected = "lock order violation: rank 1 acquired while holding rank 1")]
    fn ranked_locks_refuse_two_of_the_same_rank() {
        let (first_todo, second_todo) = (Ranked::new(TODO_ROW_RANK, ()), Ranked::new(TODO_ROW_RANK, ()));
        let _first = first_todo.lock();
        let _second = second_todo.lock();
    }
}
