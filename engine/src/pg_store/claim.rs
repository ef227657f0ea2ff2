//! The claim transaction (SPEC-0003 "Atomic Claim", amended by SPEC-0030 REQ-4).
//!
//! One transaction per claim, in this order and no other:
//! 1. pick the candidate: `FOR UPDATE SKIP LOCKED` for `claim_next` (concurrent claimers get
//!    different rows), a blocking `FOR UPDATE` for `claim` of a named todo;
//! 2. look up the queue identity's policy (one indexed lookup; none → the base claim, untouched);
//! 3. lock the policy row `FOR UPDATE` (blocking; for `claim_next` 1–3 are one statement whose
//!    candidate CTEs are materialised, so the todos are locked first; for `claim`, 2 and 3 are one);
//! 4. read `clock_timestamp()` after the lock, then in-flight (not counting the candidate) and the
//!    current window's usage;
//! 5. decide with `models::admission::decide`, the function the reference model uses;
//! 6. refuse → roll back, and `claim_next` goes on to its other queues without the refused one;
//!    admit → claim, charge one unit, commit.
//!
//! Group admission (issue #15): the budgeted `claim_next` calls of one replica on the same queues
//! queue up (`groups.rs`) and one transaction serves them in turn. Step 1 then locks up to one
//! candidate per claimer, all of the oldest candidate's queue, and 4–5 run again for each
//! claimer under the one policy lock, so each decision sees the claims made before it; the first
//! refusal ends the group's claims on that queue, and 6 commits every claim made at once.
//!
//! A transaction holds at most one policy lock and never waits on a todo lock while holding it:
//! the todos are always locked first. Dropping a transaction on any early return (an error, a
//! cancelled request) rolls it back, so nothing is charged that did not commit (REQ-13); a
//! group's claimer that has gone by its turn is left out.
//!
//! This file holds only the I/O. What a refusal means for `claim_next`'s next pick, the deferred
//! list, the headroom and the `deferred` error are pure rules in `models` (`models::claim`,
//! `Headroom::after_claim`) that the reference model applies too. The mutant hunt's seeded bugs
//! reach this transaction only through its `ClaimPlan` (`mutant_hooks`), read once as it begins. The row locks a named
//! claim takes (`lock_todo`, step 1; `lock_policy`, steps 2–3) live in `rows`, which lifecycle,
//! intake and admission share, so no other transaction module imports this one. Steps 1–3's
//! statements are in `claim/pick.rs`, step 6's claim statement in `claim/statement.rs`, and the
//! read first beside the transaction in `claim/read_first.rs`.

use super::admission::Pending;
use super::groups::{Member, Turns};
use super::mutant_hooks::ClaimPlan;
use super::rows::{LockedPolicy, lock_policy, lock_todo};
use super::{PgStore, db_error, finish};
use chrono::{DateTime, Utc};
use models::admission::{self, Headroom, Observation, Policy, Reason, Used};
use models::claim::{ClaimNextRounds, Exhausted, deferred_error};
use models::error::{Error, Result};
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::{ClaimNext, Claimed, ClaimedMany, Claims};
use models::todo::{Todo, TodoState};
use sqlx::{Postgres, Transaction};

mod pick;
mod read_first;
mod statement;

pub(crate) use read_first::ReadAhead;
use statement::{Charge, claim_locked, with_headroom};

/// A candidate locked by step 1. `claim` names a todo that may not be claimable, so it carries
/// the locked row to check at the clock of step 4; `claim_next` picked a claimable one, and
/// claimability only grows with time (a lease stays lapsed, a retry stays due).
struct Candidate {
    id: String,
    identity: QueueIdentity,
    named: Option<Todo>,
    /// A lapsed claim: counted in flight, but not against its own takeover.
    takes_over: bool,
}

/// Who a candidate is claimed for.
#[derive(Clone, Copy)]
struct Claimant<'a> {
    actor: &'a Actor,
    lease_seconds: i64,
}

/// A locked candidate offered to a claimant; a transaction's offers are taken in turn.
type Offer<'a> = (&'a Candidate, Claimant<'a>);

/// What steps 2–6 concluded for a transaction's offers: the claims made (not yet committed), in
/// turn, and the refusal that ended them, if one did.
struct Admission {
    claimed: Vec<Claimed>,
    refused: Option<Refusal>,
}

/// Why a claim was refused, and the hint its answer carries (REQ-7).
struct Refusal {
    reason: Reason,
    hint: models::admission::AdmissionHint,
    now: Option<DateTime<Utc>>,
}

