//! Admission policies in memory (`engine/src/pg_store/admission.rs`): set, replace and clear with
//! an audit record, the status of each budgeted queue identity derived when read, the policy
//! detail, and usage pruning.
//!
//! Governing: SPEC-0030 REQ-1 (the policy, usage retention), REQ-5 (usage per window start),
//! REQ-6 (status derived, never stored), REQ-9 (a row that does not evaluate is unavailable),
//! REQ-10 (full replace, audited); REQ-3 and issue #28 (no policy change removes a charge).

use super::{ModelStore, PolicyRow, State, database_error, queue_name_ok};
use crate::admission::{self, MAX_CLAIMS_PER_WINDOW_LIMIT, MAX_IN_FLIGHT_LIMIT, Observation, Policy};
use crate::error::{Error, Result};
use crate::identity::QueueIdentity;
use crate::limits::{CHARGE_LEDGER_RETENTION_DAYS, DETAIL_AUDIT_MAX, DETAIL_WINDOWS_MAX, USAGE_RETENTION_DAYS};
use crate::scope::Reach;
use crate::store::{AuditRecord, Policies, PolicyActor, PolicyDetail, QueueAdmission};
use crate::todo::TodoState;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

/// How many pending todos a status read counts: all (REQ-7), or only whether there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pending {
    Count,
    AnyAtAll,
}

impl PolicyRow {
    /// REQ-9: the stored row through the same validation `PgStore` applies on every read.
    pub(super) fn evaluate(&self) -> std::result::Result<Policy, String> {
        Policy::from_stored(
            self.max_in_flight,
            self.max_claims_per_window,
            self.window_period.as_deref(),
            self.window_tz.as_deref(),
            self.window_start.as_deref(),
            self.window_weekday.as_deref(),
            self.additional_windows.as_ref(),
        )
    }

    /// The row as the audit's `before` records it (`locked_policy_json`): raw columns, not the
    /// evaluated policy, so a corrupt row is audited as it was.
    pub(super) fn raw_json(&self) -> Value {
        let mut raw = json!({
            "max_in_flight": self.max_in_flight,
            "max_claims_per_window": self.max_claims_per_window,
            "window": self.window_period.as_ref().map(|period| json!({
                "period": period, "tz": self.window_tz, "start": self.window_start, "weekday": self.window_weekday,
            })),
        });
        if let (Some(additional), Some(map)) = (&self.additional_windows, raw.as_object_mut()) {
            map.insert("additional_windows".into(), additional.clone());
        }
        raw
    }
}

impl ModelStore {
    /// REQ-6, REQ-7: status of each identity in `identities` that has a policy.
    pub(super) fn admissions_of(
        &self,
        state: &State,
        identities: &[QueueIdentity],
        pending: Pending,
    ) -> Vec<QueueAdmission> {
        if identities.is_empty() {
            return vec![];
        }
        self.admissions_where(state, pending, |p| identities.contains(&p.identity))
    }

    /// REQ-10: every policy on the endpoints and teams of a reach.
    pub(super) fn reach_admissions_tx(&self, reach: &Reach) -> Vec<QueueAdmission> {
        let state = self.lock();
        self.admissions_where(&state, Pending::Count, |p| reach.contains(&p.identity))
    }

    /// REQ-12: every policy of every owner, ordered `p.queue, p.id`.
    pub(super) fn all_admissions_tx(&self) -> Vec<QueueAdmission> {
        let state = self.lock();
        let now = self.clock.now();
        let mut rows: Vec<&PolicyRow> = state.policies.iter().collect();
        rows.sort_by(|a, b| (&a.identity.queue, &a.id).cmp(&(&b.identity.queue, &b.id)));
        rows.into_iter().map(|row| self.evaluate_row(&state, row, now, Pending::Count)).collect()
    }

    fn admissions_where(
        &self,
        state: &State,
        pending: Pending,
        matches: impl Fn(&PolicyRow) -> bool,
    ) -> Vec<QueueAdmission> {
        let now = self.clock.now();
        let mut rows: Vec<&PolicyRow> = state.policies.iter().filter(|p| matches(p)).collect();
        // `ORDER BY p.endpoint_id, p.team_id, p.queue` (NULLs last, text bytewise) is the derived
        // order of `QueueIdentity`: endpoints before teams, then by id, then by queue.
        rows.sort_by(|a, b| a.identity.cmp(&b.identity));
        rows.into_iter().map(|row| self.evaluate_row(state, row, now, pending)).collect()
    }

