-- The hand-written one-statement queue: delete the next ready job of the
-- minimal queue's table and return it.
DELETE FROM mini_jobs
WHERE id = (
    SELECT id FROM mini_jobs
    WHERE queue = 'bench' AND status IN ('queued', 'failed')
      AND scheduled_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    ORDER BY priority DESC, scheduled_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING id \gset
