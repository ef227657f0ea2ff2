//! Switchboard's deterministic simulation.
//!
//! Owns (as the simulation issue fills it in): turmoil hosts for server replicas, agents and a
//! database host; fault injection; invariant checks; the seeded-bug catalog; a CLI. Must never
//! be needed at runtime by the server. Today it holds nothing beyond this crate boundary.
