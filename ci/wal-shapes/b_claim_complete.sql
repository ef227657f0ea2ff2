-- B claim: the ready row is locked (SKIP LOCKED) and deleted, the todo updated (HOT), the attempt opened with the lease.
WITH clock AS (SELECT clock_timestamp() AS now),
cand AS (SELECT r.todo_id AS id, r.endpoint_id, r.team_id, r.queue, r.created_at FROM todo_ready r, clock
  WHERE ((r.endpoint_id = 'ep_0123456789abcdef0123456789abcdef' AND r.queue = 'work'))
    AND (r.not_before IS NULL OR r.not_before <= clock.now)
  ORDER BY r.created_at, r.todo_id FOR UPDATE OF r SKIP LOCKED LIMIT 1),
ranked AS (SELECT cand.id, row_number() OVER (ORDER BY cand.created_at, cand.id) AS turn,
    EXISTS (SELECT 1 FROM admission_policies p WHERE true AND p.queue = cand.queue
            AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id)) AS budgeted FROM cand),
first_budgeted AS (SELECT min(turn) AS turn FROM ranked WHERE budgeted),
taken AS (SELECT ranked.id FROM ranked, first_budgeted WHERE first_budgeted.turn IS NULL OR ranked.turn < first_budgeted.turn),
unready AS (DELETE FROM todo_ready r USING taken WHERE r.todo_id = taken.id),
claimed AS (UPDATE todos t SET state = 'claimed', owner = 'endpoint/ep_0123456789abcdef0123456789abcdef',
    claimed_by_endpoint_id = 'ep_0123456789abcdef0123456789abcdef',
    lease_expires_at = clock.now + make_interval(secs => 300::double precision), attempt = t.attempt + 1,
    claimed_at = clock.now, next_retry_at = NULL, completed_at = NULL, updated_at = clock.now
  FROM taken, clock WHERE t.id = taken.id RETURNING t.*),
opened AS (INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at, owner_endpoint_id, owner_team_id, queue, lease_expires_at)
  SELECT claimed.id, (SELECT coalesce(max(a.seq), 0) + 1 FROM todo_attempts a WHERE a.todo_id = claimed.id),
    'endpoint/ep_0123456789abcdef0123456789abcdef', 'ep_0123456789abcdef0123456789abcdef', clock.now,
    claimed.endpoint_id, claimed.team_id, claimed.queue, claimed.lease_expires_at FROM claimed, clock)
SELECT coalesce((SELECT claimed.id FROM claimed), 'none') AS cid
\gset
-- B complete: held.rs COMPLETE unchanged but for the dedup row's delete (a no-op without a key).
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
  FROM changed WHERE a.todo_id = changed.id AND a.ended_at IS NULL),
undedup AS (DELETE FROM todo_dedup d USING changed WHERE d.todo_id = changed.id)
SELECT id FROM changed;
