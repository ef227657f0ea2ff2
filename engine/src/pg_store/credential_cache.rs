//! Why this exists: an MCP call used to pay one round trip to PostgreSQL before its verb, to
//! find what its endpoint credential may do (issue #31 item 3: about 0.17 of the MCP/engine
//! ratio). A replica now answers that from a cache, and the promise that a revoked credential's
//! very next request is refused, on any replica, is kept by three rules:
//!
//! 1. **Every change counts.** `credential_epoch` is moved on by a trigger on each table the
//!    look-up reads (migration 0019), in the writer's own transaction, and the look-up reads the
//!    epoch in the same statement as the scope. A cached scope is used only while its epoch is
//!    the newest one the replica has applied.
//! 2. **A replica answers from its cache only under a lease.** It applies the current epoch,
//!    then writes the epoch applied and a lease (`credential_replicas`, database time) in one
//!    statement; it counts its own lease from before it read the epoch, and only for
//!    `LEASE_TRUSTED` of `LEASE`, so its clock may run a little fast against the database's.
//!    With no lease (not yet granted, lapsed because the database went away, or given up at
//!    shutdown) every look-up reads the database.
//! 3. **A writer waits.** After committing a change, a store method that changes a
//!    credential's reach (revoke, rotate, endpoint delete, human and member removal, membership
//!    changes) waits until every replica whose lease has not lapsed has applied that epoch
//!    (`await_credential_change`). A replica that cannot answer stops counting once its lease
//!    lapses, and by then it has stopped answering from its cache by rule 2.
//!
//! `pg_notify` at the trigger tells replicas at commit, so a revocation normally returns within
//! a few milliseconds; the lease's renewal reads the epoch too, so a lost notification delays a
//! writer by one renewal period at most, never a replica's refusal. Only found credentials are
//! cached: an unknown or revoked token always reads the database.

use super::{PgStore, db_error};
use models::error::{Error, Result};
use models::scope::AgentScope;
use models::store::AgentLookup;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The channel the epoch trigger announces on (migration 0019).
pub const CREDENTIALS_CHANNEL: &str = "switchboard_credentials";
/// How long the database counts a replica's lease after its renewal.
const LEASE: Duration = Duration::from_secs(3);
/// How long the replica itself counts it, from before its renewal began: a fifth less, so a
/// replica clock up to that much fast against the database's still stops first.
const LEASE_TRUSTED: Duration = Duration::from_millis(2_400);
/// How often a replica renews its lease and reads the epoch.
const RENEW_EVERY: Duration = Duration::from_millis(750);
/// How often a waiting writer asks again whether every replica has applied its epoch.
const WAIT_POLL: Duration = Duration::from_millis(2);
/// Entries kept before the cache is emptied and starts again (credentials, not requests).
const ENTRIES_MAX: usize = 10_000;

/// One replica's cache of endpoint credentials, keyed by the token's hash.
pub struct CredentialCache {
    replica_id: String,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    /// The newest epoch applied: entries read at another are not answered from.
    applied_epoch: i64,
    /// Until when this replica may answer from the cache; None: it may not.
    lease_deadline: Option<Instant>,
    entries: HashMap<String, Cached>,
}

struct Cached {
    epoch: i64,
    agent: AgentScope,
}

impl CredentialCache {
    pub fn new(replica_id: String) -> CredentialCache {
        CredentialCache { replica_id, state: Mutex::default() }
    }

    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // A panic while holding the lock leaves plain data behind; the lease rules still hold.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The credential's answer from the cache, if this replica holds a lease and the entry was
    /// read at the epoch it last applied.
    pub fn lookup(&self, slug: &str, token_hash: &str) -> Option<AgentLookup> {
        let state = self.state();
        let leased = state.lease_deadline.is_some_and(|deadline| Instant::now() < deadline);
        let cached = state.entries.get(token_hash).filter(|cached| leased && cached.epoch == state.applied_epoch)?;
        let agent = &cached.agent;
        Some(if agent.endpoint_slug == slug || agent.endpoint_id == slug {
            AgentLookup::Found(Box::new(agent.clone()))
        } else {
            AgentLookup::OtherEndpoint
        })
    }

    /// A credential found by the database, with the epoch read in the same statement.
    pub fn remember(&self, token_hash: &str, epoch: i64, agent: &AgentScope) {
        let mut state = self.state();
        if epoch < state.applied_epoch {
            return;
        }
        if state.entries.len() >= ENTRIES_MAX {
            state.entries.clear();
        }
        state.entries.insert(token_hash.to_owned(), Cached { epoch, agent: agent.clone() });
    }

