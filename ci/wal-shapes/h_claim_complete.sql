-- H claim: the live row locked and updated (not HOT: the ready and in-flight predicates read the
-- lease); todos and todo_attempts untouched. A lapsed lease's attempt would be inserted here.
WITH clock AS (SELECT clock_timestamp() AS now),
cand AS (SELECT l.todo_id AS id, l.endpoint_id, l.team_id, l.queue, l.created_at FROM todo_live l, clock
  WHERE ((l.endpoint_id = 'ep_0123456789abcdef0123456789abcdef' AND l.queue = 'work'))
    AND l.lease_expires_at IS NULL AND (l.next_retry_at IS NULL OR l.next_retry_at <= clock.now)
    AND l.attempt < l.max_attempts
  ORDER BY l.created_at, l.todo_id FOR UPDATE OF l SKIP LOCKED LIMIT 1),
ranked AS (SELECT cand.id, row_number() OVER (ORDER BY cand.created_at, cand.id) AS turn,
    EXISTS (SELECT 1 FROM admission_policies p WHERE true AND p.queue = cand.queue
            AND (p.endpoint_id = cand.endpoint_id OR p.team_id = cand.team_id)) AS budgeted FROM cand),
first_budgeted AS (SELECT min(turn) AS turn FROM ranked WHERE budgeted),
taken AS (SELECT ranked.id FROM ranked, first_budgeted WHERE first_budgeted.turn IS NULL OR ranked.turn < first_budgeted.turn),
claimed AS (UPDATE todo_live l SET owner = 'endpoint/ep_0123456789abcdef0123456789abcdef',
    claimant = 'ep_0123456789abcdef0123456789abcdef',
    lease_expires_at = clock.now + make_interval(secs => 300::double precision), attempt = l.attempt + 1,
    claimed_at = clock.now, next_retry_at = NULL
  FROM taken, clock WHERE l.todo_id = taken.id RETURNING l.todo_id)
SELECT coalesce((SELECT claimed.todo_id FROM claimed), 'none') AS cid
\gset
-- H complete: the live row deleted under the holder test, the finished attempt inserted with the
-- result (its foreign key takes a key-share lock on the todo row).
WITH gone AS (
  DELETE FROM todo_live l
  WHERE l.todo_id = :cid AND l.lease_expires_at IS NOT NULL AND l.owner = 'endpoint/ep_0123456789abcdef0123456789abcdef'
    AND (l.queue || '/' || l.endpoint_id = ANY('{}'::text[]) OR l.endpoint_id = ANY('{ep_0123456789abcdef0123456789abcdef}'::text[])
      OR l.queue || '/' || l.team_id = ANY('{}'::text[]) OR l.team_id = ANY('{}'::text[]))
  RETURNING l.*)
INSERT INTO todo_attempts (todo_id, seq, claimant, endpoint_id, started_at, ended_at, outcome, result)
SELECT gone.todo_id, gone.attempt, gone.owner, gone.claimant, gone.claimed_at, clock_timestamp(), 'completed', NULL
FROM gone RETURNING todo_id;
