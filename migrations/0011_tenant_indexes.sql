-- Listings that stay inside their tenant (issue #14 item 4). list_todos reads each owner's (or
-- each owner queue's) newest rows backwards from these, in its own order (created_at DESC, id
-- DESC), whatever their state. The other todos indexes are partial on state, so a listing with no
-- state filter, or of done todos, had no index of the caller's rows to use and could walk every
-- tenant's. Partial only on the owner column a row has, so each row is in one of the two. A queue
-- listing reads its owner's rows from the same index and filters on the queue: it stays inside
-- the tenant, and every insert pays for two more indexes, not four.
CREATE INDEX todos_list_endpoint ON todos (endpoint_id, created_at, id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX todos_list_team ON todos (team_id, created_at, id) WHERE team_id IS NOT NULL;
