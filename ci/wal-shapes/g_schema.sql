-- G: graphile-worker-like reference (no history): claim = lock + update locked_at, complete = delete.
CREATE TABLE jobs (
    id bigserial PRIMARY KEY, job_queue_id integer, task_id integer NOT NULL, payload json NOT NULL DEFAULT '{}',
    priority smallint NOT NULL DEFAULT 0, run_at timestamptz NOT NULL DEFAULT now(),
    attempts smallint NOT NULL DEFAULT 0, max_attempts smallint NOT NULL DEFAULT 25, last_error text,
    created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
    key text UNIQUE, locked_at timestamptz, locked_by text, revision integer NOT NULL DEFAULT 0,
    flags jsonb, is_available boolean GENERATED ALWAYS AS (locked_at IS NULL AND attempts < max_attempts) STORED);
CREATE INDEX jobs_main_index ON jobs (priority, run_at) INCLUDE (id, task_id, job_queue_id) WHERE is_available = true;
