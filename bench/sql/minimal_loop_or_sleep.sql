-- The minimal queue's loop (rq_loop_or_sleep.sql), one statement: complete
-- the job in hand and claim the next; sleep 5 ms when the queue is empty.
WITH done AS (
    UPDATE mini_jobs SET status = 'success', finished_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    WHERE id = NULLIF(:id, 'none')::uuid AND status = 'claimed'
), c AS (
    SELECT id FROM mini_jobs
    WHERE queue = 'bench' AND status IN ('queued', 'failed')
      AND scheduled_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    ORDER BY priority DESC, scheduled_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED),
u AS (
    UPDATE mini_jobs j SET status = 'claimed', attempts = j.attempts + 1, claimed_by = 'bench',
                           claimed_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM c WHERE j.id = c.id
    RETURNING j.id)
SELECT coalesce((SELECT id::text FROM u), 'none') AS id, (EXISTS (SELECT FROM u))::int AS got \gset
\if :got = 0
\sleep 5 ms
\endif
