//! `Store` for `ModelStore`: each trait method is one of the transactions in the sibling modules,
//! run synchronously under the state lock (the futures are ready when first polled).

use super::ModelStore;
use super::admission::Pending;
use crate::admission::Policy;
use crate::capacity::Capacity;
use crate::error::Result;
use crate::identity::{Owner, QueueIdentity, ScopeRef};
use crate::presence::{Override, Shift};
use crate::push::{HookCall, HookOutcome, NotifyHook, PushReport, Ring};
use crate::scope::{Actor, Endpoint, HumanScope, Reach, Team, TeamRole};
use crate::store::{
    AgentLookup, ApiToken, AuditRecord, ClaimNext, Claimed, ClaimedMany, Ingested, NewEndpoint, OverrideBy,
    PolicyActor, PolicyDetail, PresenceView, QueueAdmission, Store, SweepReport, TodoQuery, WebhookRoute,
    WebhookSummary,
};
use crate::todo::{Created, NewTodo, Todo};
use serde_json::Value;

impl Store for ModelStore {
    fn counters(&self) -> &crate::counters::Counters {
        &self.counters
    }

    async fn all_admissions_unscoped(&self) -> Result<Vec<QueueAdmission>> {
        Ok(self.all_admissions_tx())
    }

    async fn ping(&self) -> Result<()> {
        Ok(())
    }

    async fn human_by_token(&self, token_hash: &str) -> Result<Option<HumanScope>> {
        Ok(self.human_by_token_tx(token_hash))
    }

    async fn agent_by_token(&self, slug: &str, token_hash: &str) -> Result<AgentLookup> {
        Ok(self.agent_by_token_tx(slug, token_hash))
    }

    async fn resolve_scope(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner> {
        self.resolve_scope_tx(reach, scope)
    }

    async fn vend_endpoint(&self, endpoint: NewEndpoint) -> Result<Endpoint> {
        self.vend_endpoint_tx(endpoint)
    }

    async fn list_endpoints(&self, human: &HumanScope) -> Result<Vec<Endpoint>> {
        Ok(self.list_endpoints_tx(human))
    }

    async fn mint_token(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> Result<()> {
        self.mint_token_tx(human_id, label, token_hash, expires_in_seconds)
    }

    async fn list_tokens(&self, human_id: &str) -> Result<Vec<ApiToken>> {
        Ok(self.list_tokens_tx(human_id))
    }

    async fn revoke_token(&self, human_id: &str, token_id: &str) -> Result<()> {
        self.revoke_token_tx(human_id, token_id)
    }

    async fn revoke_endpoint(&self, endpoint_id: &str) -> Result<()> {
        self.revoke_endpoint_tx(endpoint_id)
    }

    async fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> Result<()> {
        self.rotate_endpoint_tx(endpoint_id, token_hash)
    }

    async fn list_teams(&self, human: &HumanScope) -> Result<Vec<(Team, TeamRole)>> {
        Ok(self.list_teams_tx(human))
    }

    async fn create_webhook(&self, owner: &str, name: &str, secret: &str, targets: &[QueueIdentity]) -> Result<String> {
        self.create_webhook_tx(owner, name, secret, targets)
    }

    async fn list_webhooks(&self, owner_human_id: &str) -> Result<Vec<WebhookSummary>> {
        Ok(self.list_webhooks_tx(owner_human_id))
    }

    async fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> Result<()> {
        self.delete_webhook_tx(owner_human_id, webhook_id)
    }

    async fn rotate_webhook_secret(&self, owner_human_id: &str, webhook_id: &str, secret: &str) -> Result<()> {
        self.rotate_webhook_secret_tx(owner_human_id, webhook_id, secret)
    }

    async fn webhook_for_ingest_unscoped(&self, webhook_id: &str) -> Result<Option<WebhookRoute>> {
        Ok(self.webhook_for_ingest_tx(webhook_id))
    }

    async fn ingest(&self, webhook_id: &str, delivery_id: &str, todos: Vec<NewTodo>) -> Result<Ingested> {
        self.ingest_tx(webhook_id, delivery_id, todos)
    }

    async fn create_todo(&self, todo: NewTodo) -> Result<Created> {
        self.create_todo_tx(todo)
    }

    async fn create_todos(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        self.create_todos_tx(todos)
    }

    async fn list_todos(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        Ok(self.list_todos_tx(query))
    }

    async fn get_todo(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.get_todo_tx(actor, id)
    }

    async fn claim_next(&self, actor: &Actor, queues: &[QueueIdentity], lease_seconds: i64) -> Result<ClaimNext> {
        self.claim_next_tx(actor, queues, lease_seconds)
    }

    async fn claim_next_many(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> Result<ClaimedMany> {
        self.claim_next_many_tx(actor, queues, lease_seconds, max)
    }

    async fn claim(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        self.claim_tx(actor, id, lease_seconds)
    }

    async fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        self.heartbeat_tx(actor, id, lease_seconds)
    }

    async fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.complete_tx(actor, id, result)
    }

    async fn complete_many(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>> {
        self.complete_many_tx(actor, ids, result)
    }

    async fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.fail_tx(actor, id, result)
    }

    async fn release(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.release_tx(actor, id)
    }

    async fn retry_now(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.retry_now_tx(actor, id)
    }

    async fn queue_admissions(&self, identities: &[QueueIdentity]) -> Result<Vec<QueueAdmission>> {
        let state = self.lock();
        Ok(self.admissions_of(&state, identities, Pending::Count))
    }

    async fn reach_admissions(&self, reach: &Reach) -> Result<Vec<QueueAdmission>> {
        Ok(self.reach_admissions_tx(reach))
    }

    async fn policy_detail(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        self.policy_detail_tx(identity)
    }

    async fn set_policy(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        self.set_policy_tx(identity, policy, actor)
    }

    async fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        self.clear_policy_tx(identity, actor)
    }

