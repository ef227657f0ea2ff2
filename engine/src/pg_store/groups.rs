//! Group admission (issue #15, item 3): concurrent budgeted `claim_next` calls of one replica on
//! the same queue set join one claim transaction.
//!
//! Budgeted claims on the same queue serialize on its policy row (REQ-4). One claim per
//! transaction pays a lock wait, a clock read and a commit per claim while every other claimer
//! of the queue waits; on durable storage the commit's flush dominates. Here the claimers of one
//! queue set queue up in memory, holding nothing, and one leader task per set and replica takes
//! up to `members_max` of them into the next transaction: one policy lock, the step-4 read and
//! `decide` repeated claim by claim under it (the claim transaction in `claim.rs`), one commit.
//! The policy lock still decides across replicas.
//!
//! Leaving (REQ-13): a claimer that goes away (its request dropped) or gives up after `wait`
//! while still queued is taken out of the queue and charged nothing. One the leader has already
//! taken is left out at its turn if it has gone by then, which is after the policy lock is held:
//! a claimer cancelled while its transaction waits for the lock charges nothing. One that goes
//! away after its turn and before the commit rolls the group's transaction back, and the others
//! are claimed for again (`commit_claims`). Only one that goes away while the commit itself is
//! under way finds its claim committed, as a single claim whose answer is lost on the wire does;
//! the lease gives the todo back.
//!
//! A set has at most one leader at a time; its entry is removed when the leader finds nobody
//! waiting, so the map holds only sets with claimers in flight.

use super::PgStore;
use super::claim::ReadAhead;
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::ClaimNext;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;

/// Leader tasks per queue set and replica. A second one could pick and lock its candidates while
/// the first holds the policy lock, but measured (`ci/bench-admission`, 16 claimers, durable) it
/// split the groups and lost throughput: 390-574 vs 488-708 claims/s for (b). So one.
const LEADERS_MAX: usize = 1;

/// The queues of claimers waiting for a group claim, per queue set.
pub(crate) struct ClaimGroups {
    members_max: usize,
    wait: Duration,
    sets: Mutex<HashMap<u64, Group>>,
    /// The next claimer's seat, unique for the process's life. Not per
    /// group: a set's group is removed and made anew as it empties and fills, and a claimer whose
    /// ticket outlives its group (it leaves when its answer is in) must never find its seat
    /// number on a claimer of the next group and take that one out of the queue.
    next_seat: std::sync::atomic::AtomicU64,
}

/// One queue set's waiting claimers, and whether a leader task is serving them.
struct Group {
    queues: Vec<QueueIdentity>,
    waiting: VecDeque<(u64, Member)>,
    /// Leader tasks serving this set now, at most `LEADERS_MAX`.
    leaders: usize,
}

/// A claimer taken into a group claim: who claims, for how long, and where its answer goes.
pub(crate) struct Member {
    pub(crate) actor: Actor,
    pub(crate) lease_seconds: i64,
    reply: oneshot::Sender<Result<ClaimNext>>,
}

impl Member {
    /// Whether the claimer went away: it is left out of the claim.
    pub(crate) fn gone(&self) -> bool {
        self.reply.is_closed()
    }

    /// Hands the claimer its answer. A claimer gone during the commit loses a committed claim
    /// as a client does whose answer is lost on the wire: the lease gives the todo back.
    pub(crate) fn answer(self, answer: Result<ClaimNext>) {
        if let Err(Ok(ClaimNext::Claimed(claimed))) = self.reply.send(answer) {
            tracing::info!(todo = %claimed.todo.id, "claimer left while its claim committed; the lease will lapse");
        }
    }
}

impl PgStore {
    /// Budgeted `claim_next` calls queued on this replica for their group's next transaction
    /// (not counting those a transaction has taken): what a test waits on, and a load signal.
    pub fn claimers_queued(&self) -> usize {
        self.claim_groups.sets().values().map(|group| group.waiting.len()).sum()
    }
}

/// The claimers of one group claim still owed an answer, in turn order.
pub(crate) struct Turns(VecDeque<Member>);

