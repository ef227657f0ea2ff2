-- Shared, unchanged by every shape: owners, policies (empty: the unbudgeted path), the payload size function.
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
CREATE TABLE endpoints (id text PRIMARY KEY);
CREATE TABLE teams (id text PRIMARY KEY);
INSERT INTO endpoints VALUES ('ep_0123456789abcdef0123456789abcdef');
CREATE TABLE admission_policies (
    id text PRIMARY KEY, endpoint_id text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id text REFERENCES teams (id) ON DELETE CASCADE, queue text NOT NULL,
    max_in_flight integer, CONSTRAINT admission_policies_endpoint_queue UNIQUE (endpoint_id, queue),
    CONSTRAINT admission_policies_team_queue UNIQUE (team_id, queue));
CREATE FUNCTION compact_json_bytes(document jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN octet_length(document::text) - (
    SELECT coalesce(sum(CASE jsonb_typeof(item)
        WHEN 'object' THEN greatest(2 * (SELECT count(*) FROM jsonb_object_keys(item)) - 1, 0)
        WHEN 'array' THEN greatest(jsonb_array_length(item) - 1, 0)
        ELSE 0 END), 0)
    FROM jsonb_path_query(document, 'strict $.**') AS item);
-- todos as migrations 0001+0005+0014 leave it (FILLFACTOR set per shape below).
CREATE TABLE todos (
    id text PRIMARY KEY,
    endpoint_id text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id text REFERENCES teams (id) ON DELETE CASCADE,
    queue text NOT NULL CHECK (queue ~ '^[a-z0-9._-]{1,64}$'),
    title text NOT NULL, payload jsonb, idempotency_key text,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'claimed', 'done', 'failed', 'discarded')),
    owner text, claimed_by_endpoint_id text, lease_expires_at timestamptz,
    attempt integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts integer NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 100),
    result jsonb, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
    claimed_at timestamptz, completed_at timestamptz, next_retry_at timestamptz,
    created_by_kind text NOT NULL CHECK (created_by_kind IN ('human', 'agent', 'workflow', 'ingest', 'system')),
    created_by_id text, discarded_at timestamptz, discarded_by text,
    payload_bytes bigint NOT NULL GENERATED ALWAYS AS (coalesce(compact_json_bytes(payload), 0)) STORED,
    CONSTRAINT todos_one_queue_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1),
    CONSTRAINT todos_lease_iff_claimed CHECK ((state = 'claimed') = (lease_expires_at IS NOT NULL))
);
-- The listing indexes (0011): no state predicate; every shape keeps them.
CREATE INDEX todos_list_endpoint ON todos (endpoint_id, created_at, id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX todos_list_team ON todos (team_id, created_at, id) WHERE team_id IS NOT NULL;
