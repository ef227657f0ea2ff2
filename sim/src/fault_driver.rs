//! What happens to the system during a run, step by step: replica crashes and restarts,
//! partitions between a client and a replica, cut replica–database links, forward clock jumps and
//! damaged policy rows, each on a seeded chance per 10 ms step; and, when the clients are done,
//! the healing that lets the run drain with no fault left.
//!
//! Exists apart from `world` (which builds the hosts and runs the loop) so the fault plan reads on
//! its own. Every choice comes from its own seeded generator, in step order.

use crate::faults::{Event, FaultRates, Faulty, Rng};
use crate::push_world::Streams;
use crate::world::{Config, FaultCounts, SimStore};
use chrono::Duration as Span;
use models::identity::QueueIdentity;

/// Chances per step, in hundred-thousandths.
const CRASH_PER_100K: u64 = 16;
const PARTITION_PER_100K: u64 = 20;
const CUT_LINK_PER_100K: u64 = 16;
const CLOCK_JUMP_PER_100K: u64 = 12;
const CORRUPTION_PER_100K: u64 = 6;

/// The fault plan of one run and what it has done so far.
pub struct FaultDriver {
    rng: Rng,
    replicas: usize,
    /// Every client host, for partitions.
    clients: Vec<String>,
    /// The budgeted identities whose policy rows may be damaged.
    identities: Vec<QueueIdentity>,
    /// How far the clock has jumped ahead of simulated time.
    offset: Span,
    crashed: Option<(usize, u64)>,
    partitioned: Option<(String, String, u64)>,
    cut_link: Option<(usize, u64)>,
    counts: FaultCounts,
}

impl FaultDriver {
    pub fn new<S: SimStore>(config: &Config, store: &Faulty<S>) -> FaultDriver {
        let identities = store
            .ledger()
            .iter()
            .filter_map(|e| match e {
                Event::PolicySet { identity, .. } => Some(identity.clone()),
                _ => None,
            })
            .collect();
        let clients =
            (0..config.agents).map(|i| format!("a{i}")).chain(["m0", "owner", "producer"].map(String::from)).collect();
        FaultDriver {
            rng: Rng::new(config.seed ^ 0xD21E),
            replicas: config.replicas,
            clients,
            identities,
            offset: Span::zero(),
            crashed: None,
            partitioned: None,
            cut_link: None,
            counts: FaultCounts::default(),
        }
    }

    pub fn offset(&self) -> Span {
        self.offset
    }

    pub fn counts(&self) -> FaultCounts {
        self.counts
    }

    /// One step's faults: end the ones whose time is up, maybe start new ones.
    pub fn step<S: SimStore>(&mut self, sim: &mut turmoil::Sim<'_>, store: &Faulty<S>, streams: &Streams, steps: u64) {
        if let Some((index, back_at)) = self.crashed
            && steps >= back_at
        {
            sim.bounce(format!("r{index}"));
            streams.restarted(index);
            self.crashed = None;
        } else if self.crashed.is_none() && self.replicas > 1 && self.rng.below(100_000) < CRASH_PER_100K {
            let index = self.rng.below(self.replicas as u64) as usize;
            sim.crash(format!("r{index}"));
            streams.crashed(index);
            self.crashed = Some((index, steps + 100 + self.rng.below(1_000)));
            self.counts.crashes += 1;
        }
        if let Some((a, b, until_step)) = &self.partitioned
            && steps >= *until_step
        {
            sim.repair(a.as_str(), b.as_str());
            self.partitioned = None;
        } else if self.partitioned.is_none() && self.rng.below(100_000) < PARTITION_PER_100K {
            let a = self.rng.pick(&self.clients).clone();
            let b = format!("r{}", self.rng.below(self.replicas as u64));
            sim.partition(a.as_str(), b.as_str());
            self.partitioned = Some((a, b, steps + 50 + self.rng.below(750)));
            self.counts.partitions += 1;
        }
        if let Some((replica, until_step)) = self.cut_link
            && steps >= until_step
        {
            store.cut_link(replica, false);
            self.cut_link = None;
        } else if self.cut_link.is_none() && self.rng.below(100_000) < CUT_LINK_PER_100K {
            let replica = self.rng.below(self.replicas as u64) as usize;
            store.cut_link(replica, true);
            self.cut_link = Some((replica, steps + 50 + self.rng.below(750)));
            self.counts.database_partitions += 1;
        }
        if self.rng.below(100_000) < CLOCK_JUMP_PER_100K {
            // Forward only: a database clock does not run backwards. Across an hour boundary, a
            // day, or to just before the DST fold's second 01:30.
            self.offset += match self.rng.below(3) {
                0 => Span::minutes(20),
                1 => Span::hours(1),
                _ => Span::hours(6),
            };
            self.counts.clock_jumps += 1;
        }
        if self.rng.below(100_000) < CORRUPTION_PER_100K && !self.identities.is_empty() {
            let identity = self.rng.pick(&self.identities).clone();
            if current_policy_has_window(&store.ledger(), &identity) {
                store.inner().corrupt_policy_zone(&identity);
                store.record(Event::PolicyCorrupted { identity });
                self.counts.corruptions += 1;
            }
        }
    }

    /// Ends every fault at once and injects no more: the crashed replica restarts, partitions
    /// and cut links are repaired, the database stops failing.
    pub fn heal<S: SimStore>(&mut self, sim: &mut turmoil::Sim<'_>, store: &Faulty<S>, streams: &Streams) {
        store.arm(FaultRates::NONE);
        if let Some((index, _)) = self.crashed.take() {
            sim.bounce(format!("r{index}"));
            streams.restarted(index);
        }
        if let Some((a, b, _)) = self.partitioned.take() {
            sim.repair(a.as_str(), b.as_str());
        }
        if let Some((replica, _)) = self.cut_link.take() {
            store.cut_link(replica, false);
        }
    }
}

fn current_policy_has_window(ledger: &[Event], identity: &QueueIdentity) -> bool {
    ledger
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::PolicySet { identity: i, policy } if i == identity => Some(policy.window.is_some()),
            Event::PolicyCleared { identity: i } if i == identity => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}