impl Turns {
    pub(crate) fn new(members: Vec<Member>) -> Turns {
        Turns(members.into())
    }

    /// How many claimers still wait; those gone are dropped first.
    pub(crate) fn present(&mut self) -> usize {
        self.0.retain(|member| !member.gone());
        self.0.len()
    }

    /// The next claimer in turn that has not gone away; those gone before it are left out.
    pub(crate) fn next(&mut self) -> Option<Member> {
        std::iter::from_fn(|| self.0.pop_front()).find(|member| !member.gone())
    }

    /// Puts `members` back at the head of the line, in their order (a refused claimer, or
    /// those whose claims were rolled back).
    pub(crate) fn put_back(&mut self, members: impl IntoIterator<Item = Member>) {
        let members: Vec<Member> = members.into_iter().collect();
        for member in members.into_iter().rev() {
            self.0.push_front(member);
        }
    }

    /// Answers every claimer still owed one.
    pub(crate) fn answer_all(&mut self, answer: Result<ClaimNext>) {
        for member in self.0.drain(..) {
            member.answer(answer.clone());
        }
    }
}

/// A claimer's place in a queue: its answer, or its seat given up when dropped.
struct Ticket {
    groups: Arc<ClaimGroups>,
    set: u64,
    seat: u64,
    answer: oneshot::Receiver<Result<ClaimNext>>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.groups.leave(self.set, self.seat);
    }
}