    /// REQ-6: the status derived from what is observed now; REQ-9: unavailable when the row
    /// does not evaluate.
    fn evaluate_row(&self, state: &State, row: &PolicyRow, now: DateTime<Utc>, pending: Pending) -> QueueAdmission {
        let evaluated = row.evaluate();
        // One pass over the todos: the identity's pending count and its todos in flight.
        let (mut pending_count, mut in_flight) = (0_i64, Vec::new());
        for todo in state.todos.values() {
            match todo.state {
                TodoState::Pending if todo.identity == row.identity => pending_count += 1,
                TodoState::Claimed if todo.identity == row.identity => in_flight.push(todo),
                _ => {}
            }
        }
        // Takeover candidates: claimable again (`Todo::claimable_at`), yet counted in flight.
        let lapsed = in_flight.iter().filter(|t| t.claimable_at(now)).count() as i64;
        let used =
            evaluated.as_ref().map_or_else(|_| Default::default(), |policy| state.used(&row.identity, policy, now));
        let status = match &evaluated {
            Ok(policy) => admission::status(
                policy,
                &Observation {
                    now,
                    in_flight: in_flight.len() as i64,
                    used: used.primary,
                    additional_used: used.additional,
                    recent: state.recent_charges(&row.identity, now),
                    earliest_lease_expiry: in_flight
                        .iter()
                        .filter_map(|t| t.lease_expires_at)
                        .filter(|l| *l >= now)
                        .min(),
                    reaper_interval: self.reaper_interval_chrono(),
                },
            ),
            Err(_) => admission::unavailable_status(),
        };
        QueueAdmission {
            identity: row.identity.clone(),
            policy_id: row.id.clone(),
            policy: evaluated.ok(),
            status,
            pending: match pending {
                Pending::Count => pending_count,
                Pending::AnyAtAll => pending_count.min(1),
            },
            lapsed,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }

    /// REQ-10: the policy, its recent windows (newest first) and its audit tail.
    pub(super) fn policy_detail_tx(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        let state = self.lock();
        let admission = self
            .admissions_of(&state, std::slice::from_ref(identity), Pending::Count)
            .pop()
            .ok_or_else(Error::not_found)?;
        let mut windows: Vec<(DateTime<Utc>, i64)> = state
            .usage
            .iter()
            .filter(|((owner, slot, _), _)| owner == identity && *slot == 0)
            .map(|((_, _, start), used)| (*start, *used))
            .collect();
        windows.sort_by_key(|(start, _)| std::cmp::Reverse(*start));
        windows.truncate(DETAIL_WINDOWS_MAX as usize);
        let audit = state.audit_of(identity, DETAIL_AUDIT_MAX);
        Ok(PolicyDetail { admission, windows, audit })
    }

    /// REQ-10: full replace (or create), audited; takes effect on the next claim. The charges stay
    /// with the identity, and the counter of the window the new definition places now in is
    /// rebuilt from the ledger, so a redefinition counts the claims already in it (issue #28).
    pub(super) fn set_policy_tx(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        let mut state = self.lock();
        let now = self.clock.now();
        let window = policy.window.as_ref();
        let max_in_flight = policy.max_in_flight.map(|v| v as i32);
        let max_claims_per_window = policy.max_claims_per_window.map(|v| v as i32);
        let in_range = |value: Option<i32>, max: i64| value.is_none_or(|v| (0..=max).contains(&i64::from(v)));
        // The table's CHECKs and foreign keys.
        if !state.owner_exists(identity)
            || !queue_name_ok(&identity.queue)
            || !in_range(max_in_flight, MAX_IN_FLIGHT_LIMIT)
            || !in_range(max_claims_per_window, MAX_CLAIMS_PER_WINDOW_LIMIT)
            || (max_in_flight.is_none() && max_claims_per_window.is_none())
            || actor.human_id.as_deref().is_some_and(|human| !state.human_exists(human))
        {
            return Err(database_error());
        }
        let existing = state.policies.iter_mut().find(|p| &p.identity == identity);
        let before = existing.as_ref().map(|row| row.raw_json());
        let row = PolicyRow {
            id: String::new(),
            identity: identity.clone(),
            max_in_flight,
            max_claims_per_window,
            window_period: window.map(|w| w.period_name().to_string()),
            window_tz: window.and_then(|w| w.tz_name()).map(str::to_string),
            window_start: window.and_then(|w| w.start_text()),
            window_weekday: window.and_then(|w| w.weekday_name()).map(str::to_string),
            additional_windows: policy.additional_windows_json(),
            created_at: now,
            updated_at: now,
        };
        match existing {
            Some(stored) => *stored = PolicyRow { id: stored.id.clone(), created_at: stored.created_at, ..row },
            None => {
                let id = state.next_id("ap");
                state.policies.push(PolicyRow { id, ..row });
            }
        }
        if !crate::mutants::hooks::redefinition_starts_at_zero() {
            for (slot, start, end) in policy.charged_windows(now) {
                state.recount_window(identity, slot, (start, end));
            }
        }
        // REQ-8 (issue #28): a write that leaves the identity deferred watches it, in this write.
        let deferred = self
            .admissions_of(&state, std::slice::from_ref(identity), Pending::AnyAtAll)
            .first()
            .is_some_and(|admission| admission.status.hint.is_deferred());
        if deferred && !crate::mutants::hooks::watch_on_refusal_only() {
            state.watch_if_waiting(identity, now);
        }
        let action = if before.is_some() { "update" } else { "create" };
        state.append_audit(identity, actor, action, before, Some(policy.to_json()), now);
        // Read back as any later reader sees it (PgStore reads after commit, at a fresh clock).
        self.admissions_of(&state, std::slice::from_ref(identity), Pending::Count)
            .pop()
            .ok_or_else(|| Error::internal("saved policy vanished"))
    }

    /// REQ-10: deletes a policy (`not_found` if none); its identity's charges and the audit stay.
    pub(super) fn clear_policy_tx(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        let mut state = self.lock();
        let now = self.clock.now();
        let Some(before) = state.policy_of(identity).map(PolicyRow::raw_json) else {
            return Err(Error::not_found());
        };
        state.delete_policies(|p| &p.identity == identity);
        if crate::mutants::hooks::policy_delete_refunds() {
            state.forget_charges(|charged| charged == identity);
        }
        state.append_audit(identity, actor, "delete", Some(before), None, now);
        Ok(())
    }

    /// REQ-10: the audit records of an identity, newest first.
    pub(super) fn policy_audit_tx(&self, identity: &QueueIdentity, limit: i64) -> Vec<AuditRecord> {
        self.lock().audit_of(identity, limit)
    }

    /// Security Requirements: one write against `key`'s limiter, at this store's clock.
    pub(super) fn take_write_token_tx(&self, key: &str, quota: crate::rate::Quota) -> crate::rate::Verdict {
        let mut state = self.lock();
        let verdict = crate::rate::take(state.write_limits.get(key).copied(), self.clock.now(), quota);
        if let crate::rate::Verdict::Admitted { tat } = verdict {
            state.write_limits.insert(key.to_string(), tat);
        }
        verdict
    }

    /// REQ-1: drops usage rows older than the retention.
    pub(super) fn prune_usage_tx(&self) -> u64 {
        let mut state = self.lock();
        let cutoff = self.clock.now() - Duration::days(USAGE_RETENTION_DAYS);
        let before = state.usage.len();
        state.usage.retain(|(_, _, window_start), _| *window_start >= cutoff);
        let ledger_cutoff = self.clock.now() - Duration::days(CHARGE_LEDGER_RETENTION_DAYS);
        state.charges.retain(|(_, minute), _| *minute >= ledger_cutoff);
        let now = self.clock.now();
        state.write_limits.retain(|_, tat| *tat >= now);
        (before - state.usage.len()) as u64
    }
}

impl State {
    pub(super) fn append_audit(
        &mut self,
        identity: &QueueIdentity,
        actor: &PolicyActor,
        action: &str,
        before: Option<Value>,
        after: Option<Value>,
        at: DateTime<Utc>,
    ) {
        self.audit.push(super::AuditRow {
            identity: identity.clone(),
            record: AuditRecord {
                actor_human_id: actor.human_id.clone(),
                actor_endpoint_id: actor.endpoint_id.clone(),
                at,
                action: action.to_string(),
                before,
                after,
            },
        });
    }

