//! The scrape as Prometheus text: one function per family group (admission, todos, intake,
//! push, claim groups, capacity, collection errors), each rendering into the scrape's own fresh registry.
//!
//! It must never label a series by owner, endpoint, team, todo or human, and never report a value
//! it could not compute as 0: a family whose collector failed is absent.

use super::config::MetricsConfig;
use super::labels::{OTHER_LABEL, ScrapeQueueLabels};
use models::admission::{QueueStatus, Reason};
use models::counters::Snapshot;
use models::store::QueueAdmission;
use models::todo::CreatedByKind;
use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
use std::sync::atomic::Ordering;

/// The collector behind the two admission gauge families.
pub(super) const ADMISSION_COLLECTOR: &str = "admission";
/// The collector behind `switchboard_queue_capacity_max`.
pub(super) const CAPACITY_COLLECTOR: &str = "capacity";
/// Outcomes a closed claim may be labelled with; anything else is `__other__` (SPEC-0023 REQ-5).
const OUTCOMES: [&str; 2] = ["complete", "fail"];
/// Owner cancellations a discarded todo may be labelled with; anything else is `__other__`.
const DISCARD_ACTIONS: [&str; 2] = ["remove", "clear"];

/// The scrape as Prometheus text. `admissions` is None when the admission collector failed, and
/// then its two gauge families are absent rather than zero; `capacity` (the effective intake
/// capacity) likewise.
pub fn render(
    config: &MetricsConfig,
    counters: &Snapshot,
    admissions: Option<&[QueueAdmission]>,
    capacity: Option<i64>,
) -> prometheus::Result<String> {
    let labels = config.queue_labels.resolve(queue_names(counters, admissions));
    let registry = Registry::new();
    render_admission(&registry, &labels, counters, admissions)?;
    render_todos(&registry, &labels, counters)?;
    render_intake(&registry, &labels, counters)?;
    render_push(&registry, counters)?;
    render_claim_groups(&registry, counters)?;
    render_capacity(&registry, capacity)?;
    render_collection_errors(&registry, config)?;
    TextEncoder::new().encode_to_string(&registry.gather())
}

/// Every queue name this scrape may label, from the counters and the admission gauges.
fn queue_names<'a>(counters: &'a Snapshot, admissions: Option<&'a [QueueAdmission]>) -> impl Iterator<Item = &'a str> {
    counters
        .created
        .keys()
        .map(|(queue, _)| queue.as_str())
        .chain(counters.claimed.keys().map(String::as_str))
        .chain(counters.completed.keys().map(|(queue, _)| queue.as_str()))
        .chain(counters.charged.keys().map(String::as_str))
        .chain(counters.refusals.keys().map(|(queue, _)| queue.as_str()))
        .chain(counters.intake_refusals.keys().map(|(queue, _)| queue.as_str()))
        .chain(counters.discarded.keys().map(|(queue, _)| queue.as_str()))
        .chain(admissions.unwrap_or_default().iter().map(|a| a.identity.queue.as_str()))
}

/// Admission series (SPEC-0030 REQ-12): charged units and refusals, and, when computed, the
/// policy and deferred gauges, every status and reason of a policy queue present from zero.
fn render_admission(
    registry: &Registry,
    labels: &ScrapeQueueLabels,
    counters: &Snapshot,
    admissions: Option<&[QueueAdmission]>,
) -> prometheus::Result<()> {
    let charged = counter_vec(
        registry,
        "switchboard_admission_charged_total",
        "Window units charged by committed claims on budgeted queues (SPEC-0030 REQ-3).",
        &["queue"],
    )?;
    let refusals = counter_vec(
        registry,
        "switchboard_admission_refusals_total",
        "Claims refused by admission control, by reason (SPEC-0030 REQ-4, REQ-9).",
        &["queue", "reason"],
    )?;
    if let Some(admissions) = admissions {
        render_admission_gauges(registry, labels, admissions, &charged, &refusals)?;
    }
    for (queue, units) in &counters.charged {
        charged.get_metric_with_label_values(&[labels.label(queue)])?.inc_by(*units);
    }
    for ((queue, reason), refused) in &counters.refusals {
        refusals.get_metric_with_label_values(&[labels.label(queue), reason.as_str()])?.inc_by(*refused);
    }
    Ok(())
}

