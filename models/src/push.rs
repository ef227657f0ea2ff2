//! Push: the doorbells an agent's MCP stream receives and the notify-hook calls an endpoint's
//! URLs receive, and the rules that decide them (SPEC-0030 REQ-8 over the base system's
//! doorbells, presence and hooks; `docs/push.md`).
//!
//! Owns the pure part, shared by `PgStore` and the reference `ModelStore` so both decide alike:
//! the shape of a doorbell and of a hook body, the heartbeat ring schedule, the limits. Pushes
//! are hints; the queue stays the ledger. What must never happen: a push for a todo whose queue
//! identity is deferred, a ring while the endpoint is clocked out, or one todo rung once per
//! replica. The stores decide each push once, in a transaction; replicas only deliver.

use crate::todo::Todo;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

/// The JSON-RPC method doorbells use on the MCP stream.
pub const DOORBELL_METHOD: &str = "notifications/claude/channel";
/// Rings a pending todo gets at most: on creation, then the heartbeat sweep's four.
pub const RINGS_PER_TODO_MAX: i32 = 5;
/// Todos the heartbeat sweep re-rings in one pass, round-robin across endpoints.
pub const HEARTBEAT_TODOS_PER_SWEEP_MAX: usize = 3;
/// Heartbeat candidates a pass weighs: the longest unrung pending todos of queues that admit.
pub const HEARTBEAT_CANDIDATES_MAX: i64 = 200;
/// Push decisions taken in one transaction; a pass repeats until a batch comes back short.
pub const PUSH_BATCH_MAX: i64 = 100;
/// A session whose replica has not refreshed it for this long is treated as gone.
pub const SESSION_STALE_SECONDS: i64 = 60;
/// How often a replica refreshes the sessions whose streams it holds.
pub const SESSION_REFRESH_SECONDS: i64 = 15;
/// Doorbells a reconnecting stream can replay with `Last-Event-ID`.
pub const STREAM_REPLAY_MAX: i64 = 64;
/// Doorbells are kept this long for replay, then pruned.
pub const RINGS_RETAINED_HOURS: i64 = 24;
/// At most one reconnect digest per endpoint in this long.
pub const RECONNECT_DIGEST_COOLDOWN_MINUTES: i64 = 10;

/// Notify hooks an endpoint may have.
pub const HOOKS_PER_ENDPOINT_MAX: i64 = 5;
/// Attempts one hook call gets before it is given up.
pub const HOOK_ATTEMPTS_MAX: i32 = 3;
/// Consecutive failed calls after which a hook is disabled.
pub const HOOK_FAILURES_TO_DISABLE: i32 = 10;
/// Calls one hook may receive per minute; more wait for the next minute.
pub const HOOK_CALLS_PER_MINUTE_MAX: i32 = 120;
/// How long a replica holds a hook call it is sending; longer than a call can take (5 s), so a
/// live sender never loses its lease, and a crashed one's call is sent by another after it.
pub const HOOK_LEASE_SECONDS: i64 = 30;

/// The `last_error` of a hook call dropped at send time because its queue had been deferred
/// since the call was enqueued (REQ-8, issue #28); the queue's reopening enqueues a new call.
pub const HOOK_DEFERRED_AT_SEND: &str = "queue deferred at send time; the reopening calls again";
/// Hook calls one replica takes per pass.
pub const HOOK_CALLS_PER_PASS_MAX: i64 = 20;
/// Largest hook body (SPEC-0024).
pub const HOOK_BODY_MAX_BYTES: usize = 4096;
/// Longest `summary` a hook body carries (the todo's title, cut).
const HOOK_SUMMARY_MAX_CHARS: usize = 500;

/// Why a doorbell rang: the label of `switchboard_doorbell_rings_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RingReason {
    /// A new todo entered the queue.
    Created,
    /// A todo came back to pending: a lapsed lease reaped, a retry whose backoff elapsed.
    Requeued,
    /// The heartbeat sweep re-rang an unclaimed todo.
    Heartbeat,
    /// A deferred queue identity admits claims again (REQ-8).
    Reopen,
    /// A digest: on clock-in, at a shift start, or when a stream reconnects.
    Digest,
}

