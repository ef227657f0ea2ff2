//! `GET /metrics`: the Prometheus scrape surface. It owns the scrape credential check, the one
//! queue-label limiter every family goes through, and the scrape-time gauges (admission, and the
//! intake capacity).
//!
//! Governing: SPEC-0030 REQ-12 (admission series); SPEC-0023 REQ-1 (scrape credential), REQ-5
//! (bounded labels, queue cap with `__other__`), REQ-6 (honest absence); intake-capacity.md
//! (capacity gauge, intake refusals, owner cancellations).
//!
//! It must never label a series by owner, endpoint, team, todo or human; never report a value it
//! could not compute as 0; and never accept an operator (`sbh_`) or endpoint (`sbk_`) bearer.
//!
//! Each scrape renders into a fresh registry of its own (never the process-global one): counters
//! are copied from the store's in-process snapshot, gauges from one scrape-time query. Two
//! concurrent scrapes therefore cannot interfere, and the only state kept between scrapes is the
//! limiter's admitted queue names and the collection-error counts.

use crate::app::AppState;
use crate::auth::{ENDPOINT_TOKEN_PREFIX, HUMAN_TOKEN_PREFIX};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use models::admission::Reason;
use models::counters::Snapshot;
use models::store::{QueueAdmission, Store};
use models::todo::CreatedByKind;
use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TEXT_FORMAT, TextEncoder};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Shortest scrape token accepted (contract §1); a shorter one keeps `/metrics` closed.
pub const METRICS_TOKEN_LENGTH_MIN_BYTES: usize = 32;
/// Distinct queue names a scrape may carry when the environment does not say (SPEC-0023 REQ-5).
pub const QUEUE_LABELS_MAX_DEFAULT: usize = 50;
/// Upper bound on the configured cap: past this the cap no longer protects Prometheus.
pub const QUEUE_LABELS_MAX_CEILING: usize = 10_000;
/// How long each scrape-time collector (the admission gauges, the capacity gauge) may take before
/// the scrape gives up on it (SPEC-0023 REQ-6).
pub const ADMISSION_COLLECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The label of every queue past the cap (values of the same series summed), and of any source or
/// outcome outside its fixed vocabulary.
pub const OTHER_LABEL: &str = "__other__";

const TOKEN_ENV: &str = "SWITCHBOARD_METRICS_TOKEN";
const QUEUE_LABELS_MAX_ENV: &str = "SWITCHBOARD_METRICS_QUEUE_LABELS_MAX";
/// The collector behind the two admission gauge families.
const ADMISSION_COLLECTOR: &str = "admission";
/// The collector behind `switchboard_queue_capacity_max`.
const CAPACITY_COLLECTOR: &str = "capacity";
/// Outcomes a closed claim may be labelled with; anything else is `__other__` (SPEC-0023 REQ-5).
const OUTCOMES: [&str; 2] = ["complete", "fail"];
/// Owner cancellations a discarded todo may be labelled with; anything else is `__other__`.
const DISCARD_ACTIONS: [&str; 2] = ["remove", "clear"];

/// What `/metrics` needs besides the store: the credential, the label limiter and the error counts.
pub struct MetricsConfig {
    /// SHA-256 of the scrape token. None keeps `/metrics` closed to everyone. Only the digest is
    /// kept, so comparing against it takes the same time whatever the presented token's length.
    token_sha256: Option<[u8; 32]>,
    queue_labels: QueueLabels,
    admission_timeout: Duration,
    admission_errors_total: AtomicU64,
    capacity_errors_total: AtomicU64,
}

impl MetricsConfig {
    /// `token` is the configured scrape token, if any. An unusable one is logged once here (at
    /// startup) and leaves the surface closed rather than weakly guarded.
    pub fn new(token: Option<&str>, queue_labels_max: usize, admission_timeout: Duration) -> MetricsConfig {
        let token_sha256 = match token {
            None => None,
            Some(token) if token.len() < METRICS_TOKEN_LENGTH_MIN_BYTES => {
                tracing::warn!(
                    "{TOKEN_ENV} is shorter than {METRICS_TOKEN_LENGTH_MIN_BYTES} bytes; /metrics answers 401 to everyone"
                );
                None
            }
            // Such a token would be indistinguishable from an operator or endpoint credential,
            // which must never open /metrics.
            Some(token) if token.starts_with(HUMAN_TOKEN_PREFIX) || token.starts_with(ENDPOINT_TOKEN_PREFIX) => {
                tracing::warn!(
                    "{TOKEN_ENV} starts with {HUMAN_TOKEN_PREFIX} or {ENDPOINT_TOKEN_PREFIX}; /metrics answers 401 to everyone"
                );
                None
            }
            Some(token) => Some(Sha256::digest(token.as_bytes()).into()),
        };
        MetricsConfig {
            token_sha256,
            queue_labels: QueueLabels::new(queue_labels_max.min(QUEUE_LABELS_MAX_CEILING)),
            admission_timeout,
            admission_errors_total: AtomicU64::new(0),
            capacity_errors_total: AtomicU64::new(0),
        }
    }

