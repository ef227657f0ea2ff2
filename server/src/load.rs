//! Load that cannot starve other tenants (issue #14, item 3): every request to the API, MCP and
//! ingest passes one guard before its handler runs.
//!
//! - **Writes per credential**: every request that is not a read (`GET`/`HEAD`) spends one token
//!   of its credential's bucket; an empty bucket is `429 rate_limited` with `Retry-After`.
//! - **Concurrency per credential and in total**: a credential may have a bounded number of
//!   requests in progress (`429`), and the server as a whole too (`503 unavailable`), so one
//!   client cannot hold every pooled database connection while others wait.
//! - **A deadline per request**: a request still running after the timeout is dropped (its
//!   transaction rolls back; a claim dropped while waiting charges nothing, REQ-13) and answered
//!   `503 unavailable`.
//!
//! Long-lived streams (`GET /mcp/{slug}`) are exempt from the deadline and the concurrency
//! bounds: they hold no database connection while they wait. The credential is the bearer token
//! (by its digest, never stored), else the ingest path's webhook id, else nothing (only the total
//! bound applies). Refusals happen before any database work.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use models::error::{Code, Error};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::wire::ApiError;

/// `switchboard serve`'s flags for the bounds on load, here and in the database pool.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Sustained non-read requests (POST, PUT, PATCH, DELETE, every MCP call) per second per
    /// credential; past its burst a credential gets 429 with Retry-After.
    #[arg(long, env = "SWITCHBOARD_MAX_WRITES_PER_SECOND", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_writes_per_second: u32,
    /// Non-read requests one credential may send at once before the per-second rate applies.
    #[arg(long, env = "SWITCHBOARD_WRITE_BURST", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub write_burst: u32,
    /// Requests one credential may have in progress at once (429 past it); MCP streams not counted.
    #[arg(long, env = "SWITCHBOARD_MAX_CONCURRENT_PER_CREDENTIAL", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_per_credential: u32,
    /// Requests this server may have in progress at once (503 past it); MCP streams not counted.
    #[arg(long, env = "SWITCHBOARD_MAX_CONCURRENT_REQUESTS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_requests: u32,
    /// Seconds a request may run before it is abandoned (503; its transaction rolls back).
    #[arg(long, env = "SWITCHBOARD_REQUEST_TIMEOUT_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout_seconds: u64,
    /// Seconds a client may take to send a request's headers before its connection is closed.
    #[arg(long, env = "SWITCHBOARD_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub header_read_timeout_seconds: u64,
    /// PostgreSQL statement_timeout for every pooled connection, in seconds.
    #[arg(long, env = "SWITCHBOARD_DB_STATEMENT_TIMEOUT_SECONDS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub db_statement_timeout_seconds: u64,
    /// PostgreSQL lock_timeout, in seconds: a claim that cannot lock its queue's policy in time
    /// fails closed (admission_unavailable, nothing charged).
    #[arg(long, env = "SWITCHBOARD_DB_LOCK_TIMEOUT_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub db_lock_timeout_seconds: u64,
    /// Budgeted claim_next calls of one queue set that one claim transaction on this replica
    /// serves at most (group admission); the rest wait without a database connection for the
    /// next one (each for at most the lock timeout).
    #[arg(long, env = "SWITCHBOARD_CLAIMERS_PER_QUEUE_SET", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub claimers_per_queue_set: u32,
}

impl LoadArgs {
    /// The request guard's settings.
    pub fn settings(&self) -> LoadSettings {
        LoadSettings {
            writes_per_second: self.max_writes_per_second,
            write_burst: self.write_burst,
            concurrent_per_credential: self.max_concurrent_per_credential,
            concurrent_total: self.max_concurrent_requests,
            request_timeout: Duration::from_secs(self.request_timeout_seconds),
        }
    }

    /// The database pool's bounds on waiting, over `base`.
    pub fn pool(&self, base: engine::PoolSettings) -> engine::PoolSettings {
        engine::PoolSettings {
            statement_timeout: Duration::from_secs(self.db_statement_timeout_seconds),
            lock_timeout: Duration::from_secs(self.db_lock_timeout_seconds),
            claimers_per_queue_set: self.claimers_per_queue_set as usize,
            ..base
        }
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_secs(self.header_read_timeout_seconds)
    }
}

/// The guard's settings; `switchboard serve --help` lists the flags that set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSettings {
    /// Sustained non-read requests per second per credential.
    pub writes_per_second: u32,
    /// Non-read requests a credential may send at once before the rate applies.
    pub write_burst: u32,
    /// Requests one credential may have in progress at once.
    pub concurrent_per_credential: u32,
    /// Requests the server may have in progress at once (streams excluded).
    pub concurrent_total: u32,
    /// How long one request may take before it is dropped and answered 503.
    pub request_timeout: Duration,
}

