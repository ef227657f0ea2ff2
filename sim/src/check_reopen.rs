//! The reopenings, derived from the ledger (SPEC-0030 REQ-8; issue #28): every time a queue
//! identity with pending work was deferred and admits claims again, the next reopen pass that
//! sees it admitted must ring each endpoint that drains it, is in and holds a live stream, once.
//!
//! Exists because the push judge (`check_push.rs`) could only check the reopen doorbells against
//! the watches the store itself recorded: a store that forgets to watch rings nothing, and
//! nothing contradicted it. Here the judge decides on its own when a reopening is owed:
//!
//! - a deferral is seen where a store must record the watch in the same transaction: after a
//!   claim that leaves no room, and after a policy write that leaves the identity deferred, while
//!   the ledger shows work surely pending (created or released, not claimed since);
//! - the reopening is answered by the first reopen pass at whose place in the ledger the identity
//!   admits a claim (`check.rs` says so, from the oracle and the ledger's holdings); the pass
//!   must ring every endpoint that drains the identity and surely could be rung (in presence on
//!   either side of the pass, a stream attached and refreshed well within the stale limit);
//! - (b, derived) two reopen doorbells to one endpoint for one identity need a deferral between.
//!
//! Surely pending is a lower bound (a failed or reaped todo may be pending or waiting): the
//! judge asks for a ring only when the store must have work to name.

use chrono::{DateTime, Duration, Utc};
use models::identity::QueueIdentity;
use models::push::{Ring, RingReason, SESSION_STALE_SECONDS};
use std::collections::{BTreeMap, BTreeSet};

/// How far inside the stale limit a stream's last refresh must be for the judge to require a
/// ring on it: the store's pass and the ledger's record of it may read the clock apart.
const LIVE_MARGIN_SECONDS: i64 = 10;

/// What the ledger says of a todo's state, as far as it can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Pending,
    Held,
    /// Failed or reaped: waiting for a retry, dead-lettered or pending again.
    Unsure,
    Done,
}

struct Session {
    endpoint_id: String,
    replica: Option<String>,
    last_seen: DateTime<Utc>,
}

/// The derived reopen judge, fed by `LedgerCheck` in commit order.
pub struct ReopenJudge {
    /// The other owner's endpoint: it drains its own queue, the team's agents every team queue.
    mirror_endpoint: String,
    todos: BTreeMap<String, (QueueIdentity, Known)>,
    sessions: BTreeMap<String, Session>,
    /// Identities seen deferred with work surely pending, since when, not yet answered.
    owed: BTreeMap<QueueIdentity, DateTime<Utc>>,
    /// How many deferrals the ledger showed per identity.
    deferrals: BTreeMap<QueueIdentity, u64>,
    /// The deferral count at each endpoint's last reopen doorbell for an identity.
    last_reopen: BTreeMap<(String, QueueIdentity), u64>,
    /// Reopenings that owed at least one endpoint a ring (what the run exercised).
    pub judged: u64,
    pub violations: Vec<String>,
}

impl ReopenJudge {
    pub fn new(mirror_endpoint: String) -> ReopenJudge {
        ReopenJudge {
            mirror_endpoint,
            todos: BTreeMap::new(),
            sessions: BTreeMap::new(),
            owed: BTreeMap::new(),
            deferrals: BTreeMap::new(),
            last_reopen: BTreeMap::new(),
            judged: 0,
            violations: vec![],
        }
    }

    pub fn created(&mut self, id: &str, identity: &QueueIdentity, deduped: bool) {
        if !deduped {
            self.todos.insert(id.to_string(), (identity.clone(), Known::Pending));
        }
    }

    pub fn claimed(&mut self, id: &str) {
        self.set(id, Known::Held);
    }

    pub fn ended(&mut self, id: &str, how: &str) {
        let known = match how {
            "complete" => Known::Done,
            "release" => Known::Pending,
            _ => Known::Unsure,
        };
        self.set(id, known);
    }

    /// The reaper returned or dead-lettered these lapsed claims.
    pub fn reaped(&mut self, ids: &[String]) {
        ids.iter().for_each(|id| self.set(id, Known::Unsure));
    }

    fn set(&mut self, id: &str, known: Known) {
        if let Some(entry) = self.todos.get_mut(id) {
            entry.1 = known;
        }
    }

    fn surely_pending(&self, identity: &QueueIdentity) -> usize {
        self.todos.values().filter(|(of, known)| of == identity && *known == Known::Pending).count()
    }

