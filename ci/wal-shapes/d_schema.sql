-- D: ready table + narrow in-flight table; the todo row and its attempt are written once, at the end.
ALTER TABLE todos SET (fillfactor = 80);
CREATE TABLE todo_ready (
    todo_id text PRIMARY KEY REFERENCES todos (id) ON DELETE CASCADE,
    endpoint_id text, team_id text, queue text NOT NULL, created_at timestamptz NOT NULL, not_before timestamptz);
CREATE INDEX todo_ready_scan_endpoint ON todo_ready (endpoint_id, queue, created_at, todo_id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX todo_ready_scan_team ON todo_ready (team_id, queue, created_at, todo_id) WHERE team_id IS NOT NULL;
CREATE INDEX todo_ready_order_endpoint ON todo_ready (endpoint_id, created_at, todo_id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX todo_ready_order_team ON todo_ready (team_id, created_at, todo_id) WHERE team_id IS NOT NULL;
CREATE TABLE todo_dedup (
    todo_id text PRIMARY KEY REFERENCES todos (id) ON DELETE CASCADE,
    owner_id text NOT NULL, queue text NOT NULL, idempotency_key text NOT NULL,
    UNIQUE (owner_id, queue, idempotency_key));
-- The live claims: inserted at claim, deleted at complete/fail/release/reap (no FK: keeps the claim to one insert).
CREATE TABLE todo_claims (
    todo_id text PRIMARY KEY, endpoint_id text, team_id text, queue text NOT NULL,
    owner text NOT NULL, claimant text, seq integer NOT NULL, attempt integer NOT NULL,
    claimed_at timestamptz NOT NULL, lease_expires_at timestamptz NOT NULL);
CREATE INDEX todo_claims_identity ON todo_claims (coalesce(endpoint_id, team_id), queue, lease_expires_at);
CREATE TABLE todo_attempts (
    todo_id text NOT NULL REFERENCES todos (id) ON DELETE CASCADE, seq integer NOT NULL,
    claimant text NOT NULL, endpoint_id text, started_at timestamptz NOT NULL, ended_at timestamptz,
    outcome text CHECK (outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'canceled')),
    PRIMARY KEY (todo_id, seq));