/// Steps 2–3's outcome: the policy locked (None: the queue has none), or the database error
/// that kept it from being read, which refuses this candidate only (REQ-9).
type PolicyLock = std::result::Result<Option<LockedPolicy>, sqlx::Error>;

impl PgStore {
    pub(crate) async fn claim_next_tx(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
    ) -> Result<ClaimNext> {
        // A single claim is a batch of one (`claim_many.rs`): the one-statement path for a queue
        // without a policy, else a seat in the queue set's group claim.
        let mut one = self.claim_next_many_tx(actor, queues, lease_seconds, 1).await?;
        Ok(match one.claimed.pop() {
            Some(claimed) => ClaimNext::Claimed(Box::new(claimed)),
            None => ClaimNext::Empty { deferred: one.deferred },
        })
    }

    /// The transactional path of `claim_next`, once the oldest candidate turned out budgeted,
    /// for a group of claimers of one queue set (one, when claims do not overlap), answering
    /// each (the module's "group admission"). A refused queue is excluded from the next pick for
    /// everyone left (`ClaimNextRounds`; REQ-4, REQ-7): the claimers share their queues. `set` is
    /// their fingerprint (`QueueSetHint::fingerprint`), computed once per claim by the caller.
    /// `ahead` is the leader's latest read first begun ahead (`groups.rs`), shared by the groups
    /// that follow it while it is young, if any. True when the lock refused a claim: a read
    /// begun before then may show that queue open, so the leader begins a new one.
    pub(crate) async fn claim_next_group(
        &self,
        set: u64,
        queues: &[QueueIdentity],
        members: Vec<Member>,
        ahead: Option<ReadAhead>,
    ) -> bool {
        self.counters.claim_group(members.len());
        let mut turns = Turns::new(members);
        let mut refused_under_lock = false;
        if let Err(error) = self.claim_next_in_turn(set, queues, &mut turns, ahead, &mut refused_under_lock).await {
            turns.answer_all(Err(error));
        }
        refused_under_lock
    }

    /// `claim_next_group`'s rounds. Answers each claimer as its claim commits or its answer is
    /// known; on an error the claimers still in `turns` are owed it.
    async fn claim_next_in_turn(
        &self,
        set: u64,
        queues: &[QueueIdentity],
        turns: &mut Turns,
        ahead: Option<ReadAhead>,
        refused_under_lock: &mut bool,
    ) -> Result<()> {
        let plan = ClaimPlan::now();
        let mut rounds = ClaimNextRounds::new(queues);
        // The read first counts refusals, so it runs only while a claimer waits, as a locked
        // refusal does. A read begun ahead that is not needed here is not waited for.
        if self.tuning.pre_read_first
            && plan.reads_first
            && turns.present() > 0
            && self.refused_hint.contains(set)
            && self.pre_read_first(set, queues, &mut rounds, ahead, plan).await?
            && plan.gives_up_after_refusal
        {
            turns.answer_all(Ok(ClaimNext::Empty { deferred: vec![] }));
            return Ok(());
        }
        for _ in 0..ClaimNextRounds::ROUNDS_MAX {
            // Picks that claim nothing (each excludes a queue, or finds its claimers gone) are
            // bounded per round as for a single claimer; those that claim are bounded by the
            // claimers, so a group whose picks each serve only some of it still tries every queue.
            let mut idle_picks_left = queues.len() + 1;
            while idle_picks_left > 0 {
                let present = turns.present();
                if present == 0 {
                    return Ok(());
                }
                let mut tx = self.begin_claim().await?;
                let picked = match self.pick_candidates(&mut tx, queues, &rounds, present, plan).await {
                    Ok(picked) => picked,
                    Err(error) => {
                        // REQ-9: the statement that locks the candidates and their policy
                        // failed. Take the steps one statement each, so a policy that cannot be
                        // locked or read fails only its own queue and the others are still served.
                        tracing::warn!(%error, "claim_next candidate pick failed; retrying step by step");
                        finish(tx, Ok(())).await.ok();
                        tx = self.begin_claim().await?;
                        match self.pick_candidate_step_by_step(&mut tx, queues, &rounds, plan).await {
                            Ok(picked) => picked.map(|(candidate, policy)| (vec![candidate], policy)),
                            Err(error) => return finish(tx, Err(error)).await,
                        }
                    }
                };
                let Some((candidates, policy)) = picked else {
                    finish(tx, Ok(())).await?;
                    break;
                };
                let (claimed, refused) = match self.admit_in_turn(&mut tx, &candidates, policy, turns, plan).await {
                    Ok(outcome) => outcome,
                    Err(error) => return finish(tx, Err(error)).await,
                };
                let claimed_any = !claimed.is_empty();
                if !self.commit_claims(tx, claimed, turns).await? {
                    continue;
                }
                idle_picks_left -= usize::from(!claimed_any);
                let Some(reason) = refused else { continue };
                *refused_under_lock = true;
                let identity = candidates[0].identity.clone();
                self.count_refusal(set, &identity, reason);
                if plan.gives_up_after_refusal {
                    turns.answer_all(Ok(ClaimNext::Empty { deferred: vec![] }));
                    return Ok(());
                }
                self.exclude_refused(queues, &mut rounds, identity, reason, plan).await?;
            }
            // Nothing claimable outside the excluded queues: the deferred list, or one more round.
            if let Some(answer) = self.answer_when_exhausted(&mut rounds).await? {
                turns.answer_all(Ok(answer));
                return Ok(());
            }
        }
        turns.answer_all(Ok(ClaimNext::Empty { deferred: vec![] }));
        Ok(())
    }

