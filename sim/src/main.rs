//! `cargo run -p sim --release -- run|mutants`: the simulation from the command line.

use clap::{Parser, Subcommand, ValueEnum};
use std::ops::ControlFlow;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// A seed is hundreds of HTTP requests through hyper, axum and JSON on both ends, each allocating
/// as it goes: glibc's malloc and free took about a fifth of a seed's instructions under
/// callgrind, and mimalloc answers them faster (`docs/benchmarks.md` has the rates).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often a run prints its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

#[derive(Parser)]
#[command(
    name = "sim",
    about = "Switchboard's deterministic simulation: runs seeds, replays one, or hunts the seeded bugs."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreArg {
    /// The in-memory reference store (fast; the default).
    Model,
    /// Real PostgreSQL through the blocking bridge (a throwaway cluster is started).
    Postgres,
    /// Both, and the traces must be equal seed by seed.
    Differential,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FaultsArg {
    None,
    All,
}

#[derive(Subcommand)]
enum Command {
    /// Runs seeds and checks every invariant; prints a summary and the last trace hash.
    Run {
        /// How many seeds to run.
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// The first seed (seeds run from here upwards).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, value_enum, default_value_t = FaultsArg::All)]
        faults: FaultsArg,
        #[arg(long, value_enum, default_value_t = StoreArg::Model)]
        store: StoreArg,
        /// Print every seed's trace.
        #[arg(long)]
        trace: bool,
        /// Run with one seeded bug switched on (see `mutants`), e.g. to replay how it was caught.
        #[arg(long)]
        mutant: Option<String>,
        /// Seeds run at once, each on its own thread [default: one per CPU on the model store,
        /// 1 on PostgreSQL]. The output is the same whatever the number.
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Runs the harness against every seeded bug; exits non-zero if any is missed.
    Mutants {
        /// Seeds to try per bug before calling it missed.
        #[arg(long, default_value_t = 40)]
        seeds: u64,
    },
}

/// One job per CPU this process may use.
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |cpus| cpus.get())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { seeds, seed, faults, store, trace, mutant, jobs } => {
            if let Some(name) = &mutant
                && let Err(code) = activate_mutant(name)
            {
                return code;
            }
            let replay = Replay { mutant, faults };
            run_seeds(seed..seed + seeds, faults == FaultsArg::All, store, trace, jobs, &replay)
        }
        #[cfg(feature = "mutants")]
        Command::Mutants { seeds } => sim::mutants::hunt_all(seeds),
        #[cfg(not(feature = "mutants"))]
        Command::Mutants { .. } => {
            eprintln!("this build has no seeded bugs: cargo run -p sim --release --features mutants -- mutants");
            ExitCode::from(2)
        }
    }
}

/// Switches on the seeded bug `name` for this process, or says why it cannot.
fn activate_mutant(name: &str) -> Result<(), ExitCode> {
    #[cfg(not(feature = "mutants"))]
    {
        eprintln!("--mutant {name}: this build has no seeded bugs; run it with `--features mutants`");
        Err(ExitCode::from(2))
    }
    #[cfg(feature = "mutants")]
    {
        let Some(found) = models::mutants::Mutant::ALL.into_iter().find(|m| m.name() == name) else {
            let names: Vec<&str> = models::mutants::Mutant::ALL.iter().map(|m| m.name()).collect();
            eprintln!("--mutant: no seeded bug is called {name}; known: {}", names.join(", "));
            return Err(ExitCode::from(2));
        };
        models::mutants::activate(Some(found));
        Ok(())
    }
}

/// What a replay command line must repeat of this run besides the seed and the store.
struct Replay {
    mutant: Option<String>,
    faults: FaultsArg,
}

impl Replay {
    /// The command that runs `seed` again on `store`.
    fn command(&self, seed: u64, store: StoreArg, trace: bool) -> String {
        let features = if self.mutant.is_some() { " --features mutants" } else { "" };
        let faults = if self.faults == FaultsArg::None { " --faults none" } else { "" };
        let mutant = self.mutant.as_ref().map(|name| format!(" --mutant {name}")).unwrap_or_default();
        let store = match store {
            StoreArg::Model => "model",
            StoreArg::Postgres => "postgres",
            StoreArg::Differential => "differential",
        };
        let trace = if trace { " --trace" } else { "" };
        format!(
            "cargo run -p sim --release{features} -- run --seeds 1 --seed {seed} --store {store}{faults}{mutant}{trace}"
        )
    }
}

/// `sim run`: the seeds in order on `jobs` threads (every core for the model store), each
/// checked; a progress line now and then, a replay command for each failure, the summary last.
fn run_seeds(
    seeds: std::ops::Range<u64>,
    faults: bool,
    store: StoreArg,
    trace: bool,
    jobs: Option<usize>,
    replay: &Replay,
) -> ExitCode {
    let started = Instant::now();
    let mut reported = started;
    let count = seeds.end - seeds.start;
    // Seeds share nothing but the cluster of a PostgreSQL store, so model seeds run on every
    // core unless told otherwise.
    let jobs = jobs.unwrap_or(if store == StoreArg::Model { default_jobs() } else { 1 });
    let mut totals = sim::runner::Totals::default();
    let mut failed = false;
    let run = |seed: u64| {
        let config = sim::world::Config::quick(seed, faults);
        match store {
            StoreArg::Model => Ok(sim::runner::on_model(config)),
            StoreArg::Postgres => Ok(sim::runner::on_postgres(config)),
            StoreArg::Differential => sim::runner::differential(config),
        }
    };
    sim::runner::in_seed_order(seeds, jobs, run, |seed, outcome| {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(diff) => {
                eprintln!("{diff}");
                eprintln!("replay: {}", replay.command(seed, StoreArg::Differential, false));
                failed = true;
                return ControlFlow::Break(());
            }
        };
        if trace {
            for line in &outcome.trace {
                println!("{line}");
            }
        }
        totals.add(&outcome);
        // A long run (thousands of seeds) says how far it got, on stderr beside failures.
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = Instant::now();
            let so_far = totals.summary(started.elapsed().as_secs_f64());
            eprintln!("at seed {seed} ({} of {count}): {so_far}", totals.seeds);
        }
        if !outcome.violations.is_empty() {
            for violation in &outcome.violations {
                eprintln!("seed {seed}: {violation}");
            }
            eprintln!("replay: {}", replay.command(seed, store, true));
        }
        ControlFlow::Continue(())
    });
    if failed {
        return ExitCode::FAILURE;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("{} | {jobs} job(s)", totals.summary(elapsed));
    if totals.violations > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
