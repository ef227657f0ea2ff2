//! The background sweeps that start and stop with the server: the lease reaper, the retry
//! scheduler and the pruning of old admission usage (SPEC-0030 REQ-1, REQ-13), on one tick (`SWITCHBOARD_REAPER_INTERVAL`, default 30 s).
//!
//! They are system work: exempt from endpoint scoping, and they read nothing out to anyone.

use models::store::Store;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One pass of every sweep. Errors are logged and the next tick tries again: a sweep that fails
/// leaves rows as they were, and claims stay correct without it (takeover covers lapsed leases).
pub async fn run_once<S: Store>(store: &S) {
    match store.reap_lapsed_leases().await {
        Ok(report) if report.returned_to_pending + report.dead_lettered > 0 => tracing::info!(
            returned_to_pending = report.returned_to_pending,
            dead_lettered = report.dead_lettered,
            "lease reaper returned lapsed claims"
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "lease reaper failed; retrying next tick"),
    }
    match store.requeue_due_retries().await {
        Ok(0) => {}
        Ok(requeued) => tracing::info!(requeued, "retry scheduler returned due retries to pending"),
        Err(error) => tracing::warn!(%error, "retry scheduler failed; retrying next tick"),
    }
    match store.prune_usage().await {
        Ok(0) => {}
        Ok(pruned) => tracing::info!(pruned, "pruned admission usage older than the retention"),
        Err(error) => tracing::warn!(%error, "usage pruning failed; retrying next tick"),
    }
}

/// Runs the sweeps every `interval` until `shutdown` flips to true.
pub fn spawn<S: Store>(store: S, interval: Duration, mut shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep(interval) => run_once(&store).await,
            }
            if *shutdown.borrow() {
                break;
            }
        }
        tracing::debug!("sweeps stopped");
    })
}