    /// A refusal met under the lock: counted, and the set marked for the read first when a
    /// limit refuses every candidate. Not in_flight_full, which the read first leaves to the
    /// lock, and not admission_unavailable, which is most often a lock timeout that the unlocked
    /// read cannot see.
    fn count_refusal(&self, set: u64, identity: &QueueIdentity, reason: Reason) {
        self.counters.refused(&identity.queue, reason);
        if matches!(reason, Reason::Paused | Reason::WindowExhausted) {
            self.refused_hint.mark(set, true);
        }
    }

    /// The refused queue excluded from the next pick, and after the first refusal the queues an
    /// unlocked read shows deferred too (REQ-4's permitted pre-skip), each counted.
    async fn exclude_refused(
        &self,
        queues: &[QueueIdentity],
        rounds: &mut ClaimNextRounds,
        identity: QueueIdentity,
        reason: Reason,
        plan: ClaimPlan,
    ) -> Result<()> {
        if rounds.refused(identity, reason) {
            let statuses = self.queue_admissions_tx(queues, Pending::AnyAtAll).await?;
            self.counters.refused_all(&rounds.exclude_deferred(&plan.pre_skip_statuses(&statuses)));
        }
        Ok(())
    }

    /// When nothing is claimable outside the excluded queues: the answer (empty, with the
    /// deferred list, whose queues are watched for their reopening, REQ-8), or None for one
    /// more round (a refused queue has reopened since).
    async fn answer_when_exhausted(&self, rounds: &mut ClaimNextRounds) -> Result<Option<ClaimNext>> {
        let excluded = rounds.excluded();
        let statuses =
            if excluded.is_empty() { vec![] } else { self.queue_admissions_tx(excluded, Pending::Count).await? };
        let Exhausted::Answer(answer) = rounds.exhausted(statuses) else { return Ok(None) };
        if let ClaimNext::Empty { deferred } = &answer {
            let waiting: Vec<QueueIdentity> = deferred.iter().map(|d| d.identity.clone()).collect();
            self.watch_refused(&waiting).await;
        }
        Ok(Some(answer))
    }

    /// Step 6 for a group: one commit for every claim made, then each claimer gets its claim.
    /// Nothing claimed → roll back. A failed commit puts the claimers back, owed the error.
    ///
    /// REQ-13: a claimer that went away after its turn came (after the policy lock) and before
    /// the commit must be charged nothing, as a single claim's dropped transaction is. Then the
    /// whole transaction rolls back, the claimers are put back, and false says to pick again for
    /// those still here (a refusal this transaction met is counted only if the new pick meets it).
    async fn commit_claims(
        &self,
        tx: Transaction<'static, Postgres>,
        claimed: Vec<(Member, Claimed)>,
        turns: &mut Turns,
    ) -> Result<bool> {
        if claimed.is_empty() {
            tx.rollback().await.map_err(db_error)?;
            return Ok(true);
        }
        if claimed.iter().any(|(member, _)| member.gone()) {
            turns.put_back(claimed.into_iter().map(|(member, _)| member));
            tx.rollback().await.map_err(db_error)?;
            return Ok(false);
        }
        if let Err(error) = tx.commit().await {
            turns.put_back(claimed.into_iter().map(|(member, _)| member));
            return Err(db_error(error));
        }
        for (member, claimed) in claimed {
            self.counters.claimed(&claimed.todo.identity.queue, claimed.admission.is_some_and(|a| a.used.is_some()));
            member.answer(Ok(ClaimNext::Claimed(Box::new(claimed))));
        }
        Ok(true)
    }

