//! Simulated time: the one runtime a seed runs on, how far into the run it is, and the store's
//! clock that follows it.
//!
//! Exists so a seed costs what happens in it, not how long it lasts. Every host of a run is a set
//! of tasks on one current-thread tokio runtime whose clock is paused: when every task waits,
//! tokio moves the clock straight to the next timer, so a quiet minute costs nothing. The
//! scheduler's choices (`select!` among them) come from the seed (`rng_seed`, under the
//! workspace's `--cfg tokio_unstable`), and nothing on the runtime waits on real I/O (the
//! PostgreSQL bridge blocks), so one seed always runs the same way.

use chrono::{DateTime, Duration as Span, Utc};
use models::store::{Clock, ManualClock};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

thread_local! {
    /// When the run on this thread started, on its runtime's clock (None: no run is going).
    static STARTED: Cell<Option<tokio::time::Instant>> = const { Cell::new(None) };
}

/// The runtime one seed runs on: one thread, the clock paused (it jumps to the next timer when
/// every task waits), the scheduler seeded.
pub(crate) fn runtime(seed: u64) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .rng_seed(tokio::runtime::RngSeed::from_bytes(&seed.to_le_bytes()))
        // A panic on any task (a handler of the production router above all) ends the run and
        // fails the seed, where a runtime would log it and carry on.
        .unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime)
        .build()
        .unwrap_or_else(|error| panic!("cannot build the simulation's runtime: {error}"))
}

/// Marks the start of a run on this thread; call on the run's runtime.
pub(crate) fn start() {
    STARTED.with(|started| started.set(Some(tokio::time::Instant::now())));
}

/// Marks the end of the run on this thread: `elapsed` is zero again.
pub(crate) fn stop() {
    STARTED.with(|started| started.set(None));
}

/// Simulated time since the run on this thread started (zero outside a run).
pub fn elapsed() -> Duration {
    STARTED.with(|started| started.get().map(|at| tokio::time::Instant::now() - at)).unwrap_or_default()
}

/// True while a run is going on this thread.
fn running() -> bool {
    STARTED.with(|started| started.get().is_some())
}

/// The clock the store and the judges read: where the run started (`base`), plus simulated time,
/// plus the clock jumps so far. Each reading on the run's thread follows simulated time and is
/// kept; a reading on another thread (or outside a run) gets the last one kept, so the
/// PostgreSQL bridge `follow`s before it hands a call to its thread. Cheap to clone; clones share
/// everything.
#[derive(Clone)]
pub struct SimClock {
    clock: ManualClock,
    base: DateTime<Utc>,
    jumped_ms: Arc<AtomicI64>,
}

impl SimClock {
    pub fn at(base: DateTime<Utc>) -> SimClock {
        SimClock { clock: ManualClock::at(base), base, jumped_ms: Arc::new(AtomicI64::new(0)) }
    }

    /// The clock jumps forward by `span` (a fault: the database's clock is not simulated time).
    pub fn jump(&self, span: Span) {
        self.jumped_ms.fetch_add(span.num_milliseconds(), Ordering::SeqCst);
    }

    /// Now: simulated time on the run's thread (kept for other threads), else the last reading.
    pub fn follow(&self) -> DateTime<Utc> {
        if running() {
            let since_start = Span::from_std(elapsed()).unwrap_or_default();
            let jumped = Span::milliseconds(self.jumped_ms.load(Ordering::SeqCst));
            self.clock.set(self.base + since_start + jumped);
        }
        self.clock.now()
    }
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        self.follow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_jumps_over_idle_time() {
        let ran = runtime(1).block_on(async {
            start();
            let wall = std::time::Instant::now();
            tokio::time::sleep(Duration::from_secs(3_600)).await;
            let simulated = elapsed();
            stop();
            (simulated, wall.elapsed())
        });
        assert_eq!(ran.0, Duration::from_secs(3_600));
        assert!(ran.1 < Duration::from_secs(60), "an idle hour took {:?} of real time", ran.1);
    }

    #[test]
    #[should_panic(expected = "unhandled panic")]
    fn a_panic_on_any_task_fails_the_run() {
        runtime(1).block_on(async {
            tokio::spawn(async { panic!("a handler panicked") });
            tokio::time::sleep(Duration::from_secs(1)).await;
        });
    }

    #[test]
    fn the_store_clock_follows_simulated_time_and_jumps() {
        let base: DateTime<Utc> = "2026-11-01T08:50:00Z".parse().expect("instant");
        let clock = SimClock::at(base);
        let read = runtime(1).block_on(async {
            start();
            tokio::time::sleep(Duration::from_secs(90)).await;
            clock.jump(Span::hours(1));
            let read = clock.now();
            stop();
            read
        });
        assert_eq!(read, base + Span::seconds(90) + Span::hours(1));
        // Outside the run it keeps its last reading.
        assert_eq!(clock.now(), read);
    }
}