impl ClaimGroups {
    pub(crate) fn new(members_max: usize, wait: Duration) -> ClaimGroups {
        ClaimGroups {
            members_max: members_max.max(1),
            wait,
            sets: Mutex::new(HashMap::new()),
            next_seat: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How long a queued claimer waits for its group before giving up.
    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    fn sets(&self) -> MutexGuard<'_, HashMap<u64, Group>> {
        self.sets.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The budgeted `claim_next` of a claimer, `count` times (a single claim is a batch of one):
    /// `count` seats taken at once and in order, starting the set's leader if none runs, so the
    /// next group claim serves them one after the other under one policy lock (up to
    /// `members_max` a transaction), each decided as a lone claimer's would be. Answered in seat
    /// order; a seat still queued after `wait` gives up with a retryable `unavailable` that
    /// charged nothing.
    pub(crate) async fn claim_next_many(
        self: &Arc<Self>,
        store: &PgStore,
        set: u64,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        count: usize,
    ) -> Vec<Result<ClaimNext>> {
        let (members, answers): (Vec<Member>, Vec<_>) = (0..count)
            .map(|_| {
                let (reply, answer) = oneshot::channel();
                (Member { actor: actor.clone(), lease_seconds, reply }, answer)
            })
            .unzip();
        let (seats, lead) = match self.join(set, queues, members) {
            Ok(queued) => queued,
            Err(members) => {
                // Claimed alone, but still at most `members_max` a transaction.
                let mut members = members.into_iter().peekable();
                while members.peek().is_some() {
                    let chunk: Vec<Member> = members.by_ref().take(self.members_max).collect();
                    store.claim_next_group(set, queues, chunk, None).await;
                }
                let answered = answers.into_iter().map(|answer| async {
                    answer.await.unwrap_or_else(|_| Err(Error::internal("claim group answer lost")))
                });
                return futures::future::join_all(answered).await;
            }
        };
        if lead {
            // Made before the task: a task dropped unpolled (its runtime shutting down) still
            // steps down, so the set does not keep a leader that never runs.
            let leading = Leading { groups: self.clone(), set, stepped_down: false };
            tokio::spawn(leading.lead(store.clone()));
        }
        let tickets =
            seats.into_iter().zip(answers).map(|(seat, answer)| Ticket { groups: self.clone(), set, seat, answer });
        futures::future::join_all(tickets.map(|ticket| self.answer_of(ticket))).await
    }

    /// A queued seat's answer, or its give-up after `wait`.
    async fn answer_of(&self, mut ticket: Ticket) -> Result<ClaimNext> {
        let (set, seat) = (ticket.set, ticket.seat);
        match tokio::time::timeout(self.wait, &mut ticket.answer).await {
            Ok(answer) => answer.unwrap_or_else(|_| Err(Error::internal("claim group answer lost"))),
            Err(_elapsed) if self.leave(set, seat) => {
                tracing::info!(
                    set,
                    waiting_seconds = self.wait.as_secs_f64(),
                    "claimer gave up waiting for a policy lock"
                );
                Err(Error::unavailable("too many claimers are waiting for these queues' admission lock; retry shortly")
                    .with("retry_after_seconds", 1))
            }
            // Already taken into a group claim: its answer comes once that transaction ends.
            Err(_elapsed) => {
                (&mut ticket.answer).await.unwrap_or_else(|_| Err(Error::internal("claim group answer lost")))
            }
        }
    }

    /// Queues `members` for set `set`, in order: their seats, and whether the caller must start
    /// the set's leader. A different queue set with the same fingerprint gets the members back,
    /// to claim alone.
    fn join(
        &self,
        set: u64,
        queues: &[QueueIdentity],
        members: Vec<Member>,
    ) -> std::result::Result<(Vec<u64>, bool), Vec<Member>> {
        let mut sets = self.sets();
        let group =
            sets.entry(set).or_insert_with(|| Group { queues: queues.to_vec(), waiting: VecDeque::new(), leaders: 0 });
        if group.queues != queues {
            return Err(members);
        }
        let seats = members
            .into_iter()
            .map(|member| {
                let seat = self.next_seat.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                group.waiting.push_back((seat, member));
                seat
            })
            .collect();
        let lead = group.leaders < LEADERS_MAX;
        group.leaders += usize::from(lead);
        Ok((seats, lead))
    }

    /// Takes seat `seat` of set `set` out of its queue. False when it was no longer there (taken
    /// into a group claim, or answered).
    fn leave(&self, set: u64, seat: u64) -> bool {
        let mut sets = self.sets();
        let Some(group) = sets.get_mut(&set) else { return false };
        let before = group.waiting.len();
        group.waiting.retain(|(waiting, _)| *waiting != seat);
        group.waiting.len() != before
    }

    /// A leader of `set` leaves; the last one out removes the set, dropping any claimer still
    /// queued only when `failed` (a normal leader leaves only when nobody waits).
    fn step_down(&self, set: u64, failed: bool) {
        step_down_in(&mut self.sets(), set, failed);
    }
}

/// The leader of one set: it holds the set's leader count from the moment it is chosen. Dropped
/// without having stepped down (its claim panicked, or its task never ran), it steps down as a
/// failed leader: the claimers still queued are dropped (they see an internal error, charged
/// nothing), so a later claimer starts afresh.
struct Leading {
    groups: Arc<ClaimGroups>,
    set: u64,
    stepped_down: bool,
}

impl Leading {
    /// Group claims until nobody waits, then steps down under the same lock a new claimer
    /// queues under, so no claimer is left without a leader.
    ///
    /// From its second group on, a leader begins a read first for the groups that follow while
    /// a group claims (`PgStore::read_ahead`), so a set whose claims read first does not wait for
    /// that read between its transactions. Not for the first: a lone claimer's leader serves one
    /// group and steps down, and would only throw the read away. One read serves every group
    /// that follows while it is younger than `READ_AHEAD_SHARED_FOR` (issue #31 item 4); its age
    /// changes nothing REQ-4 relies on (`PgStore::pre_read_first`). After a group whose claim
    /// the lock refused, the leader begins a new one at once: the shared read may show that
    /// queue open, and every group using it would meet the same refusal.
    async fn lead(mut self, store: PgStore) {
        let set = self.set;
        let mut ahead = None;
        let mut first_group = true;
        loop {
            let (queues, members) = {
                let mut sets = self.groups.sets();
                let Some(group) = sets.get_mut(&set) else { break };
                let taken = group.waiting.len().min(self.groups.members_max);
                if taken == 0 {
                    // Under the lock that found nobody waiting: a claimer queuing after this
                    // sees no leader and starts one.
                    step_down_in(&mut sets, set, false);
                    break;
                }
                let members: Vec<Member> = group.waiting.drain(..taken).map(|(_, member)| member).collect();
                (group.queues.clone(), members)
            };
            let this_group = ahead.clone();
            if !first_group && !ahead.as_ref().is_some_and(ReadAhead::fresh) {
                ahead = store.read_ahead(set, &queues);
            }
            if store.claim_next_group(set, &queues, members, this_group).await {
                // The lock refused what the shared read showed open: the next group reads anew.
                ahead = None;
            }
            first_group = false;
        }
        self.stepped_down = true;
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        if !self.stepped_down {
            self.groups.step_down(self.set, true);
        }
    }
}

/// `ClaimGroups::step_down` with the sets already locked.
fn step_down_in(sets: &mut HashMap<u64, Group>, set: u64, failed: bool) {
    let Some(group) = sets.get_mut(&set) else { return };
    group.leaders -= 1;
    if group.leaders == 0 && (failed || group.waiting.is_empty()) {
        sets.remove(&set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::scope::{AgentScope, Reach};

    fn member() -> (Member, oneshot::Receiver<Result<ClaimNext>>) {
        let scope = AgentScope {
            endpoint_id: "ep_1".into(),
            endpoint_slug: "one".into(),
            owner_human_id: None,
            reach: Reach::default(),
            granted: [].into(),
            verbs: vec![],
            manages: Reach::default(),
            acting_for_human_id: None,
        };
        let (reply, answer) = oneshot::channel();
        (Member { actor: Actor::Agent(scope), lease_seconds: 60, reply }, answer)
    }

    // SPEC-0030 REQ-13 (issue #15 group admission): a claimer whose ticket outlives its set's
    // group leaves by its seat once answered; that seat is never a claimer's of the next group.
    #[test]
    fn a_seat_is_never_reused_when_a_sets_group_is_made_anew() {
        let groups = ClaimGroups::new(8, Duration::from_secs(1));
        let queues = [QueueIdentity::endpoint("ep_1", "q")];
        let (first, _first_answer) = member();
        let (first_seats, lead) = groups.join(7, &queues, vec![first]).ok().expect("queued");
        let first_seat = first_seats[0];
        assert!(lead);
        // The leader takes it into a claim, answers it, finds nobody waiting and steps down.
        let taken: Vec<(u64, Member)> = groups.sets().get_mut(&7).expect("group").waiting.drain(..).collect();
        assert_eq!(taken.len(), 1);
        groups.step_down(7, false);
        assert!(groups.sets().is_empty(), "the set's group is gone");

        let (second, mut second_answer) = member();
        let (second_seats, _) = groups.join(7, &queues, vec![second]).ok().expect("queued");
        let second_seat = second_seats[0];
        assert_ne!(first_seat, second_seat);
        // The first claimer's ticket is dropped now that its answer is in.
        assert!(!groups.leave(7, first_seat), "nothing of the first claimer's is left to take out");
        assert_eq!(groups.sets().get(&7).map(|group| group.waiting.len()), Some(1), "the second still waits");
        assert!(second_answer.try_recv().is_err_and(|e| e == oneshot::error::TryRecvError::Empty));
    }

    // Issue #15 group admission: a leader whose task never runs (dropped unpolled, as when its
    // runtime shuts down) still steps down, so its set keeps no leader that will never serve it
    // and the claimers queued are told at once instead of waiting out their timeout.
    #[test]
    fn a_leader_dropped_before_it_runs_steps_down() {
        let groups = Arc::new(ClaimGroups::new(8, Duration::from_secs(1)));
        let queues = [QueueIdentity::endpoint("ep_1", "q")];
        let (first, mut answer) = member();
        let (_, lead) = groups.join(7, &queues, vec![first]).ok().expect("queued");
        assert!(lead);
        drop(Leading { groups: groups.clone(), set: 7, stepped_down: false });
        assert!(groups.sets().is_empty(), "the set is gone with its leader");
        assert!(answer.try_recv().is_err_and(|e| e == oneshot::error::TryRecvError::Closed));
        let (second, _) = member();
        assert!(groups.join(7, &queues, vec![second]).ok().expect("queued").1, "the next claimer leads");
    }
}
