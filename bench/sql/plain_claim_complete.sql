-- group_key IS NULL: the condition of raquel's ready index (sql/schema.sql), which
-- leaves grouped jobs to their own indexes; without it no index serves this claim.
BEGIN;
WITH c AS (
    SELECT id FROM jobs
    WHERE queue = 'bench' AND status IN ('queued', 'failed') AND group_key IS NULL
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
