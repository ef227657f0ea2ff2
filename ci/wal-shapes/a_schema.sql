-- A: the shape before migration 0020 (0001..0019, final index set).
CREATE INDEX todos_claim_scan_endpoint ON todos (endpoint_id, queue, created_at, id)
    WHERE endpoint_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_claim_scan_team ON todos (team_id, queue, created_at, id)
    WHERE team_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_leases ON todos (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX todos_due_retries ON todos (next_retry_at) WHERE state = 'failed' AND next_retry_at IS NOT NULL;
CREATE UNIQUE INDEX todos_dedup_endpoint ON todos (endpoint_id, queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND endpoint_id IS NOT NULL AND state <> 'done' AND (state <> 'failed' OR next_retry_at IS NOT NULL);
CREATE UNIQUE INDEX todos_dedup_team ON todos (team_id, queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND team_id IS NOT NULL AND state <> 'done' AND (state <> 'failed' OR next_retry_at IS NOT NULL);
CREATE INDEX todos_in_flight_endpoint ON todos (endpoint_id, queue) WHERE state = 'claimed' AND endpoint_id IS NOT NULL;
CREATE INDEX todos_in_flight_team ON todos (team_id, queue) WHERE state = 'claimed' AND team_id IS NOT NULL;
CREATE INDEX todos_pending_endpoint ON todos (endpoint_id, queue) WHERE state = 'pending' AND endpoint_id IS NOT NULL;
CREATE INDEX todos_pending_team ON todos (team_id, queue) WHERE state = 'pending' AND team_id IS NOT NULL;
CREATE INDEX todos_claim_order_endpoint ON todos (endpoint_id, created_at, id)
    WHERE endpoint_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_claim_order_team ON todos (team_id, created_at, id)
    WHERE team_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE TABLE todo_attempts (
    todo_id text NOT NULL REFERENCES todos (id) ON DELETE CASCADE, seq integer NOT NULL,
    claimant text NOT NULL, endpoint_id text, started_at timestamptz NOT NULL, ended_at timestamptz,
    outcome text CHECK (outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'canceled')),
    PRIMARY KEY (todo_id, seq));
