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
use models::shared_budget::{BudgetOwner, SharedBudgetSpec, SharedBudgetView};
use models::store::Clock;
use models::store::{
    AgentLookup, AuditRecord, ClaimNext, Claimed, ClaimedMany, Ingested, NewEndpoint, OverrideBy, PolicyActor,
    PolicyDetail, PresenceView, QueueAdmission, SweepReport, TodoQuery, WebhookRoute,
};
use models::store::{Claims, Hooks, Intake, Lifecycle, Policies, Presence, Principals, Push, Store, Todos, Webhooks};
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

/// What a `Store` argument becomes to cross to the bridge thread, and how the real store's
/// method gets it back there: a borrowed argument travels owned (`ToOwned`) and is lent again;
/// a by-value one travels as it is (and is cloned out, as the closure that calls holds it).
trait Carry {
    type Owned: Send + 'static;
    type Lent<'b>
    where
        Self: 'b;
    fn carry(self) -> Self::Owned;
    fn lend(owned: &Self::Owned) -> Self::Lent<'_>;
}

impl<T> Carry for &T
where
    T: ToOwned + ?Sized,
    T::Owned: Send + 'static,
{
    type Owned = T::Owned;
    type Lent<'b>
        = &'b T
    where
        Self: 'b;
    fn carry(self) -> T::Owned {
        self.to_owned()
    }
    fn lend(owned: &T::Owned) -> &T {
        std::borrow::Borrow::borrow(owned)
    }
}

impl Carry for Option<&str> {
    type Owned = Option<String>;
    type Lent<'b>
        = Option<&'b str>
    where
        Self: 'b;
    fn carry(self) -> Option<String> {
        self.map(str::to_string)
    }
    fn lend(owned: &Option<String>) -> Option<&str> {
        owned.as_deref()
    }
}

/// `Carry` for arguments passed by value.
macro_rules! carried_by_value {
    ($($t:ty),* $(,)?) => {$(
        impl Carry for $t {
            type Owned = $t;
            type Lent<'b>
                = $t
            where
                Self: 'b;
            fn carry(self) -> $t {
                self
            }
            fn lend(owned: &$t) -> $t {
                owned.clone()
            }
        }
    )*};
}

carried_by_value!(
    i64,
    usize,
    bool,
    Option<i64>,
    Option<String>,
    Option<Value>,
    Option<Override>,
    Option<Shift>,
    OverrideBy,
    NewEndpoint,
    NewTodo,
    Vec<NewTodo>,
    TodoQuery,
    models::rate::Quota,
);

/// `Store` methods forwarded to the bridge thread's `PgStore` whole: its arguments carried across
/// (`Carry`), its answer carried back. Each signature becomes one method, so no forwarding is
/// written out by hand. `resolve_teams` is not listed: the trait's default answers it by asking
/// `resolve_scope` once per reference, which is what the model does too.
macro_rules! bridged {
    ($(async fn $name:ident(&self $(, $arg:ident: $t:ty)* $(,)?) -> $ret:ty;)*) => {
        $(
            async fn $name(&self $(, $arg: $t)*) -> $ret {
                $(let $arg = <$t as Carry>::carry($arg);)*
                self.call(move |s| async move { s.$name($(<$t as Carry>::lend(&$arg)),*).await })
            }
        )*
    };
}

impl Store for BridgeStore {
    fn counters(&self) -> &Counters {
        self.pg.counters()
    }

    bridged! {
        async fn ping(&self) -> Result<()>;
    }
}

