//! `ModelStore` against `PgStore`: the same seeded sequences of operations on both, every answer
//! compared after normalising generated ids (each store's ids are numbered by first appearance)
//! and slugs. The model is the simulation's database host and the executable specification, so
//! any difference is a bug in one of the two.
//!
//! The workload keeps `PgStore`'s own answers deterministic: every create happens at its own
//! instant (the clock moves 1 ms first), and a listing or claim never spans two endpoints, whose
//! relative order would follow `PgStore`'s random ids. `DIFFERENTIAL_SEED=n` replays one seed;
//! `DIFFERENTIAL_TRACE=1` prints every operation and its answer.
//!
//! Governing: SPEC-0030 REQ-1 … REQ-10 as `PgStore` implements them; intake-capacity.md.

use chrono::{DateTime, Duration, Utc};
use engine::pg_store::hash_token;
use engine::testing::fresh_database;
use engine::{PgStore, PoolSettings};
use models::admission::Policy;
use models::identity::{QueueIdentity, ScopeRef};
use models::model_store::ModelStore;
use models::scope::{Actor, HumanScope, TeamRole};
use models::store::{AgentLookup, ManualClock, NewEndpoint, PolicyActor, Store, TodoQuery, TodoSet};
use models::todo::{CreatedByKind, NewTodo, TodoState};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

const OPERATIONS: usize = 300;

/// Seeds run by default; `DIFFERENTIAL_SEED=n` replays one.
fn seeds() -> Vec<u64> {
    match std::env::var("DIFFERENTIAL_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => vec![1, 2, 3, 4, 5],
    }
}

/// Where a seed's clock starts: near the US spring-forward, the US fall-back, Berlin's
/// spring-forward, and an ordinary day, so window arithmetic meets DST on both sides.
fn start_of(seed: u64) -> DateTime<Utc> {
    let starts = ["2026-03-07T18:00:00Z", "2026-10-31T20:00:00Z", "2026-03-28T12:00:00Z", "2026-11-30T12:00:00Z"];
    DateTime::parse_from_rfc3339(starts[(seed % 4) as usize]).expect("instant").to_utc()
}

// SPEC-0030 REQ-1 … REQ-10: ModelStore is PgStore, answer for answer.
#[tokio::test]
async fn model_store_matches_pg_store_on_random_operation_sequences() {
    for seed in seeds() {
        let mut pair = Pair::new(format!("seed {seed}"), start_of(seed)).await;
        let mut workload = Workload { rng: StdRng::seed_from_u64(seed), made: 0 };
        for _ in 0..OPERATIONS {
            let op = workload.next(&pair.model).await;
            pair.step(&op).await;
        }
        pair.finish().await;
    }
}

// SPEC-0030 REQ-3, REQ-4, REQ-5, REQ-7, REQ-9, REQ-10; intake-capacity.md: the edges a random
// run reaches rarely, in order, on both stores.
#[tokio::test]
async fn model_store_matches_pg_store_on_scripted_edges() {
    let start = start_of(0);
    let mut pair = Pair::new("scripted".into(), start).await;
    for op in scripted_edges(start) {
        pair.step(&op).await;
    }
    pair.finish().await;
}

/// Both stores on one clock, stepped together.
struct Pair {
    label: String,
    clock: ManualClock,
    pg: Side<PgStore>,
    model: Side<ModelStore>,
    steps: usize,
    recent: Vec<String>,
    trace: bool,
}

impl Pair {
    async fn new(label: String, start: DateTime<Utc>) -> Pair {
        let db = fresh_database().await;
        let clock = ManualClock::at(start);
        let settings = PoolSettings { connections_max: 4, ..PoolSettings::default() };
        let pg = PgStore::connect(&db.url, settings, Arc::new(clock.clone())).await.expect("connect");
        let model = ModelStore::new(Arc::new(clock.clone()));
        let (pg, pg_setup) = setup_pg(pg).await;
        let (model, model_setup) = setup_model(model).await;
        assert_eq!(pg_setup, model_setup, "{label}: setup differs");
        let trace = std::env::var_os("DIFFERENTIAL_TRACE").is_some();
        Pair { label, clock, pg, model, steps: 0, recent: vec![], trace }
    }

    /// Runs one operation on both stores and requires equal answers.
    async fn step(&mut self, op: &Op) {
        match op {
            Op::Advance(by) => self.clock.advance(*by),
            Op::SetClock(instant) => self.clock.set(*instant),
            Op::Create { .. } | Op::Ingest { .. } => self.clock.advance(Duration::milliseconds(1)),
            _ => {}
        }
        let expected = self.pg.apply(op).await;
        let actual = self.model.apply(op).await;
        let step = self.steps;
        self.steps += 1;
        self.recent.push(format!("{step}: {op:?}\n    => {expected}"));
        if self.trace {
            eprintln!("{} {}", self.label, self.recent.last().map_or("", String::as_str));
        }
        assert_eq!(
            expected,
            actual,
            "{}, step {step}: PgStore (left) and ModelStore (right) differ on {op:?}\nrecent:\n{}",
            self.label,
            self.recent.iter().rev().take(12).rev().cloned().collect::<Vec<_>>().join("\n")
        );
    }

