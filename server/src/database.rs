//! Which database a command uses: `--database-url`/`DATABASE_URL` when given, otherwise the
//! embedded default: a PostgreSQL cluster the binary runs itself in `DATA_DIR/pg` from the
//! machine's server binaries, durable, reachable only over a Unix socket.

use engine::pg_cluster::{Cluster, ClusterConfig, PgBinaries};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The database inside the embedded cluster.
const EMBEDDED_DATABASE: &str = "switchboard";

/// An embedded cluster this process is using; `started_here` says whether it started it.
pub struct Embedded {
    cluster: Cluster,
    started_here: bool,
}

/// Where a command's database is.
pub enum Target {
    Url(String),
    Embedded { url: String, embedded: Embedded },
}

impl Target {
    pub fn url(&self) -> &str {
        match self {
            Target::Url(url) | Target::Embedded { url, .. } => url,
        }
    }
}

/// Resolves the database for a command, starting the embedded cluster when no URL is given.
pub async fn resolve(database_url: Option<String>, data_dir: &Path) -> Result<Target, String> {
    if let Some(url) = database_url.filter(|u| !u.trim().is_empty()) {
        return Ok(Target::Url(url));
    }
    let data_dir = data_dir.to_path_buf();
    let embedded = tokio::task::spawn_blocking(move || Embedded::ensure_running(&data_dir))
        .await
        .map_err(|e| format!("embedded PostgreSQL launcher panicked: {e}"))??;
    let url = embedded.cluster.socket_url(EMBEDDED_DATABASE);
    create_database_if_missing(&embedded.cluster).await?;
    Ok(Target::Embedded { url, embedded })
}

async fn create_database_if_missing(cluster: &Cluster) -> Result<(), String> {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&cluster.socket_url("postgres"))
        .await
        .map_err(|e| format!("cannot connect to the embedded PostgreSQL: {e}"))?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(EMBEDDED_DATABASE)
        .fetch_one(&mut admin)
        .await
        .map_err(|e| format!("embedded PostgreSQL: {e}"))?;
    if !exists {
        // The name is a constant; CREATE DATABASE takes no bind parameters.
        sqlx::query("CREATE DATABASE switchboard")
            .execute(&mut admin)
            .await
            .map_err(|e| format!("create database: {e}"))?;
    }
    admin.close().await.ok();
    Ok(())
}

/// `DATA_DIR/pg`, or, when we are root and the `postgres` OS user cannot walk to DATA_DIR (say it
/// is under /root), a directory under /var/lib/switchboard that `DATA_DIR/pg` links to. The
/// server must run as `postgres` there, and changing the permissions of the user's directories
/// to make that possible is not ours to do.
fn cluster_root(data_dir: &Path) -> Result<PathBuf, String> {
    let canonical = data_dir.canonicalize().map_err(|e| format!("data dir {}: {e}", data_dir.display()))?;
    let link = canonical.join("pg");
    // An absolute path: a relative one would be resolved from our cwd and skip the ancestors.
    let reachable = engine::pg_cluster::reachable_by_postgres(&canonical).map_err(|e| e.to_string())?;
    if reachable || link.exists() {
        return Ok(link);
    }
    let name: String =
        canonical.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let relocated = PathBuf::from("/var/lib/switchboard").join(name.trim_start_matches('_'));
    std::fs::create_dir_all(&relocated).map_err(|e| format!("cannot create {}: {e}", relocated.display()))?;
    std::os::unix::fs::symlink(&relocated, &link).map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    tracing::warn!(
        data_dir = %data_dir.display(),
        cluster = %relocated.display(),
        "the postgres OS user cannot reach the data dir, so the embedded cluster lives in /var/lib/switchboard (linked from DATA_DIR/pg)"
    );
    Ok(link)
}

impl Embedded {
    /// Uses the cluster in `data_dir/pg` if it is already running, else initialises (first run)
    /// and starts it. Blocking: runs initdb and pg_ctl.
    fn ensure_running(data_dir: &Path) -> Result<Embedded, String> {
        let bins = PgBinaries::locate()?;
        std::fs::create_dir_all(data_dir).map_err(|e| format!("cannot create data dir {}: {e}", data_dir.display()))?;
        let root = cluster_root(data_dir)?;
        let config = ClusterConfig { tcp_port: None, durable: true, max_connections: 100 };
        let cluster =
            Cluster::new(bins, &root, config).map_err(|e| format!("embedded PostgreSQL in {}: {e}", root.display()))?;
        if cluster.is_running() {
            tracing::info!(data_dir = %root.display(), "using the embedded PostgreSQL already running");
            return Ok(Embedded { cluster, started_here: false });
        }
        let started = std::time::Instant::now();
        if cluster.init_if_needed().map_err(|e| format!("initdb in {}: {e}", root.display()))? {
            tracing::info!(data_dir = %root.display(), "initialised a new embedded PostgreSQL cluster");
        }
        if let Err(error) = cluster.start() {
            // Another switchboard command may have started it in the meantime.
            if cluster.is_running() {
                return Ok(Embedded { cluster, started_here: false });
            }
            return Err(format!("cannot start the embedded PostgreSQL: {error}"));
        }
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "embedded PostgreSQL started");
        Ok(Embedded { cluster, started_here: true })
    }

    /// `serve` owns the embedded cluster and stops it on shutdown (fast: open transactions roll back).
    pub async fn stop(self) {
        let cluster = self.cluster;
        match tokio::task::spawn_blocking(move || cluster.stop("fast")).await {
            Ok(Ok(())) => tracing::info!("embedded PostgreSQL stopped"),
            Ok(Err(error)) => tracing::warn!(%error, "embedded PostgreSQL did not stop cleanly"),
            Err(error) => tracing::warn!(%error, "embedded PostgreSQL stop panicked"),
        }
    }

    /// A one-shot command (`admin …`, on a one-connection pool) stops the cluster again only if
    /// it started it and nobody else (a `serve` that came up meanwhile) is connected.
    pub async fn stop_if_unused(self, pool: &sqlx::PgPool) {
        if !self.started_here {
            return;
        }
        let others: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
        )
        .fetch_one(pool)
        .await
        .unwrap_or(1);
        pool.close().await;
        if others == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.stop().await;
        } else {
            tracing::info!("leaving the embedded PostgreSQL running: another process is using it");
        }
    }
}
