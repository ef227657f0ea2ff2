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

/// The lease reaper's default tick (`SWITCHBOARD_REAPER_INTERVAL` overrides it). It also bounds
/// an `in_flight_full` hint (REQ-6): a lapsed lease is returned at most one tick after it lapses,
/// so the hint adds one tick to the earliest lease expiry.
pub const REAPER_INTERVAL_DEFAULT: Duration = Duration::from_secs(30);

/// How many recent windows a policy detail lists, newest first (REQ-6). Thirty covers a month of
/// daily windows; older usage is still kept (`USAGE_RETENTION_DAYS`) but not shown.
pub const DETAIL_WINDOWS_MAX: i64 = 30;

/// How many audit records a policy detail lists, newest first (REQ-10). Enough to see the recent
/// history of a policy on one page.
pub const DETAIL_AUDIT_MAX: i64 = 50;

/// The `retry_after_seconds` of a `queue_full` refusal (intake-capacity.md). Intake frees up as
/// agents claim, which is seconds rather than minutes; five keeps a retrying producer from
/// hammering the intake lock without leaving capacity idle for long.
pub const QUEUE_FULL_RETRY_AFTER_SECONDS: i64 = 5;
