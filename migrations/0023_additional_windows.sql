-- Issue #52: several windows on one policy ("60 a minute and 5,000 a day"), and a minute period.
--
-- A policy keeps its primary window in its columns (SPEC-0030 REQ-1) and may carry up to four
-- more, written as the API writes them: [{"max_claims": n, "window": {...}}]. The server
-- validates them (the zone database is compiled into the binary); a stored list that no longer
-- validates makes the queue fail closed (REQ-9), as a primary window does. A minute window has no
-- zone and no start: its `window_tz` and `window_start` are NULL.
ALTER TABLE admission_policies
    ADD COLUMN additional_windows jsonb
        CHECK (additional_windows IS NULL
               OR (jsonb_typeof(additional_windows) = 'array' AND jsonb_array_length(additional_windows) BETWEEN 1 AND 4));

-- The counters of the additional windows, one row per (identity, slot, window start), slot 1 to
-- 4 being the position in the policy's list. `admission_windows` stays the primary window's
-- counter and usage history, as REQ-5 reads it. Keyed by identity, like it, so no policy change
-- refunds a charge (issue #28); a policy write recounts each slot's current window from the
-- ledger (`admission_charges`), so a slot whose definition changed counts the claims already in
-- its span.
CREATE TABLE admission_additional_windows (
    endpoint_id   text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id       text REFERENCES teams (id) ON DELETE CASCADE,
    owner_id      text GENERATED ALWAYS AS (coalesce(endpoint_id, team_id)) STORED,
    queue         text NOT NULL,
    slot          smallint NOT NULL CHECK (slot BETWEEN 1 AND 4),
    window_start  timestamptz NOT NULL,
    used          integer NOT NULL CHECK (used >= 0),
    updated_at    timestamptz NOT NULL,
    CONSTRAINT admission_additional_windows_one_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1),
    PRIMARY KEY (owner_id, queue, slot, window_start)
);
