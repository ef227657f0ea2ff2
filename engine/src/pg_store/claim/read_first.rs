//! `claim_next`'s read first (issue #15): the unlocked pre-skip read of every queue's status
//! before the first pick of a queue set that met a refusal last time, and that read begun ahead
//! while a group before claims, shared by the groups that follow it for `READ_AHEAD_SHARED_FOR`.
//!
//! Its own module because it is an optimisation beside the transaction, never a step of it: it
//! excludes queues and decides nothing (REQ-4's permitted pre-skip).

use super::super::PgStore;
use super::super::admission::Pending;
use super::super::mutant_hooks::ClaimPlan;
use futures::future::{BoxFuture, FutureExt, Shared};
use models::claim::ClaimNextRounds;
use models::error::Result;
use models::identity::QueueIdentity;
use models::store::QueueAdmission;
use std::sync::Arc;

impl PgStore {
    /// The pre-skip read before the first pick, for a queue set whose last group met a refusal
    /// (`refused_hint`): every queue's status and the queue of the oldest claimable todo, both
    /// unlocked (REQ-4's permitted pre-skip; every claim is still decided under the lock). True
    /// when it stood for the refusal the first pick would have met, which `rounds` then records
    /// and the counters count; otherwise nothing is recorded and the hint is dropped.
    ///
    /// `ahead`, the same reads begun as a group before this one started (the leader's latest,
    /// shared by the groups that follow it while younger than `READ_AHEAD_SHARED_FOR`), stands
    /// in for reading now. It is older by the claims of the groups between, and used only while
    /// younger than `READ_AHEAD_AGE_MAX` (a claim that waited long on the policy lock reads
    /// again). Its age changes nothing REQ-4 relies on: the read excludes queues and decides
    /// nothing, every claim is still decided under the lock, and a queue it shows deferred that
    /// has opened since, been repaired or lost its policy gets the one more round before the
    /// answer (`ClaimNextRounds::exhausted` reads the excluded queues anew). What it can change
    /// is the refusals counted: a queue deferred when read and open when used counts one the lock
    /// would not have met, as an unlocked read can at any age. Failed, it is read again.
    pub(super) async fn pre_read_first(
        &self,
        set: u64,
        queues: &[QueueIdentity],
        rounds: &mut ClaimNextRounds,
        ahead: Option<ReadAhead>,
        plan: ClaimPlan,
    ) -> Result<bool> {
        let read = match ahead {
            Some(ahead) => ahead.finish().await,
            None => None,
        };
        let read = match read {
            Some(read) => read,
            None => Arc::new(self.pre_read(queues).await?),
        };
        let refused = rounds.pre_read_first(&plan.pre_skip_statuses(&read.statuses), read.oldest.as_ref());
        self.counters.claim_pre_read_first(refused.is_some());
        let Some(refused) = refused else {
            self.refused_hint.mark(set, false);
            return Ok(false);
        };
        self.counters.refused_all(&refused);
        Ok(true)
    }

    /// The read first's two unlocked reads, independent of each other: on two connections at once.
    async fn pre_read(&self, queues: &[QueueIdentity]) -> Result<PreRead> {
        let (statuses, oldest) =
            tokio::try_join!(self.queue_admissions_tx(queues, Pending::AnyAtAll), self.oldest_claimable_queue(queues))?;
        Ok(PreRead { statuses, oldest })
    }

    /// Begins the read first of the groups after the one about to claim, for a queue set whose
    /// last group met a refusal (the only sets that read first); `None` for any other.
    pub(crate) fn read_ahead(&self, set: u64, queues: &[QueueIdentity]) -> Option<ReadAhead> {
        if !self.tuning.pre_read_first || !self.refused_hint.contains(set) {
            return None;
        }
        let (store, queues) = (self.clone(), queues.to_vec());
        Some(ReadAhead::spawn(async move { store.pre_read(&queues).await }))
    }
}

/// What the read first reads: every queue's status and the queue of the oldest claimable todo.
pub(crate) struct PreRead {
    statuses: Vec<QueueAdmission>,
    oldest: Option<QueueIdentity>,
}

/// A read first under way for groups not yet formed (`PgStore::read_ahead`), shared by every
/// group that uses it (`ReadAhead::fresh`). Dropped unused by all of them, its task is stopped (a
/// statement already sent still runs to its end on the server): the reads lock nothing and count
/// nothing, so stopping them loses nothing.
#[derive(Clone)]
pub(crate) struct ReadAhead {
    begun: std::time::Instant,
    read: Shared<BoxFuture<'static, Option<Arc<PreRead>>>>,
    _stop: Arc<StopOnDrop>,
}

