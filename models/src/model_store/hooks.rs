//! Notify hooks in memory (`engine/src/pg_store/hooks.rs`): an endpoint's outbound URLs, at most
//! `HOOKS_PER_ENDPOINT_MAX`, and the outbox their calls wait in.
//!
//! A call is written to the outbox by the transaction that decided it (`push.rs`), so a replica
//! crash loses none: a replica leases due rows for `HOOK_LEASE_SECONDS`, sends, and records the
//! outcome only while it is still the lease holder; a crashed sender's lease lapses and another
//! replica takes the call. The per-hook rate limit is counted on the hook's row. After
//! `HOOK_FAILURES_TO_DISABLE` failed calls in a row the hook is disabled and its waiting calls
//! are dropped, never sent later by surprise.
//!
//! Governing: SPEC-0024 (notify hooks), ADR-0029; SPEC-0030 REQ-8 (no call while deferred).

use super::{ModelStore, State, database_error};
use crate::error::{Code, Error, Result};
use crate::identity::QueueIdentity;
use crate::mutants;
use crate::presence::Presence;
use crate::push::{self, HookCall, HookOutcome, NotifyHook};
use crate::store::Hooks;
use crate::todo::Todo;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

/// An endpoint that may be rung for a queue identity: `push.rs` picks the targets of a ring,
/// and this file calls the hooks of those without an open stream. Here rather than in `push.rs`
/// so that the push decisions depend on the hook rows and never the other way round.
pub(super) struct Target {
    pub(super) id: String,
    pub(super) slug: String,
    pub(super) presence: Presence,
}

/// The `url` column's CHECK.
const HOOK_URL_BYTES_MAX: usize = 2048;

/// One `notify_hooks` row.
#[derive(Debug, Clone)]
pub(super) struct HookRow {
    pub(super) id: String,
    pub(super) endpoint_id: String,
    url: String,
    secret: String,
    ignore_presence: bool,
    enabled: bool,
    consecutive_failures: i32,
    disabled_reason: Option<String>,
    /// The rate limit's current minute and its count.
    rate_minute: Option<DateTime<Utc>>,
    rate_calls: i32,
    created_at: DateTime<Utc>,
}

impl HookRow {
    fn view(&self) -> NotifyHook {
        NotifyHook {
            id: self.id.clone(),
            endpoint_id: self.endpoint_id.clone(),
            url: self.url.clone(),
            ignore_presence: self.ignore_presence,
            enabled: self.enabled,
            consecutive_failures: self.consecutive_failures,
            disabled_reason: self.disabled_reason.clone(),
            created_at: self.created_at,
        }
    }
}

/// One `hook_outbox` row.
#[derive(Debug, Clone)]
pub(super) struct OutboxRow {
    id: i64,
    pub(super) hook_id: String,
    msg_id: String,
    body: Value,
    attempts: i32,
    next_attempt_at: DateTime<Utc>,
    leased_by: Option<String>,
    leased_until: Option<DateTime<Utc>>,
    sent_at: Option<DateTime<Utc>>,
    outcome: Option<&'static str>,
    last_error: Option<String>,
    created_at: DateTime<Utc>,
}

/// A hook call as the simulation's checks read the outbox: what it was for and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEntry {
    pub id: i64,
    pub hook_id: String,
    pub body: Value,
    pub attempts: i32,
    /// `delivered`, `failed`, `refused` or `dropped`; None while it may still be sent.
    pub outcome: Option<String>,
    pub leased_by: Option<String>,
    pub leased_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl OutboxRow {
    pub(super) fn entry(&self) -> OutboxEntry {
        OutboxEntry {
            id: self.id,
            hook_id: self.hook_id.clone(),
            body: self.body.clone(),
            attempts: self.attempts,
            outcome: self.outcome.map(str::to_string),
            leased_by: self.leased_by.clone(),
            leased_until: self.leased_until,
            created_at: self.created_at,
        }
    }
}

