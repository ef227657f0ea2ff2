//! Switchboard's deterministic simulation: the production router on simulated replicas over one
//! shared store (the in-memory `ModelStore` or, through a blocking bridge, real PostgreSQL),
//! simulated agents, an owner and a webhook producer, fault injection, invariant checks, the
//! differential run, the real-concurrency stress run and the seeded-bug catalog.
//!
//! Must never be needed at runtime by the server.

pub mod bridge;
pub mod check;
pub mod check_forecast;
pub mod check_push;
pub mod check_reopen;
pub mod config;
pub mod coverage;
pub mod fake_data;
pub mod fault_driver;
pub mod faults;
pub mod ledger;
pub mod model;
#[cfg(feature = "mutants")]
pub mod mutants;
pub mod net;
pub mod oracle;
pub mod postgres;
pub mod push_world;
pub mod replies;
pub mod rng;
pub mod runner;
pub mod sim_store;
pub mod sim_time;
pub mod sql_invariants;
pub mod stress;
pub mod trace;
pub mod workload;
pub mod world;
