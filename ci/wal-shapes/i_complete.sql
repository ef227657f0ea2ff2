-- I complete: the live row deleted under the holder test, the todo row updated with the outcome
-- (HOT when its page has room: no index of todos reads what changes). The run script puts h's claim before it.
WITH gone AS (
  DELETE FROM todo_live l
  WHERE l.todo_id = :cid AND l.lease_expires_at IS NOT NULL AND l.owner = 'endpoint/ep_0123456789abcdef0123456789abcdef'
    AND (l.queue || '/' || l.endpoint_id = ANY('{}'::text[]) OR l.endpoint_id = ANY('{ep_0123456789abcdef0123456789abcdef}'::text[])
      OR l.queue || '/' || l.team_id = ANY('{}'::text[]) OR l.team_id = ANY('{}'::text[]))
  RETURNING l.*)
UPDATE todos t SET state = 'done', result = NULL, owner = gone.owner, claimed_by_endpoint_id = gone.claimant,
    attempt = gone.attempt, claimed_at = gone.claimed_at, completed_at = clock_timestamp(), updated_at = clock_timestamp()
FROM gone WHERE t.id = gone.todo_id RETURNING t.id;
