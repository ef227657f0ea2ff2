//! Push in the simulated world (SPEC-0030 REQ-8; SPEC-0022; SPEC-0024): each replica's push pass
//! on its sweep tick, the streams each replica holds, the agents' sessions and clock-in/out, and
//! notify-hook receivers whose answers the seed decides.
//!
//! Streams do not cross the simulated network: an agent opens and attaches its MCP session by calling the
//! store over a replica's database link (what that replica's MCP handler would do), and
//! `Streams` stands for the connections each replica holds. A crash empties a replica's share,
//! and the agent notices and attaches elsewhere, as a client whose stream broke reconnects. Hook
//! sends do not cross the network either: a call takes simulated time and ends as the seed
//! decides, and a replica crashed between taking a call and finishing it never finishes it, so
//! the lease must lapse and another replica send it.
//!
//! Until the server runs its own push loops in the simulation, the replica's sweep tick drives
//! the store's push methods here, in the server's order, the way it already drives the reaper.
//! Every trace line is free of generated ids and sorted where the stores may order differently,
//! so the PostgreSQL run of a seed reads the same as the model's.

use crate::faults::{Faulty, Rng};
use crate::net::HostTasks;
use crate::trace::{PresenceVerb, PushPass, Task, Trace, TraceEvent};
use models::presence::{self, Presence};
use models::push::{HOOK_CALLS_PER_PASS_MAX, HookCall, HookOutcome, PushReport};
use models::store::OverrideBy;
use models::store::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The hook of agent 0: a receiver that mostly answers.
pub const HOOK_MOSTLY_UP: &str = "https://hooks.example/agent-0";
/// The hook of agent 1, called even while it is out: a receiver that is down, so the hook is
/// disabled after ten failed calls and its waiting calls dropped.
pub const HOOK_DOWN: &str = "https://hooks.example/agent-1-down";
/// The other owner's hook.
pub const HOOK_MIRROR: &str = "https://hooks.example/mirror";
/// Agent 2's shift: out at the start, in for four minutes from two minutes in (both epochs are
/// 01:50 Los Angeles time), then out again; across DST the interval starts at the first 01:52.
pub const AGENT_SHIFT: &str = "TZ=America/Los_Angeles Mon-Sun 01:52-01:56";
const HOOK_SECRET: &str = "whsec_c2ltdWxhdGVkLWhvb2stc2VjcmV0LTAxMjM0NTY3";
/// Chances per agent step, in thousandths.
const RECONNECT_PER_MILLE: u64 = 15;
const PRESENCE_CHANGE_PER_MILLE: u64 = 25;

/// Which sessions' streams each replica holds, and whether the replica is up.
#[derive(Clone, Default)]
pub struct Streams(Arc<Mutex<BTreeMap<usize, Held>>>);

#[derive(Default)]
struct Held {
    down: bool,
    sessions: BTreeSet<String>,
}

impl Streams {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, Held>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The replica crashed: its streams are gone.
    pub fn crashed(&self, replica: usize) {
        let mut held = self.lock();
        let entry = held.entry(replica).or_default();
        entry.down = true;
        entry.sessions.clear();
    }

    pub fn restarted(&self, replica: usize) {
        self.lock().entry(replica).or_default().down = false;
    }

    fn is_up(&self, replica: usize) -> bool {
        !self.lock().get(&replica).is_some_and(|h| h.down)
    }

    fn hold(&self, replica: usize, session: &str) {
        self.lock().entry(replica).or_default().sessions.insert(session.to_string());
    }

    fn release(&self, replica: usize, session: &str) {
        if let Some(held) = self.lock().get_mut(&replica) {
            held.sessions.remove(session);
        }
    }

    fn holds(&self, replica: usize, session: &str) -> bool {
        self.lock().get(&replica).is_some_and(|h| h.sessions.contains(session))
    }

    fn sessions(&self, replica: usize) -> Vec<String> {
        self.lock().get(&replica).map(|h| h.sessions.iter().cloned().collect()).unwrap_or_default()
    }
}

/// A push report as one trace event: what was rung (reason and queue, sorted) and withheld.
fn summary(pass: Task, report: &PushReport) -> TraceEvent {
    let mut rings: Vec<String> =
        report.rings.iter().map(|r| format!("{}:{}", r.reason.as_str(), r.queue.as_deref().unwrap_or("*"))).collect();
    rings.sort();
    TraceEvent::PushPass(PushPass {
        pass,
        rings,
        hook_calls: report.hook_calls_enqueued,
        reopens: report.reopens,
        withheld_deferred: report.withheld_deferred,
        withheld_out: report.withheld_out,
    })
}