impl RingReason {
    pub const ALL: [RingReason; 5] =
        [RingReason::Created, RingReason::Requeued, RingReason::Heartbeat, RingReason::Reopen, RingReason::Digest];

    pub fn as_str(self) -> &'static str {
        match self {
            RingReason::Created => "created",
            RingReason::Requeued => "requeued",
            RingReason::Heartbeat => "heartbeat",
            RingReason::Reopen => "reopen",
            RingReason::Digest => "digest",
        }
    }

    pub fn parse(raw: &str) -> Option<RingReason> {
        RingReason::ALL.into_iter().find(|r| r.as_str() == raw)
    }
}

/// What made a todo push-worthy in the transaction that changed it (`push_due.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DueReason {
    Created,
    Requeued,
}

impl DueReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DueReason::Created => "created",
            DueReason::Requeued => "requeued",
        }
    }

    pub fn parse(raw: &str) -> Option<DueReason> {
        match raw {
            "created" => Some(DueReason::Created),
            "requeued" => Some(DueReason::Requeued),
            _ => None,
        }
    }

    pub fn ring_reason(self) -> RingReason {
        match self {
            DueReason::Created => RingReason::Created,
            DueReason::Requeued => RingReason::Requeued,
        }
    }
}

/// Why a digest rang (`meta.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestReason {
    ClockIn,
    Operator,
    ShiftStart,
    OverrideEnd,
    Reconnect,
}

impl DigestReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DigestReason::ClockIn => "clock_in",
            DigestReason::Operator => "operator",
            DigestReason::ShiftStart => "shift_start",
            DigestReason::OverrideEnd => "override_end",
            DigestReason::Reconnect => "reconnect",
        }
    }
}

/// One doorbell decided for one session. `seq` is its stream event id.
#[derive(Debug, Clone, PartialEq)]
pub struct Ring {
    pub seq: i64,
    pub ring_id: String,
    pub session_id: String,
    pub endpoint_id: String,
    /// The replica whose process holds the session's stream.
    pub replica_id: String,
    pub queue: Option<String>,
    pub todo_id: Option<String>,
    pub reason: RingReason,
    /// The whole JSON-RPC notification the stream sends.
    pub message: Value,
}

/// What one push pass decided, for delivery, logs and metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PushReport {
    pub rings: Vec<Ring>,
    pub hook_calls_enqueued: u64,
    /// Deferred identities that became admitted and were rung (REQ-8).
    pub reopens: u64,
    /// Pushes withheld because the todo's queue identity was deferred.
    pub withheld_deferred: u64,
    /// Pushes withheld because the endpoint was clocked out.
    pub withheld_out: u64,
}

impl PushReport {
    pub fn absorb(&mut self, other: PushReport) {
        self.rings.extend(other.rings);
        self.hook_calls_enqueued += other.hook_calls_enqueued;
        self.reopens += other.reopens;
        self.withheld_deferred += other.withheld_deferred;
        self.withheld_out += other.withheld_out;
    }

    pub fn is_empty(&self) -> bool {
        self.rings.is_empty()
            && self.hook_calls_enqueued == 0
            && self.reopens == 0
            && self.withheld_deferred == 0
            && self.withheld_out == 0
    }
}

/// A doorbell for one todo: the notification an MCP client receives on its stream.
///
/// Shaped for a host that surfaces Claude Code channel events (issue #50): `content` is one short
/// sentence, and every `meta` value is a string (a host drops an event whose `meta` is not a map
/// of string to string).
pub fn doorbell_message(todo: &Todo, ring_id: &str, reason: RingReason) -> Value {
    let queue = &todo.identity.queue;
    let content = match reason {
        RingReason::Reopen => format!("Queue {queue} admits claims again and has work waiting: call claim_next."),
        _ => format!("Work is waiting in queue {queue}: call claim_next."),
    };
    json!({
        "jsonrpc": "2.0",
        "method": DOORBELL_METHOD,
        "params": {
            "content": content,
            "meta": { "todo_id": todo.id, "queue": queue, "source": todo.created_by_kind.as_str(),
                      "ring_id": ring_id, "reason": reason.as_str() },
        },
    })
}

/// The separator of a digest's `meta.queues`: queue names are `[a-z0-9._-]`, so a comma never
/// occurs inside one.
pub const DIGEST_QUEUES_SEPARATOR: &str = ",";

