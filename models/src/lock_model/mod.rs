//! A model of the claim transaction's lock protocol, small enough for loom to explore every
//! interleaving of two or three claimers.
//!
//! Governing: SPEC-0030 REQ-4 (lock the candidate todo first, then the policy row with a blocking
//! lock; read in-flight and usage under that lock; never take the policy lock before a todo lock
//! nor wait on a todo lock while holding it; at most one policy lock; a refusal releases both).
//!
//! Why a model and not the engine: loom can only explore code whose every synchronisation point
//! it controls, and the engine's locks live in Postgres. So this module restates the protocol of
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
//! notices each mistake. Nothing outside this module's tests uses them, and nothing in production
//! uses this module at all.

use crate::admission::{self, Decision, Policy, Reason};

mod ranked;
#[cfg(test)]
mod tests;

pub use ranked::{COMMIT_LOG_RANK, POLICY_ROW_RANK, Ranked, RankedGuard, TODO_ROW_RANK};

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
            additional_windows: vec![],
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