/// A replica's push work on its sweep tick: refresh the streams it holds, decide pushes (new and
/// requeued work, reopened queues, presence changes, the heartbeat), then send due hook calls.
pub async fn replica_pass<S: Store>(
    (name, index): (&str, usize),
    store: &Faulty<S>,
    streams: &Streams,
    trace: &Trace,
    tasks: &HostTasks,
) {
    let held = streams.sessions(index);
    if !held.is_empty() {
        match store.refresh_sessions(name, &held).await {
            Ok(closing) => closing.iter().for_each(|session| streams.release(index, session)),
            Err(error) => trace.log(name, TraceEvent::Failed { task: Task::Refresh, code: error.code }),
        }
    }
    let passes = [
        (Task::Push, store.dispatch_pushes().await),
        (Task::Reopen, store.reopen_sweep().await),
        (Task::Presence, store.presence_sweep().await),
        (Task::Heartbeat, store.heartbeat_sweep().await),
    ];
    for (pass, outcome) in passes {
        match outcome {
            // Which of several equally due todos the heartbeat re-rings is decided by todo id,
            // which PostgreSQL draws at random: its rings are judged from the ledger, not traced.
            Ok(report) if report.is_empty() || pass == Task::Heartbeat => {}
            Ok(report) => trace.log(name, summary(pass, &report)),
            Err(error) => trace.log(name, TraceEvent::Failed { task: pass, code: error.code }),
        }
    }
    send_hooks(name, store, trace, tasks).await;
}

/// Takes every due call (pass after pass, so which calls a pass holds does not depend on how a
/// store orders equal rows) and sends each on its own task; a crash kills the tasks mid-send.
async fn send_hooks<S: Store>(name: &str, store: &Faulty<S>, trace: &Trace, tasks: &HostTasks) {
    let mut calls: Vec<HookCall> = Vec::new();
    loop {
        match store.take_hook_calls(name).await {
            Ok(batch) => {
                let full = batch.len() as i64 >= HOOK_CALLS_PER_PASS_MAX;
                calls.extend(batch);
                if !full {
                    break;
                }
            }
            Err(error) => {
                trace.log(name, TraceEvent::Failed { task: Task::HookTake, code: error.code });
                break;
            }
        }
    }
    calls.sort_by_key(call_key);
    for call in calls {
        let (store, trace, name) = (store.clone(), trace.clone(), name.to_string());
        tasks.spawn(async move {
            let (outcome, send_ms) = receiver_answer(&call);
            tokio::time::sleep(Duration::from_millis(send_ms)).await;
            let unrecorded = store.finish_hook_call(call.id, &name, &outcome).await.err().map(|error| error.code);
            let (url, reason, summary) = call_key(&call);
            let attempt = call.attempts + 1;
            let outcome = outcome.label();
            trace.log(&name, TraceEvent::HookSent { url, reason, summary, attempt, outcome, unrecorded });
        });
    }
}

/// What identifies a call across stores (ids and message ids are generated).
fn call_key(call: &HookCall) -> (String, String, String) {
    let text = |key: &str| call.body[key].as_str().unwrap_or("").to_string();
    (call.url.clone(), text("reason"), text("summary"))
}

/// How the receiver answers one attempt of a call, and how long the call takes: decided by the
/// call's content and attempt, so both stores' runs see the same answers.
fn receiver_answer(call: &HookCall) -> (HookOutcome, u64) {
    let (url, reason, summary) = call_key(call);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in format!("{url}|{reason}|{summary}|{}", call.attempts).bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = Rng::new(hash);
    let send_ms = 100 + rng.below(1_900);
    let roll = rng.below(100);
    let outcome = match url.as_str() {
        HOOK_DOWN => HookOutcome::Failed("connection refused".into()),
        HOOK_MOSTLY_UP if roll < 5 => HookOutcome::Refused("address not allowed".into()),
        _ if roll < 20 => HookOutcome::Failed("http 503".into()),
        _ => HookOutcome::Delivered,
    };
    (outcome, send_ms)
}

/// Hooks and the shift the run starts with, through the fault wrapper so the ledger has them.
pub fn set_up<S: Store>(store: &Faulty<S>, agent_ids: &[String], mirror_id: &str) {
    let hooks = [(&agent_ids[0], HOOK_MOSTLY_UP, false), (&agent_ids[1], HOOK_DOWN, true)];
    for (endpoint, url, ignore_presence) in hooks.into_iter().chain([(&mirror_id.to_string(), HOOK_MIRROR, false)]) {
        futures::executor::block_on(store.add_hook(endpoint, url, HOOK_SECRET, ignore_presence))
            .unwrap_or_else(|e| panic!("set-up: hook {url}: {e}"));
    }
    let shift = presence::Shift::parse(AGENT_SHIFT).unwrap_or_else(|e| panic!("set-up: shift: {e}"));
    futures::executor::block_on(store.set_shift(&agent_ids[2], Some(shift)))
        .unwrap_or_else(|e| panic!("set-up: shift of agent 2: {e}"));
}