/// Stops the read's task when the last `ReadAhead` holding it is dropped.
struct StopOnDrop(tokio::task::AbortHandle);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The oldest a read begun ahead may be when a group uses it; a group of path (c) at 16
/// claimers takes about 6 ms, so only a claim that waited long on the policy lock makes one
/// older.
const READ_AHEAD_AGE_MAX: std::time::Duration = std::time::Duration::from_millis(250);

/// How long one read begun ahead serves the groups after it before a leader begins another
/// (issue #31 item 4). Path (c)'s groups at 16 claimers follow each other every few
/// milliseconds, and each read costs about 2 ms of the same two cores the claims run on; a read
/// this young says what a new one would, bar the claims of the groups between.
const READ_AHEAD_SHARED_FOR: std::time::Duration = std::time::Duration::from_millis(50);

impl ReadAhead {
    /// Runs `read` as its own task, shared by every clone of the answer.
    fn spawn(read: impl std::future::Future<Output = Result<PreRead>> + Send + 'static) -> ReadAhead {
        let task = tokio::spawn(read);
        let stop = Arc::new(StopOnDrop(task.abort_handle()));
        let read = async move {
            match task.await {
                Ok(Ok(read)) => Some(Arc::new(read)),
                Ok(Err(error)) => {
                    tracing::debug!(%error, "read first begun ahead failed; reading again");
                    None
                }
                Err(error) => {
                    tracing::debug!(%error, "read first begun ahead did not finish; reading again");
                    None
                }
            }
        };
        ReadAhead { begun: std::time::Instant::now(), read: read.boxed().shared(), _stop: stop }
    }

    /// The reads' result, or `None` when they failed or began too long ago (the caller reads
    /// again).
    async fn finish(self) -> Option<Arc<PreRead>> {
        if self.begun.elapsed() > READ_AHEAD_AGE_MAX {
            return None;
        }
        self.read.clone().await
    }

    /// Whether the next group may use this read rather than one begun now.
    pub(crate) fn fresh(&self) -> bool {
        self.begun.elapsed() < READ_AHEAD_SHARED_FOR
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn empty_read() -> PreRead {
        PreRead { statuses: vec![], oldest: None }
    }

    /// Sets its flag when dropped: the task holding it was stopped or finished.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    // One read serves every group that holds it: dropping one holder leaves it running for the
    // others, and every holder gets the same result.
    #[tokio::test]
    async fn a_shared_read_runs_while_any_group_holds_it_and_answers_each_alike() {
        let (send, receive) = tokio::sync::oneshot::channel::<()>();
        let stopped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(stopped.clone());
        let first = ReadAhead::spawn(async move {
            let _guard = guard;
            receive.await.ok();
            Ok(empty_read())
        });
        let (second, third) = (first.clone(), first.clone());
        drop(first);
        tokio::task::yield_now().await;
        assert!(!stopped.load(Ordering::SeqCst), "a holder is left: the read goes on");
        send.send(()).expect("the read waits");
        let (a, b) = (second.finish().await, third.finish().await);
        let (a, b) = (a.expect("finished"), b.expect("finished"));
        assert!(Arc::ptr_eq(&a, &b), "one result for every holder");
    }

    // Dropped by every group unused, the read's task is stopped.
    #[tokio::test]
    async fn a_shared_read_no_group_holds_is_stopped() {
        let stopped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(stopped.clone());
        let read = ReadAhead::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(empty_read())
        });
        let other = read.clone();
        tokio::task::yield_now().await;
        drop(read);
        drop(other);
        for _ in 0..100 {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the read's task was not stopped");
    }

    // A read is shared while young, and not used at all once older than the age limit.
    #[tokio::test]
    async fn a_read_is_shared_while_young_and_refused_when_old() {
        let read = ReadAhead::spawn(async { Ok(empty_read()) });
        assert!(read.fresh());
        let mut old = read.clone();
        old.begun -= READ_AHEAD_AGE_MAX + std::time::Duration::from_millis(1);
        assert!(!old.fresh());
        assert!(old.finish().await.is_none(), "too old to stand for a read now");
        assert!(read.finish().await.is_some());
    }
}
