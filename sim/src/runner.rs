//! Running seeds on either store and comparing them. Exists so the CLI, the tests and the
//! mutant hunt run a seed in exactly one way (same clock, same fresh database, same comparison).

use crate::config::{Config, epoch_for};
use crate::fault_driver::FaultPlan;
use crate::sim_time::SimClock;
use crate::world::{self, Outcome};
use std::collections::BTreeMap;
use std::ops::{ControlFlow, Range};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;

/// Sums over many seeds, for the CLI's summary line.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub seeds: u64,
    pub ops: u64,
    pub claims: u64,
    pub faults: u64,
    pub violations: u64,
    pub last_hash: String,
}

impl Totals {
    pub fn add(&mut self, outcome: &Outcome) {
        self.seeds += 1;
        self.ops += outcome.ops;
        self.claims += outcome.claims;
        self.faults += outcome.faults.total();
        self.violations += outcome.violations.len() as u64;
        self.last_hash.clone_from(&outcome.trace_hash);
    }

    /// One line for a run so far or at its end. Rates are per second of wall time: with one job
    /// on an idle machine, its claims per second are simulated claims per CPU-second (issue
    /// #15's measure).
    pub fn summary(&self, elapsed_s: f64) -> String {
        format!(
            "seeds run: {} | operations: {} | claims: {} | faults injected: {} | invariant violations: {} | \
             last trace hash: {} | {:.1} s, {:.1} seeds/s, {:.0} claims/s",
            self.seeds,
            self.ops,
            self.claims,
            self.faults,
            self.violations,
            self.last_hash,
            elapsed_s,
            self.seeds as f64 / elapsed_s.max(1e-9),
            self.claims as f64 / elapsed_s.max(1e-9)
        )
    }
}

/// One seed on the in-memory `ModelStore`.
pub fn on_model(config: Config) -> Outcome {
    let clock = SimClock::at(epoch_for(config.seed));
    let store = models::model_store::ModelStore::new(std::sync::Arc::new(clock.clone()));
    world::run(store, clock, config)
}

/// One seed on the in-memory `ModelStore` with the faults of `plan` (a scripted scenario).
pub fn on_model_planned(config: Config, plan: FaultPlan) -> Outcome {
    let clock = SimClock::at(epoch_for(config.seed));
    let store = models::model_store::ModelStore::new(std::sync::Arc::new(clock.clone()));
    world::run_planned(store, clock, config, plan)
}

/// One seed on a fresh PostgreSQL database through the bridge.
pub fn on_postgres(config: Config) -> Outcome {
    let clock = SimClock::at(epoch_for(config.seed));
    let (store, database) = crate::postgres::fresh(&clock);
    let outcome = world::run(store, clock, config);
    crate::postgres::drop(&database);
    outcome
}

/// One seed on both; the traces must be equal line for line. Returns the Postgres outcome (its
/// violations include the SQL checks, and the model's are added) or the first difference.
pub fn differential(config: Config) -> Result<Outcome, String> {
    let model = on_model(config);
    let postgres = on_postgres(config);
    same_trace(&model, &postgres)?;
    let mut outcome = postgres;
    outcome.violations.extend(model.violations.into_iter().map(|v| format!("model: {v}")));
    Ok(outcome)
}

/// `Ok` when the two runs of one seed saw the same trace; else the first line that differs.
pub fn same_trace(model: &Outcome, postgres: &Outcome) -> Result<(), String> {
    if model.trace_hash == postgres.trace_hash {
        return Ok(());
    }
    let line = model
        .trace
        .iter()
        .zip(&postgres.trace)
        .position(|(a, b)| a.to_string() != b.to_string())
        .unwrap_or(model.trace.len().min(postgres.trace.len()));
    Err(format!(
        "seed {}: the traces differ (model {} vs postgres {}) first at line {line}:\n  model:    {}\n  postgres: {}",
        model.seed,
        model.trace_hash,
        postgres.trace_hash,
        model.trace.get(line).map_or("<end>".to_string(), ToString::to_string),
        postgres.trace.get(line).map_or("<end>".to_string(), ToString::to_string),
    ))
}

/// Runs `run` for every seed of `seeds` on `jobs` threads and hands each result to `each` in seed
/// order, so what a run prints does not depend on how many threads ran it (every seed has its
/// own runtime and world; one seed always runs the same way). `each` may stop the run early;
/// seeds already started still finish, and are not handed over. A panic (in `run` for some seed,
/// or in `each`) stops the threads from starting more seeds and goes on up once that seed's turn
/// comes. Threads run at most `2 * jobs` seeds ahead of the one handed over next.
pub fn in_seed_order<R: Send>(
    seeds: Range<u64>,
    jobs: usize,
    run: impl Fn(u64) -> R + Sync,
    mut each: impl FnMut(u64, R) -> ControlFlow<()>,
) {
    let jobs = jobs.max(1) as u64;
    let next = AtomicU64::new(seeds.start);
    let due = AtomicU64::new(seeds.start);
    let stop = AtomicBool::new(false);
    let (done, results) = mpsc::channel::<(u64, std::thread::Result<R>)>();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let (done, next, due, stop, run) = (done.clone(), &next, &due, &stop, &run);
            scope.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= seeds.end {
                        break;
                    }
                    while seed >= due.load(Ordering::SeqCst) + 2 * jobs && !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed)));
                    if done.send((seed, result)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        // Whichever way this ends (a break, a panic here or a seed's panic re-raised), the
        // threads start no more seeds and their results have nowhere to go.
        let _stop = StopOnDrop(&stop);
        let results = results;
        let mut waiting = BTreeMap::new();
        for (seed, result) in results.iter() {
            waiting.insert(seed, result);
            while let Some(result) = waiting.remove(&due.load(Ordering::SeqCst)) {
                let seed = due.load(Ordering::SeqCst);
                let result = result.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                if each(seed, result).is_break() {
                    return;
                }
                due.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_run_on_several_threads_are_handed_over_in_seed_order() {
        let mut seen = vec![];
        // Later seeds finish first, so the threads report out of order.
        let run = |seed: u64| {
            std::thread::sleep(std::time::Duration::from_millis(30 - 2 * (seed - 10)));
            seed * 2
        };
        in_seed_order(10..20, 3, run, |seed, doubled| {
            seen.push((seed, doubled));
            ControlFlow::Continue(())
        });
        assert_eq!(seen, (10..20).map(|seed| (seed, seed * 2)).collect::<Vec<_>>());
    }

    #[test]
    fn a_seed_that_panics_stops_the_run_at_its_turn() {
        let started = AtomicU64::new(0);
        let mut seen = vec![];
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let run = |seed: u64| {
                started.fetch_add(1, Ordering::SeqCst);
                assert_ne!(seed, 3, "seed 3 fails");
                seed
            };
            in_seed_order(0..10_000, 2, run, |seed, _| {
                seen.push(seed);
                ControlFlow::Continue(())
            });
        }));
        assert!(outcome.is_err(), "the panic of seed 3 went nowhere");
        assert_eq!(seen, vec![0, 1, 2]);
        // Only the few seeds ahead of the failing one were started, not the whole range.
        assert!(started.load(Ordering::SeqCst) <= 3 + 2 * 2 + 2, "{} seeds started", started.load(Ordering::SeqCst));
    }

    #[test]
    fn a_break_stops_the_hand_over() {
        let mut seen = vec![];
        in_seed_order(
            0..1_000,
            2,
            |seed| seed,
            |seed, _| {
                seen.push(seed);
                if seed == 4 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
            },
        );
        assert_eq!(seen, vec![0, 1, 2, 3, 4]);
    }
}