impl ModelStore {
    /// Adds a hook; `conflict` past `HOOKS_PER_ENDPOINT_MAX` (the endpoint's row lock makes the
    /// count exact in `PgStore`; the model's lock does here).
    pub(super) fn add_hook_tx(&self, endpoint_id: &str, url: &str, secret: &str, ignore: bool) -> Result<NotifyHook> {
        let mut state = self.lock();
        if !state.endpoints.iter().any(|e| e.id == endpoint_id) {
            return Err(Error::not_found());
        }
        let count = state.push.hooks.iter().filter(|h| h.endpoint_id == endpoint_id).count() as i64;
        if count >= push::HOOKS_PER_ENDPOINT_MAX {
            return Err(Error::new(
                Code::Conflict,
                format!("an endpoint has at most {} notify hooks", push::HOOKS_PER_ENDPOINT_MAX),
            ));
        }
        if url.len() > HOOK_URL_BYTES_MAX {
            return Err(database_error());
        }
        let row = HookRow {
            id: state.next_id("nh"),
            endpoint_id: endpoint_id.to_string(),
            url: url.to_string(),
            secret: secret.to_string(),
            ignore_presence: ignore,
            enabled: true,
            consecutive_failures: 0,
            disabled_reason: None,
            rate_minute: None,
            rate_calls: 0,
            created_at: self.clock.now(),
        };
        let hook = row.view();
        state.push.hooks.push(row);
        Ok(hook)
    }

    /// An endpoint's hooks, `ORDER BY created_at, id`.
    pub(super) fn list_hooks_tx(&self, endpoint_id: &str) -> Vec<NotifyHook> {
        let state = self.lock();
        let mut hooks: Vec<NotifyHook> =
            state.push.hooks.iter().filter(|h| h.endpoint_id == endpoint_id).map(HookRow::view).collect();
        hooks.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        hooks
    }

    pub(super) fn hook_for_test_tx(&self, endpoint_id: &str, hook_id: &str) -> Result<(NotifyHook, String)> {
        let state = self.lock();
        let hook = state.push.hooks.iter().find(|h| h.endpoint_id == endpoint_id && h.id == hook_id);
        hook.map(|h| (h.view(), h.secret.clone())).ok_or_else(Error::not_found)
    }

    /// Removes a hook and (`ON DELETE CASCADE`) its calls.
    pub(super) fn remove_hook_tx(&self, endpoint_id: &str, hook_id: &str) -> Result<()> {
        let mut state = self.lock();
        let before = state.push.hooks.len();
        state.push.hooks.retain(|h| !(h.endpoint_id == endpoint_id && h.id == hook_id));
        if state.push.hooks.len() == before {
            return Err(Error::not_found());
        }
        state.push.outbox.retain(|o| o.hook_id != hook_id);
        Ok(())
    }

    /// Leases due calls of enabled hooks to `replica` (`ORDER BY next_attempt_at, id`, a pass at
    /// most); a hook past its per-minute limit keeps its calls for the next minute.
    pub(super) fn take_hook_calls_tx(&self, replica: &str) -> Vec<HookCall> {
        let mut state = self.lock();
        let now = self.clock.now();
        let lapsed_leases_free = !mutants::hooks::lapsed_hook_leases_stay_taken();
        // The due calls (a pass at most), with the queue identity of the todo each is about.
        let mut due: Vec<(DateTime<Utc>, i64, Option<QueueIdentity>)> = state
            .push
            .outbox
            .iter()
            .filter(|o| {
                o.outcome.is_none()
                    && o.next_attempt_at <= now
                    && o.leased_until.is_none_or(|until| lapsed_leases_free && until < now)
                    && state.push.hooks.iter().any(|h| h.id == o.hook_id && h.enabled)
            })
            .map(|o| {
                let todo = o.body["todo_id"].as_str().and_then(|id| state.todos.get(id));
                (o.next_attempt_at, o.id, todo.map(|t| t.identity.clone()))
            })
            .collect();
        due.sort_by_key(|(at, id, _)| (*at, *id));
        due.truncate(push::HOOK_CALLS_PER_PASS_MAX as usize);
        // REQ-8 (issue #28): re-checked at send time; a call whose queue is deferred now is
        // dropped and its queue watched (`PgStore::take_hook_calls_tx`).
        let deferred = self.deferred_among(&state, due.iter().filter_map(|(_, _, identity)| identity.as_ref()));
        let mut sendable = Vec::with_capacity(due.len());
        for (_, id, identity) in due {
            match identity.filter(|identity| deferred.contains(identity)) {
                Some(identity) => {
                    if let Some(row) = state.push.outbox.iter_mut().find(|o| o.id == id) {
                        row.outcome = Some("dropped");
                        row.last_error = Some(push::HOOK_DEFERRED_AT_SEND.to_string());
                        row.leased_until = None;
                    }
                    if !crate::mutants::hooks::watch_on_refusal_only() {
                        state.watch_if_waiting(&identity, now);
                    }
                }
                None => sendable.push(id),
            }
        }
        let state = &mut *state;
        let hooks = &mut state.push.hooks;
        let due: Vec<&mut OutboxRow> = state.push.outbox.iter_mut().filter(|o| sendable.contains(&o.id)).collect();
        let mut due = due;
        due.sort_by_key(|a| (a.next_attempt_at, a.id));
        let minute = push::hook_rate_minute(now);
        let mut calls = Vec::new();
        for row in due.into_iter().take(push::HOOK_CALLS_PER_PASS_MAX as usize) {
            let Some(hook) = hooks.iter_mut().find(|h| h.id == row.hook_id) else {
                continue;
            };
            let same_minute = hook.rate_minute == Some(minute);
            if same_minute && hook.rate_calls >= push::HOOK_CALLS_PER_MINUTE_MAX {
                row.next_attempt_at = minute + Duration::minutes(1);
                continue;
            }
            hook.rate_calls = if same_minute { hook.rate_calls + 1 } else { 1 };
            hook.rate_minute = Some(minute);
            row.leased_until = Some(now + Duration::seconds(push::HOOK_LEASE_SECONDS));
            row.leased_by = Some(replica.to_string());
            calls.push(HookCall {
                id: row.id,
                hook_id: row.hook_id.clone(),
                url: hook.url.clone(),
                secret: hook.secret.clone(),
                msg_id: row.msg_id.clone(),
                body: row.body.clone(),
                attempts: row.attempts,
            });
        }
        calls
    }

