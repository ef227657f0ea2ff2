//! What happens to the system during a run, step by step: replica crashes and restarts,
//! partitions between a client and a replica, cut replica–database links, forward clock jumps and
//! damaged policy rows, each on a seeded chance per 10 ms step (`FaultSchedule`) or at the steps
//! a scenario names (`ScriptedFault`); and, when the clients are done, the healing that lets the
//! run drain with no fault left.
//!
//! Exists apart from `world` (which builds the hosts and runs the loop) so the fault plan reads on
//! its own. Every random choice comes from its own seeded generator, in step order.

use crate::config::Config;
use crate::faults::{Event, FaultRates, Faulty, Rng};
use crate::sim_store::SimStore;
use chrono::Duration as Span;
use models::identity::QueueIdentity;
use std::collections::VecDeque;

/// How often each fault starts, as a chance per 10 ms step in hundred-thousandths, while none of
/// its kind is going on. The draws happen in a fixed order every step whatever the rates, so a
/// seed's run depends on the rates only where a draw falls between the old and the new rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSchedule {
    /// A replica crashes (and restarts 1 to 11 seconds later).
    pub crash_per_100k: u64,
    /// A client is cut off from one replica for 0.5 to 8 seconds.
    pub partition_per_100k: u64,
    /// A replica's link to the database is cut for 0.5 to 8 seconds.
    pub cut_link_per_100k: u64,
    /// The clock jumps forward 20 minutes, an hour or six hours.
    pub clock_jump_per_100k: u64,
    /// A windowed policy's stored row is damaged (an unknown zone).
    pub corruption_per_100k: u64,
}

impl FaultSchedule {
    /// The rates every random run uses.
    pub const STANDARD: FaultSchedule = FaultSchedule {
        crash_per_100k: 16,
        partition_per_100k: 20,
        cut_link_per_100k: 16,
        clock_jump_per_100k: 12,
        corruption_per_100k: 6,
    };
}

impl Default for FaultSchedule {
    fn default() -> FaultSchedule {
        FaultSchedule::STANDARD
    }
}

/// One fault a scenario asks for at a given step (the driver ends it `steps` later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptedFault {
    /// Replica `replica` crashes, and restarts `steps` later.
    Crash { replica: usize, steps: u64 },
    /// Client host `client` cannot reach replica `replica` for `steps`.
    Partition { client: String, replica: usize, steps: u64 },
    /// Replica `replica` cannot reach the database for `steps`.
    CutLink { replica: usize, steps: u64 },
    /// The clock jumps this many minutes forward.
    ClockJump { minutes: i64 },
    /// The stored policy row of the team's queue `queue` is damaged (if its policy has a window).
    DamagePolicy { queue: String },
}

/// The faults of one run: drawn at random on a schedule, scripted at given steps, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    pub random: Option<FaultSchedule>,
    /// (step, fault), in step order.
    pub script: Vec<(u64, ScriptedFault)>,
}

impl FaultPlan {
    pub fn random(schedule: FaultSchedule) -> FaultPlan {
        FaultPlan { random: Some(schedule), script: vec![] }
    }

    pub fn scripted(script: Vec<(u64, ScriptedFault)>) -> FaultPlan {
        FaultPlan { random: None, script }
    }
}

/// Fault counts of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub crashes: u64,
    /// A replica cut off from the database for a while.
    pub database_partitions: u64,
    /// Requests and answers lost on those cut links.
    pub link_losses: u64,
    pub partitions: u64,
    pub clock_jumps: u64,
    pub corruptions: u64,
    pub db_errors: u64,
    pub lost_acks: u64,
    pub delays: u64,
    pub cancellations: u64,
}

impl FaultCounts {
    pub fn add(&mut self, other: &FaultCounts) {
        self.crashes += other.crashes;
        self.database_partitions += other.database_partitions;
        self.link_losses += other.link_losses;
        self.partitions += other.partitions;
        self.clock_jumps += other.clock_jumps;
        self.corruptions += other.corruptions;
        self.db_errors += other.db_errors;
        self.lost_acks += other.lost_acks;
        self.delays += other.delays;
        self.cancellations += other.cancellations;
    }

    pub fn total(&self) -> u64 {
        self.crashes
            + self.partitions
            + self.database_partitions
            + self.link_losses
            + self.clock_jumps
            + self.corruptions
            + self.db_errors
            + self.lost_acks
            + self.cancellations
    }
}

