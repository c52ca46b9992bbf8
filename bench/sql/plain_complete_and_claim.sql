-- The same loop in plain SQL on raquel's table: one statement completes
-- the job in hand and claims the next (the ready index's condition stated,
-- as in plain_claim_complete.sql).
WITH done AS (
    UPDATE jobs SET status = 'success', finished_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    WHERE id = NULLIF(:id, 'none')::uuid AND status = 'claimed'
), c AS (
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
