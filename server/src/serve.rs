//! `switchboard serve`: migrate, then serve HTTP until SIGINT/SIGTERM, then stop in order:
//! stop accepting, finish in-flight requests, stop the sweeps, close the pool, stop the embedded
//! PostgreSQL if this process runs one.

use crate::app::router;
use crate::database::{self, Target};
use crate::hook_sender::AddressPolicy;
use crate::load::{LoadArgs, LoadGuard};
use crate::public_url::PublicUrl;
use crate::push::{Hub, tasks};
use crate::state::AppState;
use engine::pg_store::credential_cache;
use engine::{PgStore, PoolSettings, sweeps};
use models::store::{Store, SystemClock};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub struct ServeOptions {
    pub listen: SocketAddr,
    pub database_url: Option<String>,
    pub data_dir: PathBuf,
    pub reaper_interval: Duration,
    pub pool_connections_max: u32,
    /// The base of the URLs handed out (`--public-url`); none: the request's Host over http.
    pub public_url: PublicUrl,
    /// Bounds on load: per credential, per server, per request, per database wait (`load.rs`).
    pub load: LoadArgs,
}

pub async fn run(options: ServeOptions) -> Result<(), String> {
    let target = database::resolve(options.database_url, &options.data_dir).await?;
    let settings =
        options.load.pool(PoolSettings { connections_max: options.pool_connections_max, ..PoolSettings::default() });
    let (intake_env, warning) =
        models::capacity::parse_env(std::env::var(models::capacity::CAPACITY_ENV).ok().as_deref());
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    let replica_id = Hub::random_replica_id();
    let store = match PgStore::connect(target.url(), settings, Arc::new(SystemClock)).await {
        Ok(store) => store
            .with_intake_env(intake_env)
            .with_reaper_interval(options.reaper_interval)
            .with_credential_cache(replica_id.clone()),
        Err(error) => {
            stop_embedded(target).await;
            return Err(format!("cannot connect to the database: {error}"));
        }
    };
    if let Err(error) = store.migrate().await {
        stop_embedded(target).await;
        return Err(format!("migrations failed: {error}"));
    }
    tracing::info!("database migrated");

    let listener = match tokio::net::TcpListener::bind(options.listen).await {
        Ok(listener) => listener,
        Err(error) => {
            stop_embedded(target).await;
            return Err(format!("cannot listen on {}: {error}", options.listen));
        }
    };
    let address = listener.local_addr().map_err(|e| e.to_string())?;

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let sweeper = sweeps::spawn(store.clone(), options.reaper_interval, shutdown_rx.clone());
    let metrics = Arc::new(crate::metrics::MetricsConfig::from_env());
    let credential_keeper = credential_cache::spawn_keeper(store.clone(), shutdown_rx.clone());
    let push = Arc::new(Hub::new(replica_id));
    let hook_addresses = AddressPolicy::from_env();
    if hook_addresses == AddressPolicy::AllowPrivate {
        tracing::warn!("SWITCHBOARD_HOOKS_ALLOW_PRIVATE is set: notify hooks may call private and loopback addresses");
    }
    let mut pushers =
        tasks::spawn(store.clone(), push.clone(), options.reaper_interval, hook_addresses, shutdown_rx.clone());
    pushers.push(listen_for_doorbells(store.clone(), store.pool().clone(), push.clone(), shutdown_rx.clone()));
    if let Some(base) = options.public_url.configured() {
        tracing::info!(public_url = base, "handing out URLs under the configured public base");
    }
    let state = AppState {
        metrics,
        push: push.clone(),
        hook_addresses,
        public_url: options.public_url,
        load: Some(Arc::new(LoadGuard::new(options.load.settings()))),
        ..AppState::new(store.clone())
    };
    let app = router(state.clone()).merge(crate::board::router(state, shutdown_rx.clone()));

    // Tests and scripts wait for exactly this line.
    println!("switchboard listening on http://{address}");
    tracing::info!(%address, reaper_interval_s = options.reaper_interval.as_secs(), "serving");

    let server = crate::http_server::serve(listener, app, options.load.header_read_timeout(), shutdown_rx.clone());
    let streams = push.clone();
    let signals = tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested; finishing in-flight requests");
        let _ = shutdown_tx.send(true);
        // Open MCP streams never finish on their own: end them so the graceful stop can.
        streams.close(&streams.sessions(), None);
    });
    server.await;
    signals.abort();
    let _ = sweeper.await;
    let _ = credential_keeper.await;
    for pusher in pushers {
        let _ = pusher.await;
    }
    store.pool().close().await;
    stop_embedded(target).await;
    tracing::info!("stopped");
    Ok(())
}

async fn stop_embedded(target: Target) {
    if let Target::Embedded { embedded, .. } = target {
        embedded.stop().await;
    }
}

/// Resolves once `shutdown` (the signal `run` sends its loops) is true, or once its sender is
/// gone: then no one is left to ask for a stop, and waiting for a change that cannot come would
/// return at once, every time. The answer's borrow is dropped inside, so a future that awaits
/// this can be spawned.
pub(crate) async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        tracing::error!("cannot install signal handlers; stop the server with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        biased;
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

/// Delivers doorbells decided on any replica (announced with `pg_notify` at their commit) to the
/// streams this process holds. When its connection drops (the database restarting, a failover)
/// announcements made meanwhile never reach it, so once it listens again it catches up: every
/// held stream gets the rings recorded for its session after the newest it had (issue #51: a
/// ring recorded and never delivered is a ring lost). Public so a replica served in process (the
/// stress run) delivers as a server does.
pub fn listen_for_doorbells<S: Store>(
    store: S,
    pool: sqlx::PgPool,
    hub: Arc<Hub>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut listener: Option<sqlx::postgres::PgListener> = None;
        loop {
            let Some(connected) = listener.as_mut() else {
                tokio::select! {
                    biased;
                    _ = shutdown.changed() => break,
                    listening = listen(&pool) => match listening {
                        Ok(connected) => {
                            listener = Some(connected);
                            catch_up(&store, &hub).await;
                        }
                        Err(error) => {
                            tracing::warn!(%error, "cannot listen for doorbells yet; trying again");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    },
                }
                continue;
            };
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                received = connected.recv() => match received {
                    Ok(notification) => tasks::deliver_announced(&hub, notification.payload()),
                    Err(error) => {
                        tracing::warn!(%error, "doorbell listener lost its connection; reconnecting");
                        listener = None;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                },
            }
        }
    })
}

/// A connection listening on the doorbell channel.
async fn listen(pool: &sqlx::PgPool) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen(engine::pg_store::PUSH_CHANNEL).await?;
    Ok(listener)
}

/// Delivers to every stream held here the rings recorded for its session after the newest it
/// has had; the stream drops a ring it already has (`Hub::deliver`).
async fn catch_up<S: Store>(store: &S, hub: &Hub) {
    for (session, after) in hub.catch_up_points() {
        match store.rings_since(&session, after).await {
            Ok(missed) if !missed.is_empty() => {
                tracing::info!(session = %session, rings = missed.len(), "doorbells caught up after the listener reconnected");
                hub.deliver_rings_to_session(&session, &missed);
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, session = %session, "could not catch up on doorbells"),
        }
    }
}
