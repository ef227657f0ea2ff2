//! `Faulty`'s `Store` implementation, one block per role trait: for every call, whether it passes
//! straight through (set-up and reads no fault is drawn for; listed in `passed_through!`), is
//! guarded as a read or a write (`Faulty::guarded` draws its latency, error and lost
//! acknowledgement), and what a committed write records in the ledger.
//!
//! Its own module so the fault machinery (`faults.rs`) reads apart from this long, regular list.

use super::{Event, Faulty, Kind, nothing};
use models::admission::Policy;
use models::capacity::Capacity;
use models::counters::Counters;
use models::error::Result;
use models::identity::{Owner, QueueIdentity, ScopeRef};
use models::presence::{Override, Shift};
use models::push::{HookCall, HookOutcome, NotifyHook, PushReport, Ring};
use models::scope::{Actor, Endpoint, HumanScope, Reach, Team, TeamRole};
use models::shared_budget::{BudgetOwner, SharedBudgetSpec, SharedBudgetView};
use models::store::{
    AgentLookup, AuditRecord, ClaimNext, Claimed, ClaimedMany, Ingested, NewEndpoint, OverrideBy, PolicyActor,
    PolicyDetail, PresenceView, QueueAdmission, SweepReport, TodoQuery, WebhookRoute,
};
use models::store::{Claims, Hooks, Intake, Lifecycle, Policies, Principals, Push, Store, Todos, Webhooks};
use models::todo::{Created, NewTodo, Todo};
use serde_json::Value;

/// Methods that pass straight through to the wrapped store: no fault is drawn for them and they
/// add nothing to the ledger. Each signature becomes a method whose body is
/// `self.inner.<name>(<arguments>).await`, so no pass-through is written out by hand.
macro_rules! passed_through {
    ($(async fn $name:ident(&self $(, $arg:ident: $t:ty)* $(,)?) -> $ret:ty;)*) => {
        $(
            async fn $name(&self $(, $arg: $t)*) -> $ret {
                self.inner.$name($($arg),*).await
            }
        )*
    };
}

impl<S: Store> Store for Faulty<S> {
    fn counters(&self) -> &Counters {
        self.inner.counters()
    }

    passed_through! {
        async fn ping(&self) -> Result<()>;
    }
}

impl<S: Store> Principals for Faulty<S> {
    passed_through! {
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

    async fn human_by_token(&self, token_hash: &str) -> Result<Option<HumanScope>> {
        self.guarded(Kind::Read, self.inner.human_by_token(token_hash), nothing).await
    }

    async fn agent_by_token(&self, slug: &str, token_hash: &str) -> Result<AgentLookup> {
        self.guarded(Kind::Read, self.inner.agent_by_token(slug, token_hash), nothing).await
    }
}

impl<S: Store> Webhooks for Faulty<S> {
    passed_through! {
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
    }

    async fn webhook_for_ingest_unscoped(&self, webhook_id: &str) -> Result<Option<WebhookRoute>> {
        self.guarded(Kind::Read, self.inner.webhook_for_ingest_unscoped(webhook_id), nothing).await
    }

    async fn ingest(&self, webhook_id: &str, delivery_id: &str, todos: Vec<NewTodo>) -> Result<Ingested> {
        let identities: Vec<QueueIdentity> = todos.iter().map(|t| t.identity.clone()).collect();
        self.guarded(Kind::Write, self.inner.ingest(webhook_id, delivery_id, todos), |ingested, ledger| {
            for (id, identity) in ingested.todo_ids.iter().zip(identities) {
                ledger.push(Event::Created { id: id.clone(), identity, deduped: ingested.deduped });
            }
        })
        .await
    }
}

impl<S: Store> Todos for Faulty<S> {
    async fn create_todo(&self, todo: NewTodo) -> Result<Created> {
        self.guarded(Kind::Write, self.inner.create_todo(todo), |created, ledger| {
            ledger.push(Event::Created {
                id: created.todo.id.clone(),
                identity: created.todo.identity.clone(),
                deduped: created.deduped,
            });
        })
        .await
    }

