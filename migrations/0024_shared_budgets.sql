-- Issue #52 item 2: shared budgets, one window limit several queue identities of one owner draw
-- from ("5,000 claims a day across every queue that uses the key").
--
-- A budget belongs to a human or a team, is named uniquely per owner, and names its member
-- queue identities. Its window is stored as the API writes it ({period, tz?, start?, weekday?});
-- the server validates it (the zone database is compiled into the binary). The audit keeps the
-- owner and name as text, so it outlives the budget and its owner. Claims are not charged to a
-- budget yet: the counters and the charge ledger come with that change.
CREATE TABLE shared_budgets (
    id              text PRIMARY KEY,
    owner_human_id  text REFERENCES humans (id) ON DELETE CASCADE,
    owner_team_id   text REFERENCES teams (id) ON DELETE CASCADE,
    owner_id        text GENERATED ALWAYS AS (coalesce(owner_team_id, owner_human_id)) STORED,
    name            text NOT NULL CHECK (name ~ '^[a-z0-9._-]{1,64}$'),
    max_claims      integer NOT NULL CHECK (max_claims BETWEEN 0 AND 1000000),
    window_spec     jsonb NOT NULL CHECK (jsonb_typeof(window_spec) = 'object'),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT shared_budgets_one_owner CHECK (num_nonnulls(owner_human_id, owner_team_id) = 1),
    CONSTRAINT shared_budgets_name_per_owner UNIQUE (owner_id, name)
);

-- One row per member queue identity, in the order the owner listed them. An endpoint or team
-- that goes takes its memberships with it.
CREATE TABLE shared_budget_members (
    budget_id    text NOT NULL REFERENCES shared_budgets (id) ON DELETE CASCADE,
    endpoint_id  text REFERENCES endpoints (id) ON DELETE CASCADE,
    team_id      text REFERENCES teams (id) ON DELETE CASCADE,
    owner_id     text GENERATED ALWAYS AS (coalesce(endpoint_id, team_id)) STORED,
    queue        text NOT NULL CHECK (queue ~ '^[a-z0-9._-]{1,64}$'),
    position     smallint NOT NULL,
    CONSTRAINT shared_budget_members_one_owner CHECK (num_nonnulls(endpoint_id, team_id) = 1),
    PRIMARY KEY (budget_id, owner_id, queue)
);
-- A claim will find its queue's budgets here; a budget write counts a queue's budgets here.
CREATE INDEX shared_budget_members_by_queue ON shared_budget_members (owner_id, queue);

CREATE TABLE shared_budget_audit (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    budget_owner_id    text NOT NULL,
    name               text NOT NULL,
    actor_human_id     text,
    actor_endpoint_id  text,
    action             text NOT NULL CHECK (action IN ('create', 'update', 'delete')),
    before             jsonb,
    after              jsonb,
    at                 timestamptz NOT NULL
);
CREATE INDEX shared_budget_audit_by_name ON shared_budget_audit (budget_owner_id, name, at DESC);
