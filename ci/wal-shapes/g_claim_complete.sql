WITH j AS (SELECT id FROM jobs WHERE is_available = true AND run_at <= now() AND task_id = ANY('{1}'::int[])
           ORDER BY priority, run_at FOR UPDATE SKIP LOCKED LIMIT 1)
UPDATE jobs SET attempts = jobs.attempts + 1, locked_by = 'worker-0123456789', locked_at = now()
FROM j WHERE jobs.id = j.id RETURNING jobs.id AS cid
\gset
DELETE FROM jobs WHERE id = :cid AND locked_by = 'worker-0123456789';
