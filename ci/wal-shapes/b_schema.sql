-- B: ready table. todos keeps only pkey + listing indexes (no state predicate) => lifecycle updates HOT.
ALTER TABLE todos SET (fillfactor = 80);
-- Claimable (pending) todos only: inserted at create / requeue (reaper, retry scheduler, release), deleted at claim.
CREATE TABLE todo_ready (
    todo_id text PRIMARY KEY REFERENCES todos (id) ON DELETE CASCADE,
    endpoint_id text, team_id text, queue text NOT NULL, created_at timestamptz NOT NULL,
    not_before timestamptz);  -- NULL: claimable now; else a parked retry (CLAIMABLE's third arm)
CREATE INDEX todo_ready_scan_endpoint ON todo_ready (endpoint_id, queue, created_at, todo_id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX todo_ready_scan_team ON todo_ready (team_id, queue, created_at, todo_id) WHERE team_id IS NOT NULL;
CREATE INDEX todo_ready_order_endpoint ON todo_ready (endpoint_id, created_at, todo_id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX todo_ready_order_team ON todo_ready (team_id, created_at, todo_id) WHERE team_id IS NOT NULL;
-- Dedup of live todos, only for todos with a key; deleted when the todo goes terminal.
CREATE TABLE todo_dedup (
    todo_id text PRIMARY KEY REFERENCES todos (id) ON DELETE CASCADE,
    owner_id text NOT NULL, queue text NOT NULL, idempotency_key text NOT NULL,
    UNIQUE (owner_id, queue, idempotency_key));
-- No todos_due_retries: a failed todo with a retry goes back into todo_ready with not_before = next_retry_at.
-- The open attempt is the live claim: lease and in-flight counts are read from it.
CREATE TABLE todo_attempts (
    todo_id text NOT NULL REFERENCES todos (id) ON DELETE CASCADE, seq integer NOT NULL,
    claimant text NOT NULL, endpoint_id text, started_at timestamptz NOT NULL, ended_at timestamptz,
    outcome text CHECK (outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'canceled')),
    owner_endpoint_id text, owner_team_id text, queue text NOT NULL, lease_expires_at timestamptz,
    PRIMARY KEY (todo_id, seq));
CREATE INDEX todo_attempts_leases ON todo_attempts (lease_expires_at) WHERE ended_at IS NULL;
CREATE INDEX todo_attempts_in_flight_endpoint ON todo_attempts (owner_endpoint_id, queue) WHERE ended_at IS NULL AND owner_endpoint_id IS NOT NULL;
CREATE INDEX todo_attempts_in_flight_team ON todo_attempts (owner_team_id, queue) WHERE ended_at IS NULL AND owner_team_id IS NOT NULL;
