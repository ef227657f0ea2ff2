//! Running seeds on either store and comparing them. Exists so the CLI, the tests and the
//! mutant hunt run a seed in exactly one way (same clock, same fresh database, same comparison).

use crate::config::{Config, epoch_for};
use crate::fault_driver::FaultPlan;
use crate::world::{self, Outcome};
use models::store::ManualClock;
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
    let clock = ManualClock::at(epoch_for(config.seed));
    let store = models::model_store::ModelStore::new(std::sync::Arc::new(clock.clone()));
    world::run(store, clock, config)
}

/// One seed on the in-memory `ModelStore` with the faults of `plan` (a scripted scenario).
pub fn on_model_planned(config: Config, plan: FaultPlan) -> Outcome {
    let clock = ManualClock::at(epoch_for(config.seed));
    let store = models::model_store::ModelStore::new(std::sync::Arc::new(clock.clone()));
    world::run_planned(store, clock, config, plan)
}

/// One seed on a fresh PostgreSQL database through the bridge.
pub fn on_postgres(config: Config) -> Outcome {
    let clock = ManualClock::at(epoch_for(config.seed));
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
/// seeds already started still finish, and are not handed over.
pub fn in_seed_order<R: Send>(
    seeds: Range<u64>,
    jobs: usize,
    run: impl Fn(u64) -> R + Sync,
    mut each: impl FnMut(u64, R) -> ControlFlow<()>,
) {
    let next = AtomicU64::new(seeds.start);
    let stop = AtomicBool::new(false);
    let (done, results) = mpsc::channel::<(u64, R)>();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            let (done, next, stop, run) = (done.clone(), &next, &stop, &run);
            scope.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= seeds.end || done.send((seed, run(seed))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        let mut waiting = BTreeMap::new();
        let mut due = seeds.start;
        for (seed, result) in results.iter() {
            waiting.insert(seed, result);
            while let Some(result) = waiting.remove(&due) {
                if each(due, result).is_break() {
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
                due += 1;
            }
        }
    });
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
