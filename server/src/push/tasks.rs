//! The push loops that start and stop with the server, like the reaper (SPEC-0030 REQ-8,
//! REQ-13): deciding pushes for new and requeued work, the reopen sweep, the doorbell heartbeat
//! and presence sweeps, refreshing this replica's sessions, and sending notify-hook calls.
//!
//! Each loop runs on its tick and also at once when nudged through the `Hub`. They are system
//! work, exempt from endpoint scoping on the reaper's terms: they read nothing out to anyone,
//! and every decision is the store's. A failed pass is logged and retried on the next tick.

use super::{Hub, StreamEvent};
use crate::hook_sender::{self, AddressPolicy};
use crate::serve::stopping;
use models::push::{HookCall, HookOutcome, PushReport, SESSION_REFRESH_SECONDS};
use models::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often pushes are decided even without a nudge (work another replica added, or left
/// undecided when it crashed).
pub const DISPATCH_INTERVAL: Duration = Duration::from_secs(1);
/// How often due hook calls are looked for without a nudge (retries come due on their own).
pub const HOOK_INTERVAL: Duration = Duration::from_secs(1);
/// The least time from one pass of a loop to a pass a nudge asks for: a doorbell waits at most
/// this much longer, and a loop runs at most 20 nudged passes a second however many verbs nudge
/// it (`spawn_loop`).
pub const NUDGED_PASS_GAP: Duration = Duration::from_millis(50);

/// What a pass decided that this replica acts on: hook calls to send now. Its doorbells reach
/// the streams only through `NOTIFY` (`serve::listen_for_doorbells`), on every replica alike,
/// because that is the order they committed in (issue #51): sent here first, a ring could
/// overtake an older one another replica committed, and a client that then broke off would
/// resume past the older.
pub fn deliver(hub: &Hub, report: &PushReport) {
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

/// Waits for `nudge` on `hub`; never, for a loop that only ticks.
async fn nudged(hub: &Hub, nudge: Nudge) {
    match nudge {
        Nudge::None => std::future::pending().await,
        Nudge::Dispatch => hub.dispatch_now.notified().await,
        Nudge::Reopen => hub.reopen_now.notified().await,
        Nudge::Hooks => hub.hooks_now.notified().await,
    }
}

/// Runs `pass` every `interval`, and when nudged, but a nudged pass no sooner than
/// [`NUDGED_PASS_GAP`] after the previous pass began: every complete nudges the reopen sweep,
/// and at a thousand completes a second a loop that answered each nudge at once would run its
/// statements back to back, beside the claims it exists to serve. The nudges that arrive
/// meanwhile are answered by the one pass that follows; a nudge during a pass, by the next.
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
        let mut last_pass_began: Option<Instant> = None;
        loop {
            tokio::select! {
                biased;
                _ = stopping(&mut shutdown) => break,
                _ = nudged(&hub, nudge) => {
                    let since = last_pass_began.map(|began| began.elapsed()).unwrap_or(NUDGED_PASS_GAP);
                    tokio::select! {
                        biased;
                        _ = stopping(&mut shutdown) => break,
                        _ = tokio::time::sleep(NUDGED_PASS_GAP.saturating_sub(since)) => {}
                    }
                }
                _ = tokio::time::sleep(interval) => {}
            }
            // A nudge stored while this pass waited is answered by it: take it now.
            tokio::select! {
                biased;
                _ = nudged(&hub, nudge) => {}
                _ = std::future::ready(()) => {}
            }
            last_pass_began = Some(Instant::now());
            pass().await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A reopen loop on a tick too long to matter, counting its passes.
    fn counting_loop(hub: &Arc<Hub>, shutdown: watch::Receiver<bool>) -> (Arc<AtomicUsize>, JoinHandle<()>) {
        let passes = Arc::new(AtomicUsize::new(0));
        let counted = passes.clone();
        let task = spawn_loop(shutdown, Duration::from_secs(3600), hub.clone(), Nudge::Reopen, move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        (passes, task)
    }

    // Five hundred completes in half a second nudge the reopen sweep five hundred times; it runs
    // once at the first nudge and then once per gap, and the pass after the last nudge answers it.
    #[tokio::test(start_paused = true)]
    async fn nudges_faster_than_the_gap_are_answered_by_one_pass_per_gap() {
        let hub = Arc::new(Hub::new("rp_test"));
        let (stop, shutdown) = watch::channel(false);
        let (passes, task) = counting_loop(&hub, shutdown);
        for _ in 0..500 {
            hub.capacity_changed();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let gaps_in_run = (Duration::from_millis(500).as_millis() / NUDGED_PASS_GAP.as_millis()) as usize;
        let during = passes.load(Ordering::SeqCst);
        assert!((gaps_in_run..=gaps_in_run + 1).contains(&during), "{during} passes for 500 nudges");
        tokio::time::sleep(NUDGED_PASS_GAP * 4).await;
        // Passes at 0, 50, ... 450 ms, and at 500 ms for the nudges after 450 ms: none more.
        assert_eq!(passes.load(Ordering::SeqCst), gaps_in_run + 1, "the last nudges answered, once");
        stop.send(true).expect("stop");
        task.await.expect("the loop stops");
    }

    // A loop whose shutdown sender is dropped without a word stops: it used to find the channel
    // closed at every turn and go round forever, never sleeping. On real time and two threads, so
    // a spinning loop fails the deadline instead of holding paused time still.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_loop_whose_shutdown_sender_is_gone_stops() {
        let hub = Arc::new(Hub::new("rp_test"));
        let (stop, shutdown) = watch::channel(false);
        let (passes, task) = counting_loop(&hub, shutdown);
        drop(stop);
        let stopped = tokio::time::timeout(Duration::from_secs(5), task).await;
        stopped.expect("the loop still runs with its shutdown sender gone").expect("the loop ends without a panic");
        assert_eq!(passes.load(Ordering::SeqCst), 0, "no pass once the sender is gone");
    }

    // A nudge after a quiet spell is answered at once: pacing delays only a nudge that follows a
    // pass within the gap.
    #[tokio::test(start_paused = true)]
    async fn a_lone_nudge_is_answered_at_once() {
        let hub = Arc::new(Hub::new("rp_test"));
        let (stop, shutdown) = watch::channel(false);
        let (passes, task) = counting_loop(&hub, shutdown);
        for expected in 1..=3 {
            hub.capacity_changed();
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert_eq!(passes.load(Ordering::SeqCst), expected, "answered within a millisecond");
            tokio::time::sleep(NUDGED_PASS_GAP * 2).await;
        }
        stop.send(true).expect("stop");
        task.await.expect("the loop stops");
    }
}