/// An agent's MCP session and presence, on the store through the replicas' database links.
pub struct AgentPush<S: Store> {
    links: Vec<Faulty<S>>,
    streams: Streams,
    endpoint_id: String,
    /// The session, and the replica whose stream carries it (None while not attached).
    session: Option<(String, Option<usize>)>,
}

impl<S: Store> AgentPush<S> {
    pub fn new(links: Vec<Faulty<S>>, streams: Streams, endpoint_id: String) -> AgentPush<S> {
        AgentPush { links, streams, endpoint_id, session: None }
    }

    /// One step of the agent's push life: keep a stream open (reattaching after a crash),
    /// sometimes reconnect on purpose, sometimes clock in or out.
    pub async fn step(&mut self, rng: &mut Rng, trace: &Trace, name: &str) {
        if let Some((session, Some(replica))) = &self.session
            && !self.streams.holds(*replica, session)
        {
            trace.log(name, TraceEvent::StreamBroke { replica: *replica });
            self.session = self.session.take().map(|(session, _)| (session, None));
        }
        let replica = rng.below(self.links.len() as u64) as usize;
        match self.session.clone() {
            None => self.open(replica, trace, name).await,
            Some((session, None)) => self.attach(&session, replica, trace, name).await,
            Some((session, Some(current))) if rng.chance(RECONNECT_PER_MILLE) => {
                match self.links[current].detach_session(&session, &format!("r{current}")).await {
                    Ok(()) => {
                        self.streams.release(current, &session);
                        self.session = Some((session, None));
                        trace.log(name, TraceEvent::StreamClosedToReconnect { replica: current });
                    }
                    Err(error) => trace.log(name, TraceEvent::DetachFailed(error.code)),
                }
            }
            Some(_) => {}
        }
        if rng.chance(PRESENCE_CHANGE_PER_MILLE) {
            self.change_presence(rng, replica, trace, name).await;
        }
    }

    async fn open(&mut self, replica: usize, trace: &Trace, name: &str) {
        if !self.streams.is_up(replica) {
            return;
        }
        match self.links[replica].open_session(&self.endpoint_id).await {
            Ok(session) => self.session = Some((session, None)),
            Err(error) => trace.log(name, TraceEvent::InitializeFailed { replica, code: error.code }),
        }
    }

    async fn attach(&mut self, session: &str, replica: usize, trace: &Trace, name: &str) {
        if !self.streams.is_up(replica) {
            return;
        }
        let link = &self.links[replica];
        match link.attach_session(&self.endpoint_id, session, &format!("r{replica}")).await {
            Ok(true) => {
                self.streams.hold(replica, session);
                self.session = Some((session.to_string(), Some(replica)));
                let digest = link.reconnect_digest(&self.endpoint_id, session).await;
                let digest = digest.map(|report| report.rings.len()).map_err(|error| error.code);
                trace.log(name, TraceEvent::StreamAttached { replica, digest });
            }
            Ok(false) => {
                trace.log(name, TraceEvent::SessionGone { replica });
                self.session = None;
            }
            Err(error) => trace.log(name, TraceEvent::AttachFailed { replica, code: error.code }),
        }
    }

    /// `clock_in` for one to fifteen minutes when out, `clock_out` when in, as the presence verbs
    /// compute them (the shift bounds both).
    async fn change_presence(&mut self, rng: &mut Rng, replica: usize, trace: &Trace, name: &str) {
        if !self.streams.is_up(replica) {
            return;
        }
        let link = &self.links[replica];
        let view = match link.presence(&self.endpoint_id).await {
            Ok(view) => view,
            Err(error) => return trace.log(name, TraceEvent::PresenceReadFailed(error.code)),
        };
        let now = link.now();
        let (verb, override_) = match view.effective.presence {
            Presence::Out => {
                let for_seconds = 60 + rng.below(840) as i64;
                (PresenceVerb::ClockIn, presence::clock_in(view.shift.as_ref(), now, Some(for_seconds)))
            }
            Presence::In => (PresenceVerb::ClockOut, Ok(presence::clock_out(view.shift.as_ref(), now))),
        };
        let Ok(override_) = override_ else {
            return trace.log(name, TraceEvent::PresenceRefused(verb));
        };
        let answer = link.set_presence_override(&self.endpoint_id, Some(override_), OverrideBy::Agent).await;
        let answer = answer.map(|view| (view.effective.presence, view.pending)).map_err(|error| error.code);
        trace.log(name, TraceEvent::PresenceChanged { verb, answer });
    }
}