    /// No scrape credential: every scrape is refused. For routers built without an environment.
    pub fn closed() -> MetricsConfig {
        MetricsConfig::new(None, QUEUE_LABELS_MAX_DEFAULT, ADMISSION_COLLECT_TIMEOUT)
    }

    /// Reads `SWITCHBOARD_METRICS_TOKEN` and `SWITCHBOARD_METRICS_QUEUE_LABELS_MAX` once, at startup.
    pub fn from_env() -> MetricsConfig {
        let token = match std::env::var(TOKEN_ENV) {
            Ok(token) => Some(token),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                tracing::warn!("{TOKEN_ENV} is not valid UTF-8; /metrics answers 401 to everyone");
                None
            }
        };
        let queue_labels_max = match std::env::var(QUEUE_LABELS_MAX_ENV) {
            Err(_) => QUEUE_LABELS_MAX_DEFAULT,
            Ok(raw) => match raw.trim().parse::<usize>() {
                Ok(max) if max <= QUEUE_LABELS_MAX_CEILING => max,
                Ok(_) => {
                    tracing::warn!("{QUEUE_LABELS_MAX_ENV} is above {QUEUE_LABELS_MAX_CEILING}; using the ceiling");
                    QUEUE_LABELS_MAX_CEILING
                }
                Err(_) => {
                    tracing::warn!(
                        "{QUEUE_LABELS_MAX_ENV} is not a whole number; using the default {QUEUE_LABELS_MAX_DEFAULT}"
                    );
                    QUEUE_LABELS_MAX_DEFAULT
                }
            },
        };
        MetricsConfig::new(token.as_deref(), queue_labels_max, ADMISSION_COLLECT_TIMEOUT)
    }

    /// SPEC-0023 REQ-1: only the configured scrape token opens `/metrics`.
    pub fn authorizes(&self, headers: &HeaderMap) -> bool {
        let Some(expected_sha256) = &self.token_sha256 else { return false };
        let Some(presented) = bearer(headers) else { return false };
        if presented.starts_with(HUMAN_TOKEN_PREFIX) || presented.starts_with(ENDPOINT_TOKEN_PREFIX) {
            return false;
        }
        let presented_sha256: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digests_equal(&presented_sha256, expected_sha256)
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim())
}

/// Compares every byte whatever the first difference, so timing says nothing about the token.
fn digests_equal(left: &[u8; 32], right: &[u8; 32]) -> bool {
    let difference = left.iter().zip(right).fold(0u8, |acc, (l, r)| acc | (l ^ r));
    std::hint::black_box(difference) == 0
}

/// SPEC-0023 REQ-5: the one limiter every family routes its queue label through. The first
/// `names_max` distinct names it sees keep their own label for the life of the process, so a
/// queue's series never hops between its name and `__other__` from one scrape to the next.
pub struct QueueLabels {
    names_max: usize,
    admitted: Mutex<BTreeSet<String>>,
}

impl QueueLabels {
    pub fn new(names_max: usize) -> QueueLabels {
        QueueLabels { names_max, admitted: Mutex::new(BTreeSet::new()) }
    }

    /// Admits the names one scrape will label, in sorted order, so which newcomers win the free
    /// slots does not depend on the order the store happened to report them in.
    pub fn resolve<'a>(&self, queues: impl IntoIterator<Item = &'a str>) -> ScrapeQueueLabels {
        // A poisoned lock only means another scrape panicked mid-insert; the set is still valid.
        let mut admitted = self.admitted.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let wanted: BTreeSet<&str> = queues.into_iter().collect();
        let mut own = BTreeSet::new();
        for queue in wanted {
            // A real queue named `__other__` would pass for the overflow; it spends no slot.
            if queue == OTHER_LABEL {
                continue;
            }
            if admitted.contains(queue) || (admitted.len() < self.names_max && admitted.insert(queue.to_string())) {
                own.insert(queue.to_string());
            }
        }
        assert!(admitted.len() <= self.names_max, "the queue label set outgrew its cap");
        ScrapeQueueLabels { own }
    }
}

