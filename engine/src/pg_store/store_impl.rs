//! `Store` for `PgStore`: each trait method is one of the transactions in the sibling modules.

use super::PgStore;
use models::admission::Policy;
use models::error::Result;
use models::identity::{Owner, QueueIdentity, ScopeRef};
use models::presence::{Override, Shift};
use models::push::{HookCall, HookOutcome, NotifyHook, PushReport, Ring};
use models::scope::{Actor, Endpoint, HumanScope, Reach};
use models::store::{
    AgentLookup, AuditRecord, ClaimNext, Claimed, ClaimedMany, NewEndpoint, PolicyActor, PolicyDetail, QueueAdmission,
    Store, SweepReport, TodoQuery,
};
use models::store::{OverrideBy, PresenceView};
use models::todo::{Created, NewTodo, Todo};
use serde_json::Value;

impl Store for PgStore {
    fn counters(&self) -> &models::counters::Counters {
        &self.counters
    }

    async fn all_admissions_unscoped(&self) -> Result<Vec<QueueAdmission>> {
        self.all_admissions_tx().await
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(super::db_error)?;
        Ok(())
    }

    async fn human_by_token(&self, token_hash: &str) -> Result<Option<HumanScope>> {
        self.human_by_token_tx(token_hash).await
    }

    async fn agent_by_token(&self, slug: &str, token_hash: &str) -> Result<AgentLookup> {
        self.agent_by_token_tx(slug, token_hash).await
    }

    async fn resolve_scope(&self, reach: &Reach, scope: &ScopeRef) -> Result<Owner> {
        self.resolve_scope_tx(reach, scope).await
    }

    async fn resolve_teams(&self, reach: &Reach, references: &[String]) -> Result<Vec<String>> {
        self.resolve_teams_tx(reach, references).await
    }

    async fn vend_endpoint(&self, endpoint: NewEndpoint) -> Result<Endpoint> {
        self.vend_endpoint_tx(endpoint).await
    }

    async fn list_endpoints(&self, human: &HumanScope) -> Result<Vec<Endpoint>> {
        self.endpoints_by_ids(&human.reach.endpoint_ids).await
    }

    async fn mint_token(
        &self,
        human_id: &str,
        label: Option<&str>,
        token_hash: &str,
        expires_in_seconds: Option<i64>,
    ) -> Result<()> {
        self.mint_token_tx(human_id, label, token_hash, expires_in_seconds).await
    }

    async fn list_tokens(&self, human_id: &str) -> Result<Vec<models::store::ApiToken>> {
        self.list_tokens_tx(human_id).await
    }

    async fn revoke_token(&self, human_id: &str, token_id: &str) -> Result<()> {
        self.revoke_token_tx(human_id, token_id).await
    }

    async fn revoke_endpoint(&self, endpoint_id: &str) -> Result<()> {
        self.revoke_endpoint_tx(endpoint_id).await
    }

    async fn rotate_endpoint(&self, endpoint_id: &str, token_hash: &str) -> Result<()> {
        self.rotate_endpoint_tx(endpoint_id, token_hash).await
    }

    async fn list_teams(&self, human: &HumanScope) -> Result<Vec<(models::scope::Team, models::scope::TeamRole)>> {
        self.list_teams_tx(human).await
    }

    async fn create_webhook(&self, owner: &str, name: &str, secret: &str, targets: &[QueueIdentity]) -> Result<String> {
        self.create_webhook_tx(owner, name, secret, targets).await
    }

    async fn list_webhooks(&self, owner_human_id: &str) -> Result<Vec<models::store::WebhookSummary>> {
        self.list_webhooks_tx(owner_human_id).await
    }

    async fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> Result<()> {
        self.delete_webhook_tx(owner_human_id, webhook_id).await
    }

    async fn rotate_webhook_secret(&self, owner_human_id: &str, webhook_id: &str, secret: &str) -> Result<()> {
        self.rotate_webhook_secret_tx(owner_human_id, webhook_id, secret).await
    }

    async fn webhook_for_ingest_unscoped(&self, webhook_id: &str) -> Result<Option<models::store::WebhookRoute>> {
        self.webhook_for_ingest_tx(webhook_id).await
    }

    async fn ingest(
        &self,
        webhook_id: &str,
        delivery_id: &str,
        todos: Vec<NewTodo>,
    ) -> Result<models::store::Ingested> {
        self.ingest_tx(webhook_id, delivery_id, todos).await
    }

    async fn create_todo(&self, todo: NewTodo) -> Result<Created> {
        self.create_todo_tx(todo).await
    }

    async fn create_todos(&self, todos: Vec<NewTodo>) -> Result<Vec<Created>> {
        self.create_todos_tx(todos).await
    }

    async fn list_todos(&self, query: TodoQuery) -> Result<Vec<Todo>> {
        self.list_todos_tx(query).await
    }

    async fn get_todo(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.get_todo_tx(actor, id).await
    }

    async fn claim_next(&self, actor: &Actor, queues: &[QueueIdentity], lease_seconds: i64) -> Result<ClaimNext> {
        self.claim_next_tx(actor, queues, lease_seconds).await
    }