    async fn create_todos(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        self.guarded(Kind::Write, self.inner.create_todos(todos), |created, ledger| {
            for made in created {
                ledger.push(Event::Created {
                    id: made.todo.id.clone(),
                    identity: made.todo.identity.clone(),
                    deduped: made.deduped,
                });
            }
        })
        .await
    }

    async fn list_todos(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        self.guarded(Kind::Read, self.inner.list_todos(query), nothing).await
    }

    async fn get_todo(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.guarded(Kind::Read, self.inner.get_todo(actor, id), nothing).await
    }
}

impl<S: Store> Intake for Faulty<S> {
    passed_through! {
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

impl<S: Store> Claims for Faulty<S> {
    async fn claim_next(&self, actor: &Actor, queues: &[QueueIdentity], lease_seconds: i64) -> Result<ClaimNext> {
        let call = self.inner.claim_next(actor, queues, lease_seconds);
        self.guarded(Kind::Write, call, |answer, ledger| {
            if let ClaimNext::Claimed(claimed) = answer {
                ledger.push(self.claimed_event(actor, claimed));
            }
        })
        .await
    }

    async fn claim_next_many(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> Result<ClaimedMany> {
        let call = self.inner.claim_next_many(actor, queues, lease_seconds, max);
        self.guarded(Kind::Write, call, |many, ledger| {
            ledger.extend(many.claimed.iter().map(|claimed| self.claimed_event(actor, claimed)));
        })
        .await
    }

    async fn claim(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        self.guarded(Kind::Write, self.inner.claim(actor, id, lease_seconds), |claimed, ledger| {
            ledger.push(self.claimed_event(actor, claimed));
        })
        .await
    }
}

impl<S: Store> Lifecycle for Faulty<S> {
    async fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        self.guarded(Kind::Write, self.inner.heartbeat(actor, id, lease_seconds), |todo, ledger| {
            ledger.push(Event::Heartbeat { id: todo.id.clone(), lease_expires_at: todo.lease_expires_at });
        })
        .await
    }

    async fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.guarded(Kind::Write, self.inner.complete(actor, id, result), |todo, ledger| {
            ledger.push(Event::Ended { id: todo.id.clone(), how: "complete" });
        })
        .await
    }

    async fn complete_many(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>> {
        self.guarded(Kind::Write, self.inner.complete_many(actor, ids, result), |todos, ledger| {
            ledger.extend(todos.iter().map(|todo| Event::Ended { id: todo.id.clone(), how: "complete" }));
        })
        .await
    }

    async fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.guarded(Kind::Write, self.inner.fail(actor, id, result), |todo, ledger| {
            ledger.push(Event::Ended { id: todo.id.clone(), how: "fail" });
        })
        .await
    }

    async fn release(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.guarded(Kind::Write, self.inner.release(actor, id), |todo, ledger| {
            ledger.push(Event::Ended { id: todo.id.clone(), how: "release" });
        })
        .await
    }

    async fn retry_now(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.guarded(Kind::Write, self.inner.retry_now(actor, id), nothing).await
    }

    async fn reap_lapsed_leases(&self) -> Result<SweepReport> {
        self.guarded(Kind::Write, self.inner.reap_lapsed_leases(), |report, ledger| {
            if report.returned_to_pending + report.dead_lettered > 0 {
                ledger.push(Event::Reaped {
                    returned: report.returned_to_pending,
                    dead_lettered: report.dead_lettered,
                    at: self.clock.follow(),
                });
            }
        })
        .await
    }

    async fn requeue_due_retries(&self) -> Result<u64> {
        self.guarded(Kind::Write, self.inner.requeue_due_retries(), |count, ledger| {
            if *count > 0 {
                ledger.push(Event::Requeued { count: *count });
            }
        })
        .await
    }
}

impl<S: Store> Policies for Faulty<S> {
    passed_through! {
        async fn all_admissions_unscoped(&self) -> Result<Vec<QueueAdmission>>;
        async fn policy_audit(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>>;
        async fn prune_usage(&self) -> Result<u64>;
    }

    async fn queue_admissions(&self, identities: &[QueueIdentity]) -> Result<Vec<QueueAdmission>> {
        self.guarded(Kind::Read, self.inner.queue_admissions(identities), nothing).await
    }

    async fn reach_admissions(&self, reach: &Reach) -> Result<Vec<QueueAdmission>> {
        self.guarded(Kind::Read, self.inner.reach_admissions(reach), nothing).await
    }

    async fn policy_detail(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        self.guarded(Kind::Read, self.inner.policy_detail(identity), nothing).await
    }

    async fn set_policy(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        // The store's clock when the write ran: read after the call, since a clock jump may
        // strike while the call is delayed (and the store then placed its window after it).
        self.guarded(Kind::Write, self.inner.set_policy(identity, policy, actor), |_, ledger| {
            ledger.push(Event::PolicySet {
                identity: identity.clone(),
                policy: policy.clone(),
                at: self.clock.follow(),
            });
        })
        .await
    }

    async fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        self.guarded(Kind::Write, self.inner.clear_policy(identity, actor), |_, ledger| {
            ledger.push(Event::PolicyCleared { identity: identity.clone() });
        })
        .await
    }

