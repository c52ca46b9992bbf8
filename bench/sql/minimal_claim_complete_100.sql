-- The minimal queue (minimal_claim_complete.sql), in batches of 100.
BEGIN;
WITH c AS (
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
SELECT array_agg(id) AS ids FROM u \gset
UPDATE mini_jobs SET status = 'success', finished_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE id = ANY (:ids);
COMMIT;
