-- claim_unbudgeted.rs (limit 1, admission lookup on, one endpoint queue), autocommit
WITH clock AS (SELECT clock_timestamp() AS now),
cand AS (SELECT t.id, t.endpoint_id, t.team_id, t.queue, t.created_at FROM todos t, clock
  WHERE ((t.endpoint_id = 'ep_0123456789abcdef0123456789abcdef' AND t.queue = 'work'))
    AND (t.state IN ('pending', 'claimed') OR (t.state = 'failed' AND t.next_retry_at IS NOT NULL))
    AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at < clock.now AND t.attempt < t.max_attempts)
         OR (t.state = 'failed' AND t.next_retry_at <= clock.now AND t.attempt < t.max_attempts))
  ORDER BY t.created_at, t.id FOR UPDATE OF t SKIP LOCKED LIMIT 1),
ranked AS (SELECT cand.id, row_number() OVER (ORDER BY cand.created_at, cand.id) AS turn,
    EXISTS (SELECT 1 FROM admission_policies p WHERE true AND p.queue = cand.queue
            AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id)) AS budgeted FROM cand),
first_budgeted AS (SELECT min(turn) AS turn FROM ranked WHERE budgeted),
taken AS (SELECT ranked.id FROM ranked, first_budgeted WHERE first_budgeted.turn IS NULL OR ranked.turn < first_budgeted.turn),
claimed AS (UPDATE todos t SET state = 'claimed', owner = 'endpoint/ep_0123456789abcdef0123456789abcdef',
    claimed_by_endpoint_id = 'ep_0123456789abcdef0123456789abcdef',
    lease_expires_at = clock.now + make_interval(secs => 300::double precision), attempt = t.attempt + 1,
    claimed_at = clock.now, next_retry_at = NULL, completed_at = NULL, updated_at = clock.now
  FROM taken, clock WHERE t.id = taken.id RETURNING t.*),
closed AS (UPDATE todo_attempts a SET ended_at = clock.now, outcome = 'lease_expired' FROM claimed, clock
  WHERE a.todo_id = claimed.id AND a.ended_at IS NULL),
opened AS (INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at)
  SELECT claimed.id, (SELECT coalesce(max(a.seq), 0) + 1 FROM todo_attempts a WHERE a.todo_id = claimed.id),
    'endpoint/ep_0123456789abcdef0123456789abcdef', 'ep_0123456789abcdef0123456789abcdef', clock.now FROM claimed, clock)
SELECT coalesce((SELECT claimed.id FROM claimed), 'none') AS cid
\gset
-- held.rs COMPLETE, autocommit
WITH held AS (SELECT t.id FROM todos t
  WHERE t.id = :cid AND t.state = 'claimed' AND t.owner = 'endpoint/ep_0123456789abcdef0123456789abcdef'
    AND (EXISTS (SELECT 1 FROM unnest(ARRAY['ep_0123456789abcdef0123456789abcdef']::text[], ARRAY[NULL]::text[]) AS a (owner, queue)
                 WHERE t.endpoint_id = a.owner AND t.queue = coalesce(a.queue, t.queue))
      OR EXISTS (SELECT 1 FROM unnest('{}'::text[], '{}'::text[]) AS a (owner, queue)
                 WHERE t.team_id = a.owner AND t.queue = coalesce(a.queue, t.queue)))
  FOR UPDATE),
clock AS (SELECT held.id, clock_timestamp() AS now FROM held),
changed AS (UPDATE todos t SET state = 'done', result = NULL, completed_at = clock.now, lease_expires_at = NULL,
    updated_at = clock.now FROM clock WHERE t.id = clock.id RETURNING t.*),
closed AS (UPDATE todo_attempts a SET ended_at = changed.updated_at, outcome = 'completed'
  FROM changed WHERE a.todo_id = changed.id AND a.ended_at IS NULL)
SELECT id FROM changed;
