//! One simulated run: the production router on N turmoil replicas over one shared store, agents
//! draining a team's queues over MCP, a second owner's agent on a webhook copy, an owner changing
//! policies over the operator API, a producer pushing todos and signed webhook deliveries (with
//! redeliveries), and the faults: replica crash and restart, partitions between clients and
//! replicas and between a replica and the database, lost replies, client cancellation, database
//! errors and lost acknowledgements, clock jumps across window boundaries, a DST fold or gap at
//! the start, and damaged policy rows. Push runs too (`push_world`): agents hold MCP sessions on
//! replicas and clock in and out, replicas decide doorbells and send notify-hook calls, and after
//! the clients finish the run drains with every fault healed, so no hook call may stay unsent.
//!
//! The database is one shared store reached by each replica over its own link (`Faulty::via`),
//! not a turmoil host: the store's calls are whole transactions that take no simulated time, so
//! the link, not the network, carries the database faults (latency, loss, cuts).
//!
//! Determinism: every choice comes from the seed (turmoil's generator for the network, `Rng` for
//! the workload and faults), time from turmoil's clock (`ManualClock` follows it), and the
//! workspace builds with `--cfg tokio_unstable` so turmoil seeds tokio's scheduler too. The trace
//! is what every client saw, line by line; its hash identifies the run.

use crate::check;
pub use crate::config::{COPY_QUEUE, Config, EPOCH_FALL_BACK, EPOCH_SPRING_FORWARD, QUEUES, epoch_for};
pub use crate::coverage::Coverage;
use crate::fault_driver::FaultDriver;
pub use crate::fault_driver::{FaultCounts, FaultPlan, FaultSchedule, ScriptedFault};
use crate::faults::{Event, FaultRates, Faulty};
use crate::net;
use crate::push_world::{self, AgentPush, Streams};
pub use crate::sim_store::SimStore;
use crate::trace::{self, Task, Trace, TraceEvent, TraceLine};
use crate::workload::{Caller, FleetIds, Principals, WEBHOOK_SECRET, agent, owner, policy_choices, producer};
use chrono::{DateTime, Duration as Span, Utc};
use models::admission::Policy;
use models::identity::QueueIdentity;
use models::store::{ManualClock, NewEndpoint, PolicyActor, Store};

use std::sync::Arc;
use std::time::Duration;

const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// After the clients finish: faults healed, the replicas keep sweeping this long, longer than a
/// hook call may take to settle (`check_push::HOOK_SETTLE_SECONDS`).
const DRAIN: Duration = Duration::from_secs(120);
/// How often the driver checks the invariants on what committed since the last check.
const CHECK_EVERY_STEPS: u64 = 500;

#[derive(Debug, Clone)]
pub struct Outcome {
    pub coverage: Coverage,
    pub seed: u64,
    pub steps: u64,
    /// Requests the clients made.
    pub ops: u64,
    /// Claims that committed (from the ledger, whether or not the agent heard back).
    pub claims: u64,
    pub faults: FaultCounts,
    pub trace: Vec<TraceLine>,
    pub trace_hash: String,
    /// What committed, in commit order (the judges' ground truth).
    pub ledger: Vec<Event>,
    pub violations: Vec<String>,
}

/// The index of the metered queue's first policy: the day that starts at the DST edge.
fn first_metered_policy(seed: u64) -> usize {
    if seed % 2 == 1 { 0 } else { 4 }
}

fn token(prefix: &str, name: &str, seed: u64) -> String {
    format!(
        "{prefix}{:0>40}",
        format!("{name}{seed:x}").chars().filter(char::is_ascii_alphanumeric).collect::<String>()
    )
}

