WITH ins AS (
INSERT INTO todos (id, endpoint_id, queue, title, created_by_kind, created_at, updated_at)
SELECT 'td_' || replace(gen_random_uuid()::text, '-', ''), 'ep_0123456789abcdef0123456789abcdef', 'work', 'noop', 'system',
       now() - interval '1 hour' + make_interval(secs => n / 1000.0), now()
FROM generate_series(1, :n) AS n RETURNING id, endpoint_id, team_id, queue, created_at)
INSERT INTO todo_live (todo_id, endpoint_id, team_id, queue, created_at) SELECT * FROM ins;
ANALYZE todos; ANALYZE todo_live;
