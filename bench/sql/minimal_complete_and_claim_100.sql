-- The minimal queue's loop in batches, one statement: complete the 100 jobs
-- in hand and claim the next 100.
WITH done AS (
    UPDATE mini_jobs SET status = 'success', finished_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    WHERE id = ANY (NULLIF(:ids, 'none')::uuid[]) AND status = 'claimed'
), c AS (
    SELECT id FROM mini_jobs
    WHERE queue = 'bench' AND status IN ('queued', 'failed')
      AND scheduled_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    ORDER BY priority DESC, scheduled_at, id
    LIMIT 100
    FOR UPDATE SKIP LOCKED),
u AS (
    UPDATE mini_jobs j SET status = 'claimed', attempts = j.attempts + 1, claimed_by = 'bench',
                           claimed_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM c WHERE j.id = c.id
    RETURNING j.id)
SELECT coalesce(array_agg(id), '{}') AS ids FROM u \gset
