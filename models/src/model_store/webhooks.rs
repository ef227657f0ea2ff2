//! Webhooks in memory (`engine/src/pg_store/webhooks.rs`): registration, and ingest of one
//! delivery as one transaction that records the delivery id and fans out one todo per target.
//!
//! Governing: SPEC-0030 REQ-2 (each fan-out copy belongs to its own queue identity), REQ-3 (a
//! redelivery creates nothing and charges nothing); intake-capacity.md (one full copy refuses the
//! whole delivery and leaves its delivery id unrecorded).

use super::{ModelStore, WebhookRow, database_error, queue_name_ok};
use crate::error::{Code, Error, Result};
use crate::identity::QueueIdentity;
use crate::store::{Ingested, PreviousSecret, WebhookRoute, WebhookSummary, Webhooks};
use crate::todo::NewTodo;

impl ModelStore {
    /// Registers a webhook owned by a human, fanning out to `targets` in the given order (REQ-2).
    pub(super) fn create_webhook_tx(
        &self,
        owner: &str,
        name: &str,
        secret: &str,
        targets: &[QueueIdentity],
    ) -> Result<String> {
        let mut state = self.lock();
        // The foreign keys and CHECKs of `webhooks` and `webhook_targets`.
        if !state.human_exists(owner) || targets.iter().any(|t| !queue_name_ok(&t.queue) || !state.owner_exists(t)) {
            return Err(database_error());
        }
        let id = state.next_id("wh");
        state.webhooks.push(WebhookRow {
            id: id.clone(),
            name: name.to_string(),
            owner_human_id: owner.to_string(),
            secret: secret.to_string(),
            previous_secret: None,
            previous_secret_expires_at: None,
            targets: targets.to_vec(),
        });
        Ok(id)
    }

    /// The webhooks a human owns, in creation order.
    pub(super) fn list_webhooks_tx(&self, owner: &str) -> Vec<WebhookSummary> {
        let state = self.lock();
        state
            .webhooks
            .iter()
            .filter(|w| w.owner_human_id == owner)
            .map(|w| WebhookSummary { id: w.id.clone(), name: w.name.clone(), targets: w.targets.clone() })
            .collect()
    }

    /// Deletes one of the human's webhooks and its delivery records (`ON DELETE CASCADE`).
    pub(super) fn delete_webhook_tx(&self, owner: &str, webhook_id: &str) -> Result<()> {
        let mut state = self.lock();
        let before = state.webhooks.len();
        state.webhooks.retain(|w| !(w.id == webhook_id && w.owner_human_id == owner));
        if state.webhooks.len() == before {
            return Err(Error::not_found());
        }
        state.deliveries.retain(|(webhook, _), _| webhook != webhook_id);
        Ok(())
    }

    /// Replaces one of the human's webhooks' signing secret; the replaced one verifies for the
    /// grace (issue #14) and takes the place of any earlier previous secret.
    pub(super) fn rotate_webhook_secret_tx(&self, owner: &str, webhook_id: &str, secret: &str) -> Result<()> {
        let mut state = self.lock();
        let now = self.clock.now();
        let webhook = state
            .webhooks
            .iter_mut()
            .find(|w| w.id == webhook_id && w.owner_human_id == owner)
            .ok_or_else(Error::not_found)?;
        webhook.previous_secret = Some(std::mem::replace(&mut webhook.secret, secret.to_string()));
        webhook.previous_secret_expires_at = Some(PreviousSecret::grace_end(now));
        Ok(())
    }

    /// What verifying and routing a delivery needs (system read; REQ-2: one copy per identity).
    pub(super) fn webhook_for_ingest_tx(&self, webhook_id: &str) -> Option<WebhookRoute> {
        let state = self.lock();
        let now = self.clock.now();
        let webhook = state.webhooks.iter().find(|w| w.id == webhook_id)?;
        // The owner's reach, read live: a target they no longer manage receives nothing.
        let manages = super::principals::scope_of(&state, &webhook.owner_human_id).map(|scope| scope.manages);
        let mut targets = webhook.targets.clone();
        targets.retain(|target| manages.as_ref().is_some_and(|reach| reach.contains(target)));
        // Issue #14: the replaced secret only while its grace runs, on the store's clock.
        let previous_secret =
            PreviousSecret::offered_at(webhook.previous_secret.clone(), webhook.previous_secret_expires_at, now);
        Some(WebhookRoute { name: webhook.name.clone(), secret: webhook.secret.clone(), previous_secret, targets })
    }

    /// REQ-3: one delivery, one transaction. A delivery id seen before answers the todos it
    /// created (`deduped`) and creates nothing; otherwise each todo is created (or deduped onto
    /// a live one) at one instant, each capped against its own identity; a `queue_full` rolls
    /// the whole delivery back.
    pub(super) fn ingest_tx(&self, webhook_id: &str, delivery_id: &str, todos: Vec<NewTodo>) -> Result<Ingested> {
        for todo in &todos {
            todo.validate()?;
        }
        let mut state = self.lock();
        let now = self.clock.now();
        let capacity = state.capacity(self.intake_env).effective;
        let key = (webhook_id.to_string(), delivery_id.to_string());
        if let Some(todo_ids) = state.deliveries.get(&key) {
            return Ok(Ingested { todo_ids: todo_ids.clone(), deduped: true });
        }
        // `delivery_id` CHECK (1..=200 characters) and the webhook's foreign key.
        if !(1..=200).contains(&delivery_id.chars().count()) || !state.webhooks.iter().any(|w| w.id == webhook_id) {
            return Err(database_error());
        }
        // The transaction: every todo created, or none.
        let created = match state.create_all(&todos, now, capacity) {
            Ok(created) => created,
            Err((_, error)) => {
                drop(state);
                if error.code == Code::QueueFull
                    && let Some(queue) = error.extras.get("queue").and_then(serde_json::Value::as_str)
                {
                    self.counters.intake_refused(queue, "ingest");
                }
                return Err(error);
            }
        };
        let todo_ids: Vec<String> = created.iter().map(|c| c.todo.id.clone()).collect();
        state.deliveries.insert(key, todo_ids.clone());
        drop(state);
        for made in created.iter().filter(|c| !c.deduped) {
            self.counters.created(&made.todo.identity.queue, made.todo.created_by_kind.as_str());
        }
        // Committed even so: a later redelivery answers the empty list, deduped.
        if todo_ids.is_empty() {
            return Err(Error::internal("a delivery created no todo"));
        }
        Ok(Ingested { todo_ids, deduped: false })
    }
}

