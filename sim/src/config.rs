//! What one simulated run is asked to do (its seed, how many replicas, agents and todos, how
//! long, whether faults strike) and the fixed world every run shares: the team's queues and where
//! simulated time starts.
//!
//! Exists apart from `world` so the pieces a run is built from (the workload, the fault driver)
//! can read it without depending on the module that assembles them.

use chrono::{DateTime, Utc};

/// Where simulated time starts, by seed parity: ten minutes before Los Angeles falls back (odd
/// seeds; 01:30 happens twice) or springs forward (even seeds; 02:30 does not happen).
pub const EPOCH_FALL_BACK: &str = "2026-11-01T08:50:00Z";
pub const EPOCH_SPRING_FORWARD: &str = "2027-03-14T09:50:00Z";
/// The team's queues: a window budget, an in-flight cap, both, and none.
pub const QUEUES: [&str; 4] = ["metered", "capped", "both", "free"];
/// The second owner's queue that the webhook also fans out to.
pub const COPY_QUEUE: &str = "copy";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub seed: u64,
    pub replicas: usize,
    pub agents: usize,
    pub todos: usize,
    /// Simulated seconds the agents keep draining after the producer starts.
    pub duration_s: u64,
    /// Random faults (the default `FaultSchedule`, database errors, client cancellations).
    pub faults: bool,
}

impl Config {
    pub fn quick(seed: u64, faults: bool) -> Config {
        Config { seed, replicas: 2, agents: 3, todos: 50, duration_s: 240, faults }
    }

    /// The client hosts the run starts: the agents, the other owner's agent, the owner and the
    /// producer (the hosts a partition may cut off).
    pub fn clients(&self) -> Vec<String> {
        (0..self.agents).map(|i| format!("a{i}")).chain(["m0", "owner", "producer"].map(String::from)).collect()
    }
}

/// Where `seed`'s simulated time starts.
pub fn epoch_for(seed: u64) -> DateTime<Utc> {
    let at = if seed % 2 == 1 { EPOCH_FALL_BACK } else { EPOCH_SPRING_FORWARD };
    at.parse().unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}