    async fn policy_audit(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>> {
        Ok(self.policy_audit_tx(identity, limit))
    }

    async fn queue_capacity(&self) -> Result<Capacity> {
        Ok(self.queue_capacity_tx())
    }

    async fn set_queue_capacity(&self, max_pending: i64, by_human_id: &str) -> Result<Capacity> {
        self.set_queue_capacity_tx(max_pending, by_human_id)
    }

    async fn discard_todo(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()> {
        self.discard_todo_tx(identity, id, by)
    }

    async fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        Ok(self.clear_queue_tx(identity, by))
    }

    async fn edit_todo(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> Result<Todo> {
        self.edit_todo_tx(human, id, title, payload)
    }

    async fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        Ok(self.purge_queue_tx(identity, by))
    }

    async fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()> {
        self.delete_endpoint_tx(human, endpoint)
    }

    async fn reap_lapsed_leases(&self) -> Result<SweepReport> {
        Ok(self.reap_tx())
    }

    async fn requeue_due_retries(&self) -> Result<u64> {
        Ok(self.requeue_due_retries_tx())
    }

    async fn prune_usage(&self) -> Result<u64> {
        Ok(self.prune_usage_tx())
    }

    async fn take_write_token(&self, key: &str, quota: crate::rate::Quota) -> Result<crate::rate::Verdict> {
        Ok(self.take_write_token_tx(key, quota))
    }

    async fn open_session(&self, endpoint_id: &str) -> Result<String> {
        self.open_session_tx(endpoint_id)
    }

    async fn attach_session(&self, endpoint_id: &str, session_id: &str, replica_id: &str) -> Result<bool> {
        Ok(self.attach_session_tx(endpoint_id, session_id, replica_id))
    }

    async fn detach_session(&self, session_id: &str, replica_id: &str) -> Result<()> {
        self.detach_session_tx(session_id, replica_id);
        Ok(())
    }

    async fn refresh_sessions(&self, replica_id: &str, session_ids: &[String]) -> Result<Vec<String>> {
        Ok(self.refresh_sessions_tx(replica_id, session_ids))
    }

    async fn rings_since(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>> {
        Ok(self.rings_since_tx(session_id, after_seq))
    }

    async fn dispatch_pushes(&self) -> Result<PushReport> {
        self.dispatch_pushes_tx()
    }

    async fn reopen_sweep(&self) -> Result<PushReport> {
        self.reopen_sweep_tx()
    }

    async fn heartbeat_sweep(&self) -> Result<PushReport> {
        self.heartbeat_sweep_tx()
    }

    async fn presence_sweep(&self) -> Result<PushReport> {
        self.presence_sweep_tx()
    }

    async fn reconnect_digest(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        self.reconnect_digest_tx(endpoint_id, session_id)
    }

    async fn presence(&self, endpoint_id: &str) -> Result<PresenceView> {
        self.presence_tx(endpoint_id)
    }

    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        self.set_presence_override_tx(endpoint_id, override_, by)
    }

    async fn set_shift(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        self.set_shift_tx(endpoint_id, shift)
    }

    async fn add_hook(&self, endpoint_id: &str, url: &str, secret: &str, ignore_presence: bool) -> Result<NotifyHook> {
        self.add_hook_tx(endpoint_id, url, secret, ignore_presence)
    }

    async fn list_hooks(&self, endpoint_id: &str) -> Result<Vec<NotifyHook>> {
        Ok(self.list_hooks_tx(endpoint_id))
    }

    async fn hook_for_test(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)> {
        self.hook_for_test_tx(endpoint_id, hook_id)
    }

    async fn remove_hook(&self, endpoint_id: &str, hook_id: &str) -> Result<()> {
        self.remove_hook_tx(endpoint_id, hook_id)
    }

    async fn take_hook_calls(&self, replica_id: &str) -> Result<Vec<HookCall>> {
        Ok(self.take_hook_calls_tx(replica_id))
    }

    async fn finish_hook_call(&self, call_id: i64, replica_id: &str, outcome: &HookOutcome) -> Result<()> {
        self.finish_hook_call_tx(call_id, replica_id, outcome);
        Ok(())
    }
}
