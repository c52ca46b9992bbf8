BEGIN;
WITH c AS (
    SELECT id FROM jobs
    WHERE queue = 'bench' AND status IN ('queued', 'failed')
      AND scheduled_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    ORDER BY priority DESC, scheduled_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
UPDATE jobs j SET status = 'claimed', attempts = j.attempts + 1, claimed_by = 'bench',
                  claimed_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM c WHERE j.id = c.id
RETURNING j.id \gset
UPDATE jobs SET status = 'success', finished_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE id = :id;
COMMIT;