/// A digest doorbell: counts only, no titles (SPEC-0022). Its `meta` is strings only, like every
/// doorbell's: the count as decimal text, the queues joined by `DIGEST_QUEUES_SEPARATOR`.
pub fn digest_message(ring_id: &str, pending: i64, queues: &[String], reason: DigestReason) -> Value {
    let todos = if pending == 1 { "todo is" } else { "todos are" };
    json!({
        "jsonrpc": "2.0",
        "method": DOORBELL_METHOD,
        "params": {
            "content": format!("{pending} {todos} waiting in {}: call claim_next.", queues.join(", ")),
            "meta": { "kind": "digest", "pending": pending.to_string(),
                      "queues": queues.join(DIGEST_QUEUES_SEPARATOR), "reason": reason.as_str(),
                      "ring_id": ring_id },
        },
    })
}

/// A notify hook's body (SPEC-0024), at most `HOOK_BODY_MAX_BYTES`: the summary is cut to fit.
pub fn hook_body(todo: &Todo, reason: &str, endpoint_slug: &str) -> Value {
    let summary: String = todo.title.chars().take(HOOK_SUMMARY_MAX_CHARS).collect();
    json!({
        "type": "todo.ready",
        "reason": reason,
        "todo_id": todo.id,
        "queue": todo.identity.queue,
        "source": todo.created_by_kind.as_str(),
        "summary": summary,
        "endpoint": endpoint_slug,
        "attempt": todo.attempt,
        "created_at": todo.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    })
}

/// When the heartbeat sweep next re-rings an unclaimed todo that has been rung `rings` times,
/// last at `last_ringed_at`: about 5 min after creation, then +20 min, +1 h, +6 h; never after
/// `RINGS_PER_TODO_MAX` rings.
pub fn heartbeat_due_at(rings: i32, last_ringed_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let gap = match rings {
        ..=1 => Duration::minutes(5),
        2 => Duration::minutes(20),
        3 => Duration::hours(1),
        4 => Duration::hours(6),
        _ => return None,
    };
    (rings < RINGS_PER_TODO_MAX).then_some(last_ringed_at + gap)
}

/// When a failed hook call is tried again: 1 s after the first failure, 5 s after the second.
pub fn hook_retry_after(attempts_made: i32) -> Duration {
    match attempts_made {
        ..=1 => Duration::seconds(1),
        _ => Duration::seconds(5),
    }
}

/// An endpoint's presence from its stored columns (SPEC-0022): the shift as stored text and the
/// override. A shift that no longer parses counts as no shift (the endpoint is then in by
/// default): a push is a hint, and withholding it forever would hide work, while the claim path
/// never depends on presence.
pub fn presence_from_columns(
    shift_text: Option<&str>,
    override_: Option<&crate::presence::Override>,
    now: DateTime<Utc>,
) -> crate::presence::Effective {
    let shift = shift_text.and_then(|text| crate::presence::Shift::parse(text).ok());
    crate::presence::effective(shift.as_ref(), override_, now)
}

/// Why an out-to-in presence change rings its digest: an override set by the owner or by the
/// agent (`clock_in`), a shift starting with no override on record, or an override that ended.
/// `has_override` is whether the override columns are set at all (a lapsed one included).
pub fn digest_reason(source: crate::presence::PresenceSource, by_operator: bool, has_override: bool) -> DigestReason {
    use crate::presence::PresenceSource;
    match source {
        PresenceSource::Override if by_operator => DigestReason::Operator,
        PresenceSource::Override => DigestReason::ClockIn,
        PresenceSource::Shift if !has_override => DigestReason::ShiftStart,
        _ => DigestReason::OverrideEnd,
    }
}

/// Whether a session can carry a doorbell now: a stream is attached and its replica refreshed
/// it within `SESSION_STALE_SECONDS`.
pub fn session_is_live(stream_attached: bool, last_seen_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    stream_attached && last_seen_at > now - Duration::seconds(SESSION_STALE_SECONDS)
}

