//! `claim_next`'s read first (issue #15): the unlocked pre-skip read of every queue's status
//! before the first pick of a queue set that met a refusal last time, and that read begun ahead
//! while the group before claims.
//!
//! Its own module because it is an optimisation beside the transaction, never a step of it: it
//! excludes queues and decides nothing (REQ-4's permitted pre-skip).

use super::super::PgStore;
use super::super::admission::Pending;
use super::super::mutant_hooks::ClaimPlan;
use models::claim::ClaimNextRounds;
use models::error::Result;
use models::identity::QueueIdentity;
use models::store::QueueAdmission;

impl PgStore {
    /// The pre-skip read before the first pick, for a queue set whose last group met a refusal
    /// (`refused_hint`): every queue's status and the queue of the oldest claimable todo, both
    /// unlocked (REQ-4's permitted pre-skip; every claim is still decided under the lock). True
    /// when it stood for the refusal the first pick would have met, which `rounds` then records
    /// and the counters count; otherwise nothing is recorded and the hint is dropped.
    ///
    /// `ahead`, the same reads begun as the group before this one started, stands in for reading
    /// now. It is older by that group's claim, and used only while younger than
    /// `READ_AHEAD_AGE_MAX` (a claim that waited long on the policy lock reads again). Its age
    /// changes nothing REQ-4 relies on: the read excludes queues and decides nothing, every claim
    /// is still decided under the lock, and a queue it shows deferred that has opened since, or
    /// lost its policy, gets the one more round before the answer (`ClaimNextRounds::exhausted`
    /// reads the excluded queues anew). What it can change is the refusals counted: a queue
    /// deferred when read and open when used counts one the lock would not have met, as an
    /// unlocked read can at any age. Failed, it is read again.
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
        let PreRead { statuses, oldest } = match read {
            Some(read) => read,
            None => self.pre_read(queues).await?,
        };
        let refused = rounds.pre_read_first(plan.pre_skip_statuses(statuses), oldest.as_ref());
        self.counters.claim_pre_read_first(refused.is_some());
        let Some(refused) = refused else {
            self.refused_hint.mark(set, false);
            return Ok(false);
        };
        for (identity, reason) in refused {
            self.counters.refused(&identity.queue, reason);
        }
        Ok(true)
    }

    /// The read first's two unlocked reads, independent of each other: on two connections at once.
    async fn pre_read(&self, queues: &[QueueIdentity]) -> Result<PreRead> {
        let (statuses, oldest) =
            tokio::try_join!(self.queue_admissions_tx(queues, Pending::AnyAtAll), self.oldest_claimable_queue(queues))?;
        Ok(PreRead { statuses, oldest })
    }

    /// Begins the read first of the group after the one about to claim, for a queue set whose
    /// last group met a refusal (the only sets that read first); `None` for any other.
    pub(crate) fn read_ahead(&self, set: u64, queues: &[QueueIdentity]) -> Option<ReadAhead> {
        if !self.tuning.pre_read_first || !self.refused_hint.contains(set) {
            return None;
        }
        let (store, queues) = (self.clone(), queues.to_vec());
        Some(ReadAhead {
            begun: std::time::Instant::now(),
            task: tokio::spawn(async move { store.pre_read(&queues).await }),
        })
    }
}

/// What the read first reads: every queue's status and the queue of the oldest claimable todo.
pub(crate) struct PreRead {
    statuses: Vec<QueueAdmission>,
    oldest: Option<QueueIdentity>,
}

/// A read first under way for a group not yet formed (`PgStore::read_ahead`). Dropped unused, its
/// task is stopped (a statement already sent still runs to its end on the server): the reads lock
/// nothing and count nothing, so stopping them loses nothing.
pub(crate) struct ReadAhead {
    begun: std::time::Instant,
    task: tokio::task::JoinHandle<Result<PreRead>>,
}

/// The oldest a read begun ahead may be when its group uses it; a group of path (c) at 16
/// claimers takes about 6 ms, so only a claim that waited long on the policy lock makes one
/// older.
const READ_AHEAD_AGE_MAX: std::time::Duration = std::time::Duration::from_millis(250);

impl ReadAhead {
    /// The reads' result, or `None` when they failed or began too long ago (the caller reads
    /// again).
    async fn finish(mut self) -> Option<PreRead> {
        if self.begun.elapsed() > READ_AHEAD_AGE_MAX {
            return None;
        }
        match (&mut self.task).await {
            Ok(Ok(read)) => Some(read),
            Ok(Err(error)) => {
                tracing::debug!(%error, "read first begun ahead failed; reading again");
                None
            }
            Err(error) => {
                tracing::debug!(%error, "read first begun ahead did not finish; reading again");
                None
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.task.abort();
    }
}
