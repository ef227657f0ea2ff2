//! What the simulation needs from a store beyond `Store`: set-up of principals, damaging a policy
//! row, and the store's own end-of-run checks and histories.
//!
//! Exists in its own module so the stores that implement it (`model.rs`, `postgres.rs`) and the
//! judges that read it (`check.rs`) depend on this trait alone, not on the world that runs them.

use models::identity::QueueIdentity;
use models::store::Store;

/// A store the simulation can set up, damage and judge (the model store or PostgreSQL through
/// the bridge).
pub trait SimStore: Store {
    /// Creates a human with an operator token whose SHA-256 hex is `token_hash`; its id.
    fn add_human(&self, name: &str, token_hash: &str) -> String;
    /// Creates a team owned by `owner_human_id`; (team id, slug).
    fn add_team(&self, name: &str, owner_human_id: &str) -> (String, String);
    /// Overwrites the stored zone of `identity`'s policy with one no zone database knows.
    fn corrupt_policy_zone(&self, identity: &QueueIdentity);
    /// The store's own end-of-run invariant checks (SQL for Postgres); violations.
    fn final_check(&self) -> Vec<String>;
    /// Every notify-hook call decided, in `hook_outbox` id order, with its fate.
    fn hook_outbox(&self) -> Vec<models::model_store::OutboxEntry>;
    /// The model's push journal (doorbells and the reopen watches it inserted); None for a store
    /// that keeps no history of its watches.
    fn push_journal(&self) -> Option<models::model_store::PushJournal>;
}
