//! The lock model's tests. Each scenario is written once: loom explores it under `--cfg loom`
//! (`ci/loom`, every interleaving or up to a preemption bound) and `cargo test` runs it once on
//! std threads. They live apart from the model so the protocol reads on its own.

use super::*;

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
}
