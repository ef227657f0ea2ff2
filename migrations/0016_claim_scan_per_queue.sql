-- Issue #15: a claim from one queue reads that queue alone, in claim order.
--
-- The claim-order indexes (0003) are per owner: a pick from one of an owner's queues walks past
-- the older todos of its other queues. claim_next excludes each queue a refusal met, and a queue
-- over its window keeps its work pending, oldest first: with 199 of 200 queues exhausted every
-- pick walked their whole backlog. The claim-scan indexes of 0001 (per owner and queue, but
-- without the id that breaks ties, and over every row not done) now hold the claimable rows of
-- each queue in full claim order; a pick whose owner has one queue left names it by equality
-- (`owner_groups_filter`), which this index serves in order. One index replaces another, over
-- fewer rows (no dead letters, no discarded todos), so an update writes no more than before.
--
-- Built before the old ones are dropped, as in 0015.
CREATE INDEX todos_claim_scan_endpoint_new ON todos (endpoint_id, queue, created_at, id)
    WHERE endpoint_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_claim_scan_team_new ON todos (team_id, queue, created_at, id)
    WHERE team_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
DROP INDEX todos_claim_scan_endpoint;
DROP INDEX todos_claim_scan_team;
ALTER INDEX todos_claim_scan_endpoint_new RENAME TO todos_claim_scan_endpoint;
ALTER INDEX todos_claim_scan_team_new RENAME TO todos_claim_scan_team;