/// The two admission gauge families, present only when the admission collector answered.
fn render_admission_gauges(
    registry: &Registry,
    labels: &ScrapeQueueLabels,
    admissions: &[QueueAdmission],
    charged: &IntCounterVec,
    refusals: &IntCounterVec,
) -> prometheus::Result<()> {
    let policies = gauge_vec(
        registry,
        "switchboard_admission_policies",
        "Admission policies by queue and current status (SPEC-0030 REQ-12).",
        &["queue", "status"],
    )?;
    let deferred = gauge_vec(
        registry,
        "switchboard_admission_deferred_todos",
        "Pending todos of queues whose policy admits no claim now, by reason (SPEC-0030 REQ-6).",
        &["queue", "reason"],
    )?;
    let statuses = QueueStatus::ALL.map(QueueStatus::as_str);
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
        policies.get_metric_with_label_values(&[queue, admission.status.status.as_str()])?.inc();
        if let Some(reason) = admission.status.hint.reason {
            deferred.get_metric_with_label_values(&[queue, reason.as_str()])?.add(admission.pending);
        }
    }
    Ok(())
}

/// Todo lifecycle series (SPEC-0023): created by source, claimed, closed by outcome.
fn render_todos(registry: &Registry, labels: &ScrapeQueueLabels, counters: &Snapshot) -> prometheus::Result<()> {
    let created = counter_vec(
        registry,
        "switchboard_todos_created_total",
        "Todos created, by queue and the creator's kind (SPEC-0023).",
        &["queue", "source"],
    )?;
    for ((queue, source), made) in &counters.created {
        created.get_metric_with_label_values(&[labels.label(queue), source_label(source)])?.inc_by(*made);
    }
    let claimed = counter_vec(
        registry,
        "switchboard_todos_claimed_total",
        "Claims committed, counted after commit (SPEC-0023).",
        &["queue"],
    )?;
    for (queue, claims) in &counters.claimed {
        claimed.get_metric_with_label_values(&[labels.label(queue)])?.inc_by(*claims);
    }
    let completed = counter_vec(
        registry,
        "switchboard_todos_completed_total",
        "Claims closed by their worker, by outcome complete or fail (SPEC-0023).",
        &["queue", "outcome"],
    )?;
    for ((queue, outcome), closed) in &counters.completed {
        let outcome = if OUTCOMES.contains(&outcome.as_str()) { outcome.as_str() } else { OTHER_LABEL };
        completed.get_metric_with_label_values(&[labels.label(queue), outcome])?.inc_by(*closed);
    }
    Ok(())
}