    async fn take_write_token(&self, key: &str, quota: models::rate::Quota) -> Result<models::rate::Verdict> {
        self.guarded(Kind::Write, self.inner.take_write_token(key, quota), nothing).await
    }
}

impl<S: Store> Push for Faulty<S> {
    async fn open_session(&self, endpoint_id: &str) -> Result<String> {
        self.guarded(Kind::Write, self.inner.open_session(endpoint_id), nothing).await
    }

    async fn attach_session(&self, endpoint_id: &str, session_id: &str, replica_id: &str) -> Result<bool> {
        let call = self.inner.attach_session(endpoint_id, session_id, replica_id);
        self.guarded(Kind::Write, call, |attached, ledger| {
            if *attached {
                ledger.push(Event::SessionAttached {
                    session_id: session_id.to_string(),
                    endpoint_id: endpoint_id.to_string(),
                    replica: replica_id.to_string(),
                    at: self.clock.follow(),
                });
            }
        })
        .await
    }

    async fn detach_session(&self, session_id: &str, replica_id: &str) -> Result<()> {
        self.guarded(Kind::Write, self.inner.detach_session(session_id, replica_id), |_, ledger| {
            ledger.push(Event::SessionDetached { session_id: session_id.to_string(), replica: replica_id.to_string() });
        })
        .await
    }

    async fn close_session(&self, endpoint_id: &str, session_id: &str) -> Result<bool> {
        self.guarded(Kind::Write, self.inner.close_session(endpoint_id, session_id), |closed, ledger| {
            if *closed {
                ledger.push(Event::SessionClosed { session_id: session_id.to_string() });
            }
        })
        .await
    }

    async fn refresh_sessions(&self, replica_id: &str, session_ids: &[String]) -> Result<Vec<String>> {
        self.guarded(Kind::Write, self.inner.refresh_sessions(replica_id, session_ids), |closing, ledger| {
            let alive = session_ids.iter().filter(|id| !closing.contains(id)).cloned().collect();
            ledger.push(Event::SessionsRefreshed { replica: replica_id.to_string(), alive, at: self.clock.follow() });
        })
        .await
    }

