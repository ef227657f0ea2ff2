//! Fixtures for engine tests: a fresh database per test, a store on a manual clock, and a
//! human with an endpoint and its agent scope.

#![allow(dead_code)]

pub mod plans;

use chrono::{DateTime, TimeZone, Utc};
use engine::pg_store::{hash_token, new_token};
use engine::testing::{TestDatabase, fresh_database};
use engine::{PgStore, PoolSettings};
use models::identity::QueueIdentity;
use models::scope::{Actor, Endpoint, HumanScope};
use models::store::prelude::*;
use models::store::{AgentLookup, ClaimNext, Claimed, DeferredQueue, ManualClock, NewEndpoint};
use models::todo::{CreatedByKind, MAX_ATTEMPTS_DEFAULT, NewTodo, Todo};
use std::sync::Arc;

pub fn epoch() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).single().expect("valid instant")
}

pub struct World {
    pub db: TestDatabase,
    pub clock: ManualClock,
    pub store: PgStore,
}

impl World {
    pub async fn new() -> World {
        let db = fresh_database().await;
        let clock = ManualClock::at(epoch());
        let store = World::store_on(&db, &clock).await;
        World { db, clock, store }
    }

    /// Another engine instance with its own pool on the same database (a second replica).
    pub async fn store_on(db: &TestDatabase, clock: &ManualClock) -> PgStore {
        let settings = PoolSettings { connections_max: 20, ..PoolSettings::default() };
        PgStore::connect(&db.url, settings, Arc::new(clock.clone())).await.expect("connect")
    }

    /// Another engine instance on this world's database and clock, with its own pool settings
    /// (one connection, short lock waits, small groups).
    pub async fn store_with(&self, settings: PoolSettings) -> PgStore {
        PgStore::connect(&self.db.url, settings, Arc::new(self.clock.clone())).await.expect("connect")
    }

    pub async fn human(&self, name: &str) -> HumanScope {
        let (_, token) = self.store.bootstrap_human(name, false).await.expect("bootstrap human");
        self.human_scope(&token).await
    }

    /// `human` read again, so their reach includes what was vended since.
    pub async fn human_scope_of(&self, human: &HumanScope) -> HumanScope {
        self.store.human_scope(&human.human.id).await.expect("human scope").expect("human exists")
    }

    pub async fn human_scope(&self, token: &str) -> HumanScope {
        self.store.human_by_token(&hash_token(token)).await.expect("lookup").expect("human exists")
    }

    /// Vends an endpoint owned by `owner` granting `queues`, and returns its agent actor.
    pub async fn agent(&self, owner: &HumanScope, queues: &[&str]) -> Actor {
        self.agent_granted(owner, queues, &[]).await
    }

    /// Vends an endpoint owned by `owner` granting its own `queues` and the `team_queues` (team
    /// id, queue) of teams `owner` belongs to, and returns its agent actor.
    pub async fn agent_granted(&self, owner: &HumanScope, queues: &[&str], team_queues: &[(&str, &str)]) -> Actor {
        let (endpoint, token) = self.vend(owner, queues, team_queues).await;
        match self.store.agent_by_token(&endpoint.slug, &hash_token(&token)).await.expect("lookup") {
            AgentLookup::Found(scope) => Actor::Agent(*scope),
            other => panic!("vended endpoint did not authenticate: {other:?}"),
        }
    }

    /// Vends an endpoint owned by `owner` as `agent_granted` does; the endpoint and its key.
    pub async fn vend(&self, owner: &HumanScope, queues: &[&str], team_queues: &[(&str, &str)]) -> (Endpoint, String) {
        let token = new_token("sbk_");
        let endpoint = self
            .store
            .vend_endpoint(NewEndpoint {
                name: format!("{}-agent", owner.human.name),
                owner_human_id: Some(owner.human.id.clone()),
                owner_team_id: None,
                own_queues: queues.iter().map(|q| q.to_string()).collect(),
                team_queues: team_queues.iter().map(|(team, queue)| (team.to_string(), queue.to_string())).collect(),
                verbs: models::verbs::DEFAULT_GRANT.iter().map(|v| v.to_string()).collect(),
                token_hash: hash_token(&token),
                created_by_human_id: Some(owner.human.id.clone()),
            })
            .await
            .expect("vend");
        (endpoint, token)
    }

