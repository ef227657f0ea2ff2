//! The random workload: draws operations, peeking at the model to aim lifecycle calls.

use crate::ops::{A_QUEUES, B_QUEUES, Creator, IDENTITIES, Op};
use crate::side::Side;
use chrono::Duration;
use models::model_store::ModelStore;
use models::todo::TodoState;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

/// Draws operations. It peeks at the model (never at PostgreSQL) to aim lifecycle calls at
/// claimed todos and their holders; both stores then get the same operation.
pub(crate) struct Workload {
    pub(crate) rng: StdRng,
    pub(crate) made: usize,
}

impl Workload {
    /// Draws the next operation from one table of weights (out of 200); the draws a kind makes
    /// live in its helper, in the order they always had, so a seed reproduces the same run.
    pub(crate) async fn next(&mut self, model: &Side<ModelStore>) -> Op {
        let aim = Aim { known: model.norm.count("td"), claimed: model.claimed_todos().await };
        let rng = &mut self.rng;
        let lease = [30, 60, 300, 900][rng.random_range(0..4)];
        let roll = rng.random_range(0..200);
        match roll {
            0..20 => Op::Advance(advance(rng)),
            20..52 => create(&mut self.made, rng),
            52..58 => Op::CreateBatch((0..rng.random_range(1..=4)).map(|_| create(&mut self.made, rng)).collect()),
            58..84 => claim_next(rng, lease),
            84..90 => claim_next_many(rng, lease),
            90..100 => Op::Claim { actor: rng.random_range(0..4), todo: aim.any_todo(rng), lease },
            100..107 => {
                let (actor, todo) = aim.held(rng);
                Op::Heartbeat { actor, todo, lease }
            }
            107..110 => aim.complete_many(rng),
            110..120 => {
                let (actor, todo) = aim.held(rng);
                Op::Complete { actor, todo, result: rng.random_bool(0.5).then(|| json!({"ok": true})) }
            }
            120..131 => {
                let (actor, todo) = aim.held(rng);
                Op::Fail { actor, todo, result: rng.random_bool(0.5).then(|| json!({"error": "boom"})) }
            }
            131..138 => {
                let (actor, todo) = aim.held(rng);
                Op::Release { actor, todo }
            }
            138..143 => Op::RetryNow { actor: rng.random_range(0..4), todo: aim.any_todo(rng) },
            143..146 => Op::Get { actor: rng.random_range(0..4), todo: aim.any_todo(rng) },
            146..158 => set_policy(rng),
            158..162 => Op::ClearPolicy { identity: rng.random_range(0..IDENTITIES), human: rng.random_range(0..2) },
            162..164 => Op::CorruptZone { identity: rng.random_range(0..IDENTITIES) },
            164..171 => Op::Reap,
            171..176 => Op::Requeue,
            176..177 => Op::Prune,
            177..184 => ingest(&mut self.made, rng),
            184..187 => Op::Discard { identity: rng.random_range(0..IDENTITIES), todo: aim.any_todo(rng) },
            187 => Op::ClearQueue { identity: rng.random_range(0..IDENTITIES) },
            188 => purge_or_set_capacity(rng),
            189..192 => queue_admissions(rng),
            192 => Op::ReachAdmissions { human: rng.random_range(0..2) },
            193 => Op::AllAdmissions,
            194..196 => Op::PolicyDetail { identity: rng.random_range(0..IDENTITIES) },
            196 => Op::PolicyAudit { identity: rng.random_range(0..IDENTITIES), limit: rng.random_range(0..4) },
            _ => list_todos(rng),
        }
    }
}

/// What the workload aims lifecycle calls at, read from the model before the draw: how many
/// todos it has seen and which are claimed, by whom.
struct Aim {
    known: usize,
    /// (actor index, todo index) of each claimed todo.
    claimed: Vec<(usize, usize)>,
}

impl Aim {
    /// Any todo seen so far, or one past the end (a todo no store has).
    fn any_todo(&self, rng: &mut StdRng) -> usize {
        if self.known == 0 { 0 } else { rng.random_range(0..self.known + 1) }
    }

    /// Mostly a claimed todo with its holder; otherwise any actor with any todo.
    fn held(&self, rng: &mut StdRng) -> (usize, usize) {
        if !self.claimed.is_empty() && rng.random_bool(0.8) {
            self.claimed[rng.random_range(0..self.claimed.len())]
        } else {
            (rng.random_range(0..4), self.any_todo(rng))
        }
    }

    /// `complete {ids}`: mostly the todos one actor holds, sometimes with one it does not (then
    /// none ends).
    fn complete_many(&self, rng: &mut StdRng) -> Op {
        let actor = self.held(rng).0;
        let mut todos: Vec<usize> =
            self.claimed.iter().filter(|(holder, _)| *holder == actor).map(|(_, todo)| *todo).collect();
        if todos.is_empty() || rng.random_bool(0.3) {
            todos.push(self.any_todo(rng));
        }
        todos.sort_unstable();
        todos.dedup();
        Op::CompleteMany { actor, todos, result: rng.random_bool(0.5).then(|| json!({"ok": true})) }
    }
}

/// A create by a human, an agent or the system, in a busy queue identity more often than not.
fn create(made: &mut usize, rng: &mut StdRng) -> Op {
    *made += 1;
    let by = match rng.random_range(0..4) {
        0 | 1 => Creator::Human(rng.random_range(0..2)),
        2 => Creator::Agent(rng.random_range(0..2)),
        _ => Creator::System,
    };
    Op::Create {
        identity: busy_identity(rng),
        title: format!("todo {made}"),
        key: rng.random_bool(0.4).then(|| format!("k{}", rng.random_range(0..4))),
        max_attempts: rng.random_range(1..=3),
        by,
        payload: rng.random_bool(0.5).then(|| json!({"n": *made, "tags": ["a", "b"]})),
    }
}

