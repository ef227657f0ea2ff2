//! One simulated run: the production router on N simulated replicas over one shared store, agents
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
//! not a host on the network: the store's calls are whole transactions that take no simulated time, so
//! the link, not the network, carries the database faults (latency, loss, cuts).
//!
//! The world is our own, not a simulation framework's: every host is tasks on one current-thread
//! runtime whose paused clock jumps to the next timer when all of them wait (`sim_time`), over an
//! in-memory network (`net`). A replica's crash aborts its tasks; the fault driver decides its
//! 10 ms steps ahead and wakes only for the steps that do something (and every 500th, for the
//! judge), so a seed costs its events, not its length.
//!
//! Determinism: every choice comes from the seed (`Rng` for the network's latencies, the
//! workload and the faults; the runtime's scheduler seeded too, under the workspace's
//! `--cfg tokio_unstable`), and time from the runtime's clock (`SimClock` follows it). The trace
//! is what every client saw, line by line; its hash identifies the run.

use crate::check;
pub use crate::config::{COPY_QUEUE, Config, EPOCH_FALL_BACK, EPOCH_SPRING_FORWARD, QUEUES, epoch_for};
pub use crate::coverage::Coverage;
pub use crate::fault_driver::{FaultCounts, FaultPlan, FaultSchedule, ScriptedFault};
use crate::fault_driver::{FaultDriver, Hosts};
use crate::faults::{Event, FaultRates, Faulty};
use crate::net::{self, HostTasks, Net};
use crate::push_world::{self, AgentPush, Streams};
pub use crate::sim_store::SimStore;
use crate::sim_time::{self, SimClock};
use crate::trace::{self, Task, Trace, TraceEvent, TraceLine};
use crate::workload::{
    Caller, ClientResult, FleetIds, Principals, WEBHOOK_SECRET, agent, owner, policy_choices, producer,
};
use chrono::Duration as Span;
use models::admission::Policy;
use models::identity::QueueIdentity;
use models::store::prelude::*;
use models::store::{NewEndpoint, PolicyActor};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// The fault driver's step: the fault chances are per step, scripted faults name steps.
const STEP: Duration = Duration::from_millis(10);
/// How long past `duration_s` the clients may take before the run counts as stuck.
const OVERTIME: Duration = Duration::from_secs(900);
/// After the clients finish: faults healed, the replicas keep sweeping this long, longer than a
/// hook call may take to settle (`check_push::HOOK_SETTLE_SECONDS`).
const DRAIN: Duration = Duration::from_secs(120);
/// How often (in steps) the driver checks the invariants on what committed since the last check.
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

/// One life of a replica: the production router served on the network, and the background
/// sweeps on simulated time (the push pipeline's among them), all on `tasks`, which a crash
/// aborts.
fn start_replica<S: SimStore>(
    (name, index): (String, usize),
    store: Faulty<S>,
    (net, streams, trace): (Net, Streams, Trace),
    tasks: HostTasks,
) {
    let sweeper = store.clone();
    let (sweeps, host) = (tasks.clone(), name.clone());
    tasks.spawn(async move {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            match sweeper.reap_lapsed_leases().await {
                Ok(report) if report.returned_to_pending + report.dead_lettered > 0 => {
                    let (returned, dead_lettered) = (report.returned_to_pending, report.dead_lettered);
                    trace.log(&host, TraceEvent::Reaped { returned, dead_lettered })
                }
                Ok(_) => {}
                Err(error) => trace.log(&host, TraceEvent::Failed { task: Task::Reaper, code: error.code }),
            }
            match sweeper.requeue_due_retries().await {
                Ok(0) => {}
                Ok(count) => trace.log(&host, TraceEvent::RetriesRequeued { count }),
                Err(error) => trace.log(&host, TraceEvent::Failed { task: Task::RetryScheduler, code: error.code }),
            }
            push_world::replica_pass((&host, index), &sweeper, &streams, &trace, &sweeps).await;
        }
    });
    let mut state = server::app::AppState::new(store);
    // The write limiter reads the host's real clock, which a simulation must never depend on;
    // its own tests cover it. The owner stays far below this burst.
    state.admission_writes = Arc::new(server::admission_api::WriteLimiter::with_quota(1, 10_000));
    tasks.spawn(net::serve(net, name, server::app::router(state), tasks.clone()));
}

