-- Issue #31: the claim loop's rules on one column each move from table CHECKs to domains.
--
-- PostgreSQL evaluates every CHECK of a table on every row an INSERT or UPDATE writes, and it
-- reads each CHECK's stored expression anew for every statement (stringToNode, then plans it):
-- about 5,500 characters of node text for the todo's seven checks and 1,400 for the attempt's
-- one, parsed by each claim and each complete. Under `perf` that was 9 % of PostgreSQL's CPU in
-- a claim + complete drain. A domain's check is the same rule, kept parsed in the backend's type
-- cache, and it runs where a value is given to the column: on every insert, and on an update
-- that sets the column. The rules themselves are unchanged, NULL passing as it did.
--
-- The two rules over two columns (one queue owner; a lease exactly while claimed) stay CHECKs.
--
-- Changing a column to a domain with a check rewrites the table and rebuilds the indexes that
-- read the column, once.
CREATE DOMAIN queue_name AS text CHECK (VALUE ~ '^[a-z0-9._-]{1,64}$');
CREATE DOMAIN todo_state AS text CHECK (VALUE IN ('pending', 'claimed', 'done', 'failed', 'discarded'));
CREATE DOMAIN todo_creator_kind AS text CHECK (VALUE IN ('human', 'agent', 'workflow', 'ingest', 'system'));
CREATE DOMAIN attempt_number AS integer CHECK (VALUE >= 0);
CREATE DOMAIN attempts_allowed AS integer CHECK (VALUE BETWEEN 1 AND 100);
CREATE DOMAIN attempt_outcome AS text
    CHECK (VALUE IN ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'canceled'));

ALTER TABLE todos
    DROP CONSTRAINT todos_queue_check,
    DROP CONSTRAINT todos_state_check,
    DROP CONSTRAINT todos_created_by_kind_check,
    DROP CONSTRAINT todos_attempt_check,
    DROP CONSTRAINT todos_max_attempts_check,
    ALTER COLUMN queue TYPE queue_name,
    ALTER COLUMN state TYPE todo_state,
    ALTER COLUMN created_by_kind TYPE todo_creator_kind,
    ALTER COLUMN attempt TYPE attempt_number,
    ALTER COLUMN max_attempts TYPE attempts_allowed;

ALTER TABLE todo_attempts
    DROP CONSTRAINT todo_attempts_outcome_check,
    ALTER COLUMN outcome TYPE attempt_outcome;
