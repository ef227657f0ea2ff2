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

pub mod config;
mod labels;
mod render;

use crate::state::AppState;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use models::store::Store;
use prometheus::TEXT_FORMAT;
use render::{ADMISSION_COLLECTOR, CAPACITY_COLLECTOR};
use std::sync::atomic::{AtomicU64, Ordering};

pub use config::{
    ADMISSION_COLLECT_TIMEOUT, METRICS_TOKEN_LENGTH_MIN_BYTES, MetricsConfig, QUEUE_LABELS_MAX_CEILING,
    QUEUE_LABELS_MAX_DEFAULT,
};
pub use labels::{OTHER_LABEL, QueueLabels, ScrapeQueueLabels};
pub use render::render;

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