/// Runs one seed on `store` (fresh: nothing created yet) whose clock is `clock`, with random
/// faults on the standard schedule when `config.faults` is set.
pub fn run<S: SimStore>(store: S, clock: SimClock, config: Config) -> Outcome {
    let plan = if config.faults { FaultPlan::random(FaultSchedule::default()) } else { FaultPlan::default() };
    run_planned(store, clock, config, plan)
}

/// Runs one seed with the faults of `plan` (database errors, lost acknowledgements and client
/// cancellations follow `config.faults` alone).
pub fn run_planned<S: SimStore>(store: S, time: SimClock, config: Config, plan: FaultPlan) -> Outcome {
    let store = Faulty::new(store, time.clone(), config.seed);
    let principals = set_up(&store, config.seed);
    if config.faults {
        store.arm(FaultRates::ALL);
    }
    let world = World { store, streams: Streams::default(), trace: Trace::default(), time };
    let mut driver = FaultDriver::new(&config, &world.store, plan);
    // The invariants, checked while the run goes (every `CHECK_EVERY_STEPS`) and at the end.
    let mut judge = check::LedgerCheck::new(principals.tenancy.clone());
    let runtime = sim_time::runtime(config.seed);
    let driving =
        std::panic::AssertUnwindSafe(|| runtime.block_on(world.drive(&config, &principals, &mut driver, &mut judge)));
    // A task that panicked stopped the runtime (`sim_time::runtime`): the seed failed, and says
    // so like any other failure, with the command that replays it.
    let driven = std::panic::catch_unwind(driving).unwrap_or_else(|panic| {
        sim_time::stop();
        let what =
            panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
        let error = format!("a task panicked (its message is above): {}", what.unwrap_or_default());
        Driven { steps: 0, first_violation_at: None, error: Some(error) }
    });
    // Whatever is still running (silenced connections, the replicas) ends with the runtime.
    drop(runtime);
    net::teardown();
    world.judge(config, driver, judge, driven)
}

/// The shared parts of one run: the store behind its fault wrapper, the streams the replicas
/// hold, the trace, and the clock that follows simulated time.
struct World<S: SimStore> {
    store: Faulty<S>,
    streams: Streams,
    trace: Trace,
    time: SimClock,
}

/// How the run ended.
struct Driven {
    steps: u64,
    first_violation_at: Option<Duration>,
    /// Why the run could not finish (a client failed, or never finished).
    error: Option<String>,
}

/// The replicas as the fault driver reaches them: each life's tasks, the network, the streams
/// and the clock.
struct Replicas<S: SimStore> {
    lives: Vec<Option<HostTasks>>,
    store: Faulty<S>,
    net: Net,
    streams: Streams,
    trace: Trace,
    time: SimClock,
}

impl<S: SimStore> Replicas<S> {
    fn start(&mut self, index: usize) {
        let tasks = HostTasks::of(&self.net, &format!("r{index}"));
        let shared = (self.net.clone(), self.streams.clone(), self.trace.clone());
        start_replica((format!("r{index}"), index), self.store.via(index), shared, tasks.clone());
        self.lives[index] = Some(tasks);
    }
}

impl<S: SimStore> Hosts for Replicas<S> {
    fn crash(&mut self, replica: usize) {
        if let Some(tasks) = self.lives[replica].take() {
            tasks.abort();
        }
        self.net.crash(&format!("r{replica}"));
        self.streams.crashed(replica);
    }

    fn restart(&mut self, replica: usize) {
        if self.lives[replica].is_none() {
            self.start(replica);
        }
        self.streams.restarted(replica);
    }

    fn partition(&mut self, a: &str, b: &str) {
        self.net.partition(a, b);
    }

    fn repair(&mut self, a: &str, b: &str) {
        self.net.repair(a, b);
    }

    fn jump_clock(&mut self, span: Span) {
        self.time.jump(span);
    }
}

/// The simulated instant of step `step`.
fn step_at(step: u64) -> Duration {
    STEP * u32::try_from(step).unwrap_or(u32::MAX)
}