    /// Everything read back, endpoint B deleted, read back again; then the counters.
    async fn finish(&mut self) {
        for op in final_ops() {
            self.step(&op).await;
        }
        let (expected, actual) = (self.pg.store.counters().snapshot(), self.model.store.counters().snapshot());
        if self.trace {
            eprintln!("{} counters {expected:?}", self.label);
        }
        assert_eq!(expected, actual, "{}: counters differ", self.label);
    }
}

/// The six queue identities: endpoint A's three, the team's, endpoint B's two (B's `inbox`
/// shares a name with A's, REQ-2).
const IDENTITIES: usize = 6;
const A_QUEUES: [usize; 4] = [0, 1, 2, 3];
const B_QUEUES: [usize; 3] = [3, 4, 5];

/// One operation, written in store-independent terms (indexes, not ids).
#[derive(Debug, Clone)]
enum Op {
    Advance(Duration),
    SetClock(DateTime<Utc>),
    Create {
        identity: usize,
        title: String,
        key: Option<String>,
        max_attempts: i32,
        by: Creator,
        payload: Option<Value>,
    },
    ClaimNext {
        actor: usize,
        queues: Vec<usize>,
        lease: i64,
    },
    Claim {
        actor: usize,
        todo: usize,
        lease: i64,
    },
    Heartbeat {
        actor: usize,
        todo: usize,
        lease: i64,
    },
    Complete {
        actor: usize,
        todo: usize,
        result: Option<Value>,
    },
    Fail {
        actor: usize,
        todo: usize,
        result: Option<Value>,
    },
    Release {
        actor: usize,
        todo: usize,
    },
    RetryNow {
        actor: usize,
        todo: usize,
    },
    Get {
        actor: usize,
        todo: usize,
    },
    SetPolicy {
        identity: usize,
        policy: Value,
        human: usize,
        via_endpoint: bool,
    },
    ClearPolicy {
        identity: usize,
        human: usize,
    },
    CorruptZone {
        identity: usize,
    },
    Reap,
    Requeue,
    Prune,
    Ingest {
        webhook: usize,
        delivery: String,
        title: String,
        key: Option<String>,
    },
    Discard {
        identity: usize,
        todo: usize,
    },
    ClearQueue {
        identity: usize,
    },
    Purge {
        identity: usize,
    },
    QueueAdmissions {
        identities: Vec<usize>,
    },
    ReachAdmissions {
        human: usize,
    },
    AllAdmissions,
    PolicyDetail {
        identity: usize,
    },
    PolicyAudit {
        identity: usize,
        limit: i64,
    },
    ListTodos {
        owners_of: Option<usize>,
        queues: Vec<usize>,
        state: Option<TodoState>,
        limit: i64,
    },
    SetCapacity {
        max: i64,
    },
    QueueCapacity,
    Route {
        webhook: usize,
    },
    AgentLookup {
        agent: usize,
    },
    DeleteEndpoint {
        human: usize,
        endpoint: usize,
    },
}

#[derive(Debug, Clone, Copy)]
enum Creator {
    Human(usize),
    Agent(usize),
    System,
}

/// The end of every seed: a sweep, everything read back, then endpoint B deleted (by someone who
/// may not, then by its owner) and read back again.
fn final_ops() -> Vec<Op> {
    let reads = || {
        let mut ops = vec![Op::Reap, Op::Requeue, Op::AllAdmissions, Op::QueueCapacity, Op::Route { webhook: 1 }];
        for identity in 0..IDENTITIES {
            ops.push(Op::PolicyDetail { identity });
        }
        for human in 0..2 {
            ops.push(Op::ListTodos { owners_of: Some(human), queues: vec![], state: None, limit: 1000 });
            ops.push(Op::ReachAdmissions { human });
        }
        ops
    };
    let mut ops = reads();
    ops.push(Op::DeleteEndpoint { human: 0, endpoint: 1 });
    ops.push(Op::DeleteEndpoint { human: 1, endpoint: 1 });
    ops.push(Op::AgentLookup { agent: 1 });
    ops.extend(reads());
    ops
}