/// Humans, the team, endpoints, the webhook and the initial policies, straight on the store.
fn set_up<S: SimStore>(store: &Faulty<S>, seed: u64) -> Principals {
    let inner = store.inner();
    let owner_token = token("sbh_", "owner", seed);
    let owner_id = inner.add_human("owner", &engine::pg_store::hash_token(&owner_token));
    let other_token = token("sbh_", "other", seed);
    let other_id = inner.add_human("other", &engine::pg_store::hash_token(&other_token));
    let (team_id, team_slug) = inner.add_team("fleet", &owner_id);
    let mut verbs: Vec<String> = models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect();
    verbs.push("admission_status".into());
    let mut agents = vec![];
    let mut agent_ids = vec![];
    for index in 0..8 {
        let key = token("sbk_", &format!("agent{index}"), seed);
        let endpoint = futures::executor::block_on(inner.vend_endpoint(NewEndpoint {
            name: format!("agent-{index}"),
            owner_human_id: Some(owner_id.clone()),
            owner_team_id: None,
            own_queues: vec![],
            team_queues: QUEUES.iter().map(|q| (team_id.clone(), q.to_string())).collect(),
            verbs: verbs.clone(),
            token_hash: engine::pg_store::hash_token(&key),
            created_by_human_id: Some(owner_id.clone()),
        }))
        .unwrap_or_else(|e| panic!("set-up: vend agent: {e}"));
        agents.push((endpoint.slug, key));
        agent_ids.push(endpoint.id);
    }
    let mirror_key = token("sbk_", "mirror", seed);
    let mirror = futures::executor::block_on(inner.vend_endpoint(NewEndpoint {
        name: "mirror".into(),
        owner_human_id: Some(other_id.clone()),
        owner_team_id: None,
        own_queues: vec![COPY_QUEUE.into()],
        team_queues: vec![],
        verbs,
        token_hash: engine::pg_store::hash_token(&mirror_key),
        created_by_human_id: Some(other_id),
    }))
    .unwrap_or_else(|e| panic!("set-up: vend mirror: {e}"));
    let targets =
        [QueueIdentity::team(team_id.clone(), "metered"), QueueIdentity::endpoint(mirror.id.clone(), COPY_QUEUE)];
    let webhook_id = futures::executor::block_on(inner.create_webhook(&owner_id, "provider", WEBHOOK_SECRET, &targets))
        .unwrap_or_else(|e| panic!("set-up: webhook: {e}"));
    let actor = PolicyActor { human_id: Some(owner_id), endpoint_id: None };
    for queue in ["metered", "capped", "both"] {
        let first = if queue == "metered" { first_metered_policy(seed) } else { 0 };
        let policy =
            Policy::from_request(&policy_choices(queue)[first]).unwrap_or_else(|e| panic!("set-up policy: {e}"));
        // Through the wrapper, so the ledger knows the policy in force from the start.
        futures::executor::block_on(store.set_policy(&QueueIdentity::team(team_id.clone(), queue), &policy, &actor))
            .unwrap_or_else(|e| panic!("set-up: policy {queue}: {e}"));
    }
    push_world::set_up(store, &agent_ids, &mirror.id);
    let tenancy = check::Tenancy {
        mirror_holder: format!("endpoint:{}", mirror.id),
        mirror_queue: QueueIdentity::endpoint(mirror.id.clone(), COPY_QUEUE),
        team_id: team_id.clone(),
    };
    let mirror_id = mirror.id.clone();
    Principals {
        tenancy,
        owner_token,
        team_slug,
        agents,
        agent_ids,
        mirror: (mirror.slug, mirror_key),
        mirror_id,
        webhook_id,
    }
}

/// A replica: the production router, and the background sweeps on simulated time (the push
/// pipeline's among them).
async fn replica<S: SimStore>(
    (name, index): (String, usize),
    store: Faulty<S>,
    streams: Streams,
    trace: Trace,
) -> turmoil::Result {
    let sweeper = store.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            match sweeper.reap_lapsed_leases().await {
                Ok(report) if report.returned_to_pending + report.dead_lettered > 0 => {
                    let (returned, dead_lettered) = (report.returned_to_pending, report.dead_lettered);
                    trace.log(&name, TraceEvent::Reaped { returned, dead_lettered })
                }
                Ok(_) => {}
                Err(error) => trace.log(&name, TraceEvent::Failed { task: Task::Reaper, code: error.code }),
            }
            match sweeper.requeue_due_retries().await {
                Ok(0) => {}
                Ok(count) => trace.log(&name, TraceEvent::RetriesRequeued { count }),
                Err(error) => trace.log(&name, TraceEvent::Failed { task: Task::RetryScheduler, code: error.code }),
            }
            push_world::replica_pass(&name, index, &sweeper, &streams, &trace).await;
        }
    });
    let mut state = server::app::AppState::new(store);
    // The write limiter reads the host's real clock, which a simulation must never depend on;
    // its own tests cover it. The owner stays far below this burst.
    state.admission_writes = Arc::new(server::admission_api::WriteLimiter::with_quota(1, 10_000));
    net::serve(server::app::router(state)).await
}

