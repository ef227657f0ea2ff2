INSERT INTO jobs (task_id, run_at) SELECT 1, now() - interval '1 hour' + make_interval(secs => n / 1000.0) FROM generate_series(1, :n) n;
ANALYZE jobs;