/// The webhooks role on the model: each method is one of the transactions above, run under the
/// state lock.
impl Webhooks for ModelStore {
    async fn create_webhook(&self, owner: &str, name: &str, secret: &str, targets: &[QueueIdentity]) -> Result<String> {
        self.create_webhook_tx(owner, name, secret, targets)
    }

    async fn list_webhooks(&self, owner_human_id: &str) -> Result<Vec<WebhookSummary>> {
        Ok(self.list_webhooks_tx(owner_human_id))
    }

    async fn delete_webhook(&self, owner_human_id: &str, webhook_id: &str) -> Result<()> {
        self.delete_webhook_tx(owner_human_id, webhook_id)
    }

    async fn rotate_webhook_secret(&self, owner_human_id: &str, webhook_id: &str, secret: &str) -> Result<()> {
        self.rotate_webhook_secret_tx(owner_human_id, webhook_id, secret)
    }

    async fn webhook_for_ingest_unscoped(&self, webhook_id: &str) -> Result<Option<WebhookRoute>> {
        Ok(self.webhook_for_ingest_tx(webhook_id))
    }

    async fn ingest(&self, webhook_id: &str, delivery_id: &str, todos: Vec<NewTodo>) -> Result<Ingested> {
        self.ingest_tx(webhook_id, delivery_id, todos)
    }
}

#[cfg(test)]
mod grace_tests {
    use super::super::tests::{World, run};
    use crate::limits::WEBHOOK_SECRET_GRACE_SECONDS;
    use crate::store::prelude::*;
    use crate::store::{Clock, PreviousSecret};
    use chrono::Duration;

    // Issue #14
    #[test]
    fn a_rotated_webhook_secret_is_offered_for_verification_until_its_grace_ends() {
        let world = World::new(&["hooks"]);
        let hook =
            run(world.store.create_webhook(&world.human_id, "gh", "old", &[world.queue("hooks")])).expect("hook");
        let route =
            |store: &super::ModelStore| run(store.webhook_for_ingest_unscoped(&hook)).expect("read").expect("hook");
        assert_eq!(route(&world.store).previous_secret, None, "a new webhook has no previous secret");

        let rotated_at = world.clock.now();
        run(world.store.rotate_webhook_secret(&world.human_id, &hook, "new")).expect("rotate");
        let expires_at = rotated_at + Duration::seconds(WEBHOOK_SECRET_GRACE_SECONDS);
        let offered = route(&world.store);
        assert_eq!(offered.secret, "new");
        assert_eq!(offered.previous_secret, Some(PreviousSecret { secret: "old".into(), expires_at }));

        world.clock.advance(Duration::seconds(WEBHOOK_SECRET_GRACE_SECONDS - 1));
        assert!(route(&world.store).previous_secret.is_some(), "one second before the end it still verifies");
        world.clock.advance(Duration::seconds(1));
        assert_eq!(route(&world.store).previous_secret, None, "from the grace's end the old secret is refused");
        assert_eq!(route(&world.store).secret, "new");
    }

    // Issue #14
    #[test]
    fn rotating_again_replaces_the_previous_secret_with_the_one_being_replaced() {
        let world = World::new(&["hooks"]);
        let hook =
            run(world.store.create_webhook(&world.human_id, "gh", "first", &[world.queue("hooks")])).expect("hook");
        run(world.store.rotate_webhook_secret(&world.human_id, &hook, "second")).expect("rotate");
        world.clock.advance(Duration::hours(1));
        run(world.store.rotate_webhook_secret(&world.human_id, &hook, "third")).expect("rotate again");
        let route = run(world.store.webhook_for_ingest_unscoped(&hook)).expect("read").expect("hook");
        assert_eq!(route.secret, "third");
        let previous = route.previous_secret.expect("in grace");
        assert_eq!(previous.secret, "second", "the first secret no longer verifies");
        assert_eq!(previous.expires_at, PreviousSecret::grace_end(world.clock.now()), "the grace restarts");
    }

    // Issue #14
    #[test]
    fn deleting_a_webhook_ends_its_current_and_previous_secret() {
        let world = World::new(&["hooks"]);
        let hook =
            run(world.store.create_webhook(&world.human_id, "gh", "old", &[world.queue("hooks")])).expect("hook");
        run(world.store.rotate_webhook_secret(&world.human_id, &hook, "new")).expect("rotate");
        run(world.store.delete_webhook(&world.human_id, &hook)).expect("delete");
        assert_eq!(run(world.store.webhook_for_ingest_unscoped(&hook)).expect("read"), None);
    }
}
