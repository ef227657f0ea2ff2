-- H: graphile-worker's form with history kept. The todo row is written once, at create, and never
-- updated by the loop. What is live (pending, claimed, waiting to retry) is a narrow row in
-- todo_live, updated at claim and deleted when the todo is done; the finished attempt, with the
-- outcome and the result, is inserted once at completion. Dedup is per live todo, so its unique
-- indexes move to todo_live.
CREATE TABLE todo_live (
    todo_id text PRIMARY KEY REFERENCES todos (id) ON DELETE CASCADE,
    endpoint_id text, team_id text, queue text NOT NULL, created_at timestamptz NOT NULL,
    idempotency_key text, attempt integer NOT NULL DEFAULT 0, max_attempts integer NOT NULL DEFAULT 5,
    next_retry_at timestamptz, owner text, claimant text, claimed_at timestamptz, lease_expires_at timestamptz);
-- Ready work, per queue (the claim's scan) and per owner (claim_next's order across queues).
CREATE INDEX todo_live_scan_endpoint ON todo_live (endpoint_id, queue, created_at, todo_id)
    WHERE lease_expires_at IS NULL AND endpoint_id IS NOT NULL;
CREATE INDEX todo_live_scan_team ON todo_live (team_id, queue, created_at, todo_id)
    WHERE lease_expires_at IS NULL AND team_id IS NOT NULL;
CREATE INDEX todo_live_order_endpoint ON todo_live (endpoint_id, created_at, todo_id)
    WHERE lease_expires_at IS NULL AND endpoint_id IS NOT NULL;
CREATE INDEX todo_live_order_team ON todo_live (team_id, created_at, todo_id)
    WHERE lease_expires_at IS NULL AND team_id IS NOT NULL;
-- In flight, with the lease (admission's count and the reaper).
CREATE INDEX todo_live_in_flight_endpoint ON todo_live (endpoint_id, queue, lease_expires_at)
    WHERE lease_expires_at IS NOT NULL AND endpoint_id IS NOT NULL;
CREATE INDEX todo_live_in_flight_team ON todo_live (team_id, queue, lease_expires_at)
    WHERE lease_expires_at IS NOT NULL AND team_id IS NOT NULL;
CREATE UNIQUE INDEX todo_live_dedup_endpoint ON todo_live (endpoint_id, queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND endpoint_id IS NOT NULL;
CREATE UNIQUE INDEX todo_live_dedup_team ON todo_live (team_id, queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND team_id IS NOT NULL;
-- Every finished attempt, inserted once when it ends; the last one of a done todo holds its result.
CREATE TABLE todo_attempts (
    todo_id text NOT NULL REFERENCES todos (id) ON DELETE CASCADE, seq integer NOT NULL,
    claimant text NOT NULL, endpoint_id text, started_at timestamptz NOT NULL, ended_at timestamptz NOT NULL,
    outcome text NOT NULL, result jsonb,
    PRIMARY KEY (todo_id, seq));
