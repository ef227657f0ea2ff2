-- Owner cancellation (intake-capacity.md): a terminal `discarded` state that keeps the todo,
-- its audit trail and its dedup slot (a redelivery must not resurrect removed work).
ALTER TABLE todos DROP CONSTRAINT todos_state_check;
ALTER TABLE todos ADD CONSTRAINT todos_state_check
    CHECK (state IN ('pending', 'claimed', 'done', 'failed', 'discarded'));
ALTER TABLE todos ADD COLUMN discarded_at timestamptz, ADD COLUMN discarded_by text;

-- Every remove and clear: who, which queue identity, how many, which todos.
CREATE TABLE queue_cancellations (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id        text,
    team_id            text,
    queue              text NOT NULL,
    actor_human_id     text,
    actor_endpoint_id  text,
    action             text NOT NULL CHECK (action IN ('remove', 'clear')),
    removed            integer NOT NULL CHECK (removed >= 0),
    todo_ids           text[] NOT NULL,
    at                 timestamptz NOT NULL
);