impl<S: SimStore> World<S> {
    /// The replicas and the clients (agents, the other owner's agent, the owner, the producer),
    /// each client a task whose answer the returned set holds.
    fn start_hosts(
        &self,
        config: &Config,
        principals: &Principals,
        net: &Net,
    ) -> (Replicas<S>, JoinSet<(String, ClientResult)>) {
        let mut replicas = Replicas {
            lives: vec![None; config.replicas],
            store: self.store.clone(),
            net: net.clone(),
            streams: self.streams.clone(),
            trace: self.trace.clone(),
            time: self.time.clone(),
        };
        (0..config.replicas).for_each(|index| replicas.start(index));
        let until = Duration::from_secs(config.duration_s);
        let links: Vec<Faulty<S>> = (0..config.replicas).map(|index| self.store.via(index)).collect();
        let push_of =
            |endpoint_id: &str| Some(AgentPush::new(links.clone(), self.streams.clone(), endpoint_id.to_string()));
        let caller = |name: &str| Caller {
            name: name.to_string(),
            replicas: config.replicas,
            trace: self.trace.clone(),
            retry_server_errors: name == "producer",
            cancels: config.faults,
            net: net.clone(),
        };
        let mut clients = JoinSet::new();
        let mut client = |name: String, run: std::pin::Pin<Box<dyn Future<Output = ClientResult> + Send>>| {
            clients.spawn(async move { (name, run.await) });
        };
        let fleet_ids = FleetIds::default();
        for index in 0..config.agents {
            let (slug, key) = principals.agents[index % principals.agents.len()].clone();
            let push = push_of(&principals.agent_ids[index % principals.agent_ids.len()]);
            let seed = config.seed.wrapping_mul(31).wrapping_add(index as u64 + 1);
            let name = format!("a{index}");
            client(name.clone(), Box::pin(agent(caller(&name), (slug, key), seed, until, None, push)));
        }
        let mirror = principals.mirror.clone();
        let push = push_of(&principals.mirror_id);
        let ids = Some(fleet_ids.clone());
        client("m0".into(), Box::pin(agent(caller("m0"), mirror, config.seed ^ 0xA5A5, until, ids, push)));
        client("owner".into(), Box::pin(owner(caller("owner"), principals.clone(), config.seed ^ 0x5A5A, until)));
        let producer = producer(caller("producer"), principals.clone(), config.seed ^ 0x0F0F, config.todos, fleet_ids);
        client("producer".into(), Box::pin(producer));
        (replicas, clients)
    }

    /// Runs the hosts until the clients are done and the run has drained, striking the faults
    /// at their steps and feeding the judge as it goes. Simulated time only moves when every
    /// task waits, straight to the next timer: the driver decides the steps ahead and sleeps
    /// until the next one that does something, so a quiet step costs a few draws.
    async fn drive(
        &self,
        config: &Config,
        principals: &Principals,
        driver: &mut FaultDriver,
        judge: &mut check::LedgerCheck,
    ) -> Driven {
        sim_time::start();
        let hosts: Vec<String> = (0..config.replicas).map(|i| format!("r{i}")).chain(config.clients()).collect();
        let net = Net::new(config.seed, &hosts);
        let (mut replicas, clients) = self.start_hosts(config, principals, &net);
        let deadline = Duration::from_secs(config.duration_s) + OVERTIME;
        let mut driven = Driven { steps: 0, first_violation_at: None, error: None };
        let clients_done = every_client_done(clients);
        tokio::pin!(clients_done);
        // The next step the driver has not decided yet.
        let mut next = 0;
        loop {
            let before = driver.clone();
            let (step, actions) = loop {
                let step = next;
                next += 1;
                let actions = driver.decide(step);
                if !actions.is_empty() || (step + 1).is_multiple_of(CHECK_EVERY_STEPS) {
                    break (step, actions);
                }
            };
            tokio::select! {
                biased;
                finished = &mut clients_done => {
                    // The decided step never came: the driver is as it was before it.
                    *driver = before;
                    driven.error = finished.err();
                    break;
                }
                () = tokio::time::sleep_until(self.started() + step_at(step)) => {
                    driver.apply(actions, &mut replicas, &self.store);
                    if (step + 1).is_multiple_of(CHECK_EVERY_STEPS) {
                        self.check(judge, &mut driven);
                    }
                    if sim_time::elapsed() > deadline {
                        driven.error = Some(format!("the clients did not finish within {deadline:?}"));
                        break;
                    }
                }
            }
        }
        if driven.error.is_none() {
            // Every fault healed, the replicas keep sweeping until whatever was left settles.
            driver.heal(&mut replicas, &self.store);
            let drained_at = sim_time::elapsed() + DRAIN;
            let mut step = (sim_time::elapsed().as_millis() / STEP.as_millis()) as u64;
            loop {
                step += 1;
                if !(step + 1).is_multiple_of(CHECK_EVERY_STEPS) {
                    continue;
                }
                if step_at(step) >= drained_at {
                    break;
                }
                tokio::time::sleep_until(self.started() + step_at(step)).await;
                self.check(judge, &mut driven);
            }
            tokio::time::sleep_until(self.started() + drained_at).await;
        }
        driven.steps = (sim_time::elapsed().as_millis() / STEP.as_millis()) as u64;
        self.time.follow();
        sim_time::stop();
        driven
    }

