-- D claim: ready row locked + deleted, claim row inserted; todos and todo_attempts untouched.
WITH clock AS (SELECT clock_timestamp() AS now),
cand AS (SELECT r.todo_id AS id, r.endpoint_id, r.team_id, r.queue, r.created_at FROM todo_ready r, clock
  WHERE ((r.endpoint_id = 'ep_0123456789abcdef0123456789abcdef' AND r.queue = 'work'))
    AND (r.not_before IS NULL OR r.not_before <= clock.now)
  ORDER BY r.created_at, r.todo_id FOR UPDATE OF r SKIP LOCKED LIMIT 1),
ranked AS (SELECT cand.*, row_number() OVER (ORDER BY cand.created_at, cand.id) AS turn,
    EXISTS (SELECT 1 FROM admission_policies p WHERE true AND p.queue = cand.queue
            AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id)) AS budgeted FROM cand),
first_budgeted AS (SELECT min(turn) AS turn FROM ranked WHERE budgeted),
taken AS (SELECT ranked.* FROM ranked, first_budgeted WHERE first_budgeted.turn IS NULL OR ranked.turn < first_budgeted.turn),
unready AS (DELETE FROM todo_ready r USING taken WHERE r.todo_id = taken.id),
claimed AS (INSERT INTO todo_claims (todo_id, endpoint_id, team_id, queue, owner, claimant, seq, attempt, claimed_at, lease_expires_at)
  SELECT taken.id, taken.endpoint_id, taken.team_id, taken.queue, 'endpoint/ep_0123456789abcdef0123456789abcdef',
    'ep_0123456789abcdef0123456789abcdef',
    (SELECT coalesce(max(a.seq), 0) + 1 FROM todo_attempts a WHERE a.todo_id = taken.id),
    (SELECT t.attempt + 1 FROM todos t WHERE t.id = taken.id),
    clock.now, clock.now + make_interval(secs => 300::double precision) FROM taken, clock RETURNING todo_id)
SELECT coalesce((SELECT claimed.todo_id FROM claimed), 'none') AS cid
\gset
-- D complete: claim row locked + deleted, todo written once (HOT), attempt inserted closed.
WITH held AS (SELECT c.* FROM todo_claims c
  WHERE c.todo_id = :cid AND c.owner = 'endpoint/ep_0123456789abcdef0123456789abcdef'
    AND (EXISTS (SELECT 1 FROM unnest(ARRAY['ep_0123456789abcdef0123456789abcdef']::text[], ARRAY[NULL]::text[]) AS a (owner, queue)
                 WHERE c.endpoint_id = a.owner AND c.queue = coalesce(a.queue, c.queue))
      OR EXISTS (SELECT 1 FROM unnest('{}'::text[], '{}'::text[]) AS a (owner, queue)
                 WHERE c.team_id = a.owner AND c.queue = coalesce(a.queue, c.queue)))
  FOR UPDATE),
clock AS (SELECT held.todo_id, clock_timestamp() AS now FROM held),
gone AS (DELETE FROM todo_claims c USING held WHERE c.todo_id = held.todo_id),
changed AS (UPDATE todos t SET state = 'done', owner = held.owner, claimed_by_endpoint_id = held.claimant,
    attempt = held.attempt, claimed_at = held.claimed_at, result = NULL, completed_at = clock.now, updated_at = clock.now
  FROM held, clock WHERE t.id = held.todo_id RETURNING t.*),
closed AS (INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at, ended_at, outcome)
  SELECT held.todo_id, held.seq, held.owner, held.claimant, held.claimed_at, clock.now, 'completed' FROM held, clock),
undedup AS (DELETE FROM todo_dedup d USING held WHERE d.todo_id = held.todo_id)
SELECT id FROM changed;
