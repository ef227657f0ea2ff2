-- claim_next walks a caller's queues oldest first. These indexes are in that order, per owner,
-- over the rows a claim can take (dead letters excluded, so they never pile up at the head), so
-- finding the oldest claimable todo reads a few index entries instead of sorting the backlog.
CREATE INDEX todos_claim_order_endpoint ON todos (endpoint_id, created_at, id)
    WHERE endpoint_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_claim_order_team ON todos (team_id, created_at, id)
    WHERE team_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
