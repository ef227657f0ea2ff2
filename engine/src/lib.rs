//! Switchboard's production engine.
//!
//! Owns: `PgStore`, the `Store` on PostgreSQL (sqlx) with the claim transaction; the background
//! sweeps (lease reaper, retry scheduler); the PostgreSQL cluster launcher used by the embedded
//! default and by the test harness. Decisions and arithmetic come from `models`.
//! Must never know about HTTP, MCP or HTML.

pub mod pg_cluster;
pub mod pg_store;
pub mod sweeps;
pub mod testing;

pub use pg_store::{PgStore, PoolSettings};
