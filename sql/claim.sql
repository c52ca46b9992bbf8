-- Handing jobs to workers. A claim is an attempt and a lease: the job's
-- attempts go up by one, and the job is the worker's until lease_expires_at
-- (then the rescue duty counts the attempt as failed). The attempts value the
-- claim returns is the fencing token for rq_complete / rq_fail.
--
-- Each shape of the queue filter (one queue, several, any) has its own
-- statement so that each keeps a cached plan that walks a partial index of
-- ready jobs in claim order; SKIP LOCKED lets concurrent claimers pass each
-- other's rows instead of queueing behind them.
CREATE FUNCTION rq_claim(
    queues text[]   DEFAULT NULL,
    worker text     DEFAULT NULL,
    batch  integer  DEFAULT 1,
    lease  interval DEFAULT '1 minute'
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
    lease_ms bigint;
    one      text;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000, got %', coalesce(batch::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF lease IS NULL THEN
        RAISE EXCEPTION 'lease must not be null'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Leave it out for one minute.';
    END IF;
    lease_ms := @extschema@.rq_interval_ms(lease, 'lease', 1, 31536000000);
    IF queues IS NOT NULL THEN
        FOREACH one IN ARRAY queues LOOP
            PERFORM @extschema@.rq_check_queue(one);
        END LOOP;
    END IF;

    IF queues IS NULL THEN
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms
              AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            FROM ready WHERE j.id = ready.id
            RETURNING j.*
        )
        SELECT * FROM claimed c ORDER BY c.priority DESC, c.scheduled_at, c.id;
    ELSIF cardinality(queues) = 1 THEN
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = queues[1]
              AND j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms
              AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            FROM ready WHERE j.id = ready.id
            RETURNING j.*
        )
        SELECT * FROM claimed c ORDER BY c.priority DESC, c.scheduled_at, c.id;
    ELSE
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = ANY (queues)
              AND j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms
              AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            FROM ready WHERE j.id = ready.id
            RETURNING j.*
        )
        SELECT * FROM claimed c ORDER BY c.priority DESC, c.scheduled_at, c.id;
    END IF;
END
$$;