    async fn claim_next_many(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> Result<ClaimedMany> {
        self.claim_next_many_tx(actor, queues, lease_seconds, max).await
    }

    async fn claim(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        self.claim_tx(actor, id, lease_seconds).await
    }

    async fn heartbeat(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Todo> {
        self.heartbeat_tx(actor, id, lease_seconds).await
    }

    async fn complete(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.complete_tx(actor, id, result).await
    }

    async fn complete_many(&self, actor: &Actor, ids: &[String], result: Option<Value>) -> Result<Vec<Todo>> {
        self.complete_many_tx(actor, ids, result).await
    }

    async fn fail(&self, actor: &Actor, id: &str, result: Option<Value>) -> Result<Todo> {
        self.fail_tx(actor, id, result).await
    }

    async fn release(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.release_tx(actor, id).await
    }

    async fn retry_now(&self, actor: &Actor, id: &str) -> Result<Todo> {
        self.retry_now_tx(actor, id).await
    }

    async fn queue_admissions(&self, identities: &[QueueIdentity]) -> Result<Vec<QueueAdmission>> {
        self.queue_admissions_tx(identities, super::admission::Pending::Count).await
    }

    async fn reach_admissions(&self, reach: &Reach) -> Result<Vec<QueueAdmission>> {
        self.reach_admissions_tx(reach).await
    }

    async fn policy_detail(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        self.policy_detail_tx(identity).await
    }

    async fn set_policy(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        self.set_policy_tx(identity, policy, actor).await
    }

    async fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        self.clear_policy_tx(identity, actor).await
    }

    async fn policy_audit(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>> {
        self.policy_audit_tx(identity, limit).await
    }

    async fn prune_usage(&self) -> Result<u64> {
        self.prune_usage_tx().await
    }

    async fn take_write_token(&self, key: &str, quota: models::rate::Quota) -> Result<models::rate::Verdict> {
        self.take_write_token_tx(key, quota).await
    }

    async fn queue_capacity(&self) -> Result<models::capacity::Capacity> {
        self.queue_capacity_tx().await
    }

    async fn set_queue_capacity(&self, max_pending: i64, by_human_id: &str) -> Result<models::capacity::Capacity> {
        self.set_queue_capacity_tx(max_pending, by_human_id).await
    }

    async fn discard_todo(&self, identity: &QueueIdentity, id: &str, by: &PolicyActor) -> Result<()> {
        self.discard_todo_tx(identity, id, by).await
    }

    async fn clear_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        self.clear_queue_tx(identity, by).await
    }

    async fn edit_todo(
        &self,
        human: &HumanScope,
        id: &str,
        title: Option<String>,
        payload: Option<Value>,
    ) -> Result<Todo> {
        self.edit_todo_tx(human, id, title, payload).await
    }

    async fn purge_queue(&self, identity: &QueueIdentity, by: &PolicyActor) -> Result<u64> {
        self.purge_queue_tx(identity, by).await
    }

    async fn delete_endpoint(&self, human: &HumanScope, endpoint: &ScopeRef) -> Result<()> {
        self.delete_endpoint_tx(human, endpoint).await
    }

    async fn reap_lapsed_leases(&self) -> Result<SweepReport> {
        self.reap_tx().await
    }

    async fn requeue_due_retries(&self) -> Result<u64> {
        self.requeue_due_retries_tx().await
    }

    async fn open_session(&self, endpoint_id: &str) -> Result<String> {
        self.open_session_tx(endpoint_id).await
    }

    async fn attach_session(&self, endpoint_id: &str, session_id: &str, replica_id: &str) -> Result<bool> {
        self.attach_session_tx(endpoint_id, session_id, replica_id).await
    }

    async fn detach_session(&self, session_id: &str, replica_id: &str) -> Result<()> {
        self.detach_session_tx(session_id, replica_id).await
    }

    async fn refresh_sessions(&self, replica_id: &str, session_ids: &[String]) -> Result<Vec<String>> {
        self.refresh_sessions_tx(replica_id, session_ids).await
    }

    async fn rings_since(&self, session_id: &str, after_seq: i64) -> Result<Vec<Ring>> {
        self.rings_since_tx(session_id, after_seq).await
    }

    async fn dispatch_pushes(&self) -> Result<PushReport> {
        self.dispatch_pushes_tx().await
    }

    async fn reopen_sweep(&self) -> Result<PushReport> {
        self.reopen_sweep_tx().await
    }

    async fn heartbeat_sweep(&self) -> Result<PushReport> {
        self.heartbeat_sweep_tx().await
    }

    async fn presence_sweep(&self) -> Result<PushReport> {
        self.presence_sweep_tx().await
    }

    async fn reconnect_digest(&self, endpoint_id: &str, session_id: &str) -> Result<PushReport> {
        self.reconnect_digest_tx(endpoint_id, session_id).await
    }

    async fn presence(&self, endpoint_id: &str) -> Result<PresenceView> {
        self.presence_tx(endpoint_id).await
    }

    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: Option<Override>,
        by: OverrideBy,
    ) -> Result<PresenceView> {
        self.set_presence_override_tx(endpoint_id, override_, by).await
    }

    async fn set_shift(&self, endpoint_id: &str, shift: Option<Shift>) -> Result<PresenceView> {
        self.set_shift_tx(endpoint_id, shift).await
    }

    async fn add_hook(&self, endpoint_id: &str, url: &str, secret: &str, ignore_presence: bool) -> Result<NotifyHook> {
        self.add_hook_tx(endpoint_id, url, secret, ignore_presence).await
    }

    async fn list_hooks(&self, endpoint_id: &str) -> Result<Vec<NotifyHook>> {
        self.list_hooks_tx(endpoint_id).await
    }

    async fn hook_for_test(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)> {
        self.hook_for_test_tx(endpoint_id, hook_id).await
    }

    async fn remove_hook(&self, endpoint_id: &str, hook_id: &str) -> Result<()> {
        self.remove_hook_tx(endpoint_id, hook_id).await
    }

    async fn take_hook_calls(&self, replica_id: &str) -> Result<Vec<HookCall>> {
        self.take_hook_calls_tx(replica_id).await
    }

    async fn finish_hook_call(&self, call_id: i64, replica_id: &str, outcome: &HookOutcome) -> Result<()> {
        self.finish_hook_call_tx(call_id, replica_id, outcome).await
    }
}