/// Runs one seed on `store` (fresh: nothing created yet) whose clock is `clock`, with random
/// faults on the standard schedule when `config.faults` is set.
pub fn run<S: SimStore>(store: S, clock: ManualClock, config: Config) -> Outcome {
    let plan = if config.faults { FaultPlan::random(FaultSchedule::default()) } else { FaultPlan::default() };
    run_planned(store, clock, config, plan)
}

/// Runs one seed with the faults of `plan` (database errors, lost acknowledgements and client
/// cancellations follow `config.faults` alone).
pub fn run_planned<S: SimStore>(store: S, clock: ManualClock, config: Config, plan: FaultPlan) -> Outcome {
    let base = epoch_for(config.seed);
    clock.set(base);
    let store = Faulty::new(store, Arc::new(clock.clone()), config.seed);
    let principals = set_up(&store, config.seed);
    if config.faults {
        store.arm(FaultRates::ALL);
    }
    let world = World { store, streams: Streams::default(), trace: Trace::default(), clock, base };
    let until = Duration::from_secs(config.duration_s);
    let mut sim = turmoil::Builder::new()
        .simulation_duration(until + Duration::from_secs(900))
        // 10 ms steps: message latency is quantised to it; the fault chances are per step.
        .tick_duration(Duration::from_millis(10))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(25))
        .epoch(std::time::UNIX_EPOCH + Duration::from_secs(base.timestamp().max(0) as u64))
        .rng_seed(config.seed)
        .build();
    world.add_hosts(&mut sim, &config, &principals);
    let mut driver = FaultDriver::new(&config, &world.store, plan);
    // The invariants, checked while the run goes (every `CHECK_EVERY_STEPS`) and at the end.
    let mut judge = check::LedgerCheck::new(principals.tenancy.clone());
    let driven = world.drive(&mut sim, &mut driver, &mut judge);
    world.judge(config, driver, judge, driven)
}

/// The shared parts of one run: the store behind its fault wrapper, the streams the replicas
/// hold, the trace, and the clock that follows simulated time from `base`.
struct World<S: SimStore> {
    store: Faulty<S>,
    streams: Streams,
    trace: Trace,
    clock: ManualClock,
    base: DateTime<Utc>,
}

/// How the step loop ended.
struct Driven {
    steps: u64,
    first_violation_at: Option<Duration>,
    /// turmoil's error, if the simulation failed.
    error: Option<String>,
}

impl<S: SimStore> World<S> {
    /// The replicas and the clients: agents, the other owner's agent, the owner, the producer.
    fn add_hosts(&self, sim: &mut turmoil::Sim<'_>, config: &Config, principals: &Principals) {
        let until = Duration::from_secs(config.duration_s);
        for index in 0..config.replicas {
            let (name, store, trace) = (format!("r{index}"), self.store.via(index), self.trace.clone());
            let streams = self.streams.clone();
            sim.host(name.clone(), move || {
                replica((name.clone(), index), store.clone(), streams.clone(), trace.clone())
            });
        }
        let links: Vec<Faulty<S>> = (0..config.replicas).map(|index| self.store.via(index)).collect();
        let push_of =
            |endpoint_id: &str| Some(AgentPush::new(links.clone(), self.streams.clone(), endpoint_id.to_string()));
        let caller = |name: &str| Caller {
            name: name.to_string(),
            replicas: config.replicas,
            trace: self.trace.clone(),
            retry_server_errors: name == "producer",
            cancels: config.faults,
        };
        let fleet_ids = FleetIds::default();
        for index in 0..config.agents {
            let (slug, key) = principals.agents[index % principals.agents.len()].clone();
            let push = push_of(&principals.agent_ids[index % principals.agent_ids.len()]);
            let seed = config.seed.wrapping_mul(31).wrapping_add(index as u64 + 1);
            sim.client(format!("a{index}"), agent(caller(&format!("a{index}")), (slug, key), seed, until, None, push));
        }
        let mirror = principals.mirror.clone();
        let push = push_of(&principals.mirror_id);
        sim.client("m0", agent(caller("m0"), mirror, config.seed ^ 0xA5A5, until, Some(fleet_ids.clone()), push));
        sim.client("owner", owner(caller("owner"), principals.clone(), config.seed ^ 0x5A5A, until));
        let producer = producer(caller("producer"), principals.clone(), config.seed ^ 0x0F0F, config.todos, fleet_ids);
        sim.client("producer", producer);
    }

