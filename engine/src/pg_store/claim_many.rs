//! `claim_next {max}` (issue #31 item 2): up to `max` claims for one caller, each decided and
//! charged in turn exactly as that many `claim_next` calls one after another would be. A single
//! `claim_next` is a batch of one.
//!
//! Exists so an agent draining a queue pays one request, one statement and one commit for many
//! todos instead of one each. It adds no admission rule of its own: the unbudgeted todos at the
//! head of the queue set are claimed by the one-statement path (`claim_unbudgeted.rs`, with a
//! limit), and from the first budgeted candidate on the claims take seats in the set's group
//! claim (`groups.rs`), which decides them one after another under one policy lock, as it
//! decides concurrent claimers'. On one queue every seat joins one group claim (one
//! transaction); across several, a group claim's candidates would all come from the oldest
//! candidate's queue, which is not the order claims one after another take, so there the seats
//! go one at a time.

use super::{PgStore, QueueSetHint};
use models::error::Result;
use models::identity::QueueIdentity;
use models::scope::Actor;
use models::store::{ClaimNext, Claimed, ClaimedMany};

impl PgStore {
    pub(crate) async fn claim_next_many_tx(
        &self,
        actor: &Actor,
        queues: &[QueueIdentity],
        lease_seconds: i64,
        max: usize,
    ) -> Result<ClaimedMany> {
        let mut many = ClaimedMany::default();
        if queues.is_empty() {
            return Ok(many);
        }
        let set = QueueSetHint::fingerprint(queues);
        // A pass may wait up to the lock timeout for its group; once a claim is in hand, no pass
        // starts after one such wait more, so the answer (every claim made) comes back well
        // inside the request's time and none is lost to it.
        let started = std::time::Instant::now();
        while many.claimed.len() < max {
            if !many.claimed.is_empty() && started.elapsed() >= self.claim_groups.wait() {
                break;
            }
            let wanted = max - many.claimed.len();
            // Queues without a policy: steps 1, 2 and the claims in a single statement. A queue
            // set whose oldest candidate was budgeted last time goes straight to the group claim,
            // which handles an unbudgeted candidate too (the hint only saves a statement).
            if !self.budgeted_hint.contains(set) {
                let path = self.claim_next_unbudgeted(actor, queues, lease_seconds, wanted).await;
                let path = match path {
                    Ok(path) => path,
                    Err(error) if many.claimed.is_empty() => return Err(error),
                    Err(_) => break,
                };
                for todo in path.claimed {
                    self.counters.claimed(&todo.identity.queue, false);
                    many.claimed.push(Claimed { todo, admission: None });
                }
                if !path.budgeted_next {
                    break;
                }
                self.budgeted_hint.mark(set, true);
                continue;
            }
            // A group claim takes its candidates from the oldest candidate's queue, which is the
            // order claims one after another take only when there is one queue: then every seat
            // joins one group claim; across several queues, one seat at a time.
            let seats = if queues.len() == 1 { wanted } else { 1 };
            let answers = self.claim_groups.claim_next_many(self, set, actor, queues, lease_seconds, seats).await;
            if !take_answers(answers, &mut many)? {
                break;
            }
            if many.claimed.last().is_some_and(|claimed| claimed.admission.is_none()) {
                self.budgeted_hint.mark(set, false);
            }
        }
        Ok(many)
    }
}

/// Adds a group claim's answers to `many`: whether to go on claiming. Every claim made is
/// kept, whatever came after it (a committed claim whose answer is dropped would only come
/// back when its lease lapses); an empty answer ends the batch with its deferred list; an
/// error ends it, and is the answer when nothing was claimed.
fn take_answers(answers: Vec<Result<ClaimNext>>, many: &mut ClaimedMany) -> Result<bool> {
    let mut go_on = true;
    let mut first_error = None;
    for answer in answers {
        match answer {
            Ok(ClaimNext::Claimed(claimed)) => many.claimed.push(*claimed),
            Ok(ClaimNext::Empty { deferred }) => {
                if go_on {
                    many.deferred = deferred;
                }
                go_on = false;
            }
            Err(error) => {
                first_error.get_or_insert(error);
                go_on = false;
            }
        }
    }
    match first_error {
        Some(error) if many.claimed.is_empty() => Err(error),
        _ => Ok(go_on),
    }
}