    pub fn session_attached(&mut self, session_id: &str, endpoint_id: &str, replica: &str, at: DateTime<Utc>) {
        let session =
            Session { endpoint_id: endpoint_id.to_string(), replica: Some(replica.to_string()), last_seen: at };
        self.sessions.insert(session_id.to_string(), session);
    }

    pub fn session_detached(&mut self, session_id: &str, replica: &str) {
        if let Some(session) = self.sessions.get_mut(session_id).filter(|s| s.replica.as_deref() == Some(replica)) {
            session.replica = None;
        }
    }

    pub fn session_closed(&mut self, session_id: &str) {
        self.sessions.remove(session_id);
    }

    pub fn sessions_refreshed(&mut self, replica: &str, alive: &[String], at: DateTime<Utc>) {
        for id in alive {
            if let Some(session) = self.sessions.get_mut(id) {
                session.replica = Some(replica.to_string());
                session.last_seen = at;
            }
        }
    }

    fn surely_live(&self, endpoint_id: &str, at: DateTime<Utc>) -> bool {
        let since = at - Duration::seconds(SESSION_STALE_SECONDS - LIVE_MARGIN_SECONDS);
        self.sessions.values().any(|s| s.endpoint_id == endpoint_id && s.replica.is_some() && s.last_seen >= since)
    }

    fn drains(&self, endpoint_id: &str, identity: &QueueIdentity) -> bool {
        match identity.team_id() {
            Some(_) => endpoint_id != self.mirror_endpoint,
            None => endpoint_id == self.mirror_endpoint,
        }
    }

    /// The ledger shows `identity` deferred right after a claim, a policy write or a damaged
    /// row; `watched` when the store must have recorded the watch in that transaction.
    pub fn deferred(&mut self, identity: &QueueIdentity, at: DateTime<Utc>, watched: bool) {
        *self.deferrals.entry(identity.clone()).or_default() += 1;
        if watched && self.surely_pending(identity) > 0 {
            self.owed.entry(identity.clone()).or_insert(at);
        }
    }

    /// The identities whose reopening is owed, for `LedgerCheck` to say which admit now.
    pub fn owed(&self) -> Vec<QueueIdentity> {
        self.owed.keys().cloned().collect()
    }

    /// A reopen pass at `at`: `admitted` are the owed identities that admit a claim there, and
    /// `surely_in` says whether an endpoint was in presence around `at`.
    pub fn reopen_pass(
        &mut self,
        rings: &[Ring],
        at: DateTime<Utc>,
        admitted: &BTreeSet<QueueIdentity>,
        surely_in: impl Fn(&str) -> bool,
    ) {
        let mut rung: BTreeSet<(String, QueueIdentity)> = BTreeSet::new();
        for ring in rings.iter().filter(|r| r.reason == RingReason::Reopen) {
            let Some((identity, _)) = ring.todo_id.as_ref().and_then(|id| self.todos.get(id)) else { continue };
            let key = (ring.endpoint_id.clone(), identity.clone());
            let deferrals = self.deferrals.get(identity).copied().unwrap_or(0);
            if self.last_reopen.insert(key.clone(), deferrals) == Some(deferrals) {
                self.violations.push(format!(
                    "(b) reopen rung twice: endpoint {} was rung for {identity:?} at {at} with no deferral since its \
                     last reopen doorbell",
                    ring.endpoint_id
                ));
            }
            rung.insert(key);
        }
        for identity in admitted {
            let Some(since) = self.owed.remove(identity) else { continue };
            if self.surely_pending(identity) == 0 {
                continue;
            }
            let endpoints: BTreeSet<&str> = self.sessions.values().map(|s| s.endpoint_id.as_str()).collect();
            let owed_to: Vec<&str> = endpoints
                .into_iter()
                .filter(|endpoint| self.drains(endpoint, identity) && self.surely_live(endpoint, at))
                .filter(|endpoint| surely_in(endpoint))
                .collect();
            self.judged += u64::from(!owed_to.is_empty());
            let missed: Vec<String> = owed_to
                .into_iter()
                .filter(|endpoint| !rung.contains(&(endpoint.to_string(), identity.clone())))
                .map(|endpoint| {
                    format!(
                        "(f) reopening not rung: {identity:?} was deferred from {since} with work pending and admits \
                         claims at {at}, but the reopen pass did not ring endpoint {endpoint} (in, stream live)"
                    )
                })
                .collect();
            self.violations.extend(missed);
        }
    }
}