/// `claim_next` by one of the four actors over all of its reach or a part of it.
fn claim_next(rng: &mut StdRng, lease: i64) -> Op {
    let actor = rng.random_range(0..4);
    let reach: &[usize] = if actor % 2 == 0 { &A_QUEUES } else { &B_QUEUES };
    let queues = if rng.random_bool(0.6) {
        reach.to_vec()
    } else {
        reach.iter().copied().filter(|_| rng.random_bool(0.5)).collect()
    };
    Op::ClaimNext { actor, queues, lease }
}

/// `claim_next {max}`: a [`claim_next`] draw that asks for up to six todos.
fn claim_next_many(rng: &mut StdRng, lease: i64) -> Op {
    match claim_next(rng, lease) {
        Op::ClaimNext { actor, queues, lease } => {
            Op::ClaimNextMany { actor, queues, lease, max: rng.random_range(1..=6) }
        }
        other => other,
    }
}

/// A policy for a busy queue identity, set by either human, now and then through an endpoint.
fn set_policy(rng: &mut StdRng) -> Op {
    Op::SetPolicy {
        identity: busy_identity(rng),
        policy: random_policy(rng),
        human: rng.random_range(0..2),
        via_endpoint: rng.random_bool(0.3),
    }
}

/// Now and then a purge of one queue; otherwise a new intake capacity (0 three times in five).
fn purge_or_set_capacity(rng: &mut StdRng) -> Op {
    if rng.random_bool(0.3) {
        Op::Purge { identity: rng.random_range(0..IDENTITIES) }
    } else {
        Op::SetCapacity { max: [0, 0, 0, 3, 6][rng.random_range(0..5)] }
    }
}

/// The admissions of part of one endpoint's reach.
fn queue_admissions(rng: &mut StdRng) -> Op {
    let reach: &[usize] = if rng.random_bool(0.5) { &A_QUEUES } else { &B_QUEUES };
    Op::QueueAdmissions { identities: reach.iter().copied().filter(|_| rng.random_bool(0.7)).collect() }
}

/// A signed delivery to one of the two webhooks, often a redelivery of an earlier id.
fn ingest(made: &mut usize, rng: &mut StdRng) -> Op {
    Op::Ingest {
        webhook: rng.random_range(0..2),
        delivery: format!("d{}", rng.random_range(0..12)),
        title: {
            *made += 1;
            format!("hook {made}")
        },
        key: rng.random_bool(0.3).then(|| format!("k{}", rng.random_range(0..4))),
    }
}

/// A listing by an owner's reach or by queues, in some state, with some limit.
fn list_todos(rng: &mut StdRng) -> Op {
    let states = [None, Some(TodoState::Pending), Some(TodoState::Claimed), Some(TodoState::Failed)];
    let human = rng.random_range(0..2);
    let reach: &[usize] = if human == 0 { &A_QUEUES } else { &B_QUEUES };
    Op::ListTodos {
        owners_of: rng.random_bool(0.5).then_some(human),
        queues: reach.iter().copied().filter(|_| rng.random_bool(0.6)).collect(),
        state: states[rng.random_range(0..states.len())],
        limit: rng.random_range(0..30),
    }
}

/// Half the work goes to A's inbox and the team queue, so their budgets run out.
pub(crate) fn busy_identity(rng: &mut StdRng) -> usize {
    if rng.random_bool(0.5) { [0, 3][rng.random_range(0..2)] } else { rng.random_range(0..IDENTITIES) }
}

pub(crate) fn advance(rng: &mut StdRng) -> Duration {
    match rng.random_range(0..100) {
        0..60 => Duration::seconds(rng.random_range(1..600)),
        60..85 => Duration::seconds(rng.random_range(600..2 * 3600)),
        85..95 => {
            // Onto an hour boundary, or a second either side of it.
            Duration::seconds(3600 - 1 + rng.random_range(0..3))
        }
        95..99 => Duration::hours(rng.random_range(20..48)),
        _ => Duration::days(36),
    }
}

pub(crate) fn random_policy(rng: &mut StdRng) -> Value {
    let limit = |rng: &mut StdRng, max: i64| -> Value {
        match rng.random_range(0..10) {
            0..3 => Value::Null,
            3 => json!(0),
            _ => json!(rng.random_range(1..=max)),
        }
    };
    let mut in_flight = limit(rng, 3);
    let per_window = limit(rng, 4);
    if in_flight.is_null() && per_window.is_null() {
        in_flight = json!(2);
    }
    let mut policy = json!({"max_in_flight": in_flight, "max_claims_per_window": per_window});
    if !per_window.is_null() || rng.random_bool(0.2) {
        let tz = ["UTC", "America/Los_Angeles", "Europe/Berlin", "Asia/Kolkata"][rng.random_range(0..4)];
        let start = ["00:00", "00:30", "09:15", "23:45"][rng.random_range(0..4)];
        let window = match rng.random_range(0..20) {
            0..12 => json!({"period": "hour", "tz": tz, "start": start}),
            12..19 => json!({"period": "day", "tz": tz, "start": start}),
            _ => json!({"period": "week", "tz": tz, "start": start, "weekday": "Sun"}),
        };
        policy["window"] = window;
    }
    policy
}