    /// The owner's human actor, refreshed so it reaches endpoints vended since.
    pub async fn owner(&self, name: &str) -> Actor {
        let (_, token) = self.store.bootstrap_human(name, false).await.expect("bootstrap human");
        Actor::Human(self.human_scope(&token).await)
    }

    pub async fn push(&self, identity: &QueueIdentity, title: &str) -> Todo {
        self.store.create_todo(new_todo(identity, title, None)).await.expect("create").todo
    }
}

pub fn new_todo(identity: &QueueIdentity, title: &str, key: Option<&str>) -> NewTodo {
    NewTodo {
        identity: identity.clone(),
        title: title.to_string(),
        payload: None,
        idempotency_key: key.map(str::to_string),
        max_attempts: MAX_ATTEMPTS_DEFAULT,
        created_by_kind: CreatedByKind::Human,
        created_by_id: None,
    }
}

/// The first granted queue identity of an agent.
pub fn queue_of(agent: &Actor, name: &str) -> QueueIdentity {
    match agent {
        Actor::Agent(scope) => scope.granted.iter().find(|q| q.queue == name).cloned().expect("granted queue"),
        Actor::Human(_) => panic!("not an agent"),
    }
}

/// A world whose human "alice" has a team, and an agent granted `queue` of its own endpoint and
/// of that team, with the two identities (the endpoint's first).
pub async fn queue_of_both_kinds(queue: &str) -> (World, Actor, [QueueIdentity; 2]) {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let team = world.store.bootstrap_team("crew", "alice").await.expect("team");
    let agent = world.agent_granted(&alice, &[queue], &[(team.id.as_str(), queue)]).await;
    let identities = [queue_of(&agent, queue), QueueIdentity::team(&team.id, queue)];
    (world, agent, identities)
}

pub fn granted(agent: &Actor) -> Vec<QueueIdentity> {
    match agent {
        Actor::Agent(scope) => scope.granted.to_vec(),
        Actor::Human(_) => panic!("not an agent"),
    }
}

/// Sets a policy from its request JSON, as an owner would, and returns the saved status.
pub async fn set_policy(
    world: &World,
    identity: &QueueIdentity,
    body: serde_json::Value,
) -> models::store::QueueAdmission {
    let policy = models::admission::Policy::from_request(&body).expect("valid policy");
    let actor = models::store::PolicyActor { human_id: None, endpoint_id: None };
    world.store.set_policy(identity, &policy, &actor).await.expect("set policy")
}

/// Units charged to an identity, summed over all windows.
pub async fn charged(world: &World, identity: &QueueIdentity) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(w.used), 0)::bigint FROM admission_windows w \
         WHERE w.queue = $3 AND (w.endpoint_id = $1 OR w.team_id = $2)",
    )
    .bind(identity.endpoint_id())
    .bind(identity.team_id())
    .bind(&identity.queue)
    .fetch_one(world.store.pool())
    .await
    .expect("charged")
}

pub fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).expect("instant").to_utc()
}

pub fn daily_pacific(max: i64) -> serde_json::Value {
    serde_json::json!({"max_claims_per_window": max, "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}})
}

/// The claim of a `claim_next` that must have claimed.
pub fn claimed(outcome: ClaimNext) -> Claimed {
    match outcome {
        ClaimNext::Claimed(claimed) => *claimed,
        ClaimNext::Empty { deferred } => panic!("expected a claim, got empty (deferred: {deferred:?})"),
    }
}

/// The deferred list of a `claim_next` that must have come back empty.
pub fn deferred(outcome: ClaimNext) -> Vec<DeferredQueue> {
    match outcome {
        ClaimNext::Empty { deferred } => deferred,
        ClaimNext::Claimed(claimed) => panic!("expected empty, claimed {}", claimed.todo.id),
    }
}

/// A world with one human and an agent granted `queues`.
pub async fn agent_world(queues: &[&str]) -> (World, Actor) {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, queues).await;
    (world, agent)
}

/// Pushes `n` todos titled `todo {i}`.
pub async fn push_n(world: &World, identity: &QueueIdentity, n: usize) {
    for i in 0..n {
        world.push(identity, &format!("todo {i}")).await;
    }
}