/// The fault plan of one run and what it has done so far. Clone: the world copies it before it
/// decides steps ahead, and goes back to the copy if the clients finish before the decided step
/// comes.
#[derive(Clone)]
pub struct FaultDriver {
    rng: Rng,
    random: Option<FaultSchedule>,
    script: VecDeque<(u64, ScriptedFault)>,
    replicas: usize,
    /// Every client host, for partitions.
    clients: Vec<String>,
    /// The budgeted identities whose policy rows may be damaged.
    identities: Vec<QueueIdentity>,
    crashed: Option<(usize, u64)>,
    partitioned: Option<(String, String, u64)>,
    cut_link: Option<(usize, u64)>,
    counts: FaultCounts,
}

impl FaultDriver {
    pub fn new<S: SimStore>(config: &Config, store: &Faulty<S>, plan: FaultPlan) -> FaultDriver {
        let identities = store
            .ledger()
            .iter()
            .filter_map(|e| match e {
                Event::PolicySet { identity, .. } => Some(identity.clone()),
                _ => None,
            })
            .collect();
        let mut script = plan.script;
        script.sort_by_key(|(step, _)| *step);
        FaultDriver {
            rng: Rng::new(config.seed ^ 0xD21E),
            random: plan.random,
            script: script.into(),
            replicas: config.replicas,
            clients: config.clients(),
            identities,
            crashed: None,
            partitioned: None,
            cut_link: None,
            counts: FaultCounts::default(),
        }
    }

    pub fn counts(&self) -> FaultCounts {
        self.counts
    }

    /// Decides step `steps`'s faults: the scripted ones due now, then ends the ones whose time is
    /// up and maybe (on the random schedule) starts new ones. Only the driver's own state moves
    /// here (its generator, what is going on, the counts); `apply` makes the world feel it. The
    /// world decides steps ahead of simulated time and sleeps until the next that does something,
    /// so a step's draws must not depend on anything but the driver.
    pub fn decide(&mut self, steps: u64) -> Vec<Action> {
        let mut actions = vec![];
        while self.script.front().is_some_and(|(at, _)| *at <= steps) {
            if let Some((_, fault)) = self.script.pop_front() {
                self.start(fault, steps, &mut actions);
            }
        }
        let rates = self.random;
        self.crash_step(rates.map(|r| r.crash_per_100k), steps, &mut actions);
        self.partition_step(rates.map(|r| r.partition_per_100k), steps, &mut actions);
        self.cut_link_step(rates.map(|r| r.cut_link_per_100k), steps, &mut actions);
        let Some(rates) = rates else { return actions };
        if self.rng.below(100_000) < rates.clock_jump_per_100k {
            // Forward only: a database clock does not run backwards. Across an hour boundary, a
            // day, or to just before the DST fold's second 01:30.
            actions.push(Action::ClockJump(match self.rng.below(3) {
                0 => Span::minutes(20),
                1 => Span::hours(1),
                _ => Span::hours(6),
            }));
            self.counts.clock_jumps += 1;
        }
        if self.rng.below(100_000) < rates.corruption_per_100k && !self.identities.is_empty() {
            let identity = self.rng.pick(&self.identities).clone();
            actions.push(Action::Damage(identity));
        }
        actions
    }

    /// Makes the world feel what `decide` decided, at the step it was decided for.
    pub fn apply<S: SimStore>(&mut self, actions: Vec<Action>, hosts: &mut impl Hosts, store: &Faulty<S>) {
        for action in actions {
            match action {
                Action::Crash(replica) => hosts.crash(replica),
                Action::Restart(replica) => hosts.restart(replica),
                Action::Partition(a, b) => hosts.partition(&a, &b),
                Action::Repair(a, b) => hosts.repair(&a, &b),
                Action::CutLink(replica, cut) => store.cut_link(replica, cut),
                Action::ClockJump(span) => hosts.jump_clock(span),
                Action::Damage(identity) => self.damage(store, identity),
            }
        }
    }

    /// Damages `identity`'s stored policy row (an unknown zone), if its policy has a window.
    fn damage<S: SimStore>(&mut self, store: &Faulty<S>, identity: QueueIdentity) {
        if store.with_ledger(|ledger| current_policy_has_window(ledger, &identity)) {
            store.inner().corrupt_policy_zone(&identity);
            store.record(Event::PolicyCorrupted { identity });
            self.counts.corruptions += 1;
        }
    }

