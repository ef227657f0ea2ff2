-- Push (docs/push.md; SPEC-0030 REQ-8 over the base system's doorbells, presence and notify
-- hooks): MCP sessions and which replica holds each one's stream, the work waiting for a push
-- decision, the doorbells decided, each endpoint's presence, notify hooks and their outbox.
-- Every push is decided once, in a transaction here; replicas only deliver what was decided.

-- An MCP session (from `initialize`) and the replica whose process holds its open stream.
CREATE TABLE mcp_sessions (
    id              text PRIMARY KEY,
    endpoint_id     text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    created_at      timestamptz NOT NULL,
    -- NULL while no stream is open; a replica that dies stops refreshing last_seen_at.
    stream_replica  text,
    last_seen_at    timestamptz NOT NULL,
    last_rung_at    timestamptz
);
CREATE INDEX mcp_sessions_streaming ON mcp_sessions (endpoint_id, last_rung_at NULLS FIRST)
    WHERE stream_replica IS NOT NULL;

-- Work that entered `pending` and still needs its push decision. Written in the same
-- transaction as the todo's change, consumed once by whichever replica gets to it first.
CREATE TABLE push_due (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    todo_id  text NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
    reason   text NOT NULL CHECK (reason IN ('created', 'requeued')),
    at       timestamptz NOT NULL
);

-- Every doorbell decided: its stream event id (seq), the session it went to and the message.
-- Kept a bounded time so a reconnecting stream can resume from Last-Event-ID.
CREATE TABLE doorbell_rings (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ring_id      text NOT NULL UNIQUE,
    session_id   text NOT NULL REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    endpoint_id  text NOT NULL,
    queue        text,
    todo_id      text,
    reason       text NOT NULL CHECK (reason IN ('created', 'requeued', 'heartbeat', 'reopen', 'digest')),
    message      jsonb NOT NULL,
    at           timestamptz NOT NULL
);
CREATE INDEX doorbell_rings_session ON doorbell_rings (session_id, seq);
CREATE INDEX doorbell_rings_at ON doorbell_rings (at);

-- The heartbeat sweep's memory per pending todo: how often it was rung and when last.
CREATE TABLE todo_rings (
    todo_id         text PRIMARY KEY REFERENCES todos (id) ON DELETE CASCADE,
    ring_attempts   integer NOT NULL DEFAULT 0,
    last_ringed_at  timestamptz NOT NULL
);

-- Presence (SPEC-0022): a shift, an override, and the presence last acted on (won once).
ALTER TABLE endpoints
    ADD COLUMN shift text CHECK (length(shift) <= 200),
    ADD COLUMN presence_override text CHECK (presence_override IN ('in', 'out')),
    ADD COLUMN override_until timestamptz,
    ADD COLUMN override_by text,
    ADD COLUMN presence_seen text NOT NULL DEFAULT 'in' CHECK (presence_seen IN ('in', 'out')),
    ADD COLUMN last_digest_at timestamptz;

-- Queue identities whose claimers or pushes were told to wait (a push withheld, a claim
-- refused, a claim that filled the queue). The reopen sweep takes a row once the identity
-- admits claims again (or has no policy left), ringing once per endpoint and queue. Kept apart
-- from admission_policies so the sweep never holds the row claims lock.
CREATE TABLE admission_reopen_watch (
    owner_kind  text NOT NULL CHECK (owner_kind IN ('endpoint', 'team')),
    owner_id    text NOT NULL,
    queue       text NOT NULL,
    since       timestamptz NOT NULL,
    PRIMARY KEY (owner_kind, owner_id, queue)
);

-- Notify hooks (SPEC-0024): outbound URLs per endpoint, at most 5.
CREATE TABLE notify_hooks (
    id                    text PRIMARY KEY,
    endpoint_id           text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    url                   text NOT NULL CHECK (length(url) <= 2048),
    secret                text NOT NULL,
    ignore_presence       boolean NOT NULL DEFAULT false,
    enabled               boolean NOT NULL DEFAULT true,
    consecutive_failures  integer NOT NULL DEFAULT 0,
    disabled_reason       text,
    -- The per-hook rate limit's current minute and its count (exact across replicas).
    rate_minute           timestamptz,
    rate_calls            integer NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL
);
CREATE INDEX notify_hooks_endpoint ON notify_hooks (endpoint_id);

-- Hook calls decided by a committed transaction, sent by any replica: a replica leases a row,
-- sends, and records the outcome; a crashed replica's lease lapses and another sends it.
CREATE TABLE hook_outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hook_id          text NOT NULL REFERENCES notify_hooks (id) ON DELETE CASCADE,
    msg_id           text NOT NULL UNIQUE,
    body             jsonb NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    leased_by        text,
    leased_until     timestamptz,
    sent_at          timestamptz,
    outcome          text CHECK (outcome IN ('delivered', 'failed', 'refused', 'dropped')),
    last_error       text,
    created_at       timestamptz NOT NULL
);
CREATE INDEX hook_outbox_due ON hook_outbox (next_attempt_at) WHERE outcome IS NULL;