    /// The database's epoch is `epoch`: entries read before it are no longer answered from.
    pub fn apply(&self, epoch: i64) {
        let mut state = self.state();
        if epoch > state.applied_epoch {
            state.applied_epoch = epoch;
            state.entries.retain(|_, cached| cached.epoch >= epoch);
        }
    }

    pub fn applied_epoch(&self) -> i64 {
        self.state().applied_epoch
    }

    fn renewed(&self, began: Instant) {
        self.state().lease_deadline = Some(began + LEASE_TRUSTED);
    }

    /// Stops answering from the cache at once (shutdown, or a test of a lapsed lease).
    pub fn give_up_lease(&self) {
        self.state().lease_deadline = None;
    }
}

impl PgStore {
    /// Renews this replica's lease: reads the epoch, applies it, then tells the database which
    /// epoch it applied and until when it may answer from its cache.
    pub async fn renew_credential_lease(&self) -> Result<()> {
        let Some(cache) = &self.credentials else { return Ok(()) };
        let began = Instant::now();
        let epoch: i64 =
            sqlx::query_scalar("SELECT epoch FROM credential_epoch").fetch_one(&self.pool).await.map_err(db_error)?;
        cache.apply(epoch);
        sqlx::query(
            "INSERT INTO credential_replicas (replica_id, applied_epoch, lease_until) \
             VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond') \
             ON CONFLICT (replica_id) DO UPDATE SET applied_epoch = EXCLUDED.applied_epoch, \
               lease_until = EXCLUDED.lease_until",
        )
        .bind(cache.replica_id())
        .bind(cache.applied_epoch())
        .bind(i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        cache.renewed(began);
        Ok(())
    }

    /// Gives this replica's lease up, here and in the database, so writers stop waiting for it.
    pub async fn release_credential_lease(&self) {
        let Some(cache) = &self.credentials else { return };
        cache.give_up_lease();
        if let Err(error) = sqlx::query("DELETE FROM credential_replicas WHERE replica_id = $1")
            .bind(cache.replica_id())
            .execute(&self.pool)
            .await
        {
            tracing::warn!(%error, "could not give up the credential lease; writers wait for it to lapse");
        }
    }

    /// After a change to what a credential may do has committed: returns once every replica
    /// holding a lease has applied the epoch that change reached (rule 3 above). Fails closed:
    /// were a replica to keep renewing without applying it, the caller hears `unavailable`.
    pub async fn await_credential_change(&self) -> Result<()> {
        let epoch: i64 =
            sqlx::query_scalar("SELECT epoch FROM credential_epoch").fetch_one(&self.pool).await.map_err(db_error)?;
        if let Some(cache) = &self.credentials {
            cache.apply(epoch);
        }
        let began = Instant::now();
        loop {
            let behind: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM credential_replicas \
                 WHERE applied_epoch < $1 AND lease_until > clock_timestamp()",
            )
            .bind(epoch)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
            if behind == 0 {
                return Ok(());
            }
            if began.elapsed() > LEASE + RENEW_EVERY {
                tracing::error!(epoch, behind, "replicas holding a credential lease did not apply a change");
                return Err(Error::unavailable("the change is saved, but not every replica has confirmed it yet"));
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }
}

/// Keeps this replica's lease while the server runs: renews it every `RENEW_EVERY` and whenever
/// the epoch trigger announces a change, and gives it up at shutdown. A store without a cache
/// has nothing to keep.
pub fn spawn_keeper(store: PgStore, mut shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        if store.credentials.is_none() {
            return;
        }
        if let Err(error) = sqlx::query("DELETE FROM credential_replicas WHERE lease_until < now() - interval '1 hour'")
            .execute(&store.pool)
            .await
        {
            tracing::warn!(%error, "could not forget long-lapsed credential leases");
        }
        let mut listener = match sqlx::postgres::PgListener::connect_with(&store.pool).await {
            Ok(mut listener) => match listener.listen(CREDENTIALS_CHANNEL).await {
                Ok(()) => Some(listener),
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for credential changes; renewals alone apply them");
                    None
                }
            },
            Err(error) => {
                tracing::warn!(%error, "cannot listen for credential changes; renewals alone apply them");
                None
            }
        };
        let mut renewals = tokio::time::interval(RENEW_EVERY);
        renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let announced = async {
                match listener.as_mut() {
                    Some(listener) => listener.recv().await.map(|_| ()),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                outcome = announced => {
                    if let Err(error) = outcome {
                        // The listener reconnects on its next receive; the renewal catches up.
                        tracing::warn!(%error, "credential listener lost its connection; reconnecting");
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
                _ = renewals.tick() => {}
            }
            if let Err(error) = store.renew_credential_lease().await {
                tracing::warn!(%error, "credential lease not renewed; answering from the database until it is");
            }
        }
        store.release_credential_lease().await;
    })
}
