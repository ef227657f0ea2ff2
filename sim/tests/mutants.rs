//! The harness catches deliberate bugs (issue 4, item 7): a few of the seeded-bug catalog, one
//! from each kind of check, hunted here; `cargo run -p sim --release -- mutants` hunts them all.
//! One test function only: a bug is switched on process-wide.

use models::mutants::Mutant;
use sim::mutants::{Hunt, hunt};

#[test]
fn the_harness_catches_seeded_bugs_of_each_kind() {
    // Ledger/oracle check (shared window code), the differential trace (a liveness bug no
    // invariant sees), the SQL and ledger charging checks, and the real-concurrency stress.
    for mutant in
        [Mutant::FoldLatest, Mutant::ClaimNextStopsAtFirstRefusal, Mutant::RefundOnRelease, Mutant::CheckOutsideLock]
    {
        match hunt(mutant, 8) {
            Hunt::Caught { after_seeds, how } => println!("{} caught after {after_seeds}: {how}", mutant.name()),
            Hunt::Missed { seeds } => panic!("{} was not caught in {seeds} seeds", mutant.name()),
        }
    }
    // And with no bug switched on, the same first seed is clean.
    assert_eq!(sim::mutants::one_seed(1), None);
}
