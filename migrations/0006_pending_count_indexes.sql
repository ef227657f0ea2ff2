-- The intake check counts a queue identity's pending todos under its intake lock on every capped
-- create; these keep that an index-only count of just the pending rows.
CREATE INDEX todos_pending_endpoint ON todos (endpoint_id, queue) WHERE state = 'pending' AND endpoint_id IS NOT NULL;
CREATE INDEX todos_pending_team ON todos (team_id, queue) WHERE state = 'pending' AND team_id IS NOT NULL;
