//! The throwaway-Postgres test harness: one cluster per test binary, one database per test.
//!
//! Real PostgreSQL in every test that touches storage, never a mock. The cluster starts on first
//! use (≈0.6 s), each test gets a fresh database with the migrations applied (≈60 ms), and a
//! watchdog removes the cluster when the test process ends, however it ends.

use crate::pg_cluster::{Cluster, ClusterConfig, PgBinaries};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
static DATABASES_MADE: AtomicU32 = AtomicU32::new(0);

/// The shared cluster of this test binary, started on first call.
pub fn cluster() -> &'static Cluster {
    let started = CLUSTER.get_or_init(|| start_cluster().map_err(|e| e.to_string()));
    match started {
        Ok(cluster) => cluster,
        // A test cannot run without its database; failing loudly here is the point.
        Err(message) => panic!("cannot start the throwaway PostgreSQL cluster: {message}"),
    }
}

fn start_cluster() -> Result<Cluster, Box<dyn std::error::Error>> {
    let bins = PgBinaries::locate()?;
    let root = tempfile::Builder::new().prefix("sbpg-").tempdir_in("/tmp")?.keep();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    // Benchmarks measure durable storage with SWITCHBOARD_TEST_DURABLE=1 (fsync, synchronous
    // commit and full-page writes on); tests need none of it.
    let durable = durable_requested();
    let config = ClusterConfig { tcp_port: Some(port), durable, max_connections: 300 };
    let cluster = Cluster::new(bins, &root, config)?;
    cluster.remove_when_process_exits(std::process::id())?;
    cluster.init_if_needed()?;
    cluster.start()?;
    Ok(cluster)
}

/// Whether this process asked for a durable throwaway cluster (`SWITCHBOARD_TEST_DURABLE=1`).
pub fn durable_requested() -> bool {
    std::env::var("SWITCHBOARD_TEST_DURABLE").is_ok_and(|value| value == "1")
}

/// A fresh, migrated database on the shared cluster.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    pub name: String,
    pub url: String,
}

/// Creates a database for one test and applies the migrations to it.
pub async fn fresh_database() -> TestDatabase {
    let database = empty_database().await;
    let pool =
        sqlx::PgPool::connect(&database.url).await.unwrap_or_else(|e| panic!("connect to {}: {e}", database.name));
    crate::pg_store::MIGRATOR.run(&pool).await.unwrap_or_else(|e| panic!("migrate {}: {e}", database.name));
    pool.close().await;
    database
}

/// Creates an empty database (no migrations), e.g. for a server that migrates it itself.
pub async fn empty_database() -> TestDatabase {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap_or_else(|e| panic!("cluster start: {e}"));
    let name = format!("t{}_{}", std::process::id(), DATABASES_MADE.fetch_add(1, Ordering::SeqCst));
    let mut admin = admin_connection(cluster).await;
    // `name` is built above from the pid and a counter: digits and underscores only.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name} TEMPLATE template0")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    let url = cluster.tcp_url(&name).unwrap_or_else(|| unreachable!("test clusters listen on TCP"));
    TestDatabase { name, url }
}

/// Drops a test database (benchmarks drop theirs so one run's leftovers, and autovacuum on
/// them, do not slow the next).
pub async fn drop_database(database: &TestDatabase) {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap_or_else(|e| panic!("cluster start: {e}"));
    let mut admin = admin_connection(cluster).await;
    // The name was built by `empty_database`: digits and underscores only.
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", database.name)))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("drop database {}: {e}", database.name));
}

/// A connection to the cluster's `postgres` database, for creating and dropping test databases.
async fn admin_connection(cluster: &Cluster) -> sqlx::PgConnection {
    let admin_url = cluster.tcp_url("postgres").unwrap_or_else(|| unreachable!("test clusters listen on TCP"));
    <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("connect to the test cluster: {e}"))
}