    /// `ORDER BY at DESC, id DESC LIMIT clamp(limit, 1, 1000)`; the id is insertion order.
    fn audit_of(&self, identity: &QueueIdentity, limit: i64) -> Vec<AuditRecord> {
        let mut records: Vec<(usize, &AuditRecord)> = self
            .audit
            .iter()
            .enumerate()
            .filter(|(_, a)| &a.identity == identity)
            .map(|(i, a)| (i, &a.record))
            .collect();
        records.sort_by_key(|(seq, record)| std::cmp::Reverse((record.at, *seq)));
        records.into_iter().take(limit.clamp(1, 1000) as usize).map(|(_, record)| record.clone()).collect()
    }
}

/// The policies role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Policies for ModelStore {
    async fn all_admissions_unscoped(&self) -> Result<Vec<QueueAdmission>> {
        Ok(self.all_admissions_tx())
    }

    async fn queue_admissions(&self, identities: &[QueueIdentity]) -> Result<Vec<QueueAdmission>> {
        let state = self.lock();
        Ok(self.admissions_of(&state, identities, Pending::Count))
    }

    async fn reach_admissions(&self, reach: &Reach) -> Result<Vec<QueueAdmission>> {
        Ok(self.reach_admissions_tx(reach))
    }

    async fn policy_detail(&self, identity: &QueueIdentity) -> Result<PolicyDetail> {
        self.policy_detail_tx(identity)
    }

    async fn set_policy(
        &self,
        identity: &QueueIdentity,
        policy: &Policy,
        actor: &PolicyActor,
    ) -> Result<QueueAdmission> {
        self.set_policy_tx(identity, policy, actor)
    }

    async fn clear_policy(&self, identity: &QueueIdentity, actor: &PolicyActor) -> Result<()> {
        self.clear_policy_tx(identity, actor)
    }

    async fn policy_audit(&self, identity: &QueueIdentity, limit: i64) -> Result<Vec<AuditRecord>> {
        Ok(self.policy_audit_tx(identity, limit))
    }

    async fn prune_usage(&self) -> Result<u64> {
        Ok(self.prune_usage_tx())
    }

    async fn take_write_token(&self, key: &str, quota: crate::rate::Quota) -> Result<crate::rate::Verdict> {
        Ok(self.take_write_token_tx(key, quota))
    }
}
