//! The blocking bridge from the simulation to a real PostgreSQL: every `Store` call is sent to a
//! real thread that owns a real tokio runtime and a `PgStore`, and the simulation thread waits
//! for the answer.
//!
//! Exists because sqlx cannot run inside the simulated world: simulated time does not wait for real
//! I/O (context/simulation-spike.md). Blocking takes zero simulated time and keeps the order of
//! calls exactly the simulation's, so the same seed gives the same trace here as on `ModelStore`:
//! the differential run. Each call is one whole transaction, so no lock is ever held across a
//! simulated `.await`. It serialises database access, so real lock races are the stress run's job.

use crate::sim_time::SimClock;
use engine::{PgStore, PoolSettings};
use models::admission::Policy;
use models::capacity::Capacity;
use models::counters::Counters;
use models::error::Result;
use models::identity::{Owner, QueueIdentity, ScopeRef};
use models::presence::{Override, Shift};
use models::push::{HookCall, HookOutcome, NotifyHook, PushReport, Ring};
use models::scope::{Actor, Endpoint, HumanScope, Reach, Team, TeamRole};
use models::store::Clock;
use models::store::{
    AgentLookup, AuditRecord, ClaimNext, Claimed, ClaimedMany, Ingested, NewEndpoint, OverrideBy, PolicyActor,
    PolicyDetail, PresenceView, QueueAdmission, Store, SweepReport, TodoQuery, WebhookRoute,
};
use models::todo::{Created, NewTodo, Todo};
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, mpsc};

type Job = Box<dyn FnOnce(&tokio::runtime::Runtime, &PgStore) + Send>;

/// A `Store` whose every call runs to completion on a real PostgreSQL before it returns.
#[derive(Clone)]
pub struct BridgeStore {
    jobs: mpsc::Sender<Job>,
    /// A handle on the same store (the pool is shared), for its counters.
    pg: PgStore,
    /// The store's clock, brought to simulated time before each call leaves for the bridge
    /// thread (which cannot read simulated time itself).
    clock: SimClock,
}

impl BridgeStore {
    /// Starts the bridge thread: it owns a runtime and a `PgStore` on database `url` (already
    /// migrated) whose clock is `clock`.
    pub fn start(url: &str, clock: SimClock) -> BridgeStore {
        let store_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, store) = mpsc::sync_channel::<std::result::Result<PgStore, String>>(1);
        let url = url.to_string();
        std::thread::Builder::new()
            .name("sim-db-bridge".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = ready.send(Err(format!("the bridge needs a runtime: {error}")));
                        return;
                    }
                };
                let settings = PoolSettings {
                    connections_max: 2,
                    acquire_timeout: std::time::Duration::from_secs(30),
                    ..PoolSettings::default()
                };
                let connected = runtime.block_on(PgStore::connect(&url, settings, store_clock));
                let owned = match connected {
                    Ok(store) => store,
                    Err(error) => {
                        let _ = ready.send(Err(format!("the bridge cannot connect: {error}")));
                        return;
                    }
                };
                let _ = ready.send(Ok(owned.clone()));
                while let Ok(job) = queue.recv() {
                    job(&runtime, &owned);
                }
                runtime.block_on(owned.pool().close());
            })
            .unwrap_or_else(|error| panic!("cannot start the bridge thread: {error}"));
        match store.recv() {
            Ok(Ok(pg)) => BridgeStore { jobs, pg, clock },
            Ok(Err(problem)) => panic!("{problem}"),
            Err(_) => panic!("the bridge thread died while starting"),
        }
    }

    /// Runs `work` against the real store and blocks until it is done.
    pub fn call<R, F, Fut>(&self, work: F) -> R
    where
        R: Send + 'static,
        F: FnOnce(PgStore) -> Fut + Send + 'static,
        Fut: Future<Output = R> + Send + 'static,
    {
        self.clock.follow();
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |runtime, store| {
            let _ = reply.send(runtime.block_on(work(store.clone())));
        });
        if self.jobs.send(job).is_err() {
            panic!("the bridge thread is gone");
        }
        answer.recv().unwrap_or_else(|_| panic!("the bridge thread died mid-call"))
    }
}

impl Store for BridgeStore {
    fn counters(&self) -> &Counters {
        self.pg.counters()
    }

    async fn all_admissions_unscoped(&self) -> Result<Vec<QueueAdmission>> {
        self.call(|s| async move { s.all_admissions_unscoped().await })
    }

    async fn ping(&self) -> Result<()> {
        self.call(|s| async move { s.ping().await })
    }

    async fn human_by_token(&self, token_hash: &str) -> Result<Option<HumanScope>> {
        let token_hash = token_hash.to_string();
        self.call(move |s| async move { s.human_by_token(&token_hash).await })
    }

