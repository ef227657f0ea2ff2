-- Issue #15: a claim reads its queues through the claim-order indexes, never the listing ones.
--
-- todos_list_endpoint / _team (0011) have the same columns as todos_claim_order_endpoint / _team
-- (0003) but hold every row, done ones included. While the statistics show no done todo (a
-- backlog loaded and analysed) the planner costs the two alike for a claim, and of equal paths
-- it keeps the index it considered first: the newest (highest OID). Read through a listing
-- index, every claim walks past each todo completed since the last ANALYZE. Built anew here, the
-- claim-order indexes are the newest, and the claim reads only rows it can take. Once done todos
-- show in the statistics the claim-order indexes are the cheaper anyway.
--
-- The order does not survive everything: a dump restored with pg_restore creates indexes by
-- name, and REINDEX CONCURRENTLY or pg_repack on a listing index makes it the newer again. The
-- claim is still correct then, and only slower until ANALYZE sees done todos; rebuilding the
-- claim-order indexes as here restores the order. `engine/tests/claim_plans.rs` checks the
-- plans; a later index on (owner, created_at) must keep it passing.
--
-- The new indexes are built before the old ones are dropped: a build blocks writes to todos,
-- a DROP INDEX blocks reads too, until the migration commits.
CREATE INDEX todos_claim_order_endpoint_new ON todos (endpoint_id, created_at, id)
    WHERE endpoint_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_claim_order_team_new ON todos (team_id, created_at, id)
    WHERE team_id IS NOT NULL AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
DROP INDEX todos_claim_order_endpoint;
DROP INDEX todos_claim_order_team;
ALTER INDEX todos_claim_order_endpoint_new RENAME TO todos_claim_order_endpoint;
ALTER INDEX todos_claim_order_team_new RENAME TO todos_claim_order_team;
