-- Issue #28: a charge belongs to the queue identity, not to the policy row (SPEC-0030 REQ-3).
--
-- Usage was keyed by (policy, window_start) and deleted with its policy (ON DELETE CASCADE), so
-- a DELETE and PUT of the same policy refunded the window, and a redefinition (period, tz,
-- start) began its current window at 0 although claims had been committed in its span.
--
-- Two tables now hold the charges, both keyed by identity and outliving every policy change:
-- * admission_windows: the counter the claim reads and bumps under the policy lock, one row per
--   (identity, window start) of whatever definition charged it. Also the usage history.
-- * admission_charges: the ledger, units per (identity, whole minute). Every window boundary is a
--   whole minute (starts are HH:MM; zone offsets are whole minutes), so the units of any
--   window's span are an exact sum over this table. A policy write rebuilds the new current
--   window's counter from it. Kept a little longer than the longest window (a week).
-- Only the deletion of the owner (endpoint or team) removes an identity's charges.

-- The counter, re-keyed by identity.
ALTER TABLE admission_windows
    ADD COLUMN endpoint_id text REFERENCES endpoints (id) ON DELETE CASCADE,
    ADD COLUMN team_id text REFERENCES teams (id) ON DELETE CASCADE,
    ADD COLUMN queue text;
UPDATE admission_windows w SET endpoint_id = p.endpoint_id, team_id = p.team_id, queue = p.queue
FROM admission_policies p WHERE p.id = w.policy_id;
ALTER TABLE admission_windows DROP CONSTRAINT admission_windows_pkey;
ALTER TABLE admission_windows DROP COLUMN policy_id;
ALTER TABLE admission_windows
    ALTER COLUMN queue SET NOT NULL,
    ADD COLUMN owner_id text GENERATED ALWAYS AS (coalesce(endpoint_id, team_id)) STORED,
    ADD CONSTRAINT admission_windows_one_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1),
    ADD PRIMARY KEY (owner_id, queue, window_start);

-- The ledger.
CREATE TABLE admission_charges (
    endpoint_id  text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id      text REFERENCES teams (id) ON DELETE CASCADE,
    owner_id     text GENERATED ALWAYS AS (coalesce(endpoint_id, team_id)) STORED,
    queue        text NOT NULL,
    minute       timestamptz NOT NULL,
    units        integer NOT NULL CHECK (units > 0),
    CONSTRAINT admission_charges_one_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1),
    PRIMARY KEY (owner_id, queue, minute)
);

-- Existing charges have no minute of their own: each window's units are entered at the minute
-- of its last charge (`updated_at`), the latest instant any of them can have. A redefinition
-- can then count a charge in a window that began after it, never miss one: fail closed, no
-- refund.
INSERT INTO admission_charges (endpoint_id, team_id, queue, minute, units)
SELECT endpoint_id, team_id, queue, minute, sum(used)::integer
FROM (SELECT endpoint_id, team_id, queue, date_trunc('minute', updated_at) AS minute, used
      FROM admission_windows WHERE used > 0 AND updated_at > now() - interval '8 days') per_window
GROUP BY endpoint_id, team_id, queue, minute;
