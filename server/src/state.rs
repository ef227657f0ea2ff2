//! What every handler shares: the store, the admission write limiter, the metrics settings, the
//! push hub and the hook address policy, plus the body cap the router applies.
//!
//! Its own module so that the handler modules depend on it and the router (`app`) depends on the
//! handlers, and never the other way round. It must hold no routes and no handler logic.

use crate::hook_sender::AddressPolicy;
use crate::load::LoadGuard;
use crate::metrics::config::MetricsConfig;
use crate::public_url::PublicUrl;
use crate::push::Hub;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use models::error::{Code, Error, Result};
use models::store::Store;
use std::num::NonZeroU32;
use std::sync::Arc;

/// Largest request body the API and MCP accept (base-system §7: `/api/v1` caps at 64 KiB).
pub const BODY_LIMIT_BYTES: usize = 64 * 1024;

/// What every handler shares. Cheap to clone.
pub struct AppState<S: Store> {
    pub store: S,
    /// Limiter on admission policy writes, per human (operator API) and per endpoint (MCP)
    /// (SPEC-0030 Security Requirements).
    pub admission_writes: Arc<WriteLimiter>,
    /// The `/metrics` credential, queue-label limiter and collection-error counts (SPEC-0023).
    pub metrics: Arc<MetricsConfig>,
    /// This replica's MCP streams and the push loops' nudges (REQ-8).
    pub push: Arc<Hub>,
    /// Which addresses notify hooks may call (the SSRF guard's setting).
    pub hook_addresses: AddressPolicy,
    /// The base of the absolute URLs handed out (`mcp_url`, `ingest_url`); `serve --public-url`.
    pub public_url: PublicUrl,
    /// The per-credential and total request bounds (`load.rs`); `serve` always sets them. None
    /// leaves requests unbounded, for the simulation, whose real-time clock must never decide.
    pub load: Option<Arc<LoadGuard>>,
}

impl<S: Store> AppState<S> {
    pub fn new(store: S) -> Self {
        AppState {
            store,
            admission_writes: Arc::default(),
            metrics: Arc::new(MetricsConfig::closed()),
            push: Arc::new(Hub::new("local")),
            hook_addresses: AddressPolicy::PublicOnly,
            public_url: PublicUrl::from_request(),
            load: None,
        }
    }
}

impl<S: Store> Clone for AppState<S> {
    fn clone(&self) -> Self {
        AppState {
            store: self.store.clone(),
            admission_writes: self.admission_writes.clone(),
            metrics: self.metrics.clone(),
            push: self.push.clone(),
            hook_addresses: self.hook_addresses,
            public_url: self.public_url.clone(),
            load: self.load.clone(),
        }
    }
}

/// Per-human limiter on admission writes: 1 per second, burst 10.
pub struct WriteLimiter {
    limiter: DefaultKeyedRateLimiter<String>,
}

impl Default for WriteLimiter {
    /// SPEC-0030 Security Requirements: one write per second, bursts of ten.
    fn default() -> Self {
        WriteLimiter::with_quota(1, 10)
    }
}

impl WriteLimiter {
    /// A limiter with another quota: the simulation, whose writes come faster in real time than
    /// in simulated time, uses a large burst so the real clock this limiter reads never decides.
    pub fn with_quota(per_second: u32, burst: u32) -> WriteLimiter {
        let per_second = NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        WriteLimiter { limiter: DefaultKeyedRateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)) }
    }

    /// `rate_limited` with `Retry-After` when the human has spent their burst.
    pub fn check(&self, human_id: &str) -> Result<()> {
        match self.limiter.check_key(&human_id.to_string()) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Err(Error::new(Code::RateLimited, "too many admission policy writes; slow down")
                    .with("retry_after_seconds", seconds.max(1)))
            }
        }
    }
}