    async fn agent_by_token(&self, slug: &str, token_hash: &str) -> Result<AgentLookup> {
        let (slug, token_hash) = (slug.to_string(), token_hash.to_string());
        self.call(move |s| async move { s.agent_by_token(&slug, &token_hash).await })
    }

    async fn resolve_scope(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner> {
        let (reach, scope) = (reach.clone(), scope.clone());
        self.call(move |s| async move { s.resolve_scope(&reach, &scope).await })
    }

    async fn vend_endpoint(&self, endpoint: NewEndpoint) -> Result<Endpoint> {
        self.call(move |s| async move { s.vend_endpoint(endpoint).await })
    }

    async fn list_endpoints(&self, human: &HumanScope) -> Result<Vec<Endpoint>> {
        let human = human.clone();
        self.call(move |s| async move { s.list_endpoints(&human).await })
    }

    async fn mint_token(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> Result<()> {
        let (human_id, label, token_hash) = (human_id.to_string(), label.map(str::to_string), token_hash.to_string());
        self.call(
            move |s| async move { s.mint_token(&human_id, label.as_deref(), &token_hash, expires_in_seconds).await },
        )
    }

    async fn list_tokens(&self, human_id: &str) -> Result<Vec<models::store::ApiToken>> {
        let human_id = human_id.to_string();
        self.call(move |s| async move { s.list_tokens(&human_id).await })
    }

    async fn revoke_token(&self, human_id: &str, token_id: &str) -> Result<()> {
        let (human_id, token_id) = (human_id.to_string(), token_id.to_string());
        self.call(move |s| async move { s.revoke_token(&human_id, &token_id).await })
    }

    async fn revoke_endpoint(&self, endpoint_id: &str) -> Result<()> {
        let endpoint_id = endpoint_id.to_string();
        self.call(move |s| async move { s.revoke_endpoint(&endpoint_id).await })
    }

    async fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> Result<()> {
        let (endpoint_id, token_hash) = (endpoint_id.to_string(), token_hash.to_string());
        self.call(move |s| async move { s.rotate_endpoint(&endpoint_id, &token_hash).await })
    }

    async fn list_teams(&self, human: &HumanScope) -> Result<Vec<(Team, TeamRole)>> {
        let human = human.clone();
        self.call(move |s| async move { s.list_teams(&human).await })
    }

    async fn create_webhook(
        &self,
        owner_human_id: &str,
        name: &str,
        secret: &str,
        targets: &[QueueIdentity],
    ) -> Result<String> {
        let (owner, name, secret, targets) =
            (owner_human_id.to_string(), name.to_string(), secret.to_string(), targets.to_vec());
        self.call(move |s| async move { s.create_webhook(&owner, &name, &secret, &targets).await })
    }

    async fn list_webhooks(&self, owner_human_id: &str) -> Result<Vec<models::store::WebhookSummary>> {
        let owner_human_id = owner_human_id.to_string();
        self.call(move |s| async move { s.list_webhooks(&owner_human_id).await })
    }

    async fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> Result<()> {
        let (owner_human_id, webhook_id) = (owner_human_id.to_string(), webhook_id.to_string());
        self.call(move |s| async move { s.delete_webhook(&owner_human_id, &webhook_id).await })
    }

    async fn rotate_webhook_secret(&self, owner_human_id: &str, webhook_id: &str, secret: &str) -> Result<()> {
        let (owner_human_id, webhook_id, secret) =
            (owner_human_id.to_string(), webhook_id.to_string(), secret.to_string());
        self.call(move |s| async move { s.rotate_webhook_secret(&owner_human_id, &webhook_id, &secret).await })
    }

    async fn webhook_for_ingest_unscoped(&self, webhook_id: &str) -> Result<Option<WebhookRoute>> {
        let webhook_id = webhook_id.to_string();
        self.call(move |s| async move { s.webhook_for_ingest_unscoped(&webhook_id).await })
    }

    async fn ingest(&self, webhook_id: &str, delivery_id: &str, todos: Vec<NewTodo>) -> Result<Ingested> {
        let (webhook_id, delivery_id) = (webhook_id.to_string(), delivery_id.to_string());
        self.call(move |s| async move { s.ingest(&webhook_id, &delivery_id, todos).await })
    }

    async fn create_todo(&self, todo: NewTodo) -> Result<Created> {
        self.call(move |s| async move { s.create_todo(todo).await })
    }

    async fn create_todos(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        self.call(move |s| async move { s.create_todos(todos).await })
    }

    async fn list_todos(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        self.call(move |s| async move { s.list_todos(query).await })
    }

    async fn get_todo(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let (actor, id) = (actor.clone(), id.to_string());
        self.call(move |s| async move { s.get_todo(&actor, &id).await })
    }

    async fn claim_next(&self, actor: &Actor, queues: &[QueueIdentity], lease_seconds: i64) -> Result<ClaimNext> {
        let (actor, queues) = (actor.clone(), queues.to_vec());
        self.call(move |s| async move { s.claim_next(&actor, &queues, lease_seconds).await })
    }

    async fn claim_next_many(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> Result<ClaimedMany> {
        let (actor, queues) = (actor.clone(), queues.to_vec());
        self.call(move |s| async move { s.claim_next_many(&actor, &queues, lease_seconds, max).await })
    }

    async fn claim(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        let (actor, id) = (actor.clone(), id.to_string());
        self.call(move |s| async move { s.claim(&actor, &id, lease_seconds).await })
    }

    async fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        let (actor, id) = (actor.clone(), id.to_string());
        self.call(move |s| async move { s.heartbeat(&actor, &id, lease_seconds).await })
    }

    async fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        let (actor, id) = (actor.clone(), id.to_string());
        self.call(move |s| async move { s.complete(&actor, &id, result).await })
    }

    async fn complete_many(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>> {
        let (actor, ids) = (actor.clone(), ids.to_vec());
        self.call(move |s| async move { s.complete_many(&actor, &ids, result).await })
    }

    async fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        let (actor, id) = (actor.clone(), id.to_string());
        self.call(move |s| async move { s.fail(&actor, &id, result).await })
    }

    async fn release(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let (actor, id) = (actor.clone(), id.to_string());
        self.call(move |s| async move { s.release(&actor, &id).await })
    }

    async fn retry_now(&self, actor: &Actor, id: &str) -> Result<Todo> {
        let (actor, id) = (actor.clone(), id.to_string());
        self.call(move |s| async move { s.retry_now(&actor, &id).await })
    }

    async fn queue_admissions(&self, identities: &[QueueIdentity]) -> Result<Vec<QueueAdmission>> {
        let identities = identities.to_vec();
        self.call(move |s| async move { s.queue_admissions(&identities).await })
    }

    async fn reach_admissions(&self, reach: &Reach) -> Result<Vec<QueueAdmission>> {
        let reach = reach.clone();
        self.call(move |s| async move { s.reach_admissions(&reach).await })
    }

    async fn policy_detail(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        let identity = identity.clone();
        self.call(move |s| async move { s.policy_detail(&identity).await })
    }

    async fn set_policy(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        let (identity, policy, actor) = (identity.clone(), policy.clone(), actor.clone());
        self.call(move |s| async move { s.set_policy(&identity, &policy, &actor).await })
    }

    async fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        let (identity, actor) = (identity.clone(), actor.clone());
        self.call(move |s| async move { s.clear_policy(&identity, &actor).await })
    }