    /// When the run started, on the runtime's clock.
    fn started(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() - sim_time::elapsed()
    }

    /// Feeds the judge what committed since the last check.
    fn check(&self, judge: &mut check::LedgerCheck, driven: &mut Driven) {
        self.store.with_ledger(|ledger| judge.feed(ledger));
        if driven.first_violation_at.is_none() && judge.has_violations() {
            driven.first_violation_at = Some(sim_time::elapsed());
        }
    }

    /// The run's outcome: the faults injected, the trace, and every invariant judged.
    fn judge(self, config: Config, driver: FaultDriver, judge: check::LedgerCheck, driven: Driven) -> Outcome {
        let mut faults = driver.counts();
        if let Some(error) = driven.error {
            let (trace_lines, _) = self.trace.take();
            return finish(config, &self.store, (driven.steps, 0), faults, trace_lines, vec![error]);
        }
        self.store.arm(FaultRates::NONE);
        let (trace_lines, cancellations) = self.trace.take();
        faults.cancellations = cancellations;
        let injected = self.store.injected();
        faults.db_errors = injected.errors;
        faults.lost_acks = injected.lost_acks;
        faults.link_losses = injected.link_losses;
        faults.delays = injected.delays;
        let (mut violations, reopenings_judged) = judge.finish(&self.store, &principals_identities(&self.store));
        if let Some(at) = driven.first_violation_at {
            violations
                .push(format!("(the first violation was seen {:.1} simulated seconds into the run)", at.as_secs_f64()));
        }
        violations.extend(
            trace_lines
                .iter()
                .filter(|line| line.event.owner_write_refused())
                .map(|line| format!("the owner's valid policy was refused: {line}")),
        );
        violations.extend(crate::check_forecast::forecast_violations(&trace_lines));
        violations.extend(self.store.inner().final_check());
        finish(config, &self.store, (driven.steps, reopenings_judged), faults, trace_lines, violations)
    }
}

/// Waits for every client; the first that failed is the run's error. (A client that panics
/// stops the runtime before this hears of it: `sim_time::runtime`.)
async fn every_client_done(mut clients: JoinSet<(String, ClientResult)>) -> Result<(), String> {
    let mut failure = None;
    while let Some(joined) = clients.join_next().await {
        match joined {
            Ok((_, Ok(()))) => {}
            Ok((name, Err(error))) => {
                failure.get_or_insert(format!("client {name} failed: {error}"));
            }
            Err(error) => {
                failure.get_or_insert(format!("a client task ended: {error}"));
            }
        }
    }
    failure.map_or(Ok(()), Err)
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
    (steps, reopenings_judged): (u64, u64),
    faults: FaultCounts,
    trace: Vec<TraceLine>,
    violations: Vec<String>,
) -> Outcome {
    let trace_hash = trace::hash(&trace);
    let ledger = store.ledger();
    let claims = ledger.iter().filter(|e| matches!(e, Event::Claimed { .. })).count() as u64;
    let ops = trace.len() as u64;
    let mut coverage = Coverage::measure(&trace, &ledger, &store.inner().hook_outbox());
    coverage.reopenings_judged = reopenings_judged;
    Outcome { coverage, seed: config.seed, steps, ops, claims, faults, trace, trace_hash, ledger, violations }
}
