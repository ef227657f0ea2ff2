//! Step 6 of the claim transaction (`claim.rs`): the one statement that claims the offers a
//! transaction admitted, opens their attempts and charges their window and the ledger, and the
//! headroom each claim it made answers with (REQ-7).
//!
//! Its own module so the statement, the longest SQL of the claim path, sits apart from the
//! decisions that lead to it; it claims exactly what it is given.

use super::super::db_error;
use super::super::rows::TodoRow;
use super::super::sql::TODO_COLUMNS;
use super::Offer;
use chrono::{DateTime, Duration, Utc};
use models::admission::{Headroom, Observation, Policy, Used};
use models::error::{Error, Result};
use models::store::Claimed;
use models::todo::Todo;
use sqlx::{Postgres, Transaction};

/// The claimed todo and, when a window was charged, its usage after the charge: the primary
/// window's, and each additional window's by slot.
#[derive(sqlx::FromRow)]
struct ClaimedRow {
    #[sqlx(flatten)]
    todo: TodoRow,
    window_used: Option<i32>,
    additional_slots: Option<Vec<i16>>,
    additional_used: Option<Vec<i32>>,
}

/// The units a claim statement charges, to the window starting at `window_start` and to each
/// additional window (issue #52) as (slots, starts).
pub(super) struct Charge {
    pub(super) window_start: DateTime<Utc>,
    pub(super) units: i64,
    pub(super) additional: (Vec<i16>, Vec<DateTime<Utc>>),
}