    /// Steps 4–6 for the locked `candidates`, offered to the claimers in turn: each claimer
    /// still waiting takes the next candidate, and a claimer gone by now is left out (REQ-13),
    /// its candidate going to the next. Returns the claims made (not yet committed) with their
    /// claimers, and the reason the first refused claimer was refused; it and those after it
    /// stay first in `turns`.
    async fn admit_in_turn(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        candidates: &[Candidate],
        policy: PolicyLock,
        turns: &mut Turns,
        plan: ClaimPlan,
    ) -> Result<(Vec<(Member, Claimed)>, Option<Reason>)> {
        let mut members: Vec<Member> = candidates.iter().map_while(|_| turns.next()).collect();
        let offers: Vec<Offer<'_>> = candidates
            .iter()
            .zip(&members)
            .map(|(candidate, member)| {
                (candidate, Claimant { actor: &member.actor, lease_seconds: member.lease_seconds })
            })
            .collect();
        let outcome = self.admit_and_claim(tx, &offers, policy, plan).await;
        drop(offers);
        match outcome {
            Ok(Admission { claimed, refused }) => {
                turns.put_back(members.split_off(claimed.len()));
                Ok((members.into_iter().zip(claimed).collect(), refused.map(|refusal| refusal.reason)))
            }
            Err(error) => {
                turns.put_back(members);
                Err(error)
            }
        }
    }

    pub(crate) async fn claim_tx(&self, actor: &Actor, id: &str, lease_seconds: i64) -> Result<Claimed> {
        let plan = ClaimPlan::now();
        let mut tx = self.begin().await?;

        // 1. Lock the named todo, waiting for any claimer that holds it.
        let locked = async {
            let todo = lock_todo(&mut tx, id, actor.reach()).await?;
            actor.check_todo_access(&todo.identity)?;
            let takes_over = todo.state == TodoState::Claimed;
            Ok(Candidate { id: todo.id.clone(), identity: todo.identity.clone(), named: Some(todo), takes_over })
        }
        .await;
        let candidate = or_rollback!(tx, locked);

        // 2–6.
        let policy = lock_policy(&mut tx, &candidate.identity, plan).await;
        let offer = (&candidate, Claimant { actor, lease_seconds });
        let Admission { claimed, refused } =
            or_rollback!(tx, self.admit_and_claim(&mut tx, &[offer], policy, plan).await);
        if let Some(claimed) = claimed.into_iter().next() {
            tx.commit().await.map_err(db_error)?;
            self.counters.claimed(&claimed.todo.identity.queue, claimed.admission.is_some_and(|a| a.used.is_some()));
            return Ok(claimed);
        }
        tx.rollback().await.map_err(db_error)?;
        let Refusal { reason, hint, now } = refused.expect("a claim neither made nor refused");
        self.counters.refused(&candidate.identity.queue, reason);
        self.watch_refused(std::slice::from_ref(&candidate.identity)).await;
        Err(deferred_error(&candidate.identity, reason, hint, now))
    }

