//! The mutant hunt: switches each seeded bug of `models::mutants` on in turn and runs the harness
//! until it finds it, proving the harness catches real bugs and not only passes.
//!
//! Every bug but one is hunted with the differential run (the same seed on `ModelStore` and on
//! PostgreSQL through the bridge, with faults): a catch is a trace that differs from the model's
//! or a violated invariant (ledger, oracle or SQL). Check-outside-the-lock is a race the bridge
//! cannot produce (it serialises the database), so it is hunted with the real-concurrency stress
//! run, whose invariants are checked in SQL. The push pipeline's bugs are hooked in the reference
//! `ModelStore` only (`Mutant::model_store_only`), so they are hunted on model runs, whose
//! ledger, outbox and push journal the push invariants judge. Push delivery's own bugs on
//! `PgStore` (`Mutant::push_stress_only`, issue #51) need real concurrency to show: they are
//! hunted with the stress run's push judge on in-process replicas, which run the bug.

use crate::config::Config;
use crate::runner;
use models::mutants::{self, Mutant};
use std::process::ExitCode;

/// Which check found a bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// A ledger, oracle or SQL invariant on the PostgreSQL run.
    Invariants,
    /// The PostgreSQL run's trace differs from the model's (no invariant broke).
    Differential,
    /// The real-concurrency stress run's SQL invariants.
    Stress,
    /// The real-concurrency stress run's push judge (`stress::PushVerdict`).
    PushStress,
}

/// How a hunt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunt {
    Caught {
        after_seeds: u64,
        judge: Judge,
        how: String,
    },
    Missed {
        seeds: u64,
    },
    /// Caught, but the same seed without the bug fails too: the catch proves nothing.
    Unclean {
        seed: u64,
        how: String,
    },
}

/// One seed of the harness with whatever bug is switched on: the first sign of it, if any, and
/// which check saw it. The invariants are asked first, then the differential trace.
pub fn one_seed(seed: u64) -> Option<(Judge, String)> {
    let config = Config::quick(seed, true);
    let postgres = runner::on_postgres(config);
    if let Some(violation) = postgres.violations.first() {
        return Some((Judge::Invariants, violation.clone()));
    }
    let model = runner::on_model(config);
    if let Some(violation) = model.violations.first() {
        return Some((Judge::Invariants, format!("model: {violation}")));
    }
    runner::same_trace(&model, &postgres)
        .err()
        .map(|difference| (Judge::Differential, difference.lines().take(3).collect::<Vec<_>>().join(" | ")))
}

/// One seed on the model alone, with faults: the first violated invariant, if any.
pub fn one_model_seed(seed: u64) -> Option<(Judge, String)> {
    let model = runner::on_model(Config::quick(seed, true));
    model.violations.first().map(|violation| (Judge::Invariants, format!("model: {violation}")))
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

/// The push stress at the scale the hunt uses (`StressConfig::push_hunt`): the push judge's
/// violations, then the SQL invariants', if any.
pub fn one_push_stress(seed: u64) -> Vec<String> {
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return vec![format!("no runtime for the stress run: {error}")],
    };
    runtime.block_on(async {
        let database = engine::testing::fresh_database().await;
        let mut config = crate::stress::StressConfig::push_hunt();
        config.seed = seed;
        let report = crate::stress::run(&database.url, &config).await;
        engine::testing::drop_database(&database).await;
        let push = report.push.map(|verdict| verdict.violations).unwrap_or_default();
        let sql = report.invariants.violations.iter().map(|v| format!("sql {:?}: {}", v.invariant, v.detail));
        push.into_iter().chain(sql).collect()
    })
}

/// Hunts one bug for at most `seeds` seeds (stress runs: at most 3), then checks that the seed
/// that caught it is clean without the bug.
pub fn hunt(mutant: Mutant, seeds: u64) -> Hunt {
    let stress = mutant == Mutant::CheckOutsideLock;
    let push_stress = mutant.push_stress_only();
    let tries = if stress || push_stress { seeds.clamp(1, 3) } else { seeds };
    let run = |seed: u64| -> Option<(Judge, String)> {
        if stress {
            one_stress(seed).into_iter().next().map(|how| (Judge::Stress, how))
        } else if push_stress {
            one_push_stress(seed).into_iter().next().map(|how| (Judge::PushStress, how))
        } else if mutant.model_store_only() {
            one_model_seed(seed)
        } else {
            one_seed(seed)
        }
    };
    mutants::activate(Some(mutant));
    let caught = (1..=tries).find_map(|seed| run(seed).map(|(judge, how)| (seed, judge, how)));
    mutants::activate(None);
    let Some((seed, judge, how)) = caught else {
        return Hunt::Missed { seeds: tries };
    };
    match run(seed) {
        None => Hunt::Caught { after_seeds: seed, judge, how },
        Some((_, problem)) => Hunt::Unclean { seed, how: problem },
    }
}

/// `sim mutants`: a clean baseline first, then every bug; one line each and a total.
pub fn hunt_all(seeds: u64) -> ExitCode {
    mutants::activate(None);
    for seed in 1..=2 {
        if let Some((judge, problem)) = one_seed(seed) {
            println!("baseline seed {seed} is not clean ({judge:?}), so no catch would mean anything: {problem}");
            return ExitCode::FAILURE;
        }
    }
    println!("baseline: seeds 1-2 clean (differential, faults on)");
    let mut caught = 0;
    for mutant in Mutant::ALL {
        let started = std::time::Instant::now();
        match hunt(mutant, seeds) {
            Hunt::Caught { after_seeds, judge, how } => {
                caught += 1;
                let unit = if matches!(judge, Judge::Stress | Judge::PushStress) { "stress run" } else { "seed" };
                let plural = if after_seeds == 1 { "" } else { "s" };
                println!(
                    "{:<36} caught after {after_seeds} {unit}{plural} by {judge:?} ({:.1} s): {}",
                    mutant.name(),
                    started.elapsed().as_secs_f64(),
                    truncate(&how, 200)
                );
                if !matches!(judge, Judge::Stress | Judge::PushStress) {
                    let store = if mutant.model_store_only() { "model" } else { "postgres" };
                    println!(
                        "{:<36} replay: cargo run -p sim --release --features mutants -- run --store {store} \
                         --seeds 1 --seed {after_seeds} --mutant {}",
                        "",
                        mutant.name()
                    );
                }
            }
            Hunt::Unclean { seed, how } => {
                println!(
                    "{:<36} NOT PROVEN: seed {seed} also fails without the bug: {}",
                    mutant.name(),
                    truncate(&how, 200)
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