/// The claim itself on rows this transaction holds, one per offer: state, lease, attempt + 1,
/// an attempt row (closing a lapsed claimant's), and, with a window limit, `units` charged to the
/// window containing `now`, in its counter and in the ledger (`models::charges`), both keyed by
/// the offers' queue identity, and to each additional window's counter. Returns the todos in offer
/// order and every window's usage after the charge.
pub(super) async fn claim_locked(
    tx: &mut Transaction<'static, Postgres>,
    offers: &[Offer<'_>],
    now: DateTime<Utc>,
    charge: Option<Charge>,
) -> Result<(Vec<Todo>, Option<Used>)> {
    let ids: Vec<&str> = offers.iter().map(|(candidate, _)| candidate.id.as_str()).collect();
    let owners: Vec<String> = offers.iter().map(|(_, claimant)| claimant.actor.label()).collect();
    let claimants: Vec<Option<&str>> = offers.iter().map(|(_, claimant)| claimant.actor.endpoint_id()).collect();
    let leases: Vec<DateTime<Utc>> =
        offers.iter().map(|(_, claimant)| now + Duration::seconds(claimant.lease_seconds)).collect();
    let (window_start, units, (additional_slots, additional_starts)) = match charge {
        Some(Charge { window_start, units, additional }) => (Some(window_start), units, additional),
        None => (None, 0, (vec![], vec![])),
    };
    let identity = offers.first().map(|(candidate, _)| &candidate.identity);
    let rows: Vec<ClaimedRow> = sqlx::query_as(composed_sql!(
        "WITH offer AS ( \
           SELECT * FROM unnest($1::text[], $3::text[], $4::text[], $5::timestamptz[]) \
             WITH ORDINALITY AS o(id, owner, claimant, lease_expires_at, turn)), \
         closed AS ( \
           UPDATE todo_attempts a SET ended_at = $2, outcome = 'lease_expired' FROM offer \
           WHERE a.todo_id = offer.id AND a.ended_at IS NULL), \
         opened AS ( \
           INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at) \
           SELECT offer.id, (SELECT coalesce(max(a.seq), 0) + 1 FROM todo_attempts a WHERE a.todo_id = offer.id), \
             offer.owner, offer.claimant, $2 FROM offer), \
         charged AS ( \
           INSERT INTO admission_windows AS w (endpoint_id, team_id, queue, window_start, used, updated_at) \
           SELECT $6, $9, $10, $7, $8, $2 WHERE $7::timestamptz IS NOT NULL \
           ON CONFLICT (owner_id, queue, window_start) DO UPDATE SET used = w.used + EXCLUDED.used, \
             updated_at = EXCLUDED.updated_at \
           RETURNING w.used), \
         charged_more AS ( \
           INSERT INTO admission_additional_windows AS w (endpoint_id, team_id, queue, slot, window_start, used, updated_at) \
           SELECT $6, $9, $10, k.slot, k.window_start, $8, $2 \
           FROM unnest($12::smallint[], $13::timestamptz[]) AS k (slot, window_start) \
           ON CONFLICT (owner_id, queue, slot, window_start) DO UPDATE SET used = w.used + EXCLUDED.used, \
             updated_at = EXCLUDED.updated_at \
           RETURNING w.slot, w.used), \
         ledger AS ( \
           INSERT INTO admission_charges AS c (endpoint_id, team_id, queue, minute, units) \
           SELECT $6, $9, $10, $11, $8 WHERE $7::timestamptz IS NOT NULL \
           ON CONFLICT (owner_id, queue, minute) DO UPDATE SET units = c.units + EXCLUDED.units), \
         claimed AS ( \
           UPDATE todos t SET state = 'claimed', owner = offer.owner, claimed_by_endpoint_id = offer.claimant, \
             lease_expires_at = offer.lease_expires_at, attempt = t.attempt + 1, claimed_at = $2, \
             next_retry_at = NULL, completed_at = NULL, updated_at = $2 \
           FROM offer WHERE t.id = offer.id RETURNING t.*, offer.turn) \
         SELECT {TODO_COLUMNS}, (SELECT used FROM charged) AS window_used, \
           (SELECT array_agg(slot ORDER BY slot) FROM charged_more) AS additional_slots, \
           (SELECT array_agg(used ORDER BY slot) FROM charged_more) AS additional_used \
         FROM claimed t ORDER BY t.turn"
    ))
    .bind(&ids)
    .bind(now)
    .bind(&owners)
    .bind(&claimants)
    .bind(&leases)
    .bind(identity.and_then(|identity| identity.endpoint_id()))
    .bind(window_start)
    .bind(units as i32)
    .bind(identity.and_then(|identity| identity.team_id()))
    .bind(identity.map(|identity| identity.queue.as_str()))
    .bind(models::charges::charge_minute(now))
    .bind(&additional_slots)
    .bind(&additional_starts)
    .fetch_all(&mut **tx)
    .await
    .map_err(db_error)?;
    if rows.len() != offers.len() {
        return Err(Error::internal("a locked candidate was not claimed"));
    }
    let used = rows.first().and_then(|row| {
        let mut used = Used::from(i64::from(row.window_used?));
        let slots = row.additional_slots.iter().flatten();
        for (slot, units) in slots.zip(row.additional_used.iter().flatten()) {
            if let Some(entry) = used.additional.get_mut((*slot as usize).wrapping_sub(1)) {
                *entry = i64::from(*units);
            }
        }
        Some(used)
    });
    let todos = rows.into_iter().map(|row| row.todo.into_todo()).collect::<Result<Vec<Todo>>>()?;
    // Not `attempt <= max_attempts`: a todo released on its last attempt is pending again and
    // claimable (base-system §2: release keeps the attempt), so its next claim goes past it, and
    // a later fail dead-letters it at once.
    debug_assert!(todos.iter().all(|todo| todo.state == models::todo::TodoState::Claimed && todo.attempt >= 1));
    Ok((todos, used))
}

/// The claims of one statement, each with its headroom as it stood right after that claim (REQ-7):
/// the window's usage counted up from `used_before` (the usage before the statement's charge),
/// one unit per claim that was charged to `charged_window`, and the in-flight count `decide` saw
/// for it.
pub(super) fn with_headroom(
    policy: &Policy,
    charged_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    todos: Vec<Todo>,
    charged: &[bool],
    seen: &[Observation],
    used_before: Option<Used>,
) -> Vec<Claimed> {
    let slots = policy.charged_slots();
    let mut used_so_far = used_before;
    todos
        .into_iter()
        .zip(charged)
        .zip(seen)
        .map(|((todo, &charged), seen)| {
            let used = if charged {
                used_so_far = used_so_far.map(|used| used.plus_one_charge(slots));
                used_so_far
            } else {
                None
            };
            let headroom = Headroom::after_claim(policy, seen.in_flight, used, charged_window);
            Claimed { todo, admission: Some(headroom) }
        })
        .collect()
}
