-- Who vended an endpoint: the human an agent acts for when its grant lets it change a policy
-- (SPEC-0030 REQ-10 audit). Existing human-owned endpoints were vended by their owner.
ALTER TABLE endpoints ADD COLUMN created_by_human_id text REFERENCES humans (id) ON DELETE SET NULL;
UPDATE endpoints SET created_by_human_id = owner_human_id WHERE created_by_human_id IS NULL;

-- Webhook deliveries seen, by the provider's delivery id (the `webhook-id` header): a
-- redelivery dedupes onto the todos it created, even after they finished, and creates nothing.
CREATE TABLE webhook_deliveries (
    webhook_id   text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    delivery_id  text NOT NULL CHECK (length(delivery_id) BETWEEN 1 AND 200),
    todo_ids     text[] NOT NULL,
    received_at  timestamptz NOT NULL,
    PRIMARY KEY (webhook_id, delivery_id)
);
