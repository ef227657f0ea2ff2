//! Where time comes from: the `Clock` every store and sweep is handed, never a global.
//!
//! Its own module because a simulation or a test moves time by swapping the clock, and nothing
//! else in the store's contract needs to know which clock it is.

use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Where time comes from. Passed in everywhere so a simulation or a test can move it.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;

    /// True when a database-backed store should read the database's own clock
    /// (`clock_timestamp()`, the clock of record for admission) instead of `now()`.
    fn defer_to_database(&self) -> bool {
        false
    }
}

/// Production time: the host's clock, and the database's inside transactions.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn defer_to_database(&self) -> bool {
        true
    }
}

/// A clock that only moves when told to: tests and the simulation drive leases, backoffs and
/// window boundaries with it instead of sleeping.
#[derive(Debug, Clone)]
pub struct ManualClock {
    micros_since_epoch: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn at(instant: DateTime<Utc>) -> Self {
        ManualClock { micros_since_epoch: Arc::new(AtomicI64::new(instant.timestamp_micros())) }
    }

    pub fn set(&self, instant: DateTime<Utc>) {
        self.micros_since_epoch.store(instant.timestamp_micros(), Ordering::SeqCst);
    }

    pub fn advance(&self, by: chrono::Duration) {
        let micros = by.num_microseconds().unwrap_or(i64::MAX);
        self.micros_since_epoch.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        let micros = self.micros_since_epoch.load(Ordering::SeqCst);
        // The value was stored from a valid DateTime, so it converts back.
        DateTime::from_timestamp_micros(micros).unwrap_or(DateTime::<Utc>::MIN_UTC)
    }
}
