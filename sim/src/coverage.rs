//! What a run exercised, measured from its trace's events, its ledger and the hook outbox, so the tests
//! can require that budgets bound, leases lapsed, faults hit and every kind of push happened: an
//! invariant that held only because nothing exercised it proves nothing.

use crate::faults::Event;
use crate::replies::Heard;
use crate::trace::{TraceEvent, TraceLine};
use chrono::{DateTime, Utc};
use models::model_store::OutboxEntry;
use std::collections::BTreeMap;

/// What a run exercised, so tests can require that budgets bound, leases lapsed and faults hit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Claims refused, by reason, as the agents were told (deferred lists and errors).
    pub refusals: BTreeMap<String, u64>,
    /// Claims of a todo another holder had claimed before (after its lease lapsed).
    pub takeovers: u64,
    pub owner_writes_ok: u64,
    pub redeliveries_deduped: u64,
    pub foreign_probes: u64,
    /// Doorbells decided, by reason (REQ-8), as the ledger recorded the push passes.
    pub rings: BTreeMap<&'static str, u64>,
    /// Push passes that withheld work because its queue identity was deferred (REQ-8).
    pub withheld_deferred: u64,
    /// Hook calls by how they ended (`pending` for one still open when the run ended).
    pub hook_calls: BTreeMap<String, u64>,
    /// Agents clocking in or out, and streams a crashed replica took down.
    pub presence_changes: u64,
    pub streams_broken: u64,
    /// Reopenings the derived judge (`check_reopen.rs`) owed a ring to at least one endpoint.
    pub reopenings_judged: u64,
}

impl Coverage {
    pub fn add(&mut self, other: &Coverage) {
        for (reason, count) in &other.refusals {
            *self.refusals.entry(reason.clone()).or_default() += count;
        }
        self.takeovers += other.takeovers;
        self.owner_writes_ok += other.owner_writes_ok;
        self.redeliveries_deduped += other.redeliveries_deduped;
        self.foreign_probes += other.foreign_probes;
        for (reason, count) in &other.rings {
            *self.rings.entry(reason).or_default() += count;
        }
        self.withheld_deferred += other.withheld_deferred;
        for (outcome, count) in &other.hook_calls {
            *self.hook_calls.entry(outcome.clone()).or_default() += count;
        }
        self.presence_changes += other.presence_changes;
        self.streams_broken += other.streams_broken;
        self.reopenings_judged += other.reopenings_judged;
    }

    pub(crate) fn measure(trace: &[TraceLine], ledger: &[Event], outbox: &[OutboxEntry]) -> Coverage {
        let mut coverage = Coverage::default();
        for line in trace {
            for reason in line.event.refusal_reasons() {
                *coverage.refusals.entry(reason.to_string()).or_default() += 1;
            }
            match &line.event {
                TraceEvent::OwnerWrite { .. } => {
                    coverage.owner_writes_ok += u64::from(line.event.owner_write_status() == Some(200));
                }
                TraceEvent::Delivery { reply: Heard::Answer(answer), .. } => {
                    coverage.redeliveries_deduped += u64::from(answer.deduped == serde_json::json!(true));
                }
                TraceEvent::ForeignClaim(_) => coverage.foreign_probes += 1,
                TraceEvent::PushPass(pass) => coverage.withheld_deferred += u64::from(pass.withheld_deferred > 0),
                TraceEvent::PresenceChanged { .. } => coverage.presence_changes += 1,
                TraceEvent::StreamBroke { .. } => coverage.streams_broken += 1,
                _ => {}
            }
        }
        for call in outbox {
            *coverage.hook_calls.entry(call.outcome.clone().unwrap_or_else(|| "pending".into())).or_default() += 1;
        }
        // A takeover is a claim of a todo whose previous claim neither ended nor was reaped (its
        // lease lapsed and another claimer took it over).
        let mut held: BTreeMap<&str, Option<DateTime<Utc>>> = BTreeMap::new();
        for event in ledger {
            match event {
                Event::Claimed { id, lease_expires_at, .. } => {
                    coverage.takeovers += u64::from(held.insert(id.as_str(), *lease_expires_at).is_some());
                }
                Event::Heartbeat { id, lease_expires_at } => {
                    if let Some(lease) = held.get_mut(id.as_str()) {
                        *lease = *lease_expires_at;
                    }
                }
                Event::Ended { id, .. } => {
                    held.remove(id.as_str());
                }
                Event::Reaped { at, .. } => held.retain(|_, lease| !lease.is_some_and(|lease| lease < *at)),
                Event::Pushed { rings, .. } => {
                    for ring in rings {
                        *coverage.rings.entry(ring.reason.as_str()).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        coverage
    }
}