    async fn policy_audit(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>> {
        let identity = identity.clone();
        self.call(move |s| async move { s.policy_audit(&identity, limit).await })
    }

    async fn queue_capacity(&self) -> Result<Capacity> {
        self.call(|s| async move { s.queue_capacity().await })
    }

    async fn set_queue_capacity(&self, max_pending: i64, by_human_id: &str) -> Result<Capacity> {
        let by = by_human_id.to_string();
        self.call(move |s| async move { s.set_queue_capacity(max_pending, &by).await })
    }

    async fn discard_todo(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()> {
        let (identity, id, by) = (identity.clone(), id.to_string(), by.clone());
        self.call(move |s| async move { s.discard_todo(&identity, &id, &by).await })
    }

    async fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        let (identity, by) = (identity.clone(), by.clone());
        self.call(move |s| async move { s.clear_queue(&identity, &by).await })
    }

    async fn edit_todo(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> Result<Todo> {
        let (human, id) = (human.clone(), id.to_string());
        self.call(move |s| async move { s.edit_todo(&human, &id, title, payload).await })
    }

    async fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        let (identity, by) = (identity.clone(), by.clone());
        self.call(move |s| async move { s.purge_queue(&identity, &by).await })
    }

    async fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()> {
        let (human, endpoint) = (human.clone(), endpoint.clone());
        self.call(move |s| async move { s.delete_endpoint(&human, &endpoint).await })
    }

    async fn reap_lapsed_leases(&self) -> Result<SweepReport> {
        self.call(|s| async move { s.reap_lapsed_leases().await })
    }

    async fn requeue_due_retries(&self) -> Result<u64> {
        self.call(|s| async move { s.requeue_due_retries().await })
    }

    async fn prune_usage(&self) -> Result<u64> {
        self.call(|s| async move { s.prune_usage().await })
    }

    async fn take_write_token(&self, key: &str, quota: models::rate::Quota) -> Result<models::rate::Verdict> {
        let key = key.to_string();
        self.call(move |s| async move { s.take_write_token(&key, quota).await })
    }

    async fn open_session(&self, endpoint_id: &str) -> Result<String> {
        let endpoint_id = endpoint_id.to_string();
        self.call(move |s| async move { s.open_session(&endpoint_id).await })
    }

    async fn attach_session(&self, endpoint_id: &str, session_id: &str, replica_id: &str) -> Result<bool> {
        let (endpoint_id, session_id, replica_id) =
            (endpoint_id.to_string(), session_id.to_string(), replica_id.to_string());
        self.call(move |s| async move { s.attach_session(&endpoint_id, &session_id, &replica_id).await })
    }

    async fn detach_session(&self, session_id: &str, replica_id: &str) -> Result<()> {
        let (session_id, replica_id) = (session_id.to_string(), replica_id.to_string());
        self.call(move |s| async move { s.detach_session(&session_id, &replica_id).await })
    }

    async fn refresh_sessions(&self, replica_id: &str, session_ids: &[String]) -> Result<Vec<String>> {
        let (replica_id, session_ids) = (replica_id.to_string(), session_ids.to_vec());
        self.call(move |s| async move { s.refresh_sessions(&replica_id, &session_ids).await })
    }

    async fn rings_since(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>> {
        let session_id = session_id.to_string();
        self.call(move |s| async move { s.rings_since(&session_id, after_seq).await })
    }

    async fn dispatch_pushes(&self) -> Result<PushReport> {
        self.call(|s| async move { s.dispatch_pushes().await })
    }

    async fn reopen_sweep(&self) -> Result<PushReport> {
        self.call(|s| async move { s.reopen_sweep().await })
    }

    async fn heartbeat_sweep(&self) -> Result<PushReport> {
        self.call(|s| async move { s.heartbeat_sweep().await })
    }

    async fn presence_sweep(&self) -> Result<PushReport> {
        self.call(|s| async move { s.presence_sweep().await })
    }

    async fn reconnect_digest(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        let (endpoint_id, session_id) = (endpoint_id.to_string(), session_id.to_string());
        self.call(move |s| async move { s.reconnect_digest(&endpoint_id, &session_id).await })
    }

    async fn presence(&self, endpoint_id: &str) -> Result<PresenceView> {
        let endpoint_id = endpoint_id.to_string();
        self.call(move |s| async move { s.presence(&endpoint_id).await })
    }

    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        let endpoint_id = endpoint_id.to_string();
        self.call(move |s| async move { s.set_presence_override(&endpoint_id, override_, by).await })
    }

    async fn set_shift(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        let endpoint_id = endpoint_id.to_string();
        self.call(move |s| async move { s.set_shift(&endpoint_id, shift).await })
    }

    async fn add_hook(&self, endpoint_id: &str, url: &str, secret: &str, ignore_presence: bool) -> Result<NotifyHook> {
        let (endpoint_id, url, secret) = (endpoint_id.to_string(), url.to_string(), secret.to_string());
        self.call(move |s| async move { s.add_hook(&endpoint_id, &url, &secret, ignore_presence).await })
    }

    async fn list_hooks(&self, endpoint_id: &str) -> Result<Vec<NotifyHook>> {
        let endpoint_id = endpoint_id.to_string();
        self.call(move |s| async move { s.list_hooks(&endpoint_id).await })
    }

    async fn hook_for_test(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)> {
        let (endpoint_id, hook_id) = (endpoint_id.to_string(), hook_id.to_string());
        self.call(move |s| async move { s.hook_for_test(&endpoint_id, &hook_id).await })
    }

    async fn remove_hook(&self, endpoint_id: &str, hook_id: &str) -> Result<()> {
        let (endpoint_id, hook_id) = (endpoint_id.to_string(), hook_id.to_string());
        self.call(move |s| async move { s.remove_hook(&endpoint_id, &hook_id).await })
    }

    async fn take_hook_calls(&self, replica_id: &str) -> Result<Vec<HookCall>> {
        let replica_id = replica_id.to_string();
        self.call(move |s| async move { s.take_hook_calls(&replica_id).await })
    }

    async fn finish_hook_call(&self, call_id: i64, replica_id: &str, outcome: &HookOutcome) -> Result<()> {
        let (replica_id, outcome) = (replica_id.to_string(), outcome.clone());
        self.call(move |s| async move { s.finish_hook_call(call_id, &replica_id, &outcome).await })
    }
}
