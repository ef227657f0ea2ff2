//! The mutant hunt: switches each seeded bug of `models::mutants` on in turn and runs the harness
//! until it finds it, proving the harness catches real bugs and not only passes.
//!
//! Every bug but one is hunted with the differential run (the same seed on `ModelStore` and on
//! PostgreSQL through the bridge, with faults): a catch is a trace that differs from the model's
//! or a violated invariant (ledger, oracle or SQL). Check-outside-the-lock is a race the bridge
//! cannot produce (it serialises the database), so it is hunted with the real-concurrency stress
//! run, whose invariants are checked in SQL.

use crate::runner;
use crate::world::Config;
use models::mutants::{self, Mutant};
use std::process::ExitCode;

/// How a hunt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunt {
    Caught { after_seeds: u64, how: String },
    Missed { seeds: u64 },
}

/// One seed of the harness with whatever bug is switched on: the first sign of it, if any.
pub fn one_seed(seed: u64) -> Option<String> {
    match runner::differential(Config::quick(seed, true)) {
        Err(difference) => Some(difference.lines().next().unwrap_or("traces differ").to_string()),
        Ok(outcome) => outcome.violations.first().cloned(),
    }
}

/// The stress run at the scale the hunt uses; its violations, if any.
pub fn one_stress(seed: u64) -> Vec<String> {
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return vec![format!("no runtime for the stress run: {error}")],
    };
    runtime.block_on(async {
        let database = engine::testing::fresh_database().await;
        let mut config = crate::stress::StressConfig::small();
        config.seed = seed;
        let report = crate::stress::run(&database.url, &config).await;
        engine::testing::drop_database(&database).await;
        report.invariants.violations.iter().map(|v| format!("sql {:?}: {}", v.invariant, v.detail)).collect()
    })
}

/// Hunts one bug for at most `seeds` seeds (stress runs: at most 3).
pub fn hunt(mutant: Mutant, seeds: u64) -> Hunt {
    mutants::activate(Some(mutant));
    let result = if mutant == Mutant::CheckOutsideLock {
        let tries = seeds.clamp(1, 3);
        (1..=tries)
            .find_map(|seed| one_stress(seed).into_iter().next().map(|how| (seed, how)))
            .ok_or(Hunt::Missed { seeds: tries })
    } else {
        (1..=seeds).find_map(|seed| one_seed(seed).map(|how| (seed, how))).ok_or(Hunt::Missed { seeds })
    };
    mutants::activate(None);
    match result {
        Ok((after_seeds, how)) => Hunt::Caught { after_seeds, how },
        Err(missed) => missed,
    }
}

/// `sim mutants`: a clean baseline first, then every bug; one line each and a total.
pub fn hunt_all(seeds: u64) -> ExitCode {
    mutants::activate(None);
    for seed in 1..=2 {
        if let Some(problem) = one_seed(seed) {
            println!("baseline seed {seed} is not clean, so no catch would mean anything: {problem}");
            return ExitCode::FAILURE;
        }
    }
    println!("baseline: seeds 1-2 clean (differential, faults on)");
    let mut caught = 0;
    for mutant in Mutant::ALL {
        let started = std::time::Instant::now();
        match hunt(mutant, seeds) {
            Hunt::Caught { after_seeds, how } => {
                caught += 1;
                let unit = if mutant == Mutant::CheckOutsideLock { "stress run" } else { "seed" };
                let plural = if after_seeds == 1 { "" } else { "s" };
                println!(
                    "{:<36} caught after {after_seeds} {unit}{plural} ({:.1} s): {}",
                    mutant.name(),
                    started.elapsed().as_secs_f64(),
                    truncate(&how, 160)
                );
            }
            Hunt::Missed { seeds } => println!("{:<36} MISSED after {seeds} seeds", mutant.name()),
        }
    }
    println!("caught {caught} of {}", Mutant::ALL.len());
    if caught == Mutant::ALL.len() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn truncate(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(chars).collect::<String>())
    }
}