impl Principals for BridgeStore {
    bridged! {
        async fn human_by_token(&self, token_hash: &str) -> Result<Option<HumanScope>>;
        async fn agent_by_token(&self, slug: &str, token_hash: &str) -> Result<AgentLookup>;
        async fn resolve_scope(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner>;
        async fn vend_endpoint(&self, endpoint: NewEndpoint) -> Result<Endpoint>;
        async fn list_endpoints(&self, human: &HumanScope) -> Result<Vec<Endpoint>>;
        async fn mint_token(
            &self,
            human_id: &str,
            label: Option<&str>,
            token_hash: &str,
            expires_in_seconds: Option<i64>,
        ) -> Result<()>;
        async fn list_tokens(&self, human_id: &str) -> Result<Vec<models::store::ApiToken>>;
        async fn revoke_token(&self, human_id: &str, token_id: &str) -> Result<()>;
        async fn revoke_endpoint(&self, endpoint_id: &str) -> Result<()>;
        async fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> Result<()>;
        async fn list_teams(&self, human: &HumanScope) -> Result<Vec<(Team, TeamRole)>>;
    }
}

impl Webhooks for BridgeStore {
    bridged! {
        async fn create_webhook(
            &self,
            owner_human_id: &str,
            name: &str,
            secret: &str,
            targets: &[QueueIdentity],
        ) -> Result<String>;
        async fn list_webhooks(&self, owner_human_id: &str) -> Result<Vec<models::store::WebhookSummary>>;
        async fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> Result<()>;
        async fn rotate_webhook_secret(&self, owner_human_id: &str, webhook_id: &str, secret: &str) -> Result<()>;
        async fn webhook_for_ingest_unscoped(&self, webhook_id: &str) -> Result<Option<WebhookRoute>>;
        async fn ingest(&self, webhook_id: &str, delivery_id: &str, todos: Vec<NewTodo>) -> Result<Ingested>;
    }
}

impl Todos for BridgeStore {
    bridged! {
        async fn create_todo(&self, todo: NewTodo) -> Result<Created>;
        async fn create_todos(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>>;
        async fn list_todos(&self, query: TodoQuery) -> Result<Vec<Todo>>;
        async fn get_todo(&self, actor: &Actor, id: &str) -> Result<Todo>;
    }
}

impl Intake for BridgeStore {
    bridged! {
        async fn queue_capacity(&self) -> Result<Capacity>;
        async fn set_queue_capacity(&self, max_pending: i64, by_human_id: &str) -> Result<Capacity>;
        async fn discard_todo(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()>;
        async fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64>;
        async fn edit_todo(
            &self,
            human: &HumanScope,
            id: &str,
            title: Option<String>,
            payload: Option<Value>,
        ) -> Result<Todo>;
        async fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64>;
        async fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()>;
    }
}

impl Claims for BridgeStore {
    bridged! {
        async fn claim_next(&self, actor: &Actor, queues: &[QueueIdentity], lease_seconds: i64) -> Result<ClaimNext>;
        async fn claim_next_many(
            &self,
            actor: &Actor,
            queues: &[QueueIdentity],
            lease_seconds: i64,
            max: usize,
        ) -> Result<ClaimedMany>;
        async fn claim(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed>;
    }
}

impl Lifecycle for BridgeStore {
    bridged! {
        async fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo>;
        async fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo>;
        async fn complete_many(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>>;
        async fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo>;
        async fn release(&self, actor: &Actor, id: &str) -> Result<Todo>;
        async fn retry_now(&self, actor: &Actor, id: &str) -> Result<Todo>;
        async fn reap_lapsed_leases(&self) -> Result<SweepReport>;
        async fn requeue_due_retries(&self) -> Result<u64>;
    }
}

impl Policies for BridgeStore {
    bridged! {
        async fn all_admissions_unscoped(&self) -> Result<Vec<QueueAdmission>>;
        async fn queue_admissions(&self, identities: &[QueueIdentity]) -> Result<Vec<QueueAdmission>>;
        async fn reach_admissions(&self, reach: &Reach) -> Result<Vec<QueueAdmission>>;
        async fn policy_detail(&self, identity: &QueueIdentity) -> Result<PolicyDetail>;
        async fn set_policy(
            &self,
            identity: &QueueIdentity,
            policy: &Policy,
            actor: &PolicyActor,
        ) -> Result<QueueAdmission>;
        async fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()>;
        async fn policy_audit(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>>;
        async fn prune_usage(&self) -> Result<u64>;
        async fn take_write_token(&self, key: &str, quota: models::rate::Quota) -> Result<models::rate::Verdict>;
    }
}

impl Push for BridgeStore {
    bridged! {
        async fn open_session(&self, endpoint_id: &str) -> Result<String>;
        async fn attach_session(&self, endpoint_id: &str, session_id: &str, replica_id: &str) -> Result<bool>;
        async fn detach_session(&self, session_id: &str, replica_id: &str) -> Result<()>;
        async fn close_session(&self, endpoint_id: &str, session_id: &str) -> Result<bool>;
        async fn refresh_sessions(&self, replica_id: &str, session_ids: &[String]) -> Result<Vec<String>>;
        async fn rings_since(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>>;
        async fn dispatch_pushes(&self) -> Result<PushReport>;
        async fn reopen_sweep(&self) -> Result<PushReport>;
        async fn heartbeat_sweep(&self) -> Result<PushReport>;
    }
}

impl Presence for BridgeStore {
    bridged! {
        async fn presence(&self, endpoint_id: &str) -> Result<PresenceView>;
        async fn set_presence_override(
            &self,
            endpoint_id: &str,
            override_: Option<Override>,
            by: OverrideBy,
        ) -> Result<PresenceView>;
        async fn set_shift(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView>;
        async fn presence_sweep(&self) -> Result<PushReport>;
        async fn reconnect_digest(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport>;
    }
}

impl Hooks for BridgeStore {
    bridged! {
        async fn add_hook(
            &self,
            endpoint_id: &str,
            url: &str,
            secret: &str,
            ignore_presence: bool,
        ) -> Result<NotifyHook>;
        async fn list_hooks(&self, endpoint_id: &str) -> Result<Vec<NotifyHook>>;
        async fn hook_for_test(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)>;
        async fn remove_hook(&self, endpoint_id: &str, hook_id: &str) -> Result<()>;
        async fn take_hook_calls(&self, replica_id: &str) -> Result<Vec<HookCall>>;
        async fn finish_hook_call(&self, call_id: i64, replica_id: &str, outcome: &HookOutcome) -> Result<()>;
    }
}

impl models::store::SharedBudgets for BridgeStore {
    bridged! {
        async fn set_shared_budget(&self, owner: &BudgetOwner, spec: &SharedBudgetSpec, actor: &PolicyActor) -> Result<SharedBudgetView>;
        async fn shared_budgets(&self, owners: &[BudgetOwner]) -> Result<Vec<SharedBudgetView>>;
        async fn shared_budget(&self, owner: &BudgetOwner, name: &str) -> Result<SharedBudgetView>;
        async fn delete_shared_budget(&self, owner: &BudgetOwner, name: &str, actor: &PolicyActor) -> Result<()>;
        async fn shared_budget_audit(&self, owner: &BudgetOwner, name: &str, limit: i64) -> Result<Vec<AuditRecord>>;
    }
}
