//! Database faults and the ground-truth ledger (`ledger.rs`), as a wrapper around any `Store`.
//!
//! Exists so the simulation can inject the failures a real database has (an error before the
//! transaction, a commit whose acknowledgement is lost, latency) identically on `ModelStore` and
//! on the Postgres bridge: the fault decisions come from the simulation's seeded generator, in
//! the order the calls arrive, so the differential run sees the same faults on both stores.
//! The wrapper also records what actually committed (before a lost acknowledgement hides it from
//! the caller): the invariant checks read this ledger, never the clients' view.

pub use crate::ledger::Event;
pub use crate::rng::Rng;
use crate::sim_time::SimClock;
use models::error::{Error, Result};
use models::push::PushReport;
use models::scope::Actor;
use models::store::{Claimed, Store};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

mod store_impl;

/// How often the database misbehaves, per call, in thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRates {
    /// The call fails before anything happens (a connection error).
    pub error_per_mille: u64,
    /// The call commits, then the answer is lost (a crash between commit and reply).
    pub lost_ack_per_mille: u64,
    /// The call is delayed by up to this much simulated time.
    pub latency_ms_max: u64,
}

impl FaultRates {
    pub const NONE: FaultRates = FaultRates { error_per_mille: 0, lost_ack_per_mille: 0, latency_ms_max: 0 };
    pub const ALL: FaultRates = FaultRates { error_per_mille: 30, lost_ack_per_mille: 30, latency_ms_max: 40 };
}

/// What the wrapper injected, for the run's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injected {
    /// Requests or answers lost on a cut replica–database link.
    pub link_losses: u64,
    pub errors: u64,
    pub lost_acks: u64,
    pub delays: u64,
}

struct State {
    rng: Rng,
    rates: FaultRates,
    injected: Injected,
    ledger: Vec<Event>,
    /// Replicas whose link to the database is cut (a partition between them and the database).
    cut_links: std::collections::BTreeSet<usize>,
}

/// `S` with faults and a ledger. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Faulty<S: Store> {
    inner: S,
    clock: SimClock,
    state: Arc<Mutex<State>>,
    /// The replica whose database connection this handle is (None: set-up and checks).
    link: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A read: it can fail or be slow; there is nothing to lose.
    Read,
    /// A transaction that writes: it can also commit and lose its acknowledgement.
    Write,
}

impl<S: Store> Faulty<S> {
    /// Starts with no faults: set-up runs clean; `arm` turns them on.
    pub fn new(inner: S, clock: SimClock, seed: u64) -> Faulty<S> {
        let state = State {
            rng: Rng::new(seed),
            rates: FaultRates::NONE,
            injected: Injected::default(),
            ledger: vec![],
            cut_links: Default::default(),
        };
        Faulty { inner, clock, state: Arc::new(Mutex::new(state)), link: None }
    }

    /// This store as replica `replica` reaches it: over a link the simulation can cut.
    pub fn via(&self, replica: usize) -> Faulty<S> {
        Faulty { link: Some(replica), ..self.clone() }
    }

    /// Cuts (or repairs) replica `replica`'s link to the database: while cut, its requests are
    /// lost on the way, and an answer on the way back is lost after the commit.
    pub fn cut_link(&self, replica: usize, cut: bool) {
        let mut state = self.lock();
        if cut {
            state.cut_links.insert(replica);
        } else {
            state.cut_links.remove(&replica);
        }
    }

    fn link_cut(&self) -> bool {
        self.link.is_some_and(|replica| self.lock().cut_links.contains(&replica))
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The simulation's clock, as the store reads it.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.follow()
    }

    pub fn arm(&self, rates: FaultRates) {
        self.lock().rates = rates;
    }

    pub fn injected(&self) -> Injected {
        self.lock().injected
    }

    pub fn ledger(&self) -> Vec<Event> {
        self.lock().ledger.clone()
    }

    /// `read` on the ledger as it stands, without copying it (the judge reads it every few
    /// simulated seconds; a copy each time was a tenth of a seed's CPU).
    pub fn with_ledger<R>(&self, read: impl FnOnce(&[Event]) -> R) -> R {
        read(&self.lock().ledger)
    }

    pub fn record(&self, event: Event) {
        self.lock().ledger.push(event);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs one store call under the fault plan; `note` records what committed.
    async fn guarded<T>(
        &self,
        kind: Kind,
        call: impl Future<Output = Result<T>>,
        note: impl FnOnce(&T, &mut Vec<Event>),
    ) -> Result<T> {
        let (delay_ms, fail_before, lose_ack) = {
            let mut state = self.lock();
            let rates = state.rates;
            let delay = if rates.latency_ms_max > 0 { state.rng.below(rates.latency_ms_max + 1) } else { 0 };
            let fail = state.rng.chance(rates.error_per_mille);
            let lose = kind == Kind::Write && state.rng.chance(rates.lost_ack_per_mille);
            if delay > 0 {
                state.injected.delays += 1;
            }
            (delay, fail, lose)
        };
        // Half the latency on the way there, half on the way back; a cut link loses the message.
        if delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(delay_ms.div_ceil(2))).await;
        }
        if self.link_cut() {
            self.lock().injected.link_losses += 1;
            return Err(Error::unavailable("the database is unavailable (link cut)"));
        }
        if fail_before {
            self.lock().injected.errors += 1;
            return Err(Error::unavailable("the database is unavailable (injected)"));
        }
        let answer = call.await;
        if let Ok(value) = &answer {
            note(value, &mut self.lock().ledger);
        }
        if delay_ms > 1 {
            tokio::time::sleep(Duration::from_millis(delay_ms / 2)).await;
        }
        if self.link_cut() {
            self.lock().injected.link_losses += 1;
            return Err(Error::unavailable("the database connection was lost (link cut, after the call)"));
        }
        if lose_ack {
            self.lock().injected.lost_acks += 1;
            return Err(Error::unavailable("the database connection was lost (injected, after commit)"));
        }
        answer
    }

    fn claimed_event(&self, actor: &Actor, claimed: &Claimed) -> Event {
        Event::Claimed {
            id: claimed.todo.id.clone(),
            identity: claimed.todo.identity.clone(),
            holder: actor.label(),
            at: self.clock.follow(),
            lease_expires_at: claimed.todo.lease_expires_at,
            attempt: claimed.todo.attempt,
            admission: claimed.admission,
        }
    }
}

fn nothing<T>(_: &T, _: &mut Vec<Event>) {}

impl<S: Store> Faulty<S> {
    /// What a push pass decided, when it decided anything.
    fn pushed(&self, pass: &'static str, report: &PushReport, ledger: &mut Vec<Event>) {
        if !report.rings.is_empty() || report.hook_calls_enqueued > 0 || pass == "reopen" {
            ledger.push(Event::Pushed {
                pass,
                rings: report.rings.clone(),
                hook_calls: report.hook_calls_enqueued,
                at: self.clock.follow(),
            });
        }
    }
}
