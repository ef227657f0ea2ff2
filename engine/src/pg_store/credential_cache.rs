//! Why this exists: an MCP call used to pay one round trip to PostgreSQL before its verb, to
//! find what its endpoint credential may do (issue #31 item 3: about 0.17 of the MCP/engine
//! ratio). A replica now answers that from a cache, and the promise that a revoked credential's
//! very next request is refused, on any replica, is kept by three rules:
//!
//! 1. **Every change counts.** `credential_epoch` is moved on by a trigger on each table the
//!    look-up reads (migration 0019), in the writer's own transaction, and the look-up reads the
//!    epoch in the same statement as the scope. A cached scope is used only while its epoch is
//!    the one the replica last applied.
//! 2. **A replica answers from its cache only under a lease it keeps renewing.** A renewal is
//!    one transaction: it reads the epoch `FOR SHARE` (so no change can commit between that read
//!    and the renewal's commit), applies it, and counts one more renewal in
//!    `credential_replicas`. The replica counts its lease for `LEASE_TRUSTED` from before the
//!    renewal began. With no lease (not yet renewed, lapsed because renewals fail, or given up
//!    at shutdown) every look-up reads the database.
//! 3. **A writer waits.** After committing a change, a store method that changes a credential's
//!    reach (revoke, rotate, endpoint delete, human and member removal, membership changes)
//!    returns once every replica row either shows the change applied or has not renewed for
//!    `LEASE` by the writer's own clock: such a replica's last lease, counted from before that
//!    renewal committed, ran out first (`LEASE_TRUSTED` is a fifth shorter, so a replica clock
//!    running up to a fifth slow against the writer's still stops first). Rows whose lease lapsed
//!    `FORGOTTEN_AFTER` ago by the database's clock are replicas long gone and are not waited for.
//!
//! `pg_notify` at the trigger tells replicas at commit, so a revocation normally returns within
//! a few milliseconds; a lost notification delays a writer by one renewal period; a replica that
//! died without giving its lease up delays writers by `LEASE` for `FORGOTTEN_AFTER`. Only found
//! credentials are cached: an unknown or revoked token always reads the database. A server
//! older than migration 0019's (a rolling upgrade) changes credentials without waiting: until
//! every replica runs this code, its revocations reach the others as fast as the notification.

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
/// How long a writer waits for a replica that has stopped renewing, on the writer's own clock.
const LEASE: Duration = Duration::from_secs(3);
/// How long the replica itself counts its lease, from before its renewal began: a fifth less.
const LEASE_TRUSTED: Duration = Duration::from_millis(2_400);
/// How often a replica renews its lease and reads the epoch.
const RENEW_EVERY: Duration = Duration::from_millis(750);
/// A replica whose lease (database clock) lapsed this long ago is gone: writers do not wait.
const FORGOTTEN_AFTER_SECONDS: i64 = 10;
/// How often a waiting writer asks again whether every replica has applied its epoch.
const WAIT_POLL: Duration = Duration::from_millis(5);
/// How long a writer waits in all before it answers `unavailable` (the change stays saved).
const WAIT_MAX: Duration = Duration::from_secs(8);
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

    /// A change reached `epoch`: entries read before it are no longer answered from.
    pub fn apply(&self, epoch: i64) {
        let mut state = self.state();
        if epoch > state.applied_epoch {
            state.applied_epoch = epoch;
            state.entries.retain(|_, cached| cached.epoch >= epoch);
        }
    }

    /// The database's epoch, as a renewal reads it. Lower than the one applied only when the
    /// database went back in time (a restore, a failover that lost commits): then nothing
    /// cached is trusted, and the database's count is taken as it is.
    fn apply_database_epoch(&self, epoch: i64) {
        let mut state = self.state();
        if epoch < state.applied_epoch {
            tracing::warn!(epoch, applied = state.applied_epoch, "credential epoch went back; cache emptied");
            state.entries.clear();
            state.applied_epoch = epoch;
        }
        drop(state);
        self.apply(epoch);
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
    /// Renews this replica's lease (rule 2): in one transaction, reads the epoch `FOR SHARE`,
    /// applies it, and records the epoch applied and one more renewal.
    pub async fn renew_credential_lease(&self) -> Result<()> {
        let Some(cache) = &self.credentials else { return Ok(()) };
        let began = Instant::now();
        let mut tx = self.begin().await?;
        let outcome = async {
            let epoch: i64 = sqlx::query_scalar("SELECT epoch FROM credential_epoch FOR SHARE")
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
            cache.apply_database_epoch(epoch);
            sqlx::query(
                "INSERT INTO credential_replicas (replica_id, applied_epoch, renewals, lease_until) \
                 VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 millisecond') \
                 ON CONFLICT (replica_id) DO UPDATE SET applied_epoch = EXCLUDED.applied_epoch, \
                   renewals = credential_replicas.renewals + 1, lease_until = EXCLUDED.lease_until",
            )
            .bind(cache.replica_id())
            .bind(cache.applied_epoch())
            .bind(i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            Ok(())
        }
        .await;
        super::finish(tx, outcome).await?;
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

    /// After a change to what a credential may do has committed: returns once every replica has
    /// applied the epoch that change reached or has been silent for `LEASE` (rule 3). A failed
    /// read is tried again until `WAIT_MAX`; past it the caller hears `unavailable`, although the
    /// change is saved (repeating the call is harmless).
    pub async fn await_credential_change(&self) -> Result<()> {
        let began = Instant::now();
        let mut target: Option<i64> = None;
        let mut silent_since: HashMap<String, (i64, Instant)> = HashMap::new();
        loop {
            match self.replicas_behind(&mut target).await {
                Ok(behind) => {
                    let now = Instant::now();
                    let mut waiting = false;
                    for (replica_id, renewals) in behind {
                        let seen = silent_since.entry(replica_id).or_insert((renewals, now));
                        if seen.0 != renewals {
                            *seen = (renewals, now);
                        }
                        waiting |= now.duration_since(seen.1) < LEASE;
                    }
                    if !waiting {
                        return Ok(());
                    }
                }
                Err(error) => tracing::warn!(%error, "waiting for replicas to apply a credential change"),
            }
            if began.elapsed() > WAIT_MAX {
                tracing::error!(epoch = target, "replicas did not confirm a credential change in time");
                return Err(Error::unavailable("the change is saved, but not every replica has confirmed it yet"));
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }

    /// The replicas, not long gone, that have not applied `target` (read once, after the
    /// change committed, and applied here at once), with their renewal counts.
    async fn replicas_behind(&self, target: &mut Option<i64>) -> Result<Vec<(String, i64)>> {
        let epoch = match *target {
            Some(epoch) => epoch,
            None => {
                let epoch: i64 = sqlx::query_scalar("SELECT epoch FROM credential_epoch")
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                if let Some(cache) = &self.credentials {
                    cache.apply(epoch);
                }
                *target = Some(epoch);
                epoch
            }
        };
        sqlx::query_as(
            "SELECT replica_id, renewals FROM credential_replicas WHERE applied_epoch < $1 \
             AND lease_until > clock_timestamp() - $2 * interval '1 second'",
        )
        .bind(epoch)
        .bind(FORGOTTEN_AFTER_SECONDS)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }
}

/// Keeps this replica's lease while the server runs: renews it every `RENEW_EVERY` and whenever
/// the epoch trigger announces a change, listens again when the listener could not, and gives
/// the lease up at shutdown. A store without a cache has nothing to keep.
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
        let mut listener = None;
        let mut renewals = tokio::time::interval(RENEW_EVERY);
        renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if listener.is_none() {
                listener = listen(&store).await;
            }
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
            // A renewal that hangs would keep no lease anyway: bounded, and shutdown still heard.
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                renewed = tokio::time::timeout(LEASE, store.renew_credential_lease()) => match renewed {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => tracing::warn!(%error, "credential lease not renewed; reading credentials from the database"),
                    Err(_) => tracing::warn!("credential lease renewal timed out; reading credentials from the database"),
                },
            }
        }
        store.release_credential_lease().await;
    })
}

/// A listener on the epoch trigger's channel, or None (tried again at the next renewal).
async fn listen(store: &PgStore) -> Option<sqlx::postgres::PgListener> {
    let connected = tokio::time::timeout(LEASE, async {
        let mut listener = sqlx::postgres::PgListener::connect_with(&store.pool).await?;
        listener.listen(CREDENTIALS_CHANNEL).await?;
        Ok::<_, sqlx::Error>(listener)
    })
    .await;
    match connected {
        Ok(Ok(listener)) => Some(listener),
        Ok(Err(error)) => {
            tracing::warn!(%error, "cannot listen for credential changes yet; renewals apply them meanwhile");
            None
        }
        Err(_) => {
            tracing::warn!("listening for credential changes timed out; renewals apply them meanwhile");
            None
        }
    }
}