impl Default for LoadSettings {
    fn default() -> Self {
        LoadSettings {
            writes_per_second: 50,
            write_burst: 100,
            concurrent_per_credential: 16,
            concurrent_total: 512,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Keyed rate limiters keep one entry per key seen; past this many they drop idle ones.
const LIMITER_KEYS_SHRINK_AT: usize = 10_000;

/// One credential, as the guard tells them apart: a digest, never the secret itself.
type CredentialKey = [u8; 32];

/// The per-credential buckets and counters, and the server-wide permit pool.
pub struct LoadGuard {
    settings: LoadSettings,
    writes: DefaultKeyedRateLimiter<CredentialKey>,
    in_progress: Mutex<HashMap<CredentialKey, u32>>,
    total: Arc<Semaphore>,
}

impl Default for LoadGuard {
    fn default() -> Self {
        LoadGuard::new(LoadSettings::default())
    }
}

impl LoadGuard {
    pub fn new(settings: LoadSettings) -> LoadGuard {
        let per_second = NonZeroU32::new(settings.writes_per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(settings.write_burst).unwrap_or(NonZeroU32::MIN);
        LoadGuard {
            settings,
            writes: DefaultKeyedRateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            in_progress: Mutex::new(HashMap::new()),
            total: Arc::new(Semaphore::new(settings.concurrent_total.max(1) as usize)),
        }
    }

    pub fn settings(&self) -> LoadSettings {
        self.settings
    }

    /// Spends one write token of `key`, or says how many seconds until the next one.
    fn spend_write(&self, key: &CredentialKey) -> Result<(), u64> {
        if self.writes.len() > LIMITER_KEYS_SHRINK_AT {
            self.writes.retain_recent();
        }
        self.writes.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
        })
    }

    /// Takes one of `key`'s concurrency slots; `None` when all are taken. The map holds only
    /// credentials with a request in progress, so it never outgrows the total bound.
    fn enter(self: &Arc<Self>, key: CredentialKey) -> Option<Slot> {
        let mut in_progress = self.in_progress.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = in_progress.entry(key).or_insert(0);
        if *count >= self.settings.concurrent_per_credential.max(1) {
            return None;
        }
        *count += 1;
        Some(Slot { guard: self.clone(), key })
    }
}

/// A credential's concurrency slot, given back when the request ends (or is dropped).
struct Slot {
    guard: Arc<LoadGuard>,
    key: CredentialKey,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut in_progress = self.guard.in_progress.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = in_progress.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                in_progress.remove(&self.key);
            }
        }
    }
}

/// Whose request this is: the bearer token's digest, else the webhook id of an ingest path.
fn credential_of(request: &Request) -> Option<CredentialKey> {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let ingest = request.uri().path().strip_prefix("/ingest/");
    bearer.or(ingest).map(|secret_or_id| Sha256::digest(secret_or_id.as_bytes()).into())
}

/// An MCP stream: long-lived, holds no connection while it waits.
fn is_stream(request: &Request) -> bool {
    request.method() == Method::GET && request.uri().path().starts_with("/mcp/")
}

fn is_read(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// The middleware: refuses what is over a bound, otherwise runs the handler under the deadline.
pub async fn guard(State(load): State<Arc<LoadGuard>>, request: Request<Body>, next: Next) -> Response {
    if is_stream(&request) {
        return next.run(request).await;
    }
    let credential = credential_of(&request);
    if let Some(key) = &credential
        && !is_read(request.method())
        && let Err(seconds) = load.spend_write(key)
    {
        return too_many("too many requests for this credential; slow down", seconds);
    }
    let _slot = match credential {
        Some(key) => match load.enter(key) {
            Some(slot) => Some(slot),
            None => return too_many("too many requests in progress for this credential", 1),
        },
        None => None,
    };
    let Some(_permit): Option<OwnedSemaphorePermit> = load.total.clone().try_acquire_owned().ok() else {
        return unavailable("the server is at its request limit; retry shortly");
    };
    match tokio::time::timeout(load.settings.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(timeout_seconds = load.settings.request_timeout.as_secs(), "request timed out");
            unavailable("the request took too long and was abandoned; nothing it began was kept")
        }
    }
}

fn too_many(message: &str, retry_after_seconds: u64) -> Response {
    ApiError(Error::new(Code::RateLimited, message).with("retry_after_seconds", retry_after_seconds)).into_response()
}

/// 503 with `Retry-After: 1` (the error mapping in `wire.rs` adds the header).
fn unavailable(message: &str) -> Response {
    ApiError(Error::unavailable(message)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> CredentialKey {
        [n; 32]
    }

    #[test]
    fn a_credential_has_a_bounded_number_of_slots_and_gets_them_back() {
        let guard = Arc::new(LoadGuard::new(LoadSettings { concurrent_per_credential: 2, ..LoadSettings::default() }));
        let first = guard.enter(key(1)).expect("first");
        let _second = guard.enter(key(1)).expect("second");
        assert!(guard.enter(key(1)).is_none(), "a third is refused");
        assert!(guard.enter(key(2)).is_some(), "another credential is not affected");
        drop(first);
        assert!(guard.enter(key(1)).is_some(), "a slot comes back when its request ends");
    }

    #[test]
    fn the_slot_map_holds_only_credentials_in_progress() {
        let guard = Arc::new(LoadGuard::default());
        for n in 0..=255 {
            drop(guard.enter(key(n)).expect("slot"));
        }
        assert!(guard.in_progress.lock().expect("lock").is_empty());
    }

    #[test]
    fn writes_beyond_the_burst_are_refused_with_a_wait() {
        let guard = LoadGuard::new(LoadSettings { writes_per_second: 1, write_burst: 3, ..LoadSettings::default() });
        for _ in 0..3 {
            guard.spend_write(&key(7)).expect("within the burst");
        }
        assert_eq!(guard.spend_write(&key(7)), Err(1));
        guard.spend_write(&key(8)).expect("another credential has its own bucket");
    }
}
