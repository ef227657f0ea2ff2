//! The limits both stores share, each written once. A number that governs what a client sees
//! (how long a usage row is kept, how many windows a detail lists, the `retry_after_seconds` of a
//! refusal) must be the same in `PgStore` and the reference model, or the differential runs
//! would report the stores as different when only a constant was.
//!
//! Limits that belong to one concept stay with it (`todo::TITLE_LENGTH_MAX`,
//! `identity::QUEUE_NAME_LENGTH_MAX`, `push::*`); this module holds those with no other home.

use std::time::Duration;

/// How long admission usage rows are kept before the sweep prunes them (SPEC-0030 REQ-1). The
/// longest window is a calendar month (31 days), so the row of any current window, which started
/// at most 31 days ago, is never pruned; the four days beyond cover a zone's offset and a late
/// sweep.
pub const USAGE_RETENTION_DAYS: i64 = 35;

/// How long the charge ledger (units per identity and whole minute) is kept (issue #28). A policy
/// write rebuilds the usage of the new current window from it, and the longest window is a week
/// (169 hours across a DST fold), so eight days always cover it.
pub const CHARGE_LEDGER_RETENTION_DAYS: i64 = 8;

/// The lease reaper's default tick (`SWITCHBOARD_REAPER_INTERVAL` overrides it). It also bounds
/// an `in_flight_full` hint (REQ-6): a lapsed lease is returned at most one tick after it lapses,
/// so the hint adds one tick to the earliest lease expiry.
pub const REAPER_INTERVAL_DEFAULT: Duration = Duration::from_secs(30);

/// How many recent windows a policy detail lists, newest first (REQ-6). Thirty covers a month of
/// daily windows; older usage is still kept (`USAGE_RETENTION_DAYS`) but not shown.
pub const DETAIL_WINDOWS_MAX: i64 = 30;

/// Most past claims one history read returns, the newest (the board's usage charts and budget
/// preview, issue #29): a bound on what one page may read, far above what a budgeted queue
/// commits in the spans they show.
pub const CLAIM_HISTORY_MAX: i64 = 100_000;

/// How far back the budget preview replays an identity's claims (issue #29).
pub const PREVIEW_HISTORY_DAYS: i64 = 7;

/// How many audit records a policy detail lists, newest first (REQ-10). Enough to see the recent
/// history of a policy on one page.
pub const DETAIL_AUDIT_MAX: i64 = 50;

/// The `retry_after_seconds` of a `queue_full` refusal (intake-capacity.md). Intake frees up as
/// agents claim, which is seconds rather than minutes; five keeps a retrying producer from
/// hammering the intake lock without leaving capacity idle for long.
pub const QUEUE_FULL_RETRY_AFTER_SECONDS: i64 = 5;

/// How many todos one statement of a clear or purge changes (issue #14). A queue of a million
/// pending todos is cleared in a thousand statements of one transaction, none of which returns
/// or holds more than this many ids in memory.
pub const CANCELLATION_BATCH_MAX: i64 = 1_000;

/// How many todo ids a clear or purge audit record lists (issue #14). The record always holds the
/// exact count; past this many ids it lists the smallest ones (by id) and says `truncated`.
pub const CANCELLATION_AUDIT_IDS_MAX: usize = 100;

/// Keeps the audit sample of a cancellation: merges `batch` into `sample`, which stays the
/// `CANCELLATION_AUDIT_IDS_MAX` smallest ids seen, sorted. Both stores call it, so their
/// records list the same ids.
pub fn keep_audit_sample(sample: &mut Vec<String>, batch: impl IntoIterator<Item = String>) {
    sample.extend(batch);
    sample.sort_unstable();
    sample.truncate(CANCELLATION_AUDIT_IDS_MAX);
    assert!(sample.len() <= CANCELLATION_AUDIT_IDS_MAX);
}

/// Todos one batched create may carry (`create_todos`, `POST /api/v1/todos` with a list): the
/// batch is one transaction, so this bounds how long it holds its intake locks and how large
/// one request body grows (issue #15 item 2).
pub const TODOS_PER_BATCH_MAX: usize = 1_000;

/// Claims one `claim_next {max}` may make, and todos one `complete {ids}` may end (issue #31
/// item 2): each is one transaction, so this bounds how many rows it locks and how long a
/// budgeted queue's policy lock is held for one caller.
pub const CLAIMS_PER_CALL_MAX: usize = 100;

/// How many endpoints one owner (a human, or a team) may hold (issue #14). Each endpoint is a
/// credential, a session stream and rows in every sweep; a hundred is far beyond one person's
/// agents, and a script vending in a loop stops here instead of filling the database.
pub const ENDPOINTS_PER_OWNER_MAX: i64 = 100;

/// Refuses another endpoint for an owner that already holds `owned` (revoked ones count: they
/// keep their todos until deleted). Both stores call it under the owner's lock.
pub fn check_endpoint_quota(owned: i64) -> crate::error::Result<()> {
    check_quota(
        owned,
        ENDPOINTS_PER_OWNER_MAX,
        "endpoints_per_owner_max",
        "this owner already holds",
        "endpoints",
        "delete",
    )
}

/// How many live (unrevoked, unexpired) operator tokens one human may hold (issue #14: "a stolen
/// token copies itself"). Fifty covers every laptop, script and CI job a person runs; a token
/// minting tokens in a loop stops here.
pub const TOKENS_PER_HUMAN_MAX: i64 = 50;

/// Refuses another token for a human who already holds `live` live ones. Both stores call it
/// under the human's lock.
pub fn check_token_quota(live: i64) -> crate::error::Result<()> {
    check_quota(live, TOKENS_PER_HUMAN_MAX, "tokens_per_human_max", "you already hold", "live tokens", "revoke")
}

/// The one refusal of every count quota: `conflict`, naming the limit and its maximum.
fn check_quota(held: i64, max: i64, limit: &str, holder: &str, things: &str, remedy: &str) -> crate::error::Result<()> {
    if held >= max {
        return Err(crate::error::Error::new(
            crate::error::Code::Conflict,
            format!("{holder} {held} {things}; the limit is {max} ({limit}): {remedy} one first"),
        )
        .with("limit", limit)
        .with("max", max));
    }
    Ok(())
}

/// How long a webhook's replaced signing secret keeps verifying deliveries after a rotation
/// (issue #14): a day, for the provider to be reconfigured without losing a delivery.
pub const WEBHOOK_SECRET_GRACE_SECONDS: i64 = 86_400;

/// Largest `max_claims_per_window` a policy may set (SPEC-0030 REQ-1), an additional window's and
/// a shared budget's `max_claims` (issue #52).
pub const MAX_CLAIMS_PER_WINDOW_LIMIT: i64 = 1_000_000;
