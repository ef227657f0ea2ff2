-- Credential management (issue #14): operator tokens get a stable public id (listed and revoked
-- by it; the secret is only ever stored as its digest) and an optional expiry, checked against
-- the database clock on every lookup. last_used_at is deliberately not tracked: it would cost a
-- write on every authenticated request.
ALTER TABLE api_tokens
    ADD COLUMN id text NOT NULL DEFAULT ('tk_' || replace(gen_random_uuid()::text, '-', '')),
    ADD COLUMN expires_at timestamptz;
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);
