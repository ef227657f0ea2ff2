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
use models::error::{Code, Error, Result};
use models::rate::{Quota, Verdict};
use models::store::Store;
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

/// The limiter on admission writes: 1 per second, burst 10, per human (operator API and board)
/// and per endpoint (MCP). Its state lives in the store (`Policies::take_write_token`), so the limit
/// holds across every replica (issue #28); this holds only the quota.
pub struct WriteLimiter {
    quota: Quota,
}

impl Default for WriteLimiter {
    /// SPEC-0030 Security Requirements: one write per second, bursts of ten.
    fn default() -> Self {
        WriteLimiter { quota: Quota::ADMISSION_WRITES }
    }
}

impl WriteLimiter {
    /// A limiter with another quota: the simulation, whose owner writes in bursts of simulated
    /// time, uses a large burst so that only the admission rules decide its writes.
    pub fn with_quota(per_second: u32, burst: u32) -> WriteLimiter {
        WriteLimiter { quota: Quota { per_second: per_second.max(1), burst: burst.max(1) } }
    }

    /// One write by a human; `rate_limited` with `retry_after_seconds` once their burst is spent.
    pub async fn check_human<S: Store>(&self, store: &S, human_id: &str) -> Result<()> {
        self.check(store, &format!("admission:human:{human_id}")).await
    }

    /// One write by an agent over MCP, limited per endpoint.
    pub async fn check_endpoint<S: Store>(&self, store: &S, endpoint_id: &str) -> Result<()> {
        self.check(store, &format!("admission:endpoint:{endpoint_id}")).await
    }

    async fn check<S: Store>(&self, store: &S, key: &str) -> Result<()> {
        match store.take_write_token(key, self.quota).await? {
            Verdict::Admitted { .. } => Ok(()),
            Verdict::Refused { retry_after_seconds } => {
                Err(Error::new(Code::RateLimited, "too many admission policy writes; slow down")
                    .with("retry_after_seconds", retry_after_seconds))
            }
        }
    }
}
