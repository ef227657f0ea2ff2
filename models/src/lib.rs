//! The pure core of Switchboard and its executable specification.
//!
//! Owns: the domain types, the error codes, tenancy rules, the `Store` and `Clock` traits, the
//! admission decision and window arithmetic (SPEC-0030), shared by the production engine and the
//! reference model so the two cannot drift. Must never depend on Postgres, tokio or axum.

pub mod admission;
pub mod capacity;
pub mod charges;
pub mod claim;
pub mod counters;
pub mod error;
pub mod forecast;
pub mod identity;
pub mod json_number;
pub mod limits;
pub mod lock_model;
pub mod model_store;
pub mod mutants;
pub mod presence;
pub mod push;
pub mod rate;
pub mod reference;
pub mod scope;
pub mod shared_budget;
pub mod storable;
pub mod store;
pub mod todo;
pub mod verbs;
pub mod what_if;
pub mod window;
#[cfg(test)]
mod wire_properties;

pub use error::{Code, Error, Result};
