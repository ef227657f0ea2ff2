//! The simulation's in-memory side: `ModelStore` (models/src/model_store), the executable
//! specification, as the database of a run.

use crate::sim_store::SimStore;
use models::identity::QueueIdentity;
use models::model_store::ModelStore;

impl SimStore for ModelStore {
    fn add_human(&self, name: &str, token_hash: &str) -> String {
        ModelStore::add_human(self, name, false, token_hash).unwrap_or_else(|e| panic!("set-up: human {e}")).id
    }

    fn add_team(&self, name: &str, owner_human_id: &str) -> (String, String) {
        let team = ModelStore::add_team(self, name, owner_human_id).unwrap_or_else(|e| panic!("set-up: team {e}"));
        (team.id, team.slug)
    }

    fn corrupt_policy_zone(&self, identity: &QueueIdentity) {
        ModelStore::corrupt_policy_zone(self, identity, crate::postgres::UNKNOWN_ZONE);
    }

    /// The model keeps no second record to compare with: the ledger and final-state checks
    /// (`check`) are its judges.
    fn final_check(&self) -> Vec<String> {
        vec![]
    }

    fn hook_outbox(&self) -> Vec<models::model_store::OutboxEntry> {
        ModelStore::push_journal(self).outbox
    }

    fn push_journal(&self) -> Option<models::model_store::PushJournal> {
        Some(ModelStore::push_journal(self))
    }
}