/// The heartbeat sweep's pick: at most `max` items, one per owner per round, each owner's in
/// the order given (due order), owners in their `Ord` order. Round-robin, so one busy owner
/// cannot take every re-ring of a pass.
pub fn round_robin<T, K: Ord>(items: Vec<T>, owner: impl Fn(&T) -> K, max: usize) -> Vec<T> {
    let mut by_owner: std::collections::BTreeMap<K, std::collections::VecDeque<T>> = Default::default();
    for item in items {
        by_owner.entry(owner(&item)).or_default().push_back(item);
    }
    let mut chosen = Vec::new();
    while chosen.len() < max && by_owner.values().any(|queue| !queue.is_empty()) {
        for queue in by_owner.values_mut() {
            if chosen.len() < max
                && let Some(item) = queue.pop_front()
            {
                chosen.push(item);
            }
        }
    }
    chosen
}

/// The minute a hook's rate limit counts in: `now` truncated to the minute.
pub fn hook_rate_minute(now: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    now.duration_trunc(Duration::minutes(1)).unwrap_or(now)
}

/// What one finished attempt of a hook call leaves on its outbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSettlement {
    /// The final outcome (`delivered`, `failed`, `refused`), or None while it will be retried.
    pub outcome: Option<&'static str>,
    pub error: Option<String>,
    pub retry_at: Option<DateTime<Utc>>,
}

/// Settles attempt number `attempts` (counting this one) of a call: delivered; refused (never
/// retried); failed, retried with backoff until `HOOK_ATTEMPTS_MAX` attempts were made.
pub fn settle_hook_attempt(outcome: &HookOutcome, attempts: i32, now: DateTime<Utc>) -> HookSettlement {
    match outcome {
        HookOutcome::Delivered => HookSettlement { outcome: Some("delivered"), error: None, retry_at: None },
        HookOutcome::Refused(reason) => {
            HookSettlement { outcome: Some("refused"), error: Some(reason.clone()), retry_at: None }
        }
        HookOutcome::Failed(reason) if attempts >= HOOK_ATTEMPTS_MAX => {
            HookSettlement { outcome: Some("failed"), error: Some(reason.clone()), retry_at: None }
        }
        HookOutcome::Failed(reason) => HookSettlement {
            outcome: None,
            error: Some(reason.clone()),
            retry_at: Some(now + hook_retry_after(attempts)),
        },
    }
}

/// Why a hook was disabled, as its owner reads it.
pub fn hook_disabled_reason(consecutive_failures: i32) -> String {
    format!("disabled after {consecutive_failures} consecutive failed calls")
}

/// An outbound call a replica has leased from the outbox and must now send.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCall {
    pub id: i64,
    pub hook_id: String,
    pub url: String,
    pub secret: String,
    pub msg_id: String,
    pub body: Value,
    /// Attempts made before this one.
    pub attempts: i32,
}

/// How sending a hook call went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    Delivered,
    /// The receiver failed or could not be reached: retried, and counted toward disabling.
    Failed(String),
    /// The guard refused the address or the body: never retried.
    Refused(String),
}

impl HookOutcome {
    /// The label of `switchboard_notify_hook_calls_total{outcome}`.
    pub fn label(&self) -> &'static str {
        match self {
            HookOutcome::Delivered => "delivered",
            HookOutcome::Failed(_) => "failed",
            HookOutcome::Refused(_) => "refused",
        }
    }
}

