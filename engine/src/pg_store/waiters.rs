//! A bound on claimers waiting for one queue set's policy lock (issue #14, item 3).
//!
//! Budgeted claims on the same queues serialize on the policy row (REQ-4). Without a bound, a
//! fleet of 200 claimers would each take a pooled connection only to wait on that one lock,
//! and every other tenant would wait for a connection. Here claimers of one queue set (the
//! `BudgetedHint` fingerprint: every agent of a team queue shares it) take a permit before
//! they open a transaction, so at most `permits` of them hold a connection at once; the rest
//! wait in memory, holding nothing, and give up after `wait` with a retryable `unavailable`
//! that charged nothing. The bound is per replica; the policy lock still decides across
//! replicas.

use models::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Per-queue-set permits for the budgeted claim path.
pub(crate) struct ClaimWaiters {
    permits: usize,
    wait: Duration,
    sets: Mutex<HashMap<u64, Arc<Semaphore>>>,
}

impl ClaimWaiters {
    /// Past this many queue sets, idle ones are forgotten, so the map cannot grow without bound.
    const SETS_MAX: usize = 4096;

    pub(crate) fn new(permits: usize, wait: Duration) -> ClaimWaiters {
        ClaimWaiters { permits: permits.max(1), wait, sets: Mutex::new(HashMap::new()) }
    }

    /// A permit to open a claim transaction on queue set `set`, or `unavailable` after `wait`.
    pub(crate) async fn enter(&self, set: u64) -> Result<OwnedSemaphorePermit> {
        let semaphore = {
            let mut sets = self.sets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if sets.len() >= Self::SETS_MAX {
                let idle = |semaphore: &Arc<Semaphore>| semaphore.available_permits() == self.permits;
                sets.retain(|_, semaphore| !idle(semaphore));
            }
            sets.entry(set).or_insert_with(|| Arc::new(Semaphore::new(self.permits))).clone()
        };
        match tokio::time::timeout(self.wait, semaphore.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(Error::internal("claim waiter permits closed")),
            Err(_elapsed) => {
                tracing::info!(
                    set,
                    waiting_seconds = self.wait.as_secs_f64(),
                    "claimer gave up waiting for a policy lock"
                );
                Err(Error::unavailable("too many claimers are waiting for these queues' admission lock; retry shortly")
                    .with("retry_after_seconds", 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::error::Code;

    #[tokio::test]
    async fn claimers_past_the_bound_wait_then_give_up_and_other_sets_are_not_affected() {
        let waiters = ClaimWaiters::new(2, Duration::from_millis(50));
        let first = waiters.enter(1).await.expect("first");
        let _second = waiters.enter(1).await.expect("second");
        let refused = waiters.enter(1).await.expect_err("third waits, then gives up");
        assert_eq!(refused.code, Code::Unavailable);
        let _other = waiters.enter(2).await.expect("another queue set has its own permits");
        drop(first);
        let _again = waiters.enter(1).await.expect("a permit comes back when its claim ends");
    }
}
