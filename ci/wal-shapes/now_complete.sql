-- NOW complete: held.rs COMPLETE today, one UPDATE whose WHERE is the holder test, the grant bound as
-- `queue/owner` keys and owners (2026-12-06). The run script puts a's claim, which is still the
-- store's unbudgeted claim, before it.
WITH changed AS (
  UPDATE todos t SET state = 'done', result = NULL, completed_at = clock.now, lease_expires_at = NULL, updated_at = clock.now
  FROM (SELECT clock_timestamp() AS now) clock
  WHERE t.id = :cid AND t.state = 'claimed' AND t.owner = 'endpoint/ep_0123456789abcdef0123456789abcdef'
    AND (t.queue || '/' || t.endpoint_id = ANY('{}'::text[]) OR t.endpoint_id = ANY('{ep_0123456789abcdef0123456789abcdef}'::text[])
      OR t.queue || '/' || t.team_id = ANY('{}'::text[]) OR t.team_id = ANY('{}'::text[]))
  RETURNING t.*),
closed AS (UPDATE todo_attempts a SET ended_at = changed.updated_at, outcome = 'completed'
  FROM changed WHERE a.todo_id = changed.id AND a.ended_at IS NULL)
SELECT * FROM changed;
