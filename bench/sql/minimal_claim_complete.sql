-- A minimal hand-written queue, as a user comparing would write one: its
-- own table with raquel's columns, a primary key and one partial index of
-- ready jobs (bench/run makes it), the same SKIP LOCKED claim.
BEGIN;
WITH c AS (
    SELECT id FROM mini_jobs
    WHERE queue = 'bench' AND status IN ('queued', 'failed')
      AND scheduled_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    ORDER BY priority DESC, scheduled_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
UPDATE mini_jobs j SET status = 'claimed', attempts = j.attempts + 1, claimed_by = 'bench',
                       claimed_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM c WHERE j.id = c.id
RETURNING j.id \gset
UPDATE mini_jobs SET status = 'success', finished_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE id = :id;
COMMIT;