/// The scripted edges. Todos are numbered by first appearance, so the comments name them.
fn scripted_edges(start: DateTime<Utc>) -> Vec<Op> {
    let at = |rfc3339: &str| DateTime::parse_from_rfc3339(rfc3339).expect("instant").to_utc();
    let create = |identity: usize, n: usize, key: Option<&str>, max_attempts: i32| Op::Create {
        identity,
        title: format!("scripted {n}"),
        key: key.map(str::to_string),
        max_attempts,
        by: Creator::Human(0),
        payload: None,
    };
    let next = |actor: usize, queues: &[usize]| Op::ClaimNext { actor, queues: queues.to_vec(), lease: 300 };
    let policy = |identity: usize, policy: Value| Op::SetPolicy { identity, policy, human: 0, via_endpoint: false };
    let kolkata_hourly =
        json!({"max_claims_per_window": 1, "window": {"period": "hour", "tz": "Asia/Kolkata", "start": "00:00"}});
    assert_eq!(start, at("2026-03-07T18:00:00Z"), "the script's instants assume this start");
    vec![
        // REQ-1 "A daily budget" (REQ-5: the spring-forward day is a 23-hour window); REQ-7.
        policy(
            0,
            json!({"max_claims_per_window": 2,
                "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}}),
        ),
        create(0, 0, None, 3),
        create(0, 1, None, 3),
        create(0, 2, None, 3),
        create(0, 3, None, 3),
        next(0, &[0]),
        next(0, &[0]),
        next(0, &[0]),
        Op::Claim { actor: 0, todo: 2, lease: 300 },
        Op::Fail { actor: 0, todo: 0, result: Some(json!({"error": "x"})) },
        Op::Advance(Duration::seconds(31)),
        Op::Requeue,
        Op::QueueAdmissions { identities: vec![0, 1, 2, 3] },
        Op::SetClock(at("2026-03-08T07:59:59Z")),
        next(0, &[0]),
        Op::SetClock(at("2026-03-08T08:00:00Z")),
        next(0, &[0]),
        next(0, &[0]),
        Op::PolicyDetail { identity: 0 },
        // REQ-4 the in-flight cap counts lapsed claims; a takeover does not count itself; REQ-10.
        Op::SetPolicy { identity: 0, policy: json!({"max_in_flight": 2}), human: 0, via_endpoint: true },
        Op::Claim { actor: 2, todo: 3, lease: 300 },
        policy(0, json!({"max_in_flight": 3})),
        Op::Claim { actor: 2, todo: 1, lease: 300 },
        Op::Claim { actor: 2, todo: 3, lease: 300 },
        Op::Heartbeat { actor: 0, todo: 1, lease: 60 },
        Op::Advance(Duration::seconds(61)),
        Op::Claim { actor: 2, todo: 1, lease: 300 },
        Op::Complete { actor: 0, todo: 1, result: None },
        Op::Advance(Duration::seconds(301)),
        Op::Reap,
        Op::RetryNow { actor: 2, todo: 0 },
        Op::ListTodos { owners_of: Some(0), queues: vec![], state: None, limit: 10 },
        // Dedup: a dead letter frees its key; Retry now then collides; discarded keeps the slot.
        create(1, 4, Some("k"), 1),
        next(0, &[1]),
        Op::Fail { actor: 0, todo: 4, result: None },
        create(1, 5, Some("k"), 1),
        Op::RetryNow { actor: 0, todo: 4 },
        create(1, 6, Some("k"), 1),
        Op::Discard { identity: 1, todo: 5 },
        create(1, 7, Some("k"), 1),
        Op::Discard { identity: 1, todo: 5 },
        Op::Discard { identity: 0, todo: 5 },
        // Intake capacity: a full copy refuses the whole delivery, which stays unrecorded.
        Op::SetCapacity { max: 1 },
        Op::Ingest { webhook: 1, delivery: "x".into(), title: "hook x".into(), key: None },
        Op::Ingest { webhook: 1, delivery: "y".into(), title: "hook y".into(), key: None },
        Op::Ingest { webhook: 1, delivery: "x".into(), title: "hook x again".into(), key: None },
        create(1, 8, None, 3),
        create(1, 9, Some("k"), 3),
        Op::QueueCapacity,
        Op::SetCapacity { max: 0 },
        Op::Ingest { webhook: 1, delivery: "y".into(), title: "hook y again".into(), key: None },
        Op::Ingest { webhook: 0, delivery: "y".into(), title: "hook y single".into(), key: None },
        // REQ-5 an hour window in a half-hour zone; REQ-9 a corrupt zone; REQ-10 clear and re-set.
        policy(3, kolkata_hourly.clone()),
        create(3, 10, None, 3),
        next(1, &[3]),
        create(3, 11, None, 3),
        next(1, &[3]),
        next(1, &[3, 4, 5]),
        Op::CorruptZone { identity: 3 },
        next(1, &[3]),
        Op::Claim { actor: 1, todo: 12, lease: 300 },
        Op::QueueAdmissions { identities: vec![3, 4, 5] },
        Op::ClearPolicy { identity: 3, human: 1 },
        Op::ClearPolicy { identity: 3, human: 1 },
        policy(3, kolkata_hourly),
        next(1, &[3]),
        Op::PolicyAudit { identity: 3, limit: 10 },
        Op::PolicyDetail { identity: 3 },
        // REQ-1 zero pauses; a week window in Berlin.
        policy(
            2,
            json!({"max_in_flight": 0, "max_claims_per_window": 5,
            "window": {"period": "week", "tz": "Europe/Berlin", "start": "09:15", "weekday": "Sun"}}),
        ),
        create(2, 12, None, 3),
        next(0, &[2]),
        Op::Claim { actor: 0, todo: 13, lease: 300 },
        policy(
            2,
            json!({"max_claims_per_window": 5,
            "window": {"period": "week", "tz": "Europe/Berlin", "start": "09:15", "weekday": "Sun"}}),
        ),
        next(0, &[0, 1, 2]),
        // Purge: the policy goes, the audit stays, a stale claimant finds nothing.
        next(0, &[0]),
        Op::Purge { identity: 0 },
        Op::Complete { actor: 0, todo: 0, result: None },
        Op::PolicyDetail { identity: 0 },
        Op::PolicyAudit { identity: 0, limit: 50 },
        // REQ-1 usage retention.
        Op::Advance(Duration::days(36)),
        Op::Prune,
        Op::Prune,
        Op::AllAdmissions,
    ]
}

/// Draws operations. It peeks at the model (never at PostgreSQL) to aim lifecycle calls at
/// claimed todos and their holders; both stores then get the same operation.
struct Workload {
    rng: StdRng,
    made: usize,
}

impl Workload {
    async fn next(&mut self, model: &Side<ModelStore>) -> Op {
        let known = model.norm.count("td");
        let claimed = model.claimed_todos().await;
        let rng = &mut self.rng;
        let lease = [30, 60, 300, 900][rng.random_range(0..4)];
        let any_todo = |rng: &mut StdRng| if known == 0 { 0 } else { rng.random_range(0..known + 1) };
        let held = |rng: &mut StdRng| -> (usize, usize) {
            if !claimed.is_empty() && rng.random_bool(0.8) {
                claimed[rng.random_range(0..claimed.len())]
            } else {
                (rng.random_range(0..4), any_todo(rng))
            }
        };
        let roll = rng.random_range(0..200);
        match roll {
            0..20 => Op::Advance(advance(rng)),
            20..58 => {
                self.made += 1;
                let by = match rng.random_range(0..4) {
                    0 | 1 => Creator::Human(rng.random_range(0..2)),
                    2 => Creator::Agent(rng.random_range(0..2)),
                    _ => Creator::System,
                };
                Op::Create {
                    identity: busy_identity(rng),
                    title: format!("todo {}", self.made),
                    key: rng.random_bool(0.4).then(|| format!("k{}", rng.random_range(0..4))),
                    max_attempts: rng.random_range(1..=3),
                    by,
                    payload: rng.random_bool(0.5).then(|| json!({"n": self.made, "tags": ["a", "b"]})),
                }
            }
            58..90 => {
                let actor = rng.random_range(0..4);
                let reach: &[usize] = if actor % 2 == 0 { &A_QUEUES } else { &B_QUEUES };
                let queues = if rng.random_bool(0.6) {
                    reach.to_vec()
                } else {
                    reach.iter().copied().filter(|_| rng.random_bool(0.5)).collect()
                };
                Op::ClaimNext { actor, queues, lease }
            }
            90..100 => Op::Claim { actor: rng.random_range(0..4), todo: any_todo(rng), lease },
            100..107 => {
                let (actor, todo) = held(rng);
                Op::Heartbeat { actor, todo, lease }
            }
            107..120 => {
                let (actor, todo) = held(rng);
                Op::Complete { actor, todo, result: rng.random_bool(0.5).then(|| json!({"ok": true})) }
            }
            120..131 => {
                let (actor, todo) = held(rng);
                Op::Fail { actor, todo, result: rng.random_bool(0.5).then(|| json!({"error": "boom"})) }
            }
            131..138 => {
                let (actor, todo) = held(rng);
                Op::Release { actor, todo }
            }
            138..143 => Op::RetryNow { actor: rng.random_range(0..4), todo: any_todo(rng) },
            143..146 => Op::Get { actor: rng.random_range(0..4), todo: any_todo(rng) },
            146..158 => Op::SetPolicy {
                identity: busy_identity(rng),
                policy: random_policy(rng),
                human: rng.random_range(0..2),
                via_endpoint: rng.random_bool(0.3),
            },
            158..162 => Op::ClearPolicy { identity: rng.random_range(0..IDENTITIES), human: rng.random_range(0..2) },
            162..164 => Op::CorruptZone { identity: rng.random_range(0..IDENTITIES) },
            164..171 => Op::Reap,
            171..176 => Op::Requeue,
            176..177 => Op::Prune,
            177..184 => Op::Ingest {
                webhook: rng.random_range(0..2),
                delivery: format!("d{}", rng.random_range(0..12)),
                title: {
                    self.made += 1;
                    format!("hook {}", self.made)
                },
                key: rng.random_bool(0.3).then(|| format!("k{}", rng.random_range(0..4))),
            },
            184..187 => Op::Discard { identity: rng.random_range(0..IDENTITIES), todo: any_todo(rng) },
            187 => Op::ClearQueue { identity: rng.random_range(0..IDENTITIES) },
            188 => {
                if rng.random_bool(0.3) {
                    Op::Purge { identity: rng.random_range(0..IDENTITIES) }
                } else {
                    Op::SetCapacity { max: [0, 0, 0, 3, 6][rng.random_range(0..5)] }
                }
            }
            189..192 => {
                let reach: &[usize] = if rng.random_bool(0.5) { &A_QUEUES } else { &B_QUEUES };
                Op::QueueAdmissions { identities: reach.iter().copied().filter(|_| rng.random_bool(0.7)).collect() }
            }
            192 => Op::ReachAdmissions { human: rng.random_range(0..2) },
            193 => Op::AllAdmissions,
            194..196 => Op::PolicyDetail { identity: rng.random_range(0..IDENTITIES) },
            196 => Op::PolicyAudit { identity: rng.random_range(0..IDENTITIES), limit: rng.random_range(0..4) },
            _ => {
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
        }
    }
}

/// Half the work goes to A's inbox and the team queue, so their budgets run out.
fn busy_identity(rng: &mut StdRng) -> usize {
    if rng.random_bool(0.5) { [0, 3][rng.random_range(0..2)] } else { rng.random_range(0..IDENTITIES) }
}

fn advance(rng: &mut StdRng) -> Duration {
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

fn random_policy(rng: &mut StdRng) -> Value {
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

/// What the corruption of a stored policy takes on each store (REQ-9 fault injection).
trait Corruptible: Store {
    async fn corrupt_zone(&self, identity: &QueueIdentity) -> bool;
}

impl Corruptible for PgStore {
    async fn corrupt_zone(&self, identity: &QueueIdentity) -> bool {
        sqlx::query(
            "UPDATE admission_policies SET window_tz = 'Mars/Olympus' \
             WHERE queue = $3 AND (endpoint_id = $1 OR team_id = $2)",
        )
        .bind(identity.endpoint_id())
        .bind(identity.team_id())
        .bind(&identity.queue)
        .execute(self.pool())
        .await
        .expect("corrupt")
        .rows_affected()
            > 0
    }
}

impl Corruptible for ModelStore {
    async fn corrupt_zone(&self, identity: &QueueIdentity) -> bool {
        self.corrupt_policy_zone(identity, "Mars/Olympus")
    }
}

/// One store with its world: the principals, queues and webhooks, by index.
struct Side<S> {
    store: S,
    humans: Vec<HumanScope>,
    /// Agent A, agent B, human alice, human bob.
    actors: Vec<Actor>,
    endpoints: Vec<String>,
    identities: Vec<QueueIdentity>,
    webhooks: Vec<String>,
    norm: Normaliser,
}

impl Side<ModelStore> {
    /// (actor index, todo index) of every claimed todo whose holder is one of the actors.
    async fn claimed_todos(&self) -> Vec<(usize, usize)> {
        let query =
            TodoQuery { set: TodoSet::Queues(self.identities.clone()), state: Some(TodoState::Claimed), limit: 1000 };
        let todos = self.store.list_todos(query).await.expect("list");
        todos
            .iter()
            .filter_map(|t| {
                let actor = self.actors.iter().position(|a| Some(a.label()) == t.owner)?;
                Some((actor, self.norm.index("td", &t.id)?))
            })
            .collect()
    }
}

async fn setup_pg(store: PgStore) -> (Side<PgStore>, Vec<String>) {
    let (_, alice_token) = store.bootstrap_human("alice", false).await.expect("alice");
    let (_, bob_token) = store.bootstrap_human("bob", false).await.expect("bob");
    let team = store.bootstrap_team("core", "alice").await.expect("team");
    store.bootstrap_member(&team.id, "bob", TeamRole::Member).await.expect("member");
    setup(store, [hash_token(&alice_token), hash_token(&bob_token)], team.id, team.slug).await
}

async fn setup_model(store: ModelStore) -> (Side<ModelStore>, Vec<String>) {
    let hashes = [hash_token("alice-operator-token"), hash_token("bob-operator-token")];
    store.add_human("alice", false, &hashes[0]).expect("alice");
    store.add_human("bob", false, &hashes[1]).expect("bob");
    let team = store.add_team("core", "alice").expect("team");
    store.add_member(&team.id, "bob", TeamRole::Member).expect("member");
    setup(store, hashes, team.id, team.slug).await
}

/// The world both stores share, built through the `Store` surface, with its transcript.
async fn setup<S: Corruptible>(
    store: S,
    human_hashes: [String; 2],
    team_id: String,
    team_slug: String,
) -> (Side<S>, Vec<String>) {
    let mut norm = Normaliser::default();
    norm.slugs.push((team_slug, "<team-slug>".into()));
    let mut transcript = Vec::new();
    let mut humans = Vec::new();
    for hash in &human_hashes {
        humans.push(store.human_by_token(hash).await.expect("lookup").expect("human"));
    }
    let mut endpoints = Vec::new();
    let mut actors = Vec::new();
    for (i, (name, own)) in
        [("alice agent", vec!["inbox", "lane", "slow"]), ("bob agent", vec!["inbox", "lane"])].into_iter().enumerate()
    {
        let token_hash = hash_token(&format!("agent-token-{i}"));
        let vended = store
            .vend_endpoint(NewEndpoint {
                name: name.into(),
                owner_human_id: Some(humans[i].human.id.clone()),
                owner_team_id: None,
                own_queues: own.iter().map(|q| q.to_string()).collect(),
                team_queues: vec![(team_id.clone(), "triage".into())],
                verbs: models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect(),
                token_hash: token_hash.clone(),
                created_by_human_id: Some(humans[i].human.id.clone()),
            })
            .await
            .expect("vend");
        norm.slugs.push((vended.slug.clone(), format!("<endpoint-slug-{i}>")));
        transcript.push(norm.of(&vended));
        transcript.push(norm.of(&store.agent_by_token("someone-else", &token_hash).await));
        let AgentLookup::Found(scope) = store.agent_by_token(&vended.slug, &token_hash).await.expect("lookup") else {
            panic!("the vended endpoint does not authenticate");
        };
        transcript.push(norm.of(&scope));
        endpoints.push(vended.id);
        actors.push(Actor::Agent(*scope));
    }
    humans.clear();
    for hash in &human_hashes {
        let human = store.human_by_token(hash).await.expect("lookup").expect("human");
        transcript.push(norm.of(&human));
        transcript.push(norm.of(&store.list_endpoints(&human).await));
        transcript.push(norm.of(&store.list_teams(&human).await));
        humans.push(human);
    }
    transcript.push(norm.of(&store.mint_token(&humans[1].human.id, Some("second"), &hash_token("bob-second")).await));
    transcript.push(norm.of(&store.mint_token(&humans[1].human.id, None, &hash_token("bob-second")).await));
    transcript.push(norm.of(&store.resolve_scope(&humans[0].reach, &ScopeRef::Team("core".into())).await));
    transcript.push(norm.of(&store.resolve_scope(&humans[0].reach, &ScopeRef::Team(team_id.clone())).await));
    transcript.push(norm.of(&store.resolve_scope(&humans[1].manages, &ScopeRef::Endpoint(endpoints[0].clone())).await));
    actors.push(Actor::Human(humans[0].clone()));
    actors.push(Actor::Human(humans[1].clone()));
    let identities = vec![
        QueueIdentity::endpoint(endpoints[0].clone(), "inbox"),
        QueueIdentity::endpoint(endpoints[0].clone(), "lane"),
        QueueIdentity::endpoint(endpoints[0].clone(), "slow"),
        QueueIdentity::team(team_id.clone(), "triage"),
        QueueIdentity::endpoint(endpoints[1].clone(), "inbox"),
        QueueIdentity::endpoint(endpoints[1].clone(), "lane"),
    ];
    let alice = humans[0].human.id.clone();
    let single = store.create_webhook(&alice, "single", "s1", &identities[..1]).await.expect("webhook");
    // A fan-out to two endpoints (REQ-2): its copies share an instant, so no test read spans both.
    let fan_out = store.create_webhook(&alice, "fan-out", "s2", &[identities[1].clone(), identities[4].clone()]).await;
    let fan_out = fan_out.expect("webhook");
    transcript.push(norm.of(&store.webhook_for_ingest_unscoped(&fan_out).await));
    transcript.push(norm.of(&store.create_webhook("hu_nobody", "orphan", "s3", &identities[..1]).await));
    let side = Side { store, humans, actors, endpoints, identities, webhooks: vec![single, fan_out], norm };
    (side, transcript)
}

impl<S: Corruptible> Side<S> {
    /// The store's id of the `index`th todo seen; one past the end names no todo.
    fn todo_id(&self, index: usize) -> String {
        self.norm.nth("td", index).unwrap_or_else(|| "td_missing".to_string())
    }

    fn policy_actor(&self, human: usize, via_endpoint: bool) -> PolicyActor {
        PolicyActor {
            human_id: Some(self.humans[human].human.id.clone()),
            endpoint_id: via_endpoint.then(|| self.endpoints[human].clone()),
        }
    }

    /// Runs one operation and answers it normalised.
    async fn apply(&mut self, op: &Op) -> String {
        let store = &self.store;
        let id = |todo: &usize| self.todo_id(*todo);
        let queues = |indexes: &[usize]| indexes.iter().map(|i| self.identities[*i].clone()).collect::<Vec<_>>();
        let answer = match op {
            Op::Advance(_) | Op::SetClock(_) => "clock moved".to_string(),
            Op::Create { identity, title, key, max_attempts, by, payload } => {
                let (created_by_kind, created_by_id) = match by {
                    Creator::Human(h) => (CreatedByKind::Human, Some(self.humans[*h].human.id.clone())),
                    Creator::Agent(a) => (CreatedByKind::Agent, Some(self.endpoints[*a].clone())),
                    Creator::System => (CreatedByKind::System, None),
                };
                let new = NewTodo {
                    identity: self.identities[*identity].clone(),
                    title: title.clone(),
                    payload: payload.clone(),
                    idempotency_key: key.clone(),
                    max_attempts: *max_attempts,
                    created_by_kind,
                    created_by_id,
                };
                format!("{:?}", store.create_todo(new).await)
            }
            Op::ClaimNext { actor, queues: q, lease } => {
                format!("{:?}", store.claim_next(&self.actors[*actor], &queues(q), *lease).await)
            }
            Op::Claim { actor, todo, lease } => {
                format!("{:?}", store.claim(&self.actors[*actor], &id(todo), *lease).await)
            }
            Op::Heartbeat { actor, todo, lease } => {
                format!("{:?}", store.heartbeat(&self.actors[*actor], &id(todo), *lease).await)
            }
            Op::Complete { actor, todo, result } => {
                format!("{:?}", store.complete(&self.actors[*actor], &id(todo), result.clone()).await)
            }
            Op::Fail { actor, todo, result } => {
                format!("{:?}", store.fail(&self.actors[*actor], &id(todo), result.clone()).await)
            }
            Op::Release { actor, todo } => format!("{:?}", store.release(&self.actors[*actor], &id(todo)).await),
            Op::RetryNow { actor, todo } => format!("{:?}", store.retry_now(&self.actors[*actor], &id(todo)).await),
            Op::Get { actor, todo } => format!("{:?}", store.get_todo(&self.actors[*actor], &id(todo)).await),
            Op::SetPolicy { identity, policy, human, via_endpoint } => {
                let policy = Policy::from_request(policy).expect("the workload draws valid policies");
                let actor = self.policy_actor(*human, *via_endpoint);
                format!("{:?}", store.set_policy(&self.identities[*identity], &policy, &actor).await)
            }
            Op::ClearPolicy { identity, human } => {
                let actor = self.policy_actor(*human, false);
                format!("{:?}", store.clear_policy(&self.identities[*identity], &actor).await)
            }
            Op::CorruptZone { identity } => format!("{:?}", store.corrupt_zone(&self.identities[*identity]).await),
            Op::Reap => format!("{:?}", store.reap_lapsed_leases().await),
            Op::Requeue => format!("{:?}", store.requeue_due_retries().await),
            Op::Prune => format!("{:?}", store.prune_usage().await),
            Op::Ingest { webhook, delivery, title, key } => {
                let webhook_id = &self.webhooks[*webhook];
                let route = store.webhook_for_ingest_unscoped(webhook_id).await.expect("route").expect("webhook");
                let copies = route
                    .targets
                    .iter()
                    .enumerate()
                    .map(|(i, target)| NewTodo {
                        identity: target.clone(),
                        title: format!("{title}.{i}"),
                        payload: Some(json!({"delivery": delivery})),
                        idempotency_key: key.clone(),
                        max_attempts: 2,
                        created_by_kind: CreatedByKind::Ingest,
                        created_by_id: Some(webhook_id.clone()),
                    })
                    .collect();
                format!("{:?}", store.ingest(webhook_id, delivery, copies).await)
            }
            Op::Discard { identity, todo } => {
                let by = self.policy_actor(0, false);
                format!("{:?}", store.discard_todo(&self.identities[*identity], &id(todo), &by).await)
            }
            Op::ClearQueue { identity } => {
                format!("{:?}", store.clear_queue(&self.identities[*identity], &self.policy_actor(1, true)).await)
            }
            Op::Purge { identity } => {
                format!("{:?}", store.purge_queue(&self.identities[*identity], &self.policy_actor(0, false)).await)
            }
            Op::QueueAdmissions { identities } => format!("{:?}", store.queue_admissions(&queues(identities)).await),
            Op::ReachAdmissions { human } => {
                format!("{:?}", store.reach_admissions(&self.humans[*human].manages).await)
            }
            Op::AllAdmissions => {
                // Ordered by queue then random policy id in PostgreSQL: compare as a set.
                let mut all: Vec<String> = match store.all_admissions_unscoped().await {
                    Ok(all) => all.iter().map(|a| self.norm.of(a)).collect(),
                    Err(error) => vec![format!("{error:?}")],
                };
                all.sort();
                return all.join("\n");
            }
            Op::PolicyDetail { identity } => format!("{:?}", store.policy_detail(&self.identities[*identity]).await),
            Op::PolicyAudit { identity, limit } => {
                format!("{:?}", store.policy_audit(&self.identities[*identity], *limit).await)
            }
            Op::ListTodos { owners_of, queues: q, state, limit } => {
                let set = match owners_of {
                    Some(human) => TodoSet::Owners(self.humans[*human].reach.clone()),
                    None => TodoSet::Queues(queues(q)),
                };
                format!("{:?}", store.list_todos(TodoQuery { set, state: *state, limit: *limit }).await)
            }
            Op::SetCapacity { max } => {
                format!("{:?}", store.set_queue_capacity(*max, &self.humans[0].human.id).await)
            }
            Op::QueueCapacity => format!("{:?}", store.queue_capacity().await),
            Op::Route { webhook } => format!("{:?}", store.webhook_for_ingest_unscoped(&self.webhooks[*webhook]).await),
            Op::AgentLookup { agent } => {
                let token_hash = hash_token(&format!("agent-token-{agent}"));
                format!("{:?}", store.agent_by_token(&self.endpoints[*agent], &token_hash).await)
            }
            Op::DeleteEndpoint { human, endpoint } => {
                let scope = ScopeRef::Endpoint(self.endpoints[*endpoint].clone());
                format!("{:?}", store.delete_endpoint(&self.humans[*human], &scope).await)
            }
        };
        self.norm.normalise(&answer)
    }
}

const ID_PREFIXES: [&str; 6] = ["td", "ep", "wh", "hu", "tm", "ap"];
/// `xx_` and 32 lowercase hex digits: every generated id, on both stores.
const ID_LENGTH: usize = 35;

/// Numbers each store's ids by first appearance (per kind) and masks its random slugs, so two
/// stores' answers compare equal exactly when they agree up to the choice of ids.
#[derive(Default)]
struct Normaliser {
    seen: BTreeMap<&'static str, Vec<String>>,
    slugs: Vec<(String, String)>,
}

impl Normaliser {
    fn of<T: Debug>(&mut self, value: &T) -> String {
        self.normalise(&format!("{value:?}"))
    }

    fn normalise(&mut self, text: &str) -> String {
        let mut text = text.to_string();
        for (slug, label) in &self.slugs {
            text = text.replace(slug.as_str(), label);
        }
        let bytes = text.as_bytes();
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let candidate = bytes
                .get(i..i + ID_LENGTH)
                .filter(|c| c[2] == b'_' && c[3..].iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)));
            let prefix = candidate.and_then(|c| ID_PREFIXES.iter().find(|p| p.as_bytes() == &c[..2]));
            match (candidate, prefix) {
                (Some(id), Some(prefix)) => {
                    let id = String::from_utf8_lossy(id).into_owned();
                    let seen = self.seen.entry(prefix).or_default();
                    let n = seen.iter().position(|s| s == &id).unwrap_or_else(|| {
                        seen.push(id);
                        seen.len() - 1
                    });
                    out.extend_from_slice(format!("<{prefix}#{n}>").as_bytes());
                    i += ID_LENGTH;
                }
                _ => {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn count(&self, prefix: &str) -> usize {
        self.seen.get(prefix).map_or(0, Vec::len)
    }

    fn nth(&self, prefix: &str, index: usize) -> Option<String> {
        self.seen.get(prefix)?.get(index).cloned()
    }

    fn index(&self, prefix: &str, id: &str) -> Option<usize> {
        self.seen.get(prefix)?.iter().position(|s| s == id)
    }
}