    /// Steps the simulation until the clients are done and the run has drained, injecting the
    /// faults and feeding the judge as it goes.
    fn drive(&self, sim: &mut turmoil::Sim<'_>, driver: &mut FaultDriver, judge: &mut check::LedgerCheck) -> Driven {
        let mut driven = Driven { steps: 0, first_violation_at: None, error: None };
        // Set once the clients are done: the faults are healed and the run drains until then.
        let mut drained_at: Option<Duration> = None;
        loop {
            self.clock.set(self.base + Span::from_std(sim.elapsed()).unwrap_or_default() + driver.offset());
            if drained_at.is_none() {
                driver.step(sim, &self.store, &self.streams, driven.steps);
            }
            driven.steps += 1;
            if driven.steps.is_multiple_of(CHECK_EVERY_STEPS) {
                judge.feed(&self.store.ledger());
                if driven.first_violation_at.is_none() && judge.has_violations() {
                    driven.first_violation_at = Some(sim.elapsed());
                }
            }
            match sim.step() {
                Ok(true) if drained_at.is_none() => {
                    driver.heal(sim, &self.store, &self.streams);
                    drained_at = Some(sim.elapsed() + DRAIN);
                }
                Ok(true) if drained_at.is_some_and(|at| sim.elapsed() >= at) => return driven,
                Ok(_) => {}
                Err(error) => {
                    driven.error = Some(format!("simulation error: {error}"));
                    return driven;
                }
            }
        }
    }

    /// The run's outcome: the faults injected, the trace, and every invariant judged.
    fn judge(self, config: Config, driver: FaultDriver, judge: check::LedgerCheck, driven: Driven) -> Outcome {
        let mut faults = driver.counts();
        if let Some(error) = driven.error {
            let (trace_lines, _) = self.trace.take();
            return finish(config, &self.store, driven.steps, faults, trace_lines, vec![error]);
        }
        self.store.arm(FaultRates::NONE);
        let (trace_lines, cancellations) = self.trace.take();
        faults.cancellations = cancellations;
        let injected = self.store.injected();
        faults.db_errors = injected.errors;
        faults.lost_acks = injected.lost_acks;
        faults.link_losses = injected.link_losses;
        faults.delays = injected.delays;
        let mut violations = judge.finish(&self.store, &principals_identities(&self.store));
        if let Some(at) = driven.first_violation_at {
            violations
                .push(format!("(the first violation was seen {:.1} simulated seconds into the run)", at.as_secs_f64()));
        }
        violations.extend(
            trace_lines
                .iter()
                .filter(|line| line.event.owner_write_status().is_some_and(|status| (400..500).contains(&status)))
                .map(|line| format!("the owner's valid policy was refused: {line}")),
        );
        violations.extend(self.store.inner().final_check());
        finish(config, &self.store, driven.steps, faults, trace_lines, violations)
    }
}

/// Every queue identity the run created todos in or set a policy on.
fn principals_identities<S: SimStore>(store: &Faulty<S>) -> Vec<QueueIdentity> {
    let mut identities: Vec<QueueIdentity> = store
        .ledger()
        .iter()
        .filter_map(|e| match e {
            Event::Created { identity, .. } | Event::PolicySet { identity, .. } | Event::Claimed { identity, .. } => {
                Some(identity.clone())
            }
            _ => None,
        })
        .collect();
    identities.sort();
    identities.dedup();
    identities
}

fn finish<S: SimStore>(
    config: Config,
    store: &Faulty<S>,
    steps: u64,
    faults: FaultCounts,
    trace: Vec<TraceLine>,
    violations: Vec<String>,
) -> Outcome {
    let trace_hash = trace::hash(&trace);
    let ledger = store.ledger();
    let claims = ledger.iter().filter(|e| matches!(e, Event::Claimed { .. })).count() as u64;
    let ops = trace.len() as u64;
    let coverage = Coverage::measure(&trace, &ledger, &store.inner().hook_outbox());
    Outcome { coverage, seed: config.seed, steps, ops, claims, faults, trace, trace_hash, ledger, violations }
}
