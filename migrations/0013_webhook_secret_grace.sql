-- Issue #14: rotating a webhook's secret keeps the replaced one verifying deliveries until
-- `previous_secret_expires_at` (rotation + WEBHOOK_SECRET_GRACE_SECONDS), so a provider that has
-- not switched yet loses nothing. Both are null on existing rows (no rotation in grace) and are
-- set or cleared together.
ALTER TABLE webhooks
    ADD COLUMN previous_secret            text,
    ADD COLUMN previous_secret_expires_at timestamptz,
    ADD CONSTRAINT webhooks_previous_secret_with_expiry
        CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));