    /// Records how a leased call went, only while `replica` holds it: settled by
    /// `push::settle_hook_attempt`; a delivery resets the hook's failure count, anything else
    /// adds to it, and at `HOOK_FAILURES_TO_DISABLE` the hook is disabled and its waiting calls
    /// dropped.
    pub(super) fn finish_hook_call_tx(&self, call_id: i64, replica: &str, outcome: &HookOutcome) {
        let mut state = self.lock();
        let now = self.clock.now();
        let state = &mut *state;
        let Some(row) = state
            .push
            .outbox
            .iter_mut()
            .find(|o| o.id == call_id && o.leased_by.as_deref() == Some(replica) && o.outcome.is_none())
        else {
            return;
        };
        let attempts = row.attempts + 1;
        let settled = push::settle_hook_attempt(outcome, attempts, now);
        row.attempts = attempts;
        row.outcome = settled.outcome;
        row.last_error = settled.error;
        row.leased_by = None;
        row.leased_until = None;
        if settled.outcome == Some("delivered") {
            row.sent_at = Some(now);
        }
        if let Some(retry_at) = settled.retry_at {
            row.next_attempt_at = retry_at;
        }
        let hook_id = row.hook_id.clone();
        let Some(hook) = state.push.hooks.iter_mut().find(|h| h.id == hook_id) else {
            return;
        };
        if *outcome == HookOutcome::Delivered {
            hook.consecutive_failures = 0;
            return;
        }
        let failures = hook.consecutive_failures + 1;
        if failures >= push::HOOK_FAILURES_TO_DISABLE && hook.enabled {
            hook.disabled_reason = Some(push::hook_disabled_reason(failures));
        }
        if failures >= push::HOOK_FAILURES_TO_DISABLE {
            hook.enabled = false;
        }
        hook.consecutive_failures = failures;
        if !hook.enabled {
            for waiting in state.push.outbox.iter_mut().filter(|o| o.hook_id == hook_id && o.outcome.is_none()) {
                waiting.outcome = Some("dropped");
                waiting.leased_by = None;
                waiting.leased_until = None;
            }
        }
    }
}

impl State {
    /// One outbox row per enabled hook of the target endpoints (in presence, or ignoring it),
    /// endpoints in id order, each endpoint's hooks in insertion order.
    pub(super) fn enqueue_hooks(&mut self, todo: &Todo, reason: &str, targets: &[Target], now: DateTime<Utc>) -> u64 {
        let mut enqueued = 0;
        for target in targets {
            let present = target.presence == Presence::In;
            let body = push::hook_body(todo, reason, &target.slug);
            let hook_ids: Vec<String> = self
                .push
                .hooks
                .iter()
                .filter(|h| h.endpoint_id == target.id && h.enabled && (present || h.ignore_presence))
                .map(|h| h.id.clone())
                .collect();
            for hook_id in hook_ids {
                let row = OutboxRow {
                    id: self.next_number("hook_outbox") as i64,
                    hook_id,
                    msg_id: self.next_id("msg"),
                    body: body.clone(),
                    attempts: 0,
                    next_attempt_at: now,
                    leased_by: None,
                    leased_until: None,
                    sent_at: None,
                    outcome: None,
                    last_error: None,
                    created_at: now,
                };
                self.push.outbox.push(row);
                enqueued += 1;
            }
        }
        enqueued
    }
}

/// The hooks role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Hooks for ModelStore {
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