/// A notify hook as its owner sees it (never the secret after creation).
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyHook {
    pub id: String,
    pub endpoint_id: String,
    pub url: String,
    pub ignore_presence: bool,
    pub enabled: bool,
    pub consecutive_failures: i32,
    pub disabled_reason: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `meta` value a string and `content` one short sentence: what a host that surfaces
    /// channel events needs (issue #50).
    fn assert_host_surfaces(message: &Value) {
        let params = &message["params"];
        let content = params["content"].as_str().expect("content is text");
        assert!(content.len() <= 120 && content.ends_with('.'), "one short sentence: {content:?}");
        let meta = params["meta"].as_object().expect("meta is a map");
        assert!(meta.values().all(Value::is_string), "meta values are strings only: {meta:?}");
        assert_eq!(message["method"], DOORBELL_METHOD);
    }

    // Issue #50 item 3: every kind of ring (a todo's doorbell for each reason, a digest for each
    // reason) has string-only `meta` and a one-sentence `content`.
    #[test]
    fn req8_every_kind_of_ring_has_string_meta_and_a_one_sentence_content() {
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let mut model = crate::reference::Model::new(t0);
        let index = model.create("inbox", 3);
        let todo = model.todos[index].clone();
        for reason in RingReason::ALL.into_iter().filter(|r| *r != RingReason::Digest) {
            let message = doorbell_message(&todo, "rg_1", reason);
            assert_host_surfaces(&message);
            assert_eq!(message["params"]["meta"]["reason"], reason.as_str());
            assert_eq!(message["params"]["meta"]["queue"], "inbox");
        }
        let queues = ["inbox".to_string(), "lane.b".to_string()];
        for reason in [
            DigestReason::ClockIn,
            DigestReason::Operator,
            DigestReason::ShiftStart,
            DigestReason::OverrideEnd,
            DigestReason::Reconnect,
        ] {
            let message = digest_message("rg_2", 12, &queues, reason);
            assert_host_surfaces(&message);
            let meta = &message["params"]["meta"];
            assert_eq!(
                (&meta["pending"], &meta["queues"], &meta["kind"]),
                (&json!("12"), &json!("inbox,lane.b"), &json!("digest"))
            );
        }
        assert_eq!(
            digest_message("rg_3", 1, &queues[..1], DigestReason::ClockIn)["params"]["content"],
            "1 todo is waiting in inbox: call claim_next."
        );
    }

    #[test]
    fn req8_heartbeat_rings_follow_the_schedule_and_stop_at_five() {
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        assert_eq!(heartbeat_due_at(1, t0), Some(t0 + Duration::minutes(5)));
        assert_eq!(heartbeat_due_at(2, t0), Some(t0 + Duration::minutes(20)));
        assert_eq!(heartbeat_due_at(3, t0), Some(t0 + Duration::hours(1)));
        assert_eq!(heartbeat_due_at(4, t0), Some(t0 + Duration::hours(6)));
        assert_eq!(heartbeat_due_at(5, t0), None);
    }

    #[test]
    fn req8_heartbeat_pick_is_round_robin_across_owners_in_due_order() {
        let due = vec![("a", 1), ("a", 2), ("a", 3), ("b", 4), ("c", 5), ("b", 6)];
        assert_eq!(round_robin(due.clone(), |item| item.0, 3), vec![("a", 1), ("b", 4), ("c", 5)]);
        assert_eq!(round_robin(due, |item| item.0, 5), vec![("a", 1), ("b", 4), ("c", 5), ("a", 2), ("b", 6)]);
        assert!(round_robin(Vec::<(u8, u8)>::new(), |item| item.0, 3).is_empty());
    }

    #[test]
    fn spec0022_digest_reason_names_who_brought_the_endpoint_in() {
        use crate::presence::PresenceSource;
        assert_eq!(digest_reason(PresenceSource::Override, true, true), DigestReason::Operator);
        assert_eq!(digest_reason(PresenceSource::Override, false, true), DigestReason::ClockIn);
        assert_eq!(digest_reason(PresenceSource::Shift, false, false), DigestReason::ShiftStart);
        assert_eq!(digest_reason(PresenceSource::Shift, false, true), DigestReason::OverrideEnd);
        assert_eq!(digest_reason(PresenceSource::Default, false, true), DigestReason::OverrideEnd);
    }

    #[test]
    fn spec0024_a_failed_call_is_retried_twice_then_given_up() {
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let failed = HookOutcome::Failed("503".into());
        assert_eq!(settle_hook_attempt(&failed, 1, t0).retry_at, Some(t0 + Duration::seconds(1)));
        assert_eq!(settle_hook_attempt(&failed, 2, t0).retry_at, Some(t0 + Duration::seconds(5)));
        assert_eq!(settle_hook_attempt(&failed, 3, t0).outcome, Some("failed"));
        assert_eq!(settle_hook_attempt(&HookOutcome::Refused("private".into()), 1, t0).outcome, Some("refused"));
        assert_eq!(settle_hook_attempt(&HookOutcome::Delivered, 1, t0).error, None);
        assert_eq!(hook_rate_minute(t0 + Duration::seconds(59)), t0);
    }

    #[test]
    fn ring_reasons_round_trip() {
        for reason in RingReason::ALL {
            assert_eq!(RingReason::parse(reason.as_str()), Some(reason));
        }
    }
}
