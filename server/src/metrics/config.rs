//! The scrape credential and the settings `/metrics` reads once at startup (SPEC-0023 REQ-1,
//! REQ-5, REQ-6), and the collection-error counts kept between scrapes.
//!
//! Its own module because the shared state holds it: the state depends on this, never on the
//! scrape handler. It must never accept an operator (`sbh_`) or endpoint (`sbk_`) bearer.

use super::labels::QueueLabels;
use crate::auth::{ENDPOINT_TOKEN_PREFIX, HUMAN_TOKEN_PREFIX};
use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};
use std::sync::atomic::AtomicU64;
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

const TOKEN_ENV: &str = "SWITCHBOARD_METRICS_TOKEN";
const QUEUE_LABELS_MAX_ENV: &str = "SWITCHBOARD_METRICS_QUEUE_LABELS_MAX";

/// What `/metrics` needs besides the store: the credential, the label limiter and the error counts.
pub struct MetricsConfig {
    /// SHA-256 of the scrape token. None keeps `/metrics` closed to everyone. Only the digest is
    /// kept, so comparing against it takes the same time whatever the presented token's length.
    token_sha256: Option<[u8; 32]>,
    pub(super) queue_labels: QueueLabels,
    pub(super) admission_timeout: Duration,
    pub(super) admission_errors_total: AtomicU64,
    pub(super) capacity_errors_total: AtomicU64,
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

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
}