/// One scrape's verdict: which queue names are labelled as themselves.
pub struct ScrapeQueueLabels {
    own: BTreeSet<String>,
}

impl ScrapeQueueLabels {
    pub fn label<'a>(&self, queue: &'a str) -> &'a str {
        if self.own.contains(queue) { queue } else { OTHER_LABEL }
    }
}

/// `GET /metrics`. Unauthenticated scrapes get a bare 401 and cause no database work.
pub async fn scrape<S: Store>(State(state): State<AppState<S>>, headers: HeaderMap) -> Response {
    let config = &state.metrics;
    if !config.authorizes(&headers) {
        let mut refused = StatusCode::UNAUTHORIZED.into_response();
        refused.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return refused;
    }
    // SPEC-0023 REQ-6: the gauges are computed now or not at all; a failure omits them and counts.
    // Both collectors run at once, each under the same deadline, so one slow query cannot
    // double the scrape's wait.
    let (admissions, capacity) = tokio::join!(
        collect(ADMISSION_COLLECTOR, config, &config.admission_errors_total, state.store.all_admissions_unscoped()),
        collect(CAPACITY_COLLECTOR, config, &config.capacity_errors_total, state.store.queue_capacity()),
    );
    let capacity = capacity.map(|capacity| capacity.effective);
    let counters = state.store.counters().snapshot();
    match render(config, &counters, admissions.as_deref(), capacity) {
        Ok(body) => ([(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT))], body).into_response(),
        Err(error) => {
            tracing::error!(%error, "metrics: cannot render the scrape");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// One scrape-time collector under the scrape deadline: its value, or None (logged, and counted
/// in `errors`) when it failed or did not answer in time.
async fn collect<T>(
    collector: &str,
    config: &MetricsConfig,
    errors: &AtomicU64,
    work: impl Future<Output = models::error::Result<T>>,
) -> Option<T> {
    match tokio::time::timeout(config.admission_timeout, work).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(error)) => {
            tracing::warn!(%error, collector, "metrics: a collector's series are omitted from this scrape");
            errors.fetch_add(1, Ordering::Relaxed);
            None
        }
        Err(_) => {
            let timeout_ms = config.admission_timeout.as_millis();
            tracing::warn!(
                timeout_ms,
                collector,
                "metrics: a collector timed out; its series are omitted from this scrape"
            );
            errors.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// The scrape as Prometheus text. `admissions` is None when the admission collector failed, and
/// then its two gauge families are absent rather than zero; `capacity` (the effective intake
/// capacity) likewise.
pub fn render(
    config: &MetricsConfig,
    counters: &Snapshot,
    admissions: Option<&[QueueAdmission]>,
    capacity: Option<i64>,
) -> prometheus::Result<String> {
    let queues = counters
        .created
        .keys()
        .map(|(queue, _)| queue.as_str())
        .chain(counters.claimed.keys().map(String::as_str))
        .chain(counters.completed.keys().map(|(queue, _)| queue.as_str()))
        .chain(counters.charged.keys().map(String::as_str))
        .chain(counters.refusals.keys().map(|(queue, _)| queue.as_str()))
        .chain(counters.intake_refusals.keys().map(|(queue, _)| queue.as_str()))
        .chain(counters.discarded.keys().map(|(queue, _)| queue.as_str()))
        .chain(admissions.unwrap_or_default().iter().map(|a| a.identity.queue.as_str()));
    let labels = config.queue_labels.resolve(queues);
    let registry = Registry::new();

    let charged = counter_vec(
        &registry,
        "switchboard_admission_charged_total",
        "Window units charged by committed claims on budgeted queues (SPEC-0030 REQ-3).",
        &["queue"],
    )?;
    let refusals = counter_vec(
        &registry,
        "switchboard_admission_refusals_total",
        "Claims refused by admission control, by reason (SPEC-0030 REQ-4, REQ-9).",
        &["queue", "reason"],
    )?;

    if let Some(admissions) = admissions {
        let policies = gauge_vec(
            &registry,
            "switchboard_admission_policies",
            "Admission policies by queue and current status (SPEC-0030 REQ-12).",
            &["queue", "status"],
        )?;
        let deferred = gauge_vec(
            &registry,
            "switchboard_admission_deferred_todos",
            "Pending todos of queues whose policy admits no claim now, by reason (SPEC-0030 REQ-6).",
            &["queue", "reason"],
        )?;
        let statuses: Vec<&str> = std::iter::once("admitted").chain(Reason::ALL.map(Reason::as_str)).collect();
        for admission in admissions {
            let queue = labels.label(&admission.identity.queue);
            // Touching a series creates it at 0: every status and reason of every policy queue is
            // present, so an alert on one of them never sees a gap.
            for status in &statuses {
                policies.get_metric_with_label_values(&[queue, status])?;
            }
            for reason in Reason::ALL {
                deferred.get_metric_with_label_values(&[queue, reason.as_str()])?;
                refusals.get_metric_with_label_values(&[queue, reason.as_str()])?;
            }
            charged.get_metric_with_label_values(&[queue])?;
            policies.get_metric_with_label_values(&[queue, admission.status.status])?.inc();
            if let Some(reason) = admission.status.hint.reason {
                deferred.get_metric_with_label_values(&[queue, reason.as_str()])?.add(admission.pending);
            }
        }
    }

    for (queue, units) in &counters.charged {
        charged.get_metric_with_label_values(&[labels.label(queue)])?.inc_by(*units);
    }
    for ((queue, reason), refused) in &counters.refusals {
        refusals.get_metric_with_label_values(&[labels.label(queue), reason.as_str()])?.inc_by(*refused);
    }
    let created = counter_vec(
        &registry,
        "switchboard_todos_created_total",
        "Todos created, by queue and the creator's kind (SPEC-0023).",
        &["queue", "source"],
    )?;
    for ((queue, source), made) in &counters.created {
        created.get_metric_with_label_values(&[labels.label(queue), source_label(source)])?.inc_by(*made);
    }
    let claimed = counter_vec(
        &registry,
        "switchboard_todos_claimed_total",
        "Claims committed, counted after commit (SPEC-0023).",
        &["queue"],
    )?;
    for (queue, claims) in &counters.claimed {
        claimed.get_metric_with_label_values(&[labels.label(queue)])?.inc_by(*claims);
    }
    let completed = counter_vec(
        &registry,
        "switchboard_todos_completed_total",
        "Claims closed by their worker, by outcome complete or fail (SPEC-0023).",
        &["queue", "outcome"],
    )?;
    for ((queue, outcome), closed) in &counters.completed {
        let outcome = if OUTCOMES.contains(&outcome.as_str()) { outcome.as_str() } else { OTHER_LABEL };
        completed.get_metric_with_label_values(&[labels.label(queue), outcome])?.inc_by(*closed);
    }
    let intake_refusals = counter_vec(
        &registry,
        "switchboard_intake_refusals_total",
        "New todos refused because their queue held as many pending todos as the intake capacity \
         (queue_full), by queue and the creator's kind.",
        &["queue", "source"],
    )?;
    for ((queue, source), refused) in &counters.intake_refusals {
        intake_refusals.get_metric_with_label_values(&[labels.label(queue), source_label(source)])?.inc_by(*refused);
    }
    let discarded = counter_vec(
        &registry,
        "switchboard_todos_discarded_total",
        "Pending todos removed by their queue's owner, by queue and action remove (one) or clear (all).",
        &["queue", "action"],
    )?;
    for ((queue, action), removed) in &counters.discarded {
        let action = if DISCARD_ACTIONS.contains(&action.as_str()) { action.as_str() } else { OTHER_LABEL };
        discarded.get_metric_with_label_values(&[labels.label(queue), action])?.inc_by(*removed);
    }
    render_push(&registry, counters)?;
    if let Some(capacity) = capacity {
        let gauge = IntGauge::new(
            "switchboard_queue_capacity_max",
            "The effective intake capacity: the most pending todos one queue may hold (0 = unlimited).",
        )?;
        registry.register(Box::new(gauge.clone()))?;
        gauge.set(capacity);
    }
    let errors = counter_vec(
        &registry,
        "switchboard_metrics_collection_errors_total",
        "Scrapes in which a collector could not compute its values and omitted them (SPEC-0023 REQ-6).",
        &["collector"],
    )?;
    for (collector, total) in
        [(ADMISSION_COLLECTOR, &config.admission_errors_total), (CAPACITY_COLLECTOR, &config.capacity_errors_total)]
    {
        errors.get_metric_with_label_values(&[collector])?.inc_by(total.load(Ordering::Relaxed));
    }

    TextEncoder::new().encode_to_string(&registry.gather())
}

/// Sources are the creator kinds the model knows; anything else is `__other__` (SPEC-0023 REQ-5).
fn source_label(source: &str) -> &str {
    if CreatedByKind::parse(source).is_some() { source } else { OTHER_LABEL }
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    let family = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(family.clone()))?;
    Ok(family)
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    let family = IntGaugeVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(family.clone()))?;
    Ok(family)
}

/// Push series (SPEC-0030 REQ-8): doorbells by reason, hook calls by outcome, reopenings. Every
/// label value is a fixed word, reported at zero until it happens.
fn render_push(registry: &Registry, counters: &Snapshot) -> prometheus::Result<()> {
    let rings = counter_vec(
        registry,
        "switchboard_doorbell_rings_total",
        "Doorbells this replica decided, by reason (created, requeued, heartbeat, reopen, digest).",
        &["reason"],
    )?;
    for reason in models::push::RingReason::ALL {
        let rung = counters.rings.get(&reason).copied().unwrap_or(0);
        rings.get_metric_with_label_values(&[reason.as_str()])?.inc_by(rung);
    }
    let hook_calls = counter_vec(
        registry,
        "switchboard_notify_hook_calls_total",
        "Notify hook calls this replica sent, by outcome (delivered, failed, refused).",
        &["outcome"],
    )?;
    for outcome in ["delivered", "failed", "refused"] {
        let sent = counters.hook_calls.get(outcome).copied().unwrap_or(0);
        hook_calls.get_metric_with_label_values(&[outcome])?.inc_by(sent);
    }
    let reopens = prometheus::IntCounter::new(
        "switchboard_admission_reopens_total",
        "Deferred queue identities this replica rang open again once they admitted claims (REQ-8).",
    )?;
    registry.register(Box::new(reopens.clone()))?;
    reopens.inc_by(counters.reopens);
    let withheld = counter_vec(
        registry,
        "switchboard_push_withheld_total",
        "Pushes this replica withheld, by reason (deferred: the queue admitted no claim; out: the endpoint was clocked out).",
        &["reason"],
    )?;
    for why in ["deferred", "out"] {
        let held = counters.withheld.get(why).copied().unwrap_or(0);
        withheld.get_metric_with_label_values(&[why])?.inc_by(held);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::admission::unavailable_status;
    use models::identity::QueueIdentity;

    const TOKEN: &str = "a-scrape-token-of-at-least-32-bytes!";

    fn presenting(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("Bearer {token}")).expect("header value");
        headers.insert(header::AUTHORIZATION, value);
        headers
    }

    // SPEC-0030 Security Requirements: /metrics requires the scrape credential (SPEC-0023 REQ-1)
    #[test]
    fn req12_only_the_configured_token_of_32_bytes_or_more_opens_metrics() {
        let open = MetricsConfig::new(Some(TOKEN), 50, ADMISSION_COLLECT_TIMEOUT);
        assert!(open.authorizes(&presenting(TOKEN)));
        assert!(!open.authorizes(&presenting(&TOKEN[1..])));
        assert!(!open.authorizes(&presenting("sbh_anything")));
        assert!(!open.authorizes(&HeaderMap::new()));
        let short = &TOKEN[..METRICS_TOKEN_LENGTH_MIN_BYTES - 1];
        assert!(!MetricsConfig::new(Some(short), 50, ADMISSION_COLLECT_TIMEOUT).authorizes(&presenting(short)));
        let prefixed = format!("sbk_{TOKEN}");
        assert!(!MetricsConfig::new(Some(&prefixed), 50, ADMISSION_COLLECT_TIMEOUT).authorizes(&presenting(&prefixed)));
        assert!(!MetricsConfig::closed().authorizes(&presenting(TOKEN)));
    }

    // SPEC-0030 REQ-12 (SPEC-0023 REQ-5)
    #[test]
    fn req12_queue_labels_are_capped_and_stable_across_scrapes() {
        let labels = QueueLabels::new(2);
        let first = labels.resolve(["zeta", "alpha", "beta", "__other__"]);
        assert_eq!(
            ["alpha", "beta", "zeta", "__other__"].map(|q| first.label(q)),
            ["alpha", "beta", "__other__", "__other__"]
        );
        // A newcomer that sorts first cannot displace a name already admitted.
        let second = labels.resolve(["aaa", "beta", "zeta"]);
        assert_eq!(["aaa", "beta", "zeta"].map(|q| second.label(q)), ["__other__", "beta", "__other__"]);
        assert_eq!(QueueLabels::new(0).resolve(["alpha"]).label("alpha"), "__other__");
    }

    // SPEC-0030 REQ-12 (SPEC-0023 REQ-6)
    #[test]
    fn req12_admission_gauges_are_absent_when_uncomputed_and_complete_when_computed() {
        let config = MetricsConfig::new(Some(TOKEN), 50, ADMISSION_COLLECT_TIMEOUT);
        let counters = Snapshot::default();
        let omitted = render(&config, &counters, None, None).expect("render");
        assert!(!omitted.contains("switchboard_admission_policies"), "{omitted}");
        assert!(!omitted.contains("switchboard_admission_deferred_todos"), "{omitted}");
        assert!(omitted.contains("switchboard_metrics_collection_errors_total{collector=\"admission\"} 0"));

        let broken = QueueAdmission {
            identity: QueueIdentity::endpoint("ep_hidden", "lane"),
            policy_id: "ap_hidden".into(),
            policy: None,
            status: unavailable_status(),
            pending: 7,
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
        };
        let rendered = render(&config, &counters, Some(&[broken]), Some(0)).expect("render");
        let lines: Vec<&str> = rendered.lines().filter(|l| l.starts_with("switchboard_admission_")).collect();
        assert_eq!(lines.iter().filter(|l| l.starts_with("switchboard_admission_policies{")).count(), 5);
        assert!(lines.contains(&"switchboard_admission_policies{queue=\"lane\",status=\"admission_unavailable\"} 1"));
        assert!(
            lines.contains(&"switchboard_admission_deferred_todos{queue=\"lane\",reason=\"admission_unavailable\"} 7")
        );
        assert!(!rendered.contains("ep_hidden") && !rendered.contains("ap_hidden"), "{rendered}");
    }

    // intake-capacity.md, Metrics: the capacity gauge, intake refusals and owner cancellations.
    #[test]
    fn intake_series_follow_the_label_rules_and_the_gauge_is_absent_when_uncomputed() {
        let config = MetricsConfig::new(Some(TOKEN), 1, ADMISSION_COLLECT_TIMEOUT);
        let mut counters = Snapshot::default();
        counters.intake_refusals.insert(("capped".into(), "human".into()), 1);
        counters.intake_refusals.insert(("capped".into(), "robot".into()), 2);
        counters.intake_refusals.insert(("overflow".into(), "ingest".into()), 4);
        counters.discarded.insert(("capped".into(), "clear".into()), 2);
        counters.discarded.insert(("capped".into(), "remove".into()), 1);
        counters.discarded.insert(("capped".into(), "purge".into()), 5);

        let rendered = render(&config, &counters, None, Some(10)).expect("render");
        let lines: Vec<&str> = rendered.lines().collect();
        for expected in [
            "switchboard_queue_capacity_max 10",
            "switchboard_intake_refusals_total{queue=\"capped\",source=\"human\"} 1",
            "switchboard_intake_refusals_total{queue=\"capped\",source=\"__other__\"} 2",
            "switchboard_intake_refusals_total{queue=\"__other__\",source=\"ingest\"} 4",
            "switchboard_todos_discarded_total{action=\"clear\",queue=\"capped\"} 2",
            "switchboard_todos_discarded_total{action=\"remove\",queue=\"capped\"} 1",
            "switchboard_todos_discarded_total{action=\"__other__\",queue=\"capped\"} 5",
            "switchboard_metrics_collection_errors_total{collector=\"capacity\"} 0",
        ] {
            assert!(lines.contains(&expected), "{expected} missing from\n{rendered}");
        }

        let omitted = render(&config, &Snapshot::default(), None, None).expect("render");
        assert!(!omitted.contains("switchboard_queue_capacity_max"), "absent, not zero:\n{omitted}");
        assert!(omitted.contains("switchboard_metrics_collection_errors_total{collector=\"capacity\"} 0"));
        let unlimited = render(&config, &Snapshot::default(), None, Some(0)).expect("render");
        assert!(unlimited.lines().any(|l| l == "switchboard_queue_capacity_max 0"), "{unlimited}");
    }
}
