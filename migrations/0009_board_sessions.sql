-- The owner's web board (issue #12): one-time sign-in links and server-side sessions.
-- Only SHA-256 digests of link tokens and session ids are stored, like API tokens, so a read of
-- this table signs nobody in. Expiry is checked against the database clock on every request.

-- A one-time sign-in link minted by `switchboard admin login-link NAME`: valid 10 minutes and
-- redeemed at most once (used_at is set in the same statement that checks it).
CREATE TABLE board_login_links (
    token_hash  text PRIMARY KEY,
    human_id    text NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX board_login_links_expiry ON board_login_links (expires_at);

-- A signed-in browser. Idle expiry 12 h (last_seen_at) and absolute expiry 7 days (created_at);
-- sign-out deletes the row. csrf_token is the per-session synchronizer token every
-- state-changing form carries.
CREATE TABLE board_sessions (
    id_hash       text PRIMARY KEY,
    human_id      text NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    csrf_token    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX board_sessions_human ON board_sessions (human_id);
