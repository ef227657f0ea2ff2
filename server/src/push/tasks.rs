//! The push loops that start and stop with the server, like the reaper (SPEC-0030 REQ-8,
//! REQ-13): deciding pushes for new and requeued work, the reopen sweep, the doorbell heartbeat
//! and presence sweeps, refreshing this replica's sessions, and sending notify-hook calls.
//!
//! Each loop runs on its tick and also at once when nudged through the `Hub`. They are system
//! work, exempt from endpoint scoping on the reaper's terms: they read nothing out to anyone,
//! and every decision is the store's. A failed pass is logged and retried on the next tick.

use super::{Hub, StreamEvent};
use crate::hook_sender::{self, AddressPolicy};
use models::push::{HookCall, HookOutcome, PushReport, SESSION_REFRESH_SECONDS};
use models::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often pushes are decided even without a nudge (work another replica added, or left
/// undecided when it crashed).
pub const DISPATCH_INTERVAL: Duration = Duration::from_secs(1);
/// How often due hook calls are looked for without a nudge (retries come due on their own).
pub const HOOK_INTERVAL: Duration = Duration::from_secs(1);

/// Sends the doorbells a pass decided to the streams this replica holds.
pub fn deliver(hub: &Hub, report: &PushReport) {
    hub.deliver_rings(&report.rings);
    if report.hook_calls_enqueued > 0 {
        hub.hooks_now.notify_one();
    }
}

/// Starts every push loop; they stop when `shutdown` turns true.
pub fn spawn<S: Store>(
    store: S,
    hub: Arc<Hub>,
    sweep_interval: Duration,
    address_policy: AddressPolicy,
    shutdown: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    vec![
        spawn_loop(shutdown.clone(), DISPATCH_INTERVAL, hub.clone(), Nudge::Dispatch, {
            let (store, hub) = (store.clone(), hub.clone());
            move || dispatch_once(store.clone(), hub.clone())
        }),
        spawn_loop(shutdown.clone(), sweep_interval, hub.clone(), Nudge::Reopen, {
            let (store, hub) = (store.clone(), hub.clone());
            move || sweep_once(store.clone(), hub.clone())
        }),
        spawn_loop(shutdown.clone(), Duration::from_secs(SESSION_REFRESH_SECONDS as u64), hub.clone(), Nudge::None, {
            let (store, hub) = (store.clone(), hub.clone());
            move || refresh_once(store.clone(), hub.clone())
        }),
        spawn_loop(shutdown, HOOK_INTERVAL, hub.clone(), Nudge::Hooks, {
            move || hooks_once(store.clone(), hub.clone(), address_policy)
        }),
    ]
}

#[derive(Clone, Copy)]
enum Nudge {
    None,
    Dispatch,
    Reopen,
    Hooks,
}

fn spawn_loop<F, Fut>(
    mut shutdown: watch::Receiver<bool>,
    interval: Duration,
    hub: Arc<Hub>,
    nudge: Nudge,
    pass: F,
) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let nudged = async {
                match nudge {
                    Nudge::None => std::future::pending().await,
                    Nudge::Dispatch => hub.dispatch_now.notified().await,
                    Nudge::Reopen => hub.reopen_now.notified().await,
                    Nudge::Hooks => hub.hooks_now.notified().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.changed() => {}
                _ = nudged => pass().await,
                _ = tokio::time::sleep(interval) => pass().await,
            }
            if *shutdown.borrow() {
                break;
            }
        }
    })
}

async fn dispatch_once<S: Store>(store: S, hub: Arc<Hub>) {
    match store.dispatch_pushes().await {
        Ok(report) => {
            log_report("push", &report);
            deliver(&hub, &report);
        }
        Err(error) => tracing::warn!(%error, "push decisions failed; retrying next tick"),
    }
}

/// The reopen sweep on every pass; the heartbeat and presence sweeps ride along.
async fn sweep_once<S: Store>(store: S, hub: Arc<Hub>) {
    let passes = [("reopen", store.reopen_sweep().await), ("presence", store.presence_sweep().await)];
    for (name, outcome) in passes {
        match outcome {
            Ok(report) => {
                log_report(name, &report);
                deliver(&hub, &report);
            }
            Err(error) => tracing::warn!(%error, sweep = name, "push sweep failed; retrying next tick"),
        }
    }
    match store.heartbeat_sweep().await {
        Ok(report) => {
            log_report("heartbeat", &report);
            deliver(&hub, &report);
        }
        Err(error) => tracing::warn!(%error, "doorbell heartbeat failed; retrying next tick"),
    }
}

async fn refresh_once<S: Store>(store: S, hub: Arc<Hub>) {
    let sessions = hub.sessions();
    if sessions.is_empty() {
        return;
    }
    match store.refresh_sessions(hub.replica_id(), &sessions).await {
        Ok(closing) if !closing.is_empty() => {
            tracing::info!(count = closing.len(), "closing streams of revoked or deleted sessions");
            hub.close(&closing, None);
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "session refresh failed; retrying next tick"),
    }
}

async fn hooks_once<S: Store>(store: S, hub: Arc<Hub>, policy: AddressPolicy) {
    let calls = match store.take_hook_calls(hub.replica_id()).await {
        Ok(calls) => calls,
        Err(error) => {
            tracing::warn!(%error, "could not take hook calls; retrying next tick");
            return;
        }
    };
    let sends = calls.into_iter().map(|call| {
        let (store, hub) = (store.clone(), hub.clone());
        async move {
            let outcome = send(&call, policy).await;
            store.counters().hook_called(outcome.label());
            tracing::info!(hook = %call.hook_id, msg = %call.msg_id, outcome = outcome.label(), "notify hook call");
            if let Err(error) = store.finish_hook_call(call.id, hub.replica_id(), &outcome).await {
                tracing::warn!(%error, "could not record a hook call's outcome; it may be sent again");
            }
        }
    });
    futures::future::join_all(sends).await;
}

async fn send(call: &HookCall, policy: AddressPolicy) -> HookOutcome {
    let timestamp = chrono::Utc::now().timestamp();
    match hook_sender::send(&call.url, &call.secret, &call.msg_id, timestamp, &call.body, policy).await {
        hook_sender::Outcome::Delivered { .. } => HookOutcome::Delivered,
        hook_sender::Outcome::Failed { reason } => HookOutcome::Failed(reason),
        hook_sender::Outcome::Refused { reason } => HookOutcome::Refused(reason),
    }
}

fn log_report(pass: &str, report: &PushReport) {
    if !report.is_empty() {
        tracing::debug!(
            pass,
            rings = report.rings.len(),
            hook_calls = report.hook_calls_enqueued,
            reopens = report.reopens,
            withheld_deferred = report.withheld_deferred,
            withheld_out = report.withheld_out,
            "push pass"
        );
    }
}

/// Delivers a doorbell announced through the database (`pg_notify`), if its stream is here.
pub fn deliver_announced(hub: &Hub, payload: &str) {
    let Ok(announcement) = serde_json::from_str::<serde_json::Value>(payload) else {
        tracing::warn!("unreadable doorbell announcement");
        return;
    };
    let seq = announcement.get("seq").and_then(serde_json::Value::as_i64);
    let session = announcement.get("session_id").and_then(serde_json::Value::as_str);
    if let (Some(seq), Some(session), Some(message)) = (seq, session, announcement.get("message")) {
        hub.deliver(session, StreamEvent { seq, message: message.clone() });
    }
}