    /// A scripted fault, unless one of its kind is still going on.
    fn start(&mut self, fault: ScriptedFault, steps: u64, actions: &mut Vec<Action>) {
        match fault {
            ScriptedFault::Crash { replica, steps: lasting } if self.crashed.is_none() => {
                actions.push(Action::Crash(replica));
                self.crashed = Some((replica, steps + lasting));
                self.counts.crashes += 1;
            }
            ScriptedFault::Partition { client, replica, steps: lasting } if self.partitioned.is_none() => {
                let replica = format!("r{replica}");
                actions.push(Action::Partition(client.clone(), replica.clone()));
                self.partitioned = Some((client, replica, steps + lasting));
                self.counts.partitions += 1;
            }
            ScriptedFault::CutLink { replica, steps: lasting } if self.cut_link.is_none() => {
                actions.push(Action::CutLink(replica, true));
                self.cut_link = Some((replica, steps + lasting));
                self.counts.database_partitions += 1;
            }
            ScriptedFault::ClockJump { minutes } => {
                actions.push(Action::ClockJump(Span::minutes(minutes)));
                self.counts.clock_jumps += 1;
            }
            ScriptedFault::DamagePolicy { queue } => {
                let identity = self.identities.iter().find(|identity| identity.queue == queue).cloned();
                if let Some(identity) = identity {
                    actions.push(Action::Damage(identity));
                }
            }
            _ => {}
        }
    }

    /// Restarts the crashed replica when its time is up; else, on the random schedule, maybe
    /// crashes one.
    fn crash_step(&mut self, rate: Option<u64>, steps: u64, actions: &mut Vec<Action>) {
        if let Some((index, back_at)) = self.crashed
            && steps >= back_at
        {
            actions.push(Action::Restart(index));
            self.crashed = None;
        } else if let Some(rate) = rate
            && self.crashed.is_none()
            && self.replicas > 1
            && self.rng.below(100_000) < rate
        {
            let index = self.rng.below(self.replicas as u64) as usize;
            actions.push(Action::Crash(index));
            self.crashed = Some((index, steps + 100 + self.rng.below(1_000)));
            self.counts.crashes += 1;
        }
    }

    /// Repairs the partition when its time is up; else maybe cuts a client from a replica.
    fn partition_step(&mut self, rate: Option<u64>, steps: u64, actions: &mut Vec<Action>) {
        if let Some((a, b, until_step)) = &self.partitioned
            && steps >= *until_step
        {
            actions.push(Action::Repair(a.clone(), b.clone()));
            self.partitioned = None;
        } else if let Some(rate) = rate
            && self.partitioned.is_none()
            && self.rng.below(100_000) < rate
        {
            let a = self.rng.pick(&self.clients).clone();
            let b = format!("r{}", self.rng.below(self.replicas as u64));
            actions.push(Action::Partition(a.clone(), b.clone()));
            self.partitioned = Some((a, b, steps + 50 + self.rng.below(750)));
            self.counts.partitions += 1;
        }
    }

    /// Repairs the cut database link when its time is up; else maybe cuts one.
    fn cut_link_step(&mut self, rate: Option<u64>, steps: u64, actions: &mut Vec<Action>) {
        if let Some((replica, until_step)) = self.cut_link
            && steps >= until_step
        {
            actions.push(Action::CutLink(replica, false));
            self.cut_link = None;
        } else if let Some(rate) = rate
            && self.cut_link.is_none()
            && self.rng.below(100_000) < rate
        {
            let replica = self.rng.below(self.replicas as u64) as usize;
            actions.push(Action::CutLink(replica, true));
            self.cut_link = Some((replica, steps + 50 + self.rng.below(750)));
            self.counts.database_partitions += 1;
        }
    }

    /// Ends every fault at once and injects no more: the crashed replica restarts, partitions
    /// and cut links are repaired, the database stops failing.
    pub fn heal<S: SimStore>(&mut self, hosts: &mut impl Hosts, store: &Faulty<S>) {
        store.arm(FaultRates::NONE);
        if let Some((index, _)) = self.crashed.take() {
            hosts.restart(index);
        }
        if let Some((a, b, _)) = self.partitioned.take() {
            hosts.repair(&a, &b);
        }
        if let Some((replica, _)) = self.cut_link.take() {
            store.cut_link(replica, false);
        }
    }
}

/// One thing a step does to the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Replica `index` crashes.
    Crash(usize),
    /// Replica `index` starts again.
    Restart(usize),
    /// Client host and replica host cut apart.
    Partition(String, String),
    Repair(String, String),
    /// Replica `index`'s database link is cut (true) or repaired.
    CutLink(usize, bool),
    /// The clock jumps forward.
    ClockJump(Span),
    /// A policy row is damaged (if its policy has a window when the step comes).
    Damage(QueueIdentity),
}

/// What the driver acts on: the world's hosts, the network between them, and its clock.
pub trait Hosts {
    fn crash(&mut self, replica: usize);
    fn restart(&mut self, replica: usize);
    fn partition(&mut self, a: &str, b: &str);
    fn repair(&mut self, a: &str, b: &str);
    fn jump_clock(&mut self, span: Span);
}

fn current_policy_has_window(ledger: &[Event], identity: &QueueIdentity) -> bool {
    ledger
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::PolicySet { identity: i, policy, .. } if i == identity => Some(policy.window.is_some()),
            Event::PolicyCleared { identity: i } if i == identity => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}
