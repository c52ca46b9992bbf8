-- Many jobs in one call, and looking at the queue from psql.
\set SHOW_CONTEXT never
SET intervalstyle = postgres;  -- pg_regress picks a verbose style; show the default
TRUNCATE jobs;                 -- start from an empty queue: earlier files left jobs behind

-- Enqueue a batch: one statement, one job per array element, in order.
SELECT count(*) AS enqueued, min(payload::int) AS first, max(payload::int) AS last
FROM rq_enqueue_batch('thumbnails', ARRAY(SELECT i::text FROM generate_series(1, 1000) i),
                      at => clock_timestamp() - interval '1 minute');
SELECT payload FROM rq_enqueue_batch('webhooks', ARRAY['{"id": 1}', '{"id": 2}']::jsonb[]);

-- Claim a batch and complete it in one call (attempts, one per id, fence it).
CREATE TEMP TABLE claimed AS
    SELECT id, attempts FROM rq_claim(ARRAY['thumbnails'], worker => 'w1', batch => 100);
SELECT count(*) AS claimed FROM claimed;
SELECT count(*) AS completed, min(status) AS status
FROM rq_complete_batch(ARRAY(SELECT id FROM claimed ORDER BY id),
                       ARRAY(SELECT attempts FROM claimed ORDER BY id));

-- All or nothing: one id that is not claimed spoils the batch.
SELECT count(*) FROM rq_claim(ARRAY['thumbnails'], batch => 2);
SELECT rq_complete_batch(ARRAY(SELECT id FROM jobs WHERE status = 'claimed' ORDER BY id)
                         || '00000000-0000-7000-8000-000000000000'::uuid,
                         ARRAY(SELECT attempts FROM jobs WHERE status = 'claimed' ORDER BY id) || 1);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS still_claimed FROM jobs WHERE status = 'claimed';

-- Per queue: counts by status, ready now, age of the oldest ready job.
SELECT queue, total, queued, claimed, success, failed, ready,
       oldest_ready_age > interval '59 seconds' AS waited_a_minute
FROM rq_stats();
SELECT rq_queues();
SELECT rq_count() AS all_jobs, rq_count('thumbnails', ARRAY['success']) AS thumbnails_done;

-- The rq_jobs view: the table with instants as timestamptz and durations as intervals.
SELECT queue, status, min_retry_delay, max_retry_delay, backoff_base,
       scheduled_at < enqueued_at AS scheduled_in_the_past
FROM rq_jobs WHERE queue = 'webhooks' ORDER BY id;

-- Pruning: a retention of 0 passed to rq_prune deletes every finished job
-- now (the setting raquel.retention = 0 keeps them for ever instead).
SELECT count(*) AS finished FROM jobs WHERE status IN ('success', 'cancelled', 'expired', 'exhausted');
SELECT rq_prune(retention => '1 day') AS pruned_after_a_day;
SELECT rq_prune(retention => '0') AS pruned_now;
SELECT count(*) AS finished_left FROM jobs WHERE status IN ('success', 'cancelled', 'expired', 'exhausted');