/// Intake series (intake-capacity.md): refusals at the capacity, and owner cancellations.
fn render_intake(registry: &Registry, labels: &ScrapeQueueLabels, counters: &Snapshot) -> prometheus::Result<()> {
    let intake_refusals = counter_vec(
        registry,
        "switchboard_intake_refusals_total",
        "New todos refused because their queue held as many pending todos as the intake capacity \
         (queue_full), by queue and the creator's kind.",
        &["queue", "source"],
    )?;
    for ((queue, source), refused) in &counters.intake_refusals {
        intake_refusals.get_metric_with_label_values(&[labels.label(queue), source_label(source)])?.inc_by(*refused);
    }
    let discarded = counter_vec(
        registry,
        "switchboard_todos_discarded_total",
        "Pending todos removed by their queue's owner, by queue and action remove (one) or clear (all).",
        &["queue", "action"],
    )?;
    for ((queue, action), removed) in &counters.discarded {
        let action = if DISCARD_ACTIONS.contains(&action.as_str()) { action.as_str() } else { OTHER_LABEL };
        discarded.get_metric_with_label_values(&[labels.label(queue), action])?.inc_by(*removed);
    }
    Ok(())
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

/// Group admission: how many budgeted `claim_next` callers each leader took together, and how
/// often a group read its queues' statuses before its first pick (issue #15).
fn render_claim_groups(registry: &Registry, counters: &Snapshot) -> prometheus::Result<()> {
    let families = [
        (
            "switchboard_claim_groups_total",
            "Groups of budgeted claim_next callers this replica's leaders took to claim in turn (one or more transactions each).",
            counters.claim_groups,
        ),
        (
            "switchboard_claim_group_claimers_total",
            "Claimers those groups took; divided by switchboard_claim_groups_total, the mean group size.",
            counters.claim_group_claimers,
        ),
        (
            "switchboard_claim_pre_reads_first_total",
            "Groups that read their queues' statuses before the first pick because the last group on those queues met a refusal.",
            counters.claim_pre_reads_first,
        ),
        (
            "switchboard_claim_pre_reads_first_met_total",
            "Of those reads, the ones that stood for a refusal the first pick would have met; the rest bought nothing.",
            counters.claim_pre_reads_first_met,
        ),
    ];
    for (name, help, value) in families {
        let counter = prometheus::IntCounter::new(name, help)?;
        registry.register(Box::new(counter.clone()))?;
        counter.inc_by(value);
    }
    Ok(())
}

/// The effective intake capacity, absent (not zero) when it could not be read.
fn render_capacity(registry: &Registry, capacity: Option<i64>) -> prometheus::Result<()> {
    if let Some(capacity) = capacity {
        let gauge = IntGauge::new(
            "switchboard_queue_capacity_max",
            "The effective intake capacity: the most pending todos one queue may hold (0 = unlimited).",
        )?;
        registry.register(Box::new(gauge.clone()))?;
        gauge.set(capacity);
    }
    Ok(())
}

/// SPEC-0023 REQ-6: how many scrapes each collector failed, kept between scrapes.
fn render_collection_errors(registry: &Registry, config: &MetricsConfig) -> prometheus::Result<()> {
    let errors = counter_vec(
        registry,
        "switchboard_metrics_collection_errors_total",
        "Scrapes in which a collector could not compute its values and omitted them (SPEC-0023 REQ-6).",
        &["collector"],
    )?;
    for (collector, total) in
        [(ADMISSION_COLLECTOR, &config.admission_errors_total), (CAPACITY_COLLECTOR, &config.capacity_errors_total)]
    {
        errors.get_metric_with_label_values(&[collector])?.inc_by(total.load(Ordering::Relaxed));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::config::ADMISSION_COLLECT_TIMEOUT;
    use models::admission::unavailable_status;
    use models::identity::QueueIdentity;

    const TOKEN: &str = "a-scrape-token-of-at-least-32-bytes!";

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
            lapsed: 0,
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
        };
        let rendered = render(&config, &counters, Some(&[broken]), Some(0)).expect("render");
        let lines: Vec<&str> = rendered.lines().filter(|l| l.starts_with("switchboard_admission_")).collect();
        // One series per status, issue #52's `shared_budget_exhausted` among them.
        assert_eq!(lines.iter().filter(|l| l.starts_with("switchboard_admission_policies{")).count(), 6);
        assert!(lines.contains(&"switchboard_admission_policies{queue=\"lane\",status=\"shared_budget_exhausted\"} 0"));
        assert!(lines.contains(&"switchboard_admission_policies{queue=\"lane\",status=\"admission_unavailable\"} 1"));
        assert!(
            lines.contains(&"switchboard_admission_deferred_todos{queue=\"lane\",reason=\"admission_unavailable\"} 7")
        );
        assert!(!rendered.contains("ep_hidden") && !rendered.contains("ap_hidden"), "{rendered}");
    }

    // Issue #15 group admission: the group counters render as they were counted, 0 included.
    #[test]
    fn claim_group_counters_render_as_counted() {
        let config = MetricsConfig::new(Some(TOKEN), 50, ADMISSION_COLLECT_TIMEOUT);
        let idle = render(&config, &Snapshot::default(), None, None).expect("render");
        assert!(idle.lines().any(|l| l == "switchboard_claim_groups_total 0"), "{idle}");
        let counters = Snapshot { claim_groups: 3, claim_group_claimers: 9, ..Snapshot::default() };
        let rendered = render(&config, &counters, None, None).expect("render");
        assert!(rendered.lines().any(|l| l == "switchboard_claim_groups_total 3"), "{rendered}");
        assert!(rendered.lines().any(|l| l == "switchboard_claim_group_claimers_total 9"), "{rendered}");
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