    /// Steps 4–6 for candidates this transaction has locked, all of one queue, each offered to
    /// its claimant in turn, with the queue's policy as steps 2–3 found and locked it. One clock
    /// reading, in-flight count and usage read under the lock serve every offer: `decide` runs
    /// for each in turn, seeing the claims admitted before it (`decide_in_turn`), and the
    /// admitted ones are claimed and charged in one statement.
    async fn admit_and_claim(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        offers: &[Offer<'_>],
        policy: PolicyLock,
        plan: ClaimPlan,
    ) -> Result<Admission> {
        let Some(&(first, _)) = offers.first() else { return Ok(Admission { claimed: vec![], refused: None }) };
        // 2–3. The policy, locked; none → the base claim, taking no admission lock.
        let locked = match policy {
            Ok(locked) => locked,
            Err(error) => {
                // REQ-9: a policy that cannot be read refuses this queue's candidates, and only them.
                tracing::warn!(%error, queue = %first.identity, "admission policy unreadable; refusing (fail closed)");
                return Ok(unavailable());
            }
        };
        let Some(locked) = locked else {
            return self.claim_unbudgeted(tx, offers).await;
        };
        let policy = match &locked.evaluated {
            Ok(policy) => policy,
            Err(_) if plan.fails_open_on_invalid_policy => {
                return self.claim_unbudgeted(tx, offers).await;
            }
            Err(problem) => {
                // A named todo that is not claimable anyway (done, held) says so first, as it
                // does in a queue whose policy reads fine.
                if first.named.is_some() {
                    check_claimable(first, self.clock_after_lock(tx).await?)?;
                }
                tracing::warn!(%problem, policy = %locked.id, queue = %first.identity, "admission policy invalid; refusing (fail closed)");
                return Ok(unavailable());
            }
        };

        // 4. The clock after the lock, then in-flight and usage under it.
        let observed = self.observe(tx, policy, &first.identity, plan).await?;
        for (candidate, _) in offers {
            check_claimable(candidate, observed.now)?;
        }

        // 5. Decide, offer by offer.
        let takes_over: Vec<bool> =
            offers.iter().map(|(candidate, _)| plan.takeover_leaves_itself_out(candidate.takes_over)).collect();
        let in_turn = admission::decide_in_turn(policy, &observed, &takes_over, |used| plan.used_for_decision(used));
        let refused = in_turn.refused.map(|(reason, seen)| Refusal {
            reason,
            hint: admission::status(policy, &seen).hint,
            now: Some(observed.now),
        });
        let admitted = in_turn.admitted.len();
        if admitted == 0 {
            return Ok(Admission { claimed: vec![], refused });
        }

        // 6. Claim the admitted ones and charge one unit each.
        let charged_window = policy.charged_window(observed.now);
        let (charged, units) = charges(tx, &offers[..admitted], charged_window, plan).await?;
        let charge = charged_window.filter(|_| units > 0).map(|(start, _)| Charge {
            window_start: start,
            units,
            additional: if plan.charges_one_window_only {
                (vec![], vec![])
            } else {
                super::additional_windows::current_windows(policy, observed.now)
            },
        });
        let (todos, used_after) = claim_locked(tx, &offers[..admitted], observed.now, charge).await?;
        if let Some(used) = used_after
            && !plan.over_admits_on_purpose()
        {
            for (slot, max, _) in policy.windows() {
                let charged = used.of(slot);
                assert!(charged <= max, "over-admission: charged {charged} > max_claims {max} of window {slot}");
            }
        }
        let used_before = used_after.map(|used| minus_units(used, units, policy));
        let claimed = with_headroom(policy, charged_window, todos, &charged, &in_turn.admitted, used_before);
        // REQ-8 (issue #28): a claim that leaves no room defers the queue; the reopen watch is
        // recorded in this transaction, whatever surface the claim came from.
        if claimed.last().and_then(|c| c.admission.as_ref()).is_some_and(Headroom::leaves_no_room) {
            self.watch_if_waiting(tx, &first.identity, observed.now).await?;
        }
        Ok(Admission { claimed, refused })
    }

    /// The base claim of locked candidates whose queue has no policy: no admission lock, nothing
    /// charged, every offer claimed.
    async fn claim_unbudgeted(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        offers: &[Offer<'_>],
    ) -> Result<Admission> {
        let now = self.clock_after_lock(tx).await?;
        for (candidate, _) in offers {
            check_claimable(candidate, now)?;
        }
        let (todos, _) = claim_locked(tx, offers, now, None).await?;
        let claimed = todos.into_iter().map(|todo| Claimed { todo, admission: None }).collect();
        Ok(Admission { claimed, refused: None })
    }

    /// Step 4: the clock (read after the policy lock), the in-flight count of `identity` (the
    /// candidates that are lapsed claims included), the earliest lease among them, and the usage of the window containing that clock reading.
    /// This must be its own statement, after the lock statement: under READ COMMITTED a
    /// statement's snapshot is taken when it starts, before any lock wait, so counts read in the
    /// locking statement would miss the claim committed by the transaction we waited for.
    async fn observe(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        policy: &Policy,
        identity: &QueueIdentity,
        plan: ClaimPlan,
    ) -> Result<Observation> {
        // Guess the window from this host's clock so one round trip usually suffices; if the
        // database's clock lands in another window, read that window's usage as well.
        let guess = policy.window.as_ref().map(|w| w.window_containing(self.clock.now()));
        // $6 is the guessed window's start. The in-flight count's queue filter is the statement's
        // one variable part: this queue's claims (REQ-4), or every queue of the owner in the
        // plan of the seeded `InFlightAcrossQueues` bug. The claims are read per owner kind (one
        // kind's id is null), each through its in-flight index, as `status_select` explains.
        macro_rules! observe_sql {
            ($in_flight_queues:literal) => {
                concat!(
                    "SELECT coalesce($1::timestamptz, clock_timestamp()), f.n, f.earliest, \
                       (SELECT w.used FROM admission_windows w \
                        WHERE w.owner_id = $5 AND w.queue = $4 AND w.window_start = $6) \
                     FROM (SELECT count(*) AS n, min(t.lease_expires_at) FILTER ( \
                             WHERE t.lease_expires_at >= coalesce($1::timestamptz, clock_timestamp())) AS earliest \
                           FROM (SELECT t.lease_expires_at FROM todos t WHERE t.state = 'claimed' AND ",
                    $in_flight_queues,
                    " AND t.endpoint_id = $2 \
                             UNION ALL SELECT t.lease_expires_at FROM todos t WHERE t.state = 'claimed' AND ",
                    $in_flight_queues,
                    " AND t.team_id = $3) t) f"
                )
            };
        }
        let sql = if plan.in_flight_across_queues { observe_sql!("true") } else { observe_sql!("t.queue = $4") };
        let (now, in_flight, earliest, used): (DateTime<Utc>, i64, Option<DateTime<Utc>>, Option<i32>) =
            sqlx::query_as(sql)
                .bind(self.now_param())
                .bind(identity.endpoint_id())
                .bind(identity.team_id())
                .bind(&identity.queue)
                .bind(identity.owner_id())
                .bind(guess.map(|(start, _)| start))
                .fetch_one(&mut **tx)
                .await
                .map_err(db_error)?;
        let mut used = i64::from(used.unwrap_or(0));
        if let Some(window) = &policy.window {
            let actual = window.window_start(now);
            if guess.map(|(start, _)| start) != Some(actual) {
                let reread: Option<i32> = sqlx::query_scalar(
                    "SELECT used FROM admission_windows WHERE owner_id = $1 AND queue = $2 AND window_start = $3",
                )
                .bind(identity.owner_id())
                .bind(&identity.queue)
                .bind(actual)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db_error)?;
                used = i64::from(reread.unwrap_or(0));
            }
        }
        // Issue #52: a policy with additional windows reads their counters too, under the lock.
        let additional_used = if policy.additional_windows.is_empty() {
            [0; models::admission::ADDITIONAL_WINDOWS_MAX]
        } else {
            super::additional_windows::used_now(&mut **tx, identity, policy, now).await?
        };
        Ok(Observation {
            now,
            in_flight,
            used,
            additional_used,
            // The claim's hint needs no forecast.
            recent: Default::default(),
            earliest_lease_expiry: earliest,
            reaper_interval: self.reaper_interval_chrono(),
        })
    }
}

/// Which admitted offers are charged to `charged_window` (every one, REQ-3; the seeded
/// `ChargePerTodo` bug may leave some out), and how many units that is.
async fn charges(
    tx: &mut Transaction<'static, Postgres>,
    offers: &[Offer<'_>],
    charged_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    plan: ClaimPlan,
) -> Result<(Vec<bool>, i64)> {
    let mut charged = Vec::with_capacity(offers.len());
    for (candidate, _) in offers {
        let charge = charged_window.map(|(start, _)| start);
        charged.push(plan.charge(tx, &candidate.id, charge).await?.is_some());
    }
    let units = charged.iter().filter(|charged| **charged).count() as i64;
    Ok((charged, units))
}

/// `used` before a charge of `units` to every window of `policy`.
fn minus_units(used: Used, units: i64, policy: &Policy) -> Used {
    let mut before = Used { primary: used.primary - units, ..used };
    for entry in before.additional.iter_mut().take(policy.additional_windows.len()) {
        *entry -= units;
    }
    before
}

fn unavailable() -> Admission {
    let refusal =
        Refusal { reason: Reason::AdmissionUnavailable, hint: admission::unavailable_status().hint, now: None };
    Admission { claimed: vec![], refused: Some(refusal) }
}

/// `conflict` with the todo's state when a named todo is not claimable at `now` (a live claim,
/// a finished todo, a retry not yet due).
fn check_claimable(candidate: &Candidate, now: DateTime<Utc>) -> Result<()> {
    match &candidate.named {
        Some(todo) if !todo.claimable_at(now) => {
            Err(Error::conflict_state("the todo is not claimable", todo.state.as_str()))
        }
        _ => Ok(()),
    }
}

/// The claims role on PostgreSQL: the transactions above, and `claim_many.rs`'s batch of them.
impl Claims for PgStore {
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
}
