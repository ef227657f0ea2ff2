-- The base queue (base-system §1–§2): humans and their API tokens, teams, vended endpoints with
-- their grants, todos with their attempts, webhooks, and install-wide settings.
-- Ids are opaque text with a type prefix (contract §2); tokens are stored as SHA-256 digests only.

CREATE TABLE humans (
    id              text PRIMARY KEY,
    name            text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    instance_admin  boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    token_hash  text PRIMARY KEY,
    human_id    text NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    label       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_tokens_human ON api_tokens (human_id);

CREATE TABLE teams (
    id          text PRIMARY KEY,
    slug        text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE team_members (
    team_id     text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    human_id    text NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, human_id)
);
CREATE INDEX team_members_human ON team_members (human_id);

CREATE TABLE endpoints (
    id                   text PRIMARY KEY,
    slug                 text NOT NULL UNIQUE,
    name                 text NOT NULL,
    owner_human_id       text REFERENCES humans (id) ON DELETE CASCADE,
    owner_team_id        text REFERENCES teams (id) ON DELETE CASCADE,
    token_hash           text NOT NULL UNIQUE,
    verbs                text[] NOT NULL,
    revoked              boolean NOT NULL DEFAULT false,
    created_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT endpoints_one_owner CHECK (num_nonnulls(owner_human_id, owner_team_id) = 1)
);
CREATE INDEX endpoints_owner_human ON endpoints (owner_human_id);
CREATE INDEX endpoints_owner_team ON endpoints (owner_team_id);

-- The queues an endpoint drains: its own (team_id null) or a team's.
CREATE TABLE endpoint_grants (
    endpoint_id  text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id      text REFERENCES teams (id) ON DELETE CASCADE,
    queue        text NOT NULL CHECK (queue ~ '^[a-z0-9._-]{1,64}$')
);
CREATE UNIQUE INDEX endpoint_grants_unique ON endpoint_grants (endpoint_id, coalesce(team_id, ''), queue);

CREATE TABLE todos (
    id                      text PRIMARY KEY,
    endpoint_id             text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id                 text REFERENCES teams (id) ON DELETE CASCADE,
    queue                   text NOT NULL CHECK (queue ~ '^[a-z0-9._-]{1,64}$'),
    title                   text NOT NULL,
    payload                 jsonb,
    idempotency_key         text,
    state                   text NOT NULL DEFAULT 'pending'
                                CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    owner                   text,
    -- No foreign key: the claimant may be deleted while its claim is remembered.
    claimed_by_endpoint_id  text,
    lease_expires_at        timestamptz,
    attempt                 integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts            integer NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 100),
    result                  jsonb,
    created_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL,
    claimed_at              timestamptz,
    completed_at            timestamptz,
    next_retry_at           timestamptz,
    created_by_kind         text NOT NULL
                                CHECK (created_by_kind IN ('human', 'agent', 'workflow', 'ingest', 'system')),
    created_by_id           text,
    -- The queue identity is (endpoint, queue) or (team, queue), never both, never neither.
    CONSTRAINT todos_one_queue_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1),
    -- A lease exists exactly while claimed.
    CONSTRAINT todos_lease_iff_claimed CHECK ((state = 'claimed') = (lease_expires_at IS NOT NULL))
);

-- claim_next scans a caller's queues oldest first among non-terminal rows.
CREATE INDEX todos_claim_scan_endpoint ON todos (endpoint_id, queue, created_at) WHERE state <> 'done' AND endpoint_id IS NOT NULL;
CREATE INDEX todos_claim_scan_team ON todos (team_id, queue, created_at) WHERE state <> 'done' AND team_id IS NOT NULL;
-- The sweeps.
CREATE INDEX todos_leases ON todos (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX todos_due_retries ON todos (next_retry_at) WHERE state = 'failed' AND next_retry_at IS NOT NULL;
-- Dedup: one live todo per (queue identity, idempotency key). Live = not done and not dead-lettered.
CREATE UNIQUE INDEX todos_dedup_endpoint ON todos (endpoint_id, queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND endpoint_id IS NOT NULL
      AND state <> 'done' AND (state <> 'failed' OR next_retry_at IS NOT NULL);
CREATE UNIQUE INDEX todos_dedup_team ON todos (team_id, queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND team_id IS NOT NULL
      AND state <> 'done' AND (state <> 'failed' OR next_retry_at IS NOT NULL);

-- One row per committed claim (SPEC-0034), closed with its outcome.
CREATE TABLE todo_attempts (
    todo_id      text NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
    seq          integer NOT NULL,
    claimant     text NOT NULL,
    endpoint_id  text,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    outcome      text CHECK (outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'canceled')),
    PRIMARY KEY (todo_id, seq)
);

CREATE TABLE webhooks (
    id              text PRIMARY KEY,
    name            text NOT NULL,
    owner_human_id  text NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    -- The signing secret must be usable to verify signatures, so it is kept, not hashed.
    secret          text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE webhook_targets (
    webhook_id   text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    endpoint_id  text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id      text REFERENCES teams (id) ON DELETE CASCADE,
    queue        text NOT NULL CHECK (queue ~ '^[a-z0-9._-]{1,64}$'),
    CONSTRAINT webhook_targets_one_queue_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1)
);
CREATE INDEX webhook_targets_webhook ON webhook_targets (webhook_id);

-- Install-wide settings (retention, intake capacity, …), one JSON value per key.
CREATE TABLE settings (
    key                  text PRIMARY KEY,
    value                jsonb NOT NULL,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    updated_by_human_id  text REFERENCES humans (id) ON DELETE SET NULL
);
