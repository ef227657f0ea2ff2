-- SPEC-0030: per-queue admission policies, per-window usage counters, and the policy audit.
-- Window fields are validated by the application (the zone database is compiled into the
-- binary); a stored row that no longer validates makes the queue fail closed (REQ-9).

CREATE TABLE admission_policies (
    id                     text PRIMARY KEY,
    endpoint_id            text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id                text REFERENCES teams (id) ON DELETE CASCADE,
    queue                  text NOT NULL CHECK (queue ~ '^[a-z0-9._-]{1,64}$'),
    max_in_flight          integer CHECK (max_in_flight BETWEEN 0 AND 10000),
    max_claims_per_window  integer CHECK (max_claims_per_window BETWEEN 0 AND 1000000),
    window_period          text,
    window_tz              text,
    window_start           text,
    window_weekday         text,
    created_by_human_id    text REFERENCES humans (id) ON DELETE SET NULL,
    updated_by_human_id    text REFERENCES humans (id) ON DELETE SET NULL,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    CONSTRAINT admission_policies_one_queue_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1),
    CONSTRAINT admission_policies_some_limit CHECK (num_nonnulls(max_in_flight, max_claims_per_window) >= 1),
    CONSTRAINT admission_policies_endpoint_queue UNIQUE (endpoint_id, queue),
    CONSTRAINT admission_policies_team_queue UNIQUE (team_id, queue)
);

-- Usage per (policy, window_start): claims age out of todos, so charges are counted here.
CREATE TABLE admission_windows (
    policy_id     text NOT NULL REFERENCES admission_policies (id) ON DELETE CASCADE,
    window_start  timestamptz NOT NULL,
    used          integer NOT NULL CHECK (used >= 0),
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (policy_id, window_start)
);

-- Append-only: who changed which policy, when, from what to what. No foreign keys, so the
-- history outlives the policy (and the endpoint).
CREATE TABLE admission_audit (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    policy_id          text NOT NULL,
    endpoint_id        text,
    team_id            text,
    queue              text NOT NULL,
    actor_human_id     text,
    actor_endpoint_id  text,
    action             text NOT NULL CHECK (action IN ('create', 'update', 'delete')),
    before             jsonb,
    after              jsonb,
    at                 timestamptz NOT NULL
);
CREATE INDEX admission_audit_endpoint_queue ON admission_audit (endpoint_id, queue, at DESC) WHERE endpoint_id IS NOT NULL;
CREATE INDEX admission_audit_team_queue ON admission_audit (team_id, queue, at DESC) WHERE team_id IS NOT NULL;

-- The in-flight count is read under the policy lock on every budgeted claim.
CREATE INDEX todos_in_flight_endpoint ON todos (endpoint_id, queue) WHERE state = 'claimed' AND endpoint_id IS NOT NULL;
CREATE INDEX todos_in_flight_team ON todos (team_id, queue) WHERE state = 'claimed' AND team_id IS NOT NULL;
