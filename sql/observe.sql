-- Looking at the queue from psql. These read the whole table (they are for
-- people, not for the hot path); times come out as timestamptz and
-- durations as intervals.

-- One row per queue: how many jobs in each status, how many are ready now,
-- and how long the oldest ready job has been waiting.
CREATE FUNCTION rq_stats()
RETURNS TABLE (queue text, total bigint, queued bigint, claimed bigint, success bigint,
               failed bigint, expired bigint, exhausted bigint, cancelled bigint,
               ready bigint, oldest_ready_age interval)
LANGUAGE sql VOLATILE
AS $$
    SELECT j.queue,
           count(*),
           count(*) FILTER (WHERE j.status = 'queued'),
           count(*) FILTER (WHERE j.status = 'claimed'),
           count(*) FILTER (WHERE j.status = 'success'),
           count(*) FILTER (WHERE j.status = 'failed'),
           count(*) FILTER (WHERE j.status = 'expired'),
           count(*) FILTER (WHERE j.status = 'exhausted'),
           count(*) FILTER (WHERE j.status = 'cancelled'),
           count(*) FILTER (WHERE r.ready),
           (clock.ms - min(j.scheduled_at) FILTER (WHERE r.ready)) * interval '1 millisecond'
    FROM @extschema@.jobs j
    CROSS JOIN (SELECT @extschema@.rq_now_ms() AS ms) clock
    CROSS JOIN LATERAL (
        SELECT j.status IN ('queued', 'failed') AND j.scheduled_at <= clock.ms
               AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > clock.ms) AS ready
    ) r
    GROUP BY j.queue, clock.ms
    ORDER BY j.queue
$$;

-- The queues that have jobs, by name.
CREATE FUNCTION rq_queues() RETURNS SETOF text
LANGUAGE sql STABLE
AS $$
    SELECT DISTINCT j.queue FROM @extschema@.jobs j ORDER BY j.queue
$$;

-- How many jobs, in one queue or all (NULL), in some statuses or all (NULL).
CREATE FUNCTION rq_count(queue text DEFAULT NULL, statuses text[] DEFAULT NULL) RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT count(*) FROM @extschema@.jobs j
    WHERE ($1 IS NULL OR j.queue = $1) AND ($2 IS NULL OR j.status = ANY ($2))
$$;

-- The jobs table as a person reads it: instants as timestamptz, durations as
-- intervals. The columns keep the table's names.
CREATE VIEW rq_jobs AS
SELECT j.id, j.queue, j.status, j.priority, j.attempts, j.requeues, j.max_retry_count,
       j.payload, j.error, j.claimed_by,
       to_timestamp(j.enqueued_at / 1000.0)      AS enqueued_at,
       to_timestamp(j.scheduled_at / 1000.0)     AS scheduled_at,
       to_timestamp(j.claimed_at / 1000.0)       AS claimed_at,
       to_timestamp(j.lease_expires_at / 1000.0) AS lease_expires_at,
       to_timestamp(j.finished_at / 1000.0)      AS finished_at,
       j.max_age * interval '1 millisecond'         AS max_age,
       j.min_retry_delay * interval '1 millisecond' AS min_retry_delay,
       j.max_retry_delay * interval '1 millisecond' AS max_retry_delay,
       j.backoff_base * interval '1 millisecond'    AS backoff_base,
       j.error_trace
FROM jobs j;