    async fn rings_since(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>> {
        self.guarded(Kind::Read, self.inner.rings_since(session_id, after_seq), nothing).await
    }

    async fn dispatch_pushes(&self) -> Result<PushReport> {
        self.guarded(Kind::Write, self.inner.dispatch_pushes(), |report, ledger| {
            self.pushed("dispatch", report, ledger)
        })
        .await
    }

    async fn reopen_sweep(&self) -> Result<PushReport> {
        self.guarded(Kind::Write, self.inner.reopen_sweep(), |report, ledger| self.pushed("reopen", report, ledger))
            .await
    }

    async fn heartbeat_sweep(&self) -> Result<PushReport> {
        let call = self.inner.heartbeat_sweep();
        self.guarded(Kind::Write, call, |report, ledger| self.pushed("heartbeat", report, ledger)).await
    }
}

impl<S: Store> models::store::Presence for Faulty<S> {
    async fn presence(&self, endpoint_id: &str) -> Result<PresenceView> {
        self.guarded(Kind::Read, self.inner.presence(endpoint_id), nothing).await
    }

    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        // The digest a clock-in rings is not in the answer (a `PresenceView`), so the ledger
        // has the change only; the model's journal has the digest.
        let call = self.inner.set_presence_override(endpoint_id, override_, by);
        self.guarded(Kind::Write, call, |_, ledger| {
            ledger.push(Event::PresenceSet { endpoint_id: endpoint_id.to_string(), override_ });
        })
        .await
    }

    async fn set_shift(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        self.guarded(Kind::Write, self.inner.set_shift(endpoint_id, shift), |_, ledger| {
            ledger.push(Event::ShiftSet { endpoint_id: endpoint_id.to_string(), shift });
        })
        .await
    }

    async fn presence_sweep(&self) -> Result<PushReport> {
        let call = self.inner.presence_sweep();
        self.guarded(Kind::Write, call, |report, ledger| self.pushed("presence", report, ledger)).await
    }

    async fn reconnect_digest(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        let call = self.inner.reconnect_digest(endpoint_id, session_id);
        self.guarded(Kind::Write, call, |report, ledger| self.pushed("reconnect", report, ledger)).await
    }
}

impl<S: Store> Hooks for Faulty<S> {
    async fn add_hook(&self, endpoint_id: &str, url: &str, secret: &str, ignore_presence: bool) -> Result<NotifyHook> {
        self.guarded(Kind::Write, self.inner.add_hook(endpoint_id, url, secret, ignore_presence), nothing).await
    }

    async fn list_hooks(&self, endpoint_id: &str) -> Result<Vec<NotifyHook>> {
        self.guarded(Kind::Read, self.inner.list_hooks(endpoint_id), nothing).await
    }

    async fn hook_for_test(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)> {
        self.guarded(Kind::Read, self.inner.hook_for_test(endpoint_id, hook_id), nothing).await
    }

    async fn remove_hook(&self, endpoint_id: &str, hook_id: &str) -> Result<()> {
        self.guarded(Kind::Write, self.inner.remove_hook(endpoint_id, hook_id), nothing).await
    }

    async fn take_hook_calls(&self, replica_id: &str) -> Result<Vec<HookCall>> {
        self.guarded(Kind::Write, self.inner.take_hook_calls(replica_id), nothing).await
    }

    async fn finish_hook_call(&self, call_id: i64, replica_id: &str, outcome: &HookOutcome) -> Result<()> {
        self.guarded(Kind::Write, self.inner.finish_hook_call(call_id, replica_id, outcome), nothing).await
    }
}

// Issue #52's shared budgets pass through unfaulted: the simulation's workload does not set
// them yet (they charge no claim yet, `docs/requirements.md` X-2).
impl<S: Store> models::store::SharedBudgets for Faulty<S> {
    passed_through! {
        async fn set_shared_budget(&self, owner: &BudgetOwner, spec: &SharedBudgetSpec, actor: &PolicyActor) -> Result<SharedBudgetView>;
        async fn shared_budgets(&self, owners: &[BudgetOwner]) -> Result<Vec<SharedBudgetView>>;
        async fn shared_budget(&self, owner: &BudgetOwner, name: &str) -> Result<SharedBudgetView>;
        async fn delete_shared_budget(&self, owner: &BudgetOwner, name: &str, actor: &PolicyActor) -> Result<()>;
        async fn shared_budget_audit(&self, owner: &BudgetOwner, name: &str, limit: i64) -> Result<Vec<AuditRecord>>;
    }
}
