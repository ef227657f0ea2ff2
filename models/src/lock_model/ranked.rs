//! Ranked locks: the mutexes that stand for row locks in the lock model, each with a rank (todo
//! row, then policy row, then the commit log). Locking one while holding a lock of the same or a
//! higher rank panics with "lock order violation" before it waits, so an ordering mistake fails
//! on the first run that reaches it, under loom or on std threads alike, instead of deadlocking
//! (which loom reports by aborting the test process). The rank bookkeeping is its own concept,
//! so it lives apart from the claim protocol that uses it; it must never decide anything itself.

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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

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
