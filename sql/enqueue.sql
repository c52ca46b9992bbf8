-- Producing jobs.

-- Bounds on what a caller may ask for. Retry delays are integer milliseconds
-- in the table (about 24.8 days at most); a job's schedule and maximum age
-- stop at a century, a lease at a year: anything longer is a mistake.
--   delay, max_age:        3153600000000 ms = 36500 days
--   retry delays, base:       2147483647 ms
--   lease:                   31536000000 ms = 365 days

CREATE FUNCTION rq_enqueue(
    queue           text        DEFAULT 'default',
    payload         text        DEFAULT NULL,
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT '1 second',
    max_retry_delay interval    DEFAULT '12 hours',
    backoff_base    interval    DEFAULT '1 second',
    priority        integer     DEFAULT 0
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    now_ms     bigint := rq_now_ms();
    min_delay  bigint := coalesce(rq_interval_ms(rq_enqueue.min_retry_delay, 'min_retry_delay', 0, 2147483647), 1000);
    max_delay  bigint := coalesce(rq_interval_ms(rq_enqueue.max_retry_delay, 'max_retry_delay', 0, 2147483647), 43200000);
    job        jobs;
BEGIN
    PERFORM rq_check_queue(rq_enqueue.queue);
    IF rq_enqueue.max_retry_count < 0 THEN
        RAISE EXCEPTION 'max_retry_count must not be negative, got %', rq_enqueue.max_retry_count
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use 0 for no retry, or NULL to retry forever.';
    END IF;
    IF min_delay > max_delay THEN
        RAISE EXCEPTION 'min_retry_delay (%) must not exceed max_retry_delay (%)',
                rq_enqueue.min_retry_delay, rq_enqueue.max_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO jobs AS j (queue, payload, max_age, max_retry_count,
                           min_retry_delay, max_retry_delay, backoff_base,
                           enqueued_at, scheduled_at, priority)
    VALUES (rq_enqueue.queue,
            rq_enqueue.payload,
            rq_interval_ms(rq_enqueue.max_age, 'max_age', 1, 3153600000000),
            rq_enqueue.max_retry_count,
            min_delay,
            max_delay,
            coalesce(rq_interval_ms(rq_enqueue.backoff_base, 'backoff_base', 0, 2147483647), 1000),
            now_ms,
            coalesce(rq_timestamp_ms(rq_enqueue.at, 'at'), now_ms)
                + coalesce(rq_interval_ms(rq_enqueue.delay, 'delay', 0, 3153600000000), 0),
            coalesce(rq_enqueue.priority, 0))
    RETURNING j.* INTO job;
    RETURN job;
END
$$;

-- The same with a JSON payload, stored as its text (the table's payload is
-- text, as in the Python library).
CREATE FUNCTION rq_enqueue(
    queue           text,
    payload         jsonb,
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT '1 second',
    max_retry_delay interval    DEFAULT '12 hours',
    backoff_base    interval    DEFAULT '1 second',
    priority        integer     DEFAULT 0
) RETURNS jobs
LANGUAGE sql VOLATILE
AS $$
    SELECT rq_enqueue($1, $2::text, $3, $4, $5, $6, $7, $8, $9, $10)
$$;
